"""The OSMP configuration handshake, honoured: what a master's ``OSMPSensorViewInConfig`` makes of the lidars.

OSMP lets a master read the SensorViewConfiguration the model asks for (``OSMPSensorViewInConfigRequest``,
:func:`lidar_fmu.osi.config.rig_view_configuration`) and set the one it will provide (``OSMPSensorViewInConfig``).
:func:`follow_view_configuration` compares the two: a narrower field of view, fewer rays, another update cycle, a
shorter range, a mounting or a sensor id are followed (:func:`narrow_pattern`); a change the model cannot simulate
is one line of :attr:`FollowedConfiguration.not_followed` (the FMU warns); what cannot be read, or leaves a lidar
nothing to cast, is a :class:`~lidar_fmu.osi.config.ViewConfigurationError`. Field by field:
docs/fmu.md#the-configuration-handshake.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..geometry.pattern import RayPattern
from ..osi.config import ViewConfigurationError, read_view_configuration
from ..osi.decode import mounting_pose as osi_mounting_pose
from ..sensors.rig import RigMember
from ..sensors.spec import Sensor

#: rad: an angle this close to the field of view's edge is inside it (float32 directions, float64 angles)
EDGE_TOLERANCE_RAD = 1e-7
#: the fields a master may change that tell its own side, not the model's
INFORMATIONAL = ("update_cycle_offset", "simulation_start_time", "mounting_position_rmse", "version")
#: technology entries of a SensorViewConfiguration that are not a lidar's
OTHER_TECHNOLOGIES = ("generic_sensor_view_configuration", "radar_sensor_view_configuration",
                      "camera_sensor_view_configuration", "ultrasonic_sensor_view_configuration")


@dataclass(frozen=True)
class FollowedConfiguration:
    """What a master's SensorViewConfiguration makes of the model's lidars."""

    members: list[RigMember]  # the lidars as they now are: narrowed sensors, mountings and ids
    sensor_id: int | None  # the SensorData's sensor id the configuration sets (None: the SensorView's)
    followed: list[str]  # one line per change the model follows
    not_followed: list[str]  # one line per field the model cannot follow (it keeps what it had there)

    def message(self) -> str:
        """One line for a log: what the model follows (``''``: nothing changed)."""
        return f"OSMPSensorViewInConfig followed: {'; '.join(self.followed)}" if self.followed else ""


def follow_view_configuration(members: list[RigMember], request: bytes, config: bytes) -> FollowedConfiguration:
    """The lidars ``members`` (as the sensor parameter gives them: their own mounting and id, None where it sets
    none) as the configuration ``config`` asks, against ``request``, the configuration they asked for (module
    doc). A field ``config`` leaves as ``request`` has it changes nothing."""
    asked = read_view_configuration(request)
    given = read_view_configuration(config)
    followed: list[str] = []
    not_followed: list[str] = []
    changed = _changed_fields(asked, given, skip=("lidar_sensor_view_configuration",))  # compared per lidar
    not_followed += [f"{name}: the model is a lidar; this entry is not followed" for name in OTHER_TECHNOLOGIES
                     if name in changed]
    if "omit_static_information" in changed and given.omit_static_information:
        not_followed.append("omit_static_information: the model has no OSMPGroundTruthInit; static ground truth "
                            "a SensorView leaves out is not simulated")
    extra = len(given.lidar_sensor_view_configuration) - len(members)
    if extra > 0:
        not_followed.append(f"lidar_sensor_view_configuration: {extra} entries more than the model's "
                            f"{len(members)} lidar(s); not followed")
    cycle_s = _cycle_s(given, changed, asked)
    range_m = _range_m(given, changed, members, not_followed)
    out = []
    for k, member in enumerate(members):
        lidar_asked = asked.lidar_sensor_view_configuration[k]
        entries = given.lidar_sensor_view_configuration
        lidar_given = entries[k] if k < len(entries) else lidar_asked
        lidar_changed = _changed_fields(lidar_asked, lidar_given)
        top = changed if k == 0 else set()  # the top-level fields are the first lidar's (the request says so)
        out.append(_follow_lidar(k, member, (asked, given, top), (lidar_asked, lidar_given, lidar_changed),
                                 cycle_s, range_m, followed, not_followed))
    if cycle_s is not None:
        followed.append(f"update_cycle_time {cycle_s:g} s")
    if range_m is not None:
        followed.append(f"range {range_m:g} m")
    sensor_id = None
    if "sensor_id" in changed:
        sensor_id = int(given.sensor_id.value)
        followed.append(f"sensor_id {sensor_id}")
    return FollowedConfiguration(out, sensor_id, followed, not_followed)


def _changed_fields(asked, given, skip=()) -> set[str]:
    """Names of the fields ``given`` sets otherwise than ``asked`` (a message field compared whole). A field it
    leaves unset (an empty repeated one too) says nothing: a master may write only what it decides."""
    names = {field.name for field, _ in given.ListFields()} - set(INFORMATIONAL) - set(skip)
    return {name for name in names if getattr(asked, name) != getattr(given, name)}


def _cycle_s(given, changed: set[str], asked) -> float | None:
    """The update cycle the configuration sets, s (None: as asked)."""
    if "update_cycle_time" not in changed:
        return None
    cycle = given.update_cycle_time
    cycle_s = cycle.seconds + cycle.nanos * 1e-9
    if not (math.isfinite(cycle_s) and cycle_s > 0):
        raise ViewConfigurationError(f"OSMPSensorViewInConfig update_cycle_time is {cycle_s:g} s; a cycle needs a "
                                     "time > 0")
    return cycle_s


def _range_m(given, changed: set[str], members: list[RigMember], not_followed: list[str]) -> float | None:
    """The shorter range the configuration sets, m (None: as asked)."""
    if "range" not in changed:
        return None
    range_m = float(given.range)
    longest = max(member.sensor.max_range_m for member in members)
    if not math.isfinite(range_m) or range_m >= longest:
        not_followed.append(f"range {range_m:g} m: the lidars reach {longest:g} m at most; kept")
        return None
    for k, member in enumerate(members):
        if range_m <= member.sensor.min_range_m:
            raise ViewConfigurationError(f"OSMPSensorViewInConfig range {range_m:g} m is not beyond lidar {k}'s "
                                         f"minimum range {member.sensor.min_range_m:g} m: it would see nothing")
    return range_m


def _follow_lidar(k, member: RigMember, top, lidar, cycle_s, range_m, followed, not_followed) -> RigMember:
    """Lidar ``k`` as the configuration asks (docs/fmu.md#the-configuration-handshake)."""
    asked, given, top_changed = top
    _, lidar_given, lidar_changed = lidar
    sensor = member.sensor
    name = f"lidar {k}"
    fov = {axis: _field_of_view(f"field_of_view_{axis}", name, top, lidar, not_followed)
           for axis in ("horizontal", "vertical")}
    counts = {axis: _ray_count(f"number_of_rays_{axis}", have, name, lidar, not_followed)
              for axis, have in (("horizontal", sensor.pattern.columns), ("vertical", sensor.pattern.rows))}
    narrowing = any(v is not None for v in (*fov.values(), *counts.values()))
    if narrowing and sensor.continuous is not None:
        not_followed.append(f"{name} field of view and ray counts: its pattern never repeats "
                            f"({sensor.name}); not narrowed")
    elif narrowing:
        pattern = narrow_pattern(sensor.pattern, fov["horizontal"], fov["vertical"], counts["horizontal"],
                                 counts["vertical"], name)
        followed.append(f"{name} {pattern.rows}×{pattern.columns} of {sensor.pattern.rows}×{sensor.pattern.columns} "
                        "rays" + "".join(f", {axis} field of view {value:.4g} rad" for axis, value in fov.items()
                                         if value is not None))
        sensor = dataclasses.replace(sensor, pattern=pattern)
    for field in ("directions", "timings", "num_of_pixels"):
        if field in lidar_changed and not _describes(lidar_given, field, sensor.pattern):
            not_followed.append(f"{name} {field}: the model casts its own rays (narrowed as above); not followed")
    not_followed += [f"{name} {field}: a property of the environment's ray tracer; not followed"
                     for field in ("emitter_frequency", "max_number_of_interactions") if field in lidar_changed]
    sensor = _with_cycle(sensor, asked, cycle_s)
    if range_m is not None and range_m < sensor.max_range_m:
        sensor = dataclasses.replace(sensor, max_range_m=range_m)
    mounting_pose, sensor_id = member.mounting_pose, member.sensor_id
    for where, changed, config in (("top-level", top_changed, given), (name, lidar_changed, lidar_given)):
        if "mounting_position" in changed:  # a lidar entry's, read last, wins
            mounting_pose = osi_mounting_pose(config.mounting_position, f"OSMPSensorViewInConfig {where} "
                                                                     "mounting_position")
            followed.append(f"{name} mounting_position from the {where} entry")
    if "sensor_id" in lidar_changed:
        sensor_id = int(lidar_given.sensor_id.value)
        followed.append(f"{name} sensor_id {sensor_id}")
    return RigMember(sensor, mounting_pose, sensor_id)


def _field_of_view(field: str, name: str, top, lidar, not_followed: list[str]) -> float | None:
    """The narrower field of view ``field`` the configuration sets for lidar ``name``, rad (None: as asked): its
    entry's, and the top-level one where it is the first lidar's, the narrower of the two."""
    _, given, top_changed = top
    lidar_asked, lidar_given, lidar_changed = lidar
    values = [float(getattr(lidar_given, field))] if field in lidar_changed else []
    values += [float(getattr(given, field))] if field in top_changed else []
    if not values:
        return None
    if not all(map(math.isfinite, values)):
        raise ViewConfigurationError(f"OSMPSensorViewInConfig {field} {values} rad: {name}'s field of view must be a "
                                     "finite angle")
    value, asked = min(values), float(getattr(lidar_asked, field))
    if not value < asked:
        not_followed.append(f"{name} {field} {value:g} rad: wider than the unit's {asked:g} rad; kept")
        return None
    if not value > 0:
        raise ViewConfigurationError(f"OSMPSensorViewInConfig {field} {value:g} rad: {name} would cast no ray")
    return value


def _ray_count(field: str, have: int, name: str, lidar, not_followed: list[str]) -> int | None:
    """The ray count ``field`` the configuration sets for lidar ``name``, which has ``have`` (None: as asked)."""
    _, lidar_given, lidar_changed = lidar
    if field not in lidar_changed:
        return None
    count = int(getattr(lidar_given, field))
    if count < 1:
        raise ViewConfigurationError(f"OSMPSensorViewInConfig {name} {field} is {count}; OSI asks for ≥ 1")
    if count > have:
        not_followed.append(f"{name} {field} {count}: more than the unit's {have}; kept")
        return None
    return count


def _with_cycle(sensor: Sensor, asked, cycle_s: float | None) -> Sensor:
    """``sensor`` spinning at the new update cycle, if its frame period is the one the request asked for."""
    if cycle_s is None:
        return sensor
    period = sensor.frame_period_s
    asked_cycle = asked.update_cycle_time
    if (int(period), int(round((period % 1) * 1e9))) != (asked_cycle.seconds, asked_cycle.nanos):
        return sensor  # another lidar of the rig, on its own clock
    scale = cycle_s / period
    pattern = dataclasses.replace(sensor.pattern, time_offset_s=(sensor.pattern.time_offset_s.astype(np.float64)
                                                                 * scale).astype(np.float32))
    return dataclasses.replace(sensor, pattern=pattern, frame_rate_hz=1.0 / cycle_s)


def _describes(lidar_given, field: str, pattern: RayPattern) -> bool:
    """Does the configuration's ``field`` (directions, timings, num_of_pixels) describe ``pattern``'s rays?"""
    if field == "num_of_pixels":
        return int(lidar_given.num_of_pixels) == len(pattern)
    values = getattr(lidar_given, field)
    if len(values) != len(pattern):
        return False
    if field == "timings":
        return bool(np.array_equal(np.asarray(values, np.int64),
                                   np.round(pattern.time_offset_s.astype(np.float64) * 1e6).astype(np.int64)))
    given = np.array([(v.x, v.y, v.z) for v in values], np.float64)
    return bool(np.array_equal(given, pattern.directions.astype(np.float64)))


def narrow_pattern(pattern: RayPattern, fov_horizontal_rad: float | None, fov_vertical_rad: float | None,
                   rays_horizontal: int | None, rays_vertical: int | None, name: str = "the lidar") -> RayPattern:
    """``pattern`` within OSI fields of view and ray counts (None: as it is): the grid columns whose every ray lies
    within ``±fov_horizontal_rad/2`` of azimuth and the rows whose every ray left lies within ``±fov_vertical_rad/2``
    of elevation; then, where a count is below what is left, that many columns (in firing order) and rows (by
    elevation), spread evenly. Rays keep their beam, column and firing time. :class:`ViewConfigurationError` when
    nothing is left."""
    rows = np.arange(pattern.rows)
    columns = np.arange(pattern.columns)
    grid = (pattern.columns, pattern.rows)
    if fov_horizontal_rad is not None:
        azimuth = np.abs(pattern.azimuth_rad.astype(np.float64)).reshape(grid)
        columns = np.flatnonzero(np.all(azimuth <= fov_horizontal_rad / 2 + EDGE_TOLERANCE_RAD, axis=1))
        if len(columns) == 0:
            raise ViewConfigurationError(f"OSMPSensorViewInConfig field_of_view_horizontal {fov_horizontal_rad:g} "
                                         f"rad leaves none of {name}'s rays")
    elevation = pattern.elevation_rad.astype(np.float64).reshape(grid)[columns]
    if fov_vertical_rad is not None:
        rows = np.flatnonzero(np.all(np.abs(elevation) <= fov_vertical_rad / 2 + EDGE_TOLERANCE_RAD, axis=0))
        if len(rows) == 0:
            raise ViewConfigurationError(f"OSMPSensorViewInConfig field_of_view_vertical {fov_vertical_rad:g} rad "
                                         f"leaves none of {name}'s rays")
    if rays_horizontal is not None and rays_horizontal < len(columns):
        columns = columns[_evenly(len(columns), rays_horizontal)]
    if rays_vertical is not None and rays_vertical < len(rows):
        by_elevation = rows[np.argsort(elevation[:, rows].mean(axis=0), kind="stable")]
        rows = np.sort(by_elevation[_evenly(len(rows), rays_vertical)])
    if len(rows) == pattern.rows and len(columns) == pattern.columns:
        return pattern
    return pattern.select_grid(rows, columns)


def _evenly(have: int, keep: int) -> np.ndarray:
    """``keep`` of ``have`` indices, spread evenly from the first (every other one for half)."""
    return np.floor(np.arange(keep) * (have / keep)).astype(np.int64)

"""SensorView bytes → :class:`SensorViewFrame`: what the scene and the sensor need this step.

OSI conventions (REFERENCE §3): ``base.position`` is the bounding-box centre
in world coordinates, ``base.orientation`` intrinsic z-y'-x'' (yaw, pitch,
roll); the host vehicle frame sits at the rear-axle centre
``base.position + R · bbcenter_to_rear`` with the base orientation; the
sensor's ``mounting_position`` is given in that vehicle frame.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import LidarFmuError
from ..geometry.transforms import extrapolate_pose, pose_matrix
from ..physics.weather import KOSCHMIEDER_CONSTANT, MOR_CONSTANT, Weather

#: |coordinate| beyond this (m) is no place in any world: such a position is invalid input, like NaN
#: (float32 rays there are metres apart, and a pose that far out is a unit or encoding error)
MAX_POSITION_M = 1e7


class SensorViewError(LidarFmuError, ValueError):
    """The SensorView bytes cannot be used (malformed, truncated, NaN poses…)."""


def in_world(values, axis: int | None = None) -> np.bool_ | np.ndarray:
    """Whether coordinates ``values`` (m) lie in some world: finite and within ±MAX_POSITION_M — all of them
    (``axis`` None: one bool), or each row along ``axis`` (a mask: ``axis=1`` of (N, 3) points)."""
    # NaN compares false: one comparison rules out what is not finite and what lies too far
    return np.all(np.abs(np.asarray(values, np.float64)) <= MAX_POSITION_M, axis=axis)


def position_in_world(values) -> bool:
    """One position's floats: :func:`in_world` in plain Python, for the checks run per object every step (a numpy
    call per object costs more than the check)."""
    return all(abs(v) <= MAX_POSITION_M for v in values)  # NaN compares false


def check_position(position, what: str) -> None:
    """Raise :class:`SensorViewError` if ``position`` (x, y, z in m) is not finite or lies beyond ±MAX_POSITION_M."""
    values = [float(v) for v in position]
    if position_in_world(values):
        return
    if not all(map(math.isfinite, values)):
        raise SensorViewError(f"{what} contains NaN or infinite values: {values}")
    raise SensorViewError(f"{what} {values} lies beyond ±{MAX_POSITION_M:g} m: no world is that large")


@dataclass
class ObjectState:
    """One OSI object this step (SI units, world frame)."""

    id: int
    position_m: tuple  # (x, y, z) bounding-box centre
    orientation_rad: tuple  # (roll, pitch, yaw)
    dimension_m: tuple  # (length, width, height)
    model_reference: str = ""
    moving: bool = True
    bbcenter_to_rear_m: tuple | None = None  # vehicles only
    velocity_m_s: tuple | None = None  # base.velocity (world), when the view sets it
    orientation_rate_rad_s: tuple | None = None  # base.orientation_rate (d/dt of roll, pitch, yaw)
    #: what OSI says the object is (:func:`object_class`): "car", "heavy_truck", "pedestrian", "tree", …; "" unknown
    object_class: str = ""
    #: a stationary object's OSI classification material ("concrete", "metal", …; "" unknown)
    material: str = ""
    #: a stationary object's base polygon (P, 2) m in its own frame (x forward, y left, origin at the box centre)
    base_polygon_m: np.ndarray | None = None

    @property
    def pose(self) -> np.ndarray:
        """4×4 world_from_object (object frame at the bounding-box centre)."""
        return pose_matrix(self.position_m, self.orientation_rad)

    @property
    def moves(self) -> bool:
        """Does the view give this object a velocity or an orientation rate that is not zero?"""
        return any(v for v in (self.velocity_m_s or ()) + (self.orientation_rate_rad_s or ()))


@dataclass
class SensorViewFrame:
    timestamp_s: float
    sensor_id: int
    host_vehicle_id: int | None
    #: the moving objects (stationary ones are part of :attr:`stationary_part`)
    objects: list[ObjectState] = field(default_factory=list)
    mounting_pose: np.ndarray | None = None  # vehicle_from_sensor, None when the view carries none
    #: per ``lidar_sensor_view[k]``, its view configuration's mounting (None where it has none; the error where
    #: it is unusable, raised only by the lidar that uses it): a rig's lidars
    lidar_mountings: list = field(default_factory=list)
    environment_reference: str = ""
    version: tuple[int, int, int] | None = None
    weather: Weather | None = None  # of GroundTruth.environmental_conditions, if set (from_osi_environment)
    #: the ground truth's road (lanes, boundaries, markings, signs, lights, reference lines, logical lanes) and its
    #: stationary objects, each as the bytes of a GroundTruth holding only those fields (b"" where the view sends
    #: none): :func:`static_parts`, decoded by :mod:`lidar_fmu.osi.ground_truth` when they change
    road_part: bytes = b""
    stationary_part: bytes = b""
    country_code: int = 0  # GroundTruth.country_code (ISO 3166-1 numeric), 0 unknown
    #: moving objects other than the host left out of :attr:`objects`, each (id, why): a size that is not finite
    left_out: list[tuple[int, str]] = field(default_factory=list)

    def object(self, object_id: int) -> ObjectState | None:
        return next((o for o in self.objects if o.id == object_id), None)

    def host_pose(self, dt_s: float = 0.0) -> np.ndarray | None:
        """4×4 world_from_vehicle (rear-axle frame) of the host, if it is in the ground truth (``dt_s`` later:
        :func:`~lidar_fmu.geometry.transforms.extrapolate_pose`)."""
        host = self.object(self.host_vehicle_id) if self.host_vehicle_id is not None else None
        if host is None:
            return None
        pose = extrapolate_pose(host.pose, host.velocity_m_s, host.orientation_rate_rad_s, dt_s) if dt_s else host.pose
        if host.bbcenter_to_rear_m is not None:
            pose[:3, 3] += pose[:3, :3] @ np.asarray(host.bbcenter_to_rear_m)
        return pose


def _vector(msg, names, what: str) -> tuple:
    values = tuple(getattr(msg, n) for n in names)
    if not all(map(math.isfinite, values)):
        raise SensorViewError(f"{what} contains NaN or infinite values: {list(values)}")
    return values


def _lidar_mounting(lidar_view, k: int):
    """``lidar_sensor_view[k]``'s mounting, None, or the error it gives (an entry no lidar uses may be broken)."""
    if not lidar_view.view_configuration.HasField("mounting_position"):
        return None
    try:
        return mounting_pose(lidar_view.view_configuration.mounting_position, f"lidar_sensor_view[{k}] mounting_position")
    except LidarFmuError as exc:
        return exc


def mounting_pose(mounting, what: str) -> np.ndarray:
    """An OSI MountingPosition → 4×4 vehicle_from_sensor; SensorViewError naming ``what`` when it is no pose."""
    position = _vector(mounting.position, "xyz", f"{what}.position")
    check_position(position, f"{what}.position")
    orientation = _vector(mounting.orientation, ("roll", "pitch", "yaw"), f"{what}.orientation")
    return pose_matrix(position, orientation)


#: OSI 3.8 MovingObject.VehicleClassification.Type by number → the class name lidar-fmu uses. OSI's aliases share
#: numbers (TYPE_CAR = TYPE_MEDIUM_CAR = 4, TYPE_VAN = TYPE_DELIVERY_VAN = 6, TYPE_MOTORCYCLE = TYPE_MOTORBIKE = 10):
#: one name each. Numbers a newer OSI adds read as "vehicle".
VEHICLE_CLASSES = {2: "small_car", 3: "compact_car", 4: "car", 5: "luxury_car", 6: "van", 7: "heavy_truck",
                   8: "semitrailer", 9: "trailer", 10: "motorcycle", 11: "bicycle", 12: "bus", 13: "tram",
                   14: "train", 15: "wheelchair", 16: "semitractor", 17: "standup_scooter",
                   18: "micromobility_device", 19: "work_machine", 20: "watercraft", 21: "aircraft",
                   22: "land_vehicle"}
#: OSI MovingObject.Type → class (vehicles take their VehicleClassification)
MOVING_CLASSES = {3: "pedestrian", 4: "animal"}
#: OSI StationaryObject.Classification.Type (OSI 3.8) → class
STATIONARY_CLASSES = {2: "bridge", 3: "building", 4: "pole", 5: "pylon", 6: "delineator", 7: "tree", 8: "barrier",
                      9: "vegetation", 10: "curbstone", 11: "wall", 12: "vertical_structure",
                      13: "rectangular_structure", 14: "overhead_structure", 15: "reflective_structure",
                      16: "construction_site_element", 17: "speed_bump", 18: "emitting_structure"}
#: OSI StationaryObject.Classification.Material → name
STATIONARY_MATERIALS = {2: "wood", 3: "plastic", 4: "concrete", 5: "metal", 6: "stone", 7: "glass", 8: "mud"}


def object_class(obj, moving: bool) -> str:
    """What OSI says ``obj`` (a MovingObject or StationaryObject message) is; "" when it does not say."""
    if not moving:
        return STATIONARY_CLASSES.get(obj.classification.type, "")
    if obj.type == 2:  # TYPE_VEHICLE
        return VEHICLE_CLASSES.get(obj.vehicle_classification.type, "vehicle")
    return MOVING_CLASSES.get(obj.type, "")


def _object(obj, moving: bool) -> ObjectState:
    what = f"{'moving' if moving else 'stationary'}_object {obj.id.value}"
    base = obj.base
    state = ObjectState(
        id=int(obj.id.value),
        position_m=_vector(base.position, "xyz", f"{what} position"),
        orientation_rad=_vector(base.orientation, ("roll", "pitch", "yaw"), f"{what} orientation"),
        dimension_m=_vector(base.dimension, ("length", "width", "height"), f"{what} dimension"),
        model_reference=obj.model_reference,
        moving=moving,
        object_class=object_class(obj, moving),
    )
    if not moving:  # (its base polygon, bounded: lidar_fmu.osi.ground_truth.decode_stationary)
        state.material = STATIONARY_MATERIALS.get(obj.classification.material, "")
    if moving and base.HasField("velocity"):  # BaseStationary has neither
        state.velocity_m_s = _vector(base.velocity, "xyz", f"{what} velocity")
    if moving and base.HasField("orientation_rate"):
        state.orientation_rate_rad_s = _vector(base.orientation_rate, ("roll", "pitch", "yaw"),
                                               f"{what} orientation_rate")
    if moving and obj.HasField("vehicle_attributes") and obj.vehicle_attributes.HasField("bbcenter_to_rear"):
        state.bbcenter_to_rear_m = _vector(obj.vehicle_attributes.bbcenter_to_rear, "xyz", f"{what} bbcenter_to_rear")
    return state


def parse_sensor_view(data: bytes):
    """Bytes → ``osi3.SensorView``; :class:`SensorViewError` if they are not one."""
    from google.protobuf.message import DecodeError
    from osi3.osi_sensorview_pb2 import SensorView

    if not data:
        raise SensorViewError("empty SensorView buffer")
    try:
        view = SensorView.FromString(bytes(data))
    except DecodeError as exc:
        raise SensorViewError(f"malformed or truncated SensorView ({len(data)} bytes): {exc}") from None
    except Exception as exc:  # the C++/upb parser may raise other types on garbage
        raise SensorViewError(f"cannot parse SensorView ({len(data)} bytes): {exc}") from None
    return view


def sensor_view_time_s(data: bytes) -> float:
    """A serialized SensorView's ``timestamp`` in s (0 for an empty message, which parses as an empty SensorView);
    :class:`SensorViewError` if the bytes are not one."""
    if not data:
        return 0.0
    view = parse_sensor_view(data)
    return view.timestamp.seconds + 1e-9 * view.timestamp.nanos


def decode_sensor_view(data: bytes) -> SensorViewFrame:
    """Decode and validate one SensorView."""
    view = parse_sensor_view(data)
    if not view.HasField("global_ground_truth"):
        raise SensorViewError("SensorView has no global_ground_truth")
    gt = view.global_ground_truth
    timestamp = view.timestamp if view.HasField("timestamp") else gt.timestamp
    timestamp_s = float(timestamp.seconds) + 1e-9 * float(timestamp.nanos)
    host_id = None
    if view.HasField("host_vehicle_id"):
        host_id = int(view.host_vehicle_id.value)
    elif gt.HasField("host_vehicle_id"):
        host_id = int(gt.host_vehicle_id.value)
    mounting = None
    if view.HasField("mounting_position"):
        mounting = mounting_pose(view.mounting_position, "SensorView.mounting_position")
    elif len(view.lidar_sensor_view) and view.lidar_sensor_view[0].view_configuration.HasField("mounting_position"):
        mounting = mounting_pose(
            view.lidar_sensor_view[0].view_configuration.mounting_position, "lidar_sensor_view mounting_position"
        )
    lidar_mountings = [_lidar_mounting(lidar, k) for k, lidar in enumerate(view.lidar_sensor_view)]
    objects, left_out = _moving_objects(gt.moving_object, host_id)
    road_part, stationary_part = static_parts(data)
    version = None
    if view.HasField("version"):
        version = (view.version.version_major, view.version.version_minor, view.version.version_patch)
    weather = None
    if gt.HasField("environmental_conditions"):
        weather = from_osi_environment(gt.environmental_conditions)
    return SensorViewFrame(
        weather=weather,
        timestamp_s=timestamp_s,
        sensor_id=int(view.sensor_id.value),
        host_vehicle_id=host_id,
        objects=objects,
        mounting_pose=mounting,
        lidar_mountings=lidar_mountings,
        environment_reference=gt.model_reference,
        version=version,
        road_part=road_part,
        stationary_part=stationary_part,
        country_code=int(gt.country_code),
        left_out=left_out,
    )


def _moving_objects(messages, host_id: int | None) -> tuple[list[ObjectState], list[tuple[int, str]]]:
    """The moving objects, and (id, why) of those left out: an object other than the host whose dimension is not
    finite is only that object's problem (its box cannot be placed); a pose that is not finite still rejects the
    view, as does the host's own dimension (its wheels are where the ground is)."""
    objects, left_out = [], []
    for message in messages:
        dimension = (message.base.dimension.length, message.base.dimension.width, message.base.dimension.height)
        if int(message.id.value) != host_id and not all(map(math.isfinite, dimension)):
            left_out.append((int(message.id.value), f"moving_object {message.id.value} dimension contains NaN or "
                                                    f"infinite values: {list(dimension)}; left out"))
            continue
        objects.append(_object(message, True))
    return objects, left_out


# ------------------------------------------------------------ the static part, found at the wire level

#: SensorView.global_ground_truth
_GROUND_TRUTH_FIELD = 7
#: GroundTruth fields that make the road (OSI 3.8: traffic_sign 6, traffic_light 7, road_marking 8, lane_boundary 9,
#: lane 10, reference_line 17, logical_lane_boundary 18, logical_lane 19) and its stationary objects (4)
ROAD_FIELDS = frozenset({6, 7, 8, 9, 10, 17, 18, 19})
STATIONARY_FIELD = 4


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise SensorViewError("malformed SensorView: a varint runs past its message")


def _fields(buf, start: int, end: int):
    """(field number, first byte of its tag, end) of every field of the message in ``buf[start:end]``."""
    pos = start
    while pos < end:
        first = pos
        key, pos = _varint(buf, pos, end)
        wire = key & 7
        if wire == 2:
            length, pos = _varint(buf, pos, end)
            pos += length
        elif wire == 0:
            _, pos = _varint(buf, pos, end)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:  # groups (deprecated, never in OSI)
            raise SensorViewError(f"malformed SensorView: wire type {wire} of field {key >> 3}")
        if pos > end:
            raise SensorViewError("malformed SensorView: a field runs past its message")
        yield key >> 3, first, pos


def static_parts(sensor_view: bytes) -> tuple[bytes, bytes]:
    """The road and the stationary objects of a SensorView's ground truth, each as the bytes of a GroundTruth holding
    only those fields (b"" where it has none).

    Found by walking the wire format (tags and lengths, nothing decoded): a step compares its static content with
    the last one's by these bytes, and decodes them only when they change (esmini sends the road only in its first
    message; other tools send it unchanged every step).
    """
    buf = memoryview(sensor_view)
    road, stationary = [], []
    for number, first, end in _fields(buf, 0, len(buf)):
        if number != _GROUND_TRUTH_FIELD:
            continue
        _, value = _varint(buf, first, end)  # the tag
        _, value = _varint(buf, value, end)  # the length: the ground truth's fields follow
        for inner, start, stop in _fields(buf, value, end):
            if inner in ROAD_FIELDS:
                road.append(buf[start:stop])
            elif inner == STATIONARY_FIELD:
                stationary.append(buf[start:stop])
    return b"".join(road), b"".join(stationary)


# ------------------------------------------------------------ OSI environmental conditions

#: OSI EnvironmentalConditions.Fog → MOR (m, 5 % visibility, OSI's definition) representing the class:
#: the geometric middle of the class's range [lo, hi) (the classes are log-spaced), the arithmetic
#: middle for FOG_DENSE [0, 50) whose geometric middle is 0, and no fog for FOG_EXCELLENT_VISIBILITY
#: [40 km, inf) (α ≤ 7.5e-5 /m: ≥ 97 % two-way transmission over 200 m), UNKNOWN and OTHER.
OSI_FOG_MOR_M = {
    "FOG_UNKNOWN": math.inf,
    "FOG_OTHER": math.inf,
    "FOG_EXCELLENT_VISIBILITY": math.inf,
    "FOG_GOOD_VISIBILITY": math.sqrt(10_000.0 * 40_000.0),
    "FOG_MODERATE_VISIBILITY": math.sqrt(4_000.0 * 10_000.0),
    "FOG_POOR_VISIBILITY": math.sqrt(2_000.0 * 4_000.0),
    "FOG_MIST": math.sqrt(1_000.0 * 2_000.0),
    "FOG_LIGHT": math.sqrt(200.0 * 1_000.0),
    "FOG_THICK": math.sqrt(50.0 * 200.0),
    "FOG_DENSE": 25.0,
}
#: OSI EnvironmentalConditions.Precipitation → intensity (mm/h) representing the class: the geometric
#: middle of [lo, hi) (classes after Paulat et al. 2008, log-spaced), 0 for PRECIPITATION_NONE [0, 0.1)
#: and for UNKNOWN and OTHER (no information: no precipitation), and the lower bound 149 mm/h for the
#: open-ended PRECIPITATION_EXTREME [149, inf) (the least extreme rate in the class; rates beyond are rare).
OSI_PRECIPITATION_MM_H = {
    "PRECIPITATION_UNKNOWN": 0.0,
    "PRECIPITATION_OTHER": 0.0,
    "PRECIPITATION_NONE": 0.0,
    "PRECIPITATION_VERY_LIGHT": math.sqrt(0.1 * 0.5),
    "PRECIPITATION_LIGHT": math.sqrt(0.5 * 1.9),
    "PRECIPITATION_MODERATE": math.sqrt(1.9 * 8.1),
    "PRECIPITATION_HEAVY": math.sqrt(8.1 * 34.0),
    "PRECIPITATION_VERY_HEAVY": math.sqrt(34.0 * 149.0),
    "PRECIPITATION_EXTREME": 149.0,
}
#: Precipitation falls as snow when OSI's ``temperature`` (K, at z = 0) is set and below freezing.
FREEZING_K = 273.15


def from_osi_environment(env) -> Weather:
    """The :class:`Weather` of an ``osi3.EnvironmentalConditions`` message.

    ``fog`` (enum) → visibility via :data:`OSI_FOG_MOR_M`. OSI defines its
    classes by the MOR (5 % transmission, α = ln(20)/V), the spec by
    Koschmieder's 2 % visibility (α = ln(50)/V), so the class value is scaled
    by ln(50)/ln(20) = 1.306 to keep α. OSI 3.8 (installed) has no numeric fog
    visibility field, only the enum. ``precipitation`` (enum) → mm/h via
    :data:`OSI_PRECIPITATION_MM_H`; OSI does not say rain or snow, so it is
    snow when ``temperature`` is set and below 273.15 K, rain otherwise.
    Fields not set count as UNKNOWN: clear air.
    """
    fog_name = env.Fog.Name(env.fog) if env.HasField("fog") else "FOG_UNKNOWN"
    precipitation_name = (
        env.Precipitation.Name(env.precipitation) if env.HasField("precipitation") else "PRECIPITATION_UNKNOWN"
    )
    visibility_m = OSI_FOG_MOR_M[fog_name] * (KOSCHMIEDER_CONSTANT / MOR_CONSTANT)
    rate_mm_h = OSI_PRECIPITATION_MM_H[precipitation_name]
    freezing = env.HasField("temperature") and env.temperature < FREEZING_K
    if freezing:
        return Weather(fog_visibility_m=visibility_m, snow_mm_h=rate_mm_h)
    return Weather(fog_visibility_m=visibility_m, rain_mm_h=rate_mm_h)

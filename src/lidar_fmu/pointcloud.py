"""The point-cloud record: one row per lidar return, in the sensor frame.

``PointCloud.points`` is a packed numpy structured array whose layout is the
binary PCD record, so writing a file is a header plus one ``tobytes()``.
:mod:`lidar_fmu.physics.returns` fills it from hits in one compiled pass, and the
cloud keeps the ray pattern it was cast with (``pattern``) and each return's
ray (``ray_index``). Points that lost their rays (read back from OSI
detections) get them back exactly with :func:`match_rays`.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numba import njit
from numba.extending import register_jitable

from .errors import LidarFmuError
from .geometry.semantic import SEMANTIC_DTYPE

if TYPE_CHECKING:
    from .geometry.pattern import RayPattern

#: object_id reported for returns from the static environment (OSI: no object).
NO_OBJECT_ID = np.uint64(2**64 - 1)
#: Scene instance ids at or above this are environment geometry, not OSI objects.
ENVIRONMENT_ID_BASE = 2**62

POINT_DTYPE = np.dtype(
    [
        ("x", "<f4"), ("y", "<f4"), ("z", "<f4"),  # m, sensor frame
        ("range", "<f4"),  # m along the beam, in the unit's own convention (docs/sensors.md, "Range convention")
        ("reflectivity", "<f4"),  # 0–1, Lambertian-equivalent
        ("normal_x", "<f4"), ("normal_y", "<f4"), ("normal_z", "<f4"),  # unit, sensor frame, facing the sensor
        ("beam_id", "<u4"),  # emitter (laser) index
        ("object_id", "<u8"),  # instance id hit; NO_OBJECT_ID for the environment
        ("saturated", "u1"),  # 1: a retroreflector saturated the receiver
        ("time", "<f4"),  # s: when the return's ray fired, after the frame's (or partial sweep's) first firing
        ("echo", "u1"),  # the ray's reported echoes numbered by range, 0 = nearest (lidar_fmu.physics.echoes)
    ]
)
assert POINT_DTYPE.names is not None  # a structured dtype (for the type checker)
#: the fields a caster's physics pass writes; ``time`` comes from the ray pattern (:func:`lidar_fmu.physics.returns_cloud`)
#: and ``echo`` from echo formation (:mod:`lidar_fmu.physics.echoes`; 0 where a ray gives one return)
CAST_FIELDS = tuple(name for name in POINT_DTYPE.names if name not in ("time", "echo"))

#: angle (rad) within which a point must lie of its ray in :func:`match_rays`. A return is
#: ``range · direction`` in float32 and OSI carries its angles as doubles of those
#: float32 coordinates, so a round trip through OSI moves it off its ray by at most a few
#: float32 ulps (~3e-7 rad), while the presets' rays of one beam lie 2.4e-3 rad apart or more
#: (a 4000-pixel, 90° pinhole's 4e-4 rad). Closer rays are refused as ambiguous, never guessed.
RAY_MATCH_TOLERANCE_RAD = 2e-6


class RayMatchError(LidarFmuError):
    """Points cannot be given their rays exactly: they were not cast with this pattern, or its rays coincide."""


class NoRayPatternError(LidarFmuError):
    """A cloud without its ray pattern was asked for something only the pattern knows (its scan grid)."""


@dataclass
class PointCloud:
    """Returns of one scan.

    ``points`` (M,) POINT_DTYPE; ``ray_index`` (M,) int32 the ray of
    ``pattern`` each return came from; ``pattern`` the
    :class:`~lidar_fmu.sensors.RayPattern` the returns were cast with (None
    for points read back from a file or from OSI before
    :func:`lidar_fmu.tools.replay.organize`); ``rows``/``columns`` its organized
    grid shape. The per-return :attr:`row`, :attr:`column`,
    :attr:`direction` and :attr:`time_offset_s` are looked up in the pattern.
    """

    points: np.ndarray
    ray_index: np.ndarray
    rows: int
    columns: int
    timestamp_s: float = 0.0
    sensor_pose: np.ndarray = field(default_factory=lambda: np.eye(4))  # world_from_sensor
    sensor_name: str = ""
    intensity_percent: np.ndarray | None = None  # (M,) OSI intensity, see lidar_fmu.physics.returns
    pattern: RayPattern | None = None  # the rays the returns were cast with; ray_index indexes it
    existence_probability: np.ndarray | None = None  # (M,) P(detected), see lidar_fmu.physics.effects; None: 1
    echo_pulse_width_m: np.ndarray | None = None  # (M,) OSI echo_pulse_width, see lidar_fmu.physics.echoes; None: not given
    #: (M,) lidar_fmu.physics.ground_truth.GROUND_TRUTH_DTYPE beside the points, when asked for; None: not kept
    ground_truth: np.ndarray | None = None
    #: True: every point was cast from one pose, at ``timestamp_s`` (the sensor's ``motion_distortion`` off), so
    #: the firing times in ``points["time"]`` say nothing about the points and files carry no per-point time
    snapshot: bool = False
    #: scenario time (s) of the frame's first firing, which the points' ``time`` counts from; None: not known
    first_firing_s: float | None = None
    #: (beams,) uint16 ring of each beam id (:func:`beam_rings`); None: not known, files carry no ``ring``
    beam_rings: np.ndarray | None = None
    #: (M,) float32 m/s: each return's radial velocity, ``dr/dt`` (negative approaching), as an FMCW unit reports it
    #: (:mod:`lidar_fmu.physics.fmcw`), or the exact one where a scan asked for it (OSI reflections' Doppler shift);
    #: None: a unit that measures none, files carry no ``radial_velocity``
    radial_velocity_m_s: np.ndarray | None = None
    #: (M,) uint8 semantic class of what each return hit (:mod:`lidar_fmu.geometry.semantic`, docs/formats.md#semantic-
    #: classes); None: not known (points decoded from OSI), files carry no ``semantic``
    semantic: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.pattern is not None and (self.pattern.rows, self.pattern.columns) != (self.rows, self.columns):
            raise ValueError(f"pattern grid {self.pattern.rows}×{self.pattern.columns} does not match "
                             f"the cloud's {self.rows}×{self.columns}")

    def __len__(self) -> int:
        return len(self.points)

    def records(self) -> np.ndarray:
        """What files hold: the points (without ``time`` for a :attr:`snapshot`), then ``intensity`` (float32, the
        OSI intensity in %), ``ring`` (uint16, :func:`beam_rings`), ``semantic`` (uint8, :attr:`semantic`) and
        ``radial_velocity`` (float32 m/s, an FMCW unit's :attr:`radial_velocity_m_s`) where the cloud knows them,
        then the ground-truth fields when it carries them."""
        columns: dict[str, np.ndarray] = {}
        assert self.points.dtype.names is not None  # structured
        for name in self.points.dtype.names:
            if not (name == "time" and self.snapshot):
                columns[name] = self.points[name]
        if self.intensity_percent is not None:
            columns["intensity"] = np.asarray(self.intensity_percent, np.float32)
        if self.beam_rings is not None:
            columns["ring"] = rings_of(self.points["beam_id"], self.beam_rings)
        if self.semantic is not None:
            columns["semantic"] = np.asarray(self.semantic, SEMANTIC_DTYPE)
        if self.radial_velocity_m_s is not None:
            columns["radial_velocity"] = np.asarray(self.radial_velocity_m_s, np.float32)
        if self.ground_truth is not None:
            assert self.ground_truth.dtype.names is not None  # structured
            columns.update((name, self.ground_truth[name]) for name in self.ground_truth.dtype.names)
        if list(columns) == list(self.points.dtype.names):
            return self.points
        out = np.empty(len(self.points), np.dtype([(name, values.dtype) for name, values in columns.items()]))
        for name, values in columns.items():
            out[name] = values
        return out

    @property
    def frame_stamps(self) -> dict[str, float]:
        """The frame's times as files record them: ``timestamp_s`` (when it ends, the SensorView's time) and, where
        known, ``first_firing_s``."""
        stamps = {"timestamp_s": float(self.timestamp_s)}
        if self.first_firing_s is not None:
            stamps["first_firing_s"] = float(self.first_firing_s)
        return stamps

    @property
    def xyz(self) -> np.ndarray:
        """(M, 3) float32 copy of the positions (m, sensor frame)."""
        return np.stack([self.points["x"], self.points["y"], self.points["z"]], axis=1)

    def require_pattern(self, what: str = "this") -> RayPattern:
        """The cloud's pattern; :class:`NoRayPatternError` naming ``what`` needed it if there is none."""
        if self.pattern is None:
            name = f" of {self.sensor_name}" if self.sensor_name else ""
            raise NoRayPatternError(
                f"{what} needs the ray pattern the returns were cast with, and this point cloud{name} carries "
                "none (points read from a file or decoded from OSI know no scan grid)")
        return self.pattern

    def with_pattern(self, pattern: RayPattern, max_echoes: int = 1) -> PointCloud:
        """This cloud organized on ``pattern``: each return's ray found by :func:`match_rays` (exact, or it raises).

        ``max_echoes``: how many returns one ray may carry (2 for a dual-return sensor); the returns of one ray
        are then numbered by range in ``echo`` (0 = nearest), as the scan numbered them (OSI carries no echo
        number: detections decoded from it get theirs back here).
        """
        ray_index = match_rays(self.points, pattern, max_echoes=max_echoes)
        points = self.points.copy()
        points["time"] = pattern.time_offset_s[ray_index]
        if max_echoes > 1:
            points["echo"] = echo_numbers(ray_index, points["range"])
        return dataclasses.replace(self, points=points, ray_index=ray_index, rows=pattern.rows,
                                   columns=pattern.columns, pattern=pattern)

    @property
    def row(self) -> np.ndarray:
        """(M,) grid row of each return in pattern order (``ray_index % rows``; for a scan grid the beam)."""
        return np.asarray(self.ray_index, np.int64) % self.require_pattern("the grid row").rows

    @property
    def column(self) -> np.ndarray:
        """(M,) uint32 firing column of each return (azimuth step, firing order)."""
        return self.require_pattern("the firing column").column[self.ray_index]

    @property
    def direction(self) -> np.ndarray:
        """(M, 3) float32 unit direction of each return's ray (sensor frame)."""
        return self.require_pattern("the ray direction").directions[self.ray_index]

    @property
    def time_offset_s(self) -> np.ndarray:
        """(M,) float32 firing time of each return's ray after the frame start (s)."""
        return self.require_pattern("the firing time").time_offset_s[self.ray_index]


def beam_rings(pattern: RayPattern) -> np.ndarray:
    """(beams,) uint16: each beam id's ring, its rank by elevation with 0 the lowest beam.

    This is how velodyne_pointcloud numbers rings (ros-drivers/velodyne, ``calibration.cpp``: rings ordered by
    ``vert_correction``, ascending), the numbering of the ``x y z intensity ring time`` clouds that LIO-SAM and
    FAST-LIO read. ouster-ros numbers its ``ring`` top-down instead (the row of the unit's scan, ``point_cloud_
    compose.h``): there ``rows - 1 - ring``. A beam's elevation is the median over its rays (a rosette's
    channel wanders); equal elevations go by beam id.
    """
    beam = np.asarray(pattern.beam_id, np.int64)
    count = int(beam.max()) + 1 if len(beam) else 0
    if count > 2**16:
        raise ValueError(f"{count} beams do not fit a uint16 ring")
    elevation = np.arcsin(np.clip(pattern.directions[:, 2].astype(np.float64), -1.0, 1.0))
    order = np.argsort(beam, kind="stable")
    starts = np.searchsorted(beam[order], np.arange(count + 1))
    median = np.array([np.median(elevation[order[a:b]]) if b > a else np.inf for a, b in zip(starts[:-1], starts[1:])])
    rings = np.empty(count, np.uint16)
    rings[np.lexsort((np.arange(count), median))] = np.arange(count)
    return rings


def rings_of(beam_id: np.ndarray, rings: np.ndarray) -> np.ndarray:
    """(M,) uint16 ring of each point's ``beam_id`` by the table ``rings`` (:func:`beam_rings`)."""
    beam = np.asarray(beam_id, np.int64)
    if len(beam) and beam.max() >= len(rings):
        raise ValueError(f"beam {int(beam.max())} is not one of the sensor's {len(rings)} beams")
    return rings[beam]


@njit(cache=True, nogil=True)
def _match_rays(beam_start, sorted_azimuth, sorted_ray, ray_direction, ray_origin, beam, xyz, azimuth,  # type: ignore[no-untyped-def]
                cos_elevation, slack_rad, tolerance_rad, out):
    """out[k] = the one ray of beam ``beam[k]`` within ``tolerance_rad`` of ``direction[k]``; −1 none, −2 several.

    Rays are sorted by (beam, azimuth): beam b's are ``sorted_ray[beam_start[b]:beam_start[b + 1]]``.
    Only an azimuth window is searched (widened by ``slack_rad[k]``: how far off-centre beam origins can
    turn a point's azimuth seen from the sensor origin); the test is the full angle between the ray and
    the point seen from that ray's origin.
    """
    sin_tolerance = math.sin(tolerance_rad)
    for k in range(xyz.shape[0]):
        out[k] = -1
        b = beam[k]
        if b >= beam_start.shape[0] - 1:
            continue
        lo, hi = beam_start[b], beam_start[b + 1]
        # rays within the tolerance differ in azimuth by at most this (more near the poles)
        c = cos_elevation[k]
        spread = tolerance_rad + slack_rad[k]
        half = 2.0 * spread / (c - spread) if c > 4.0 * spread else 4.0
        a = azimuth[k]
        count = 0
        best = -1
        # up to three azimuth intervals: the window and its parts wrapped around ±π
        for w in range(3 if half < np.pi else 1):
            first = a - half + (0.0 if w == 0 else (2.0 * np.pi if w == 1 else -2.0 * np.pi))
            last = first + 2.0 * half
            if half >= np.pi:
                i0, i1 = lo, hi
            else:
                if last < -np.pi or first > np.pi:
                    continue
                i0 = lo + np.searchsorted(sorted_azimuth[lo:hi], first)
                i1 = lo + np.searchsorted(sorted_azimuth[lo:hi], last, side="right")
            for i in range(i0, i1):
                r = sorted_ray[i]
                dx, dy, dz = xyz[k, 0] - ray_origin[r, 0], xyz[k, 1] - ray_origin[r, 1], xyz[k, 2] - ray_origin[r, 2]
                length = math.sqrt(dx * dx + dy * dy + dz * dz)
                if length == 0.0:
                    continue
                dx, dy, dz = dx / length, dy / length, dz / length
                rx, ry, rz = ray_direction[r, 0], ray_direction[r, 1], ray_direction[r, 2]
                if dx * rx + dy * ry + dz * rz <= 0.0:
                    continue
                cx, cy, cz = dy * rz - dz * ry, dz * rx - dx * rz, dx * ry - dy * rx
                if math.sqrt(cx * cx + cy * cy + cz * cz) <= sin_tolerance:
                    count += 1
                    best = r
        if count == 1:
            out[k] = best
        elif count > 1:
            out[k] = -2


def match_rays(points: np.ndarray, pattern: RayPattern, tolerance_rad: float = RAY_MATCH_TOLERANCE_RAD,
               max_echoes: int = 1) -> np.ndarray:
    """(M,) int32 index of the ray of ``pattern`` each of ``points`` (POINT_DTYPE, sensor frame) was cast along.

    Exact, not a nearest guess: a return lies on its ray (``range · direction``)
    up to float32 rounding, so point ``k`` gets ray ``i`` only when ``i`` is
    the one ray of beam ``points["beam_id"][k]`` within ``tolerance_rad`` of
    the point's direction, and no ray is given more than ``max_echoes`` points
    (1: no ray twice; a dual-return sensor's rays carry up to 2, its echoes).
    Anything else raises :class:`RayMatchError`: a point on no ray of its beam
    (the points were not cast with this pattern), on several (the pattern
    repeats a direction within one beam), or more points on one ray than it
    has echoes.
    """
    points = np.asarray(points)
    m = len(points)
    out = np.empty(m, np.int32)
    if m == 0:
        return out
    xyz = np.stack([points["x"], points["y"], points["z"]], axis=1).astype(np.float64)
    norm = np.linalg.norm(xyz, axis=1)
    direction = xyz / np.where(norm > 0, norm, 1.0)[:, None]
    azimuth = np.arctan2(direction[:, 1], direction[:, 0])
    cos_elevation = np.hypot(direction[:, 0], direction[:, 1])
    if pattern.origins is None:  # every ray leaves the sensor origin
        ray_origin = np.zeros((len(pattern), 3))
        slack = np.zeros(m)
    else:  # beam origins off the axis: seen from the sensor origin a point is off its ray's azimuth by ≤ |o|/|p|
        ray_origin = pattern.origins.astype(np.float64)
        slack = 2.0 * float(np.linalg.norm(ray_origin, axis=1).max()) / np.maximum(norm, 1e-9)
    rays = pattern.directions.astype(np.float64)
    rays /= np.linalg.norm(rays, axis=1, keepdims=True)
    ray_beam = pattern.beam_id.astype(np.int64)
    ray_azimuth = np.arctan2(rays[:, 1], rays[:, 0])
    order = np.lexsort((ray_azimuth, ray_beam))
    beam_start = np.searchsorted(ray_beam[order], np.arange(int(ray_beam.max()) + 2))
    beam = points["beam_id"].astype(np.int64)
    _match_rays(beam_start, ray_azimuth[order], order.astype(np.int64), rays, ray_origin, beam, xyz, azimuth,
                cos_elevation, slack, float(tolerance_rad), out)
    problems = []
    off = np.flatnonzero((out == -1) | (norm == 0))
    if len(off):
        problems.append(f"{len(off)} lie on no ray of their beam within {tolerance_rad:g} rad (the first: point "
                        f"{off[0]}, beam {beam[off[0]]}): they were not cast with this pattern")
    several = np.flatnonzero(out == -2)
    if len(several):
        problems.append(f"{len(several)} lie on several rays of their beam (the pattern repeats a direction)")
    if not problems:
        given = np.bincount(out, minlength=len(pattern))
        if given.max() > max_echoes:
            problems.append(f"{int(np.count_nonzero(given > max_echoes))} rays would carry more than "
                            f"{max_echoes} point{'s' if max_echoes > 1 else ''}")
    if problems:
        raise RayMatchError(f"cannot give {m} points their rays in a {pattern.rows}×{pattern.columns} pattern: "
                            + "; ".join(problems))
    return out


def echo_numbers(ray_index: np.ndarray, range_m: np.ndarray) -> np.ndarray:
    """(M,) uint8 echo number of each return: its rank by range among the returns of its ray (0 = nearest)."""
    order = np.lexsort((range_m, ray_index))
    ray = np.asarray(ray_index)[order]
    first = np.flatnonzero(np.r_[True, ray[1:] != ray[:-1]]) if len(ray) else np.zeros(0, np.int64)
    starts = np.repeat(first, np.diff(np.r_[first, len(ray)]))
    echo = np.empty(len(ray), np.uint8)
    echo[order] = np.arange(len(ray)) - starts
    return echo


@register_jitable(inline="always")
def point_on_ray(origins, ray, range_m, dx, dy, dz):  # type: ignore[no-untyped-def]
    """``origin + range · direction`` for ray ``ray`` leaving ``origins[ray]`` (or ``origins[0]`` when
    ``origins`` is (1, 3), every ray from the sensor origin) along (dx, dy, dz)."""
    if origins.shape[0] == 1:  # two returns, not `o = 0 if … else ray`: numba unifies int64 and uint64 to float
        return origins[0, 0] + range_m * dx, origins[0, 1] + range_m * dy, origins[0, 2] + range_m * dz
    return origins[ray, 0] + range_m * dx, origins[ray, 1] + range_m * dy, origins[ray, 2] + range_m * dz


@njit(cache=True, nogil=True)
def place_on_rays(points, ray_index, directions, origins):  # type: ignore[no-untyped-def]
    """Each of ``points`` (POINT_DTYPE records) at its ``range`` along ray ``ray_index[k]``: x, y, z = ``origin +
    range · direction`` (origins (N, 3), or (1, 3) for every ray), in float32 as the physics pass writes it; in
    the records (field views as arguments took 1.25× as long)."""
    for k in range(points.shape[0]):
        i = ray_index[k]
        point = points[k]
        point.x, point.y, point.z = point_on_ray(origins, i, point.range, directions[i, 0], directions[i, 1],
                                                 directions[i, 2])


class Returns(NamedTuple):
    """The returns of a batch of rays, in ray order: what a backend's ``returns`` gives."""

    points: np.ndarray  # (M,) POINT_DTYPE, sensor frame
    ray_index: np.ndarray  # (M,) int32 ray of the batch
    intensity_percent: np.ndarray  # (M,) float32
    #: (M,) int16 IR material hit (for ground truth); None where a stage did not keep it
    material_id: np.ndarray | None = None
    #: (M,) uint8 semantic class of what each return hit (:mod:`lidar_fmu.geometry.semantic`); None: not known
    semantic: np.ndarray | None = None


def take_returns(returns: Returns, index: np.ndarray) -> Returns:
    """The returns ``index`` (indices) of ``returns``, their ``ray_index`` as they were."""
    record = np.dtype((np.void, POINT_DTYPE.itemsize))  # moved as bytes, not field by field
    return Returns(np.take(returns.points.view(record), index).view(POINT_DTYPE), np.take(returns.ray_index, index),
                   np.take(returns.intensity_percent, index),
                   *(None if a is None else np.take(a, index) for a in (returns.material_id, returns.semantic)))


def concatenate_returns(parts: Sequence[Returns]) -> Returns:
    """One :class:`Returns` of consecutive batches' (``ray_index`` already counted in the whole)."""
    # records moved as opaque bytes: numpy copies a structured dtype field by field, 15× slower
    record = np.dtype((np.void, POINT_DTYPE.itemsize))
    points = np.concatenate([p.points.view(record) for p in parts] or [np.zeros(0, record)]).view(POINT_DTYPE)
    ray_index = np.concatenate([p.ray_index for p in parts] or [np.zeros(0, np.int32)])
    intensity = np.concatenate([p.intensity_percent for p in parts] or [np.zeros(0, np.float32)])
    kept = parts and all(p.material_id is not None for p in parts)
    known = parts and all(p.semantic is not None for p in parts)
    return Returns(points, ray_index, intensity, np.concatenate([p.material_id for p in parts]) if kept else None,
                   np.concatenate([p.semantic for p in parts]) if known else None)

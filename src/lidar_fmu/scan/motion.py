"""Motion during a frame: the sensor and the objects move while the rays fire.

A spinning lidar fires its columns over the whole frame period, so a real unit's raw cloud is *distorted*: each
point is measured from where the sensor was when its ray fired, against the objects where they were then, and
reported in the sensor frame of that instant. Poses between two SensorViews are interpolated (position linearly,
orientation by slerp: :func:`interpolate_pose`), the same law for the sensor and for every object; before the
first SensorView they are extrapolated from OSI ``base.velocity`` and ``base.orientation_rate``
(:func:`~lidar_fmu.geometry.transforms.extrapolate_pose`).

How a frame is cast (:func:`cast_moving`):

* the **sensor's** motion is exact per ray: each ray is moved from the sensor frame at its firing time into the
  sensor frame at the frame's end (one rotation about one axis and a shift along one line, vectorized);
* **objects** are posed in ``motion_slices`` time slices (a few per frame): each slice's rays see the objects
  where they were at the slice's middle; the static environment needs none;
* every return is then reported in the sensor frame *at its own firing time*: ``origin + range · direction`` of
  its ray in the pattern, exactly as the unit reports it.

The spec keys and what was checked: docs/sensors.md, "Firing time and motion distortion".
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from ..geometry.scene import find_ids
from ..geometry.transforms import largest_scale, split_scale
from ..pointcloud import Returns, place_on_rays, take_returns
from ..raycast import CastJob, RayBatch
from ..raycast.rays import reach_m

#: Faster than this, a pose change is a jump (a teleport, a respawn, a test placing objects), not motion, and is not
#: interpolated. Assumed: 150 m/s (540 km/h) is beyond any road vehicle (the fastest production cars stay under
#: 140 m/s), and a scenario that jumps wants no smear between the two places.
MAX_INTERPOLATED_SPEED_M_S = 150.0
#: Likewise a turn of more than this over one window (rad): a quarter turn in one frame is no vehicle's motion.
MAX_INTERPOLATED_TURN_RAD = 0.5 * np.pi


def beyond_motion(distance_m, turn_rad, dt_s: float):
    """The one rule for what counts as motion: a pose change of ``distance_m`` and ``turn_rad`` over ``dt_s``
    seconds faster than :data:`MAX_INTERPOLATED_SPEED_M_S` or turning more than :data:`MAX_INTERPOLATED_TURN_RAD`
    (or not a number) is a jump. Broadcasts; True where it is a jump."""
    motion = (np.asarray(distance_m) <= MAX_INTERPOLATED_SPEED_M_S * abs(dt_s)) & (
        np.asarray(turn_rad) <= MAX_INTERPOLATED_TURN_RAD)
    return ~motion


def jumps(start: np.ndarray, end: np.ndarray, dt_s: float) -> np.ndarray:
    """(K,) bool: did each pose change from ``start`` (K, 4, 4) to ``end`` over ``dt_s`` seconds too fast to be
    motion (:func:`beyond_motion`)? The turn's angle comes from the trace, exact enough for a quarter-turn
    threshold."""
    r0, _ = split_scale(start)
    r1, _ = split_scale(end)
    distance_m = np.linalg.norm(np.asarray(end)[..., :3, 3] - np.asarray(start)[..., :3, 3], axis=-1)
    cos_turn = 0.5 * (np.einsum("...ij,...ij->...", r0, r1) - 1.0)  # trace(r0ᵀ r1) = 1 + 2 cos θ
    return beyond_motion(distance_m, np.arccos(np.clip(cos_turn, -1.0, 1.0)), dt_s)


def is_jump(start: np.ndarray, end: np.ndarray, dt_s: float) -> bool:
    """Did a pose change from ``start`` to ``end`` over ``dt_s`` seconds too fast to be motion (:func:`jumps`)?"""
    return bool(jumps(np.asarray(start)[None], np.asarray(end)[None], dt_s)[0])


def rates_jump(velocity_m_s, orientation_rate_rad_s, dt_s: float) -> str:
    """Why moving a pose ``dt_s`` seconds at an OSI ``base.velocity`` (m/s) and ``base.orientation_rate`` (rad/s;
    either ``None``: zero) would be a jump rather than motion (:func:`beyond_motion`, the rule between two
    views); ``""`` when it would not. The turn is taken as ``|orientation_rate| · |dt_s|``."""
    if dt_s == 0:
        return ""
    speed_m_s = float(np.linalg.norm(velocity_m_s)) if velocity_m_s is not None else 0.0
    rate_rad_s = float(np.linalg.norm(orientation_rate_rad_s)) if orientation_rate_rad_s is not None else 0.0
    if beyond_motion(speed_m_s * abs(dt_s), 0.0, dt_s):
        return f"speed {speed_m_s:.3g} m/s is beyond {MAX_INTERPOLATED_SPEED_M_S:g} m/s"
    if beyond_motion(0.0, rate_rad_s * abs(dt_s), dt_s):
        return (f"orientation rate {rate_rad_s:.3g} rad/s turns it more than a quarter turn in {abs(dt_s):g} s "
                f"(beyond {MAX_INTERPOLATED_TURN_RAD / abs(dt_s):.3g} rad/s)")
    return ""


def unit_quaternions(rotations: np.ndarray) -> np.ndarray:
    """(K, 4) (w, x, y, z) of (K, 3, 3) rotations, by Shepperd's method: from the largest of the four squared
    components, so it stays accurate at every angle (the trace alone fails near a half turn).

    (Not trimesh's: importing trimesh here, in the middle of a step, pulls in its ray module and a second
    Embree, and C masters with two instances then crashed at exit in ~1 run in 8.)
    """
    r = np.asarray(rotations, np.float64).reshape(-1, 3, 3)
    t = r[:, 0, 0] + r[:, 1, 1] + r[:, 2, 2]
    squares = np.stack([1.0 + t, 1.0 + 2.0 * r[:, 0, 0] - t, 1.0 + 2.0 * r[:, 1, 1] - t, 1.0 + 2.0 * r[:, 2, 2] - t],
                       axis=1)
    k = np.argmax(squares, axis=1)
    big = 0.5 * np.sqrt(squares[np.arange(len(r)), k])
    f = 0.25 / big
    # the antisymmetric and symmetric parts' pairs: each component is one of them, or ``big``, by ``k``
    skew_x, skew_y, skew_z = f * (r[:, 2, 1] - r[:, 1, 2]), f * (r[:, 0, 2] - r[:, 2, 0]), f * (r[:, 1, 0] - r[:, 0, 1])
    sum_xy, sum_xz, sum_yz = f * (r[:, 0, 1] + r[:, 1, 0]), f * (r[:, 0, 2] + r[:, 2, 0]), f * (r[:, 1, 2] + r[:, 2, 1])
    q = np.stack([np.choose(k, [big, skew_x, skew_y, skew_z]), np.choose(k, [skew_x, big, sum_xy, sum_xz]),
                  np.choose(k, [skew_y, sum_xy, big, sum_yz]), np.choose(k, [skew_z, sum_xz, sum_yz, big])], axis=1)
    return q / _norms(q)[:, None]


def _norms(vectors: np.ndarray) -> np.ndarray:
    """Each row's length, as ``np.linalg.norm`` gives one vector's (the dot product of a row with itself: the same
    sums, so a pose interpolated for many objects at once is bit for bit the one interpolated alone)."""
    return np.sqrt(np.matmul(vectors[:, None, :], vectors[:, :, None])[:, 0, 0])


def unit_quaternion(rotation: np.ndarray) -> np.ndarray:
    """(w, x, y, z) of one 3×3 rotation (:func:`unit_quaternions`)."""
    return unit_quaternions(rotation)[0]


def rotation_vectors(rotations: np.ndarray) -> np.ndarray:
    """(K, 3) axis · angle (rad, 0 ≤ angle ≤ π) of (K, 3, 3) rotations, through their unit quaternions (robust near
    0 and π); all at once (1,000 moving objects one by one took ~20 ms of a step)."""
    q = unit_quaternions(rotations)
    xyz = q[:, 1:] * np.where(q[:, 0] >= 0, 1.0, -1.0)[:, None]  # the shorter way round
    sin_half = _norms(xyz)
    turned = sin_half != 0.0
    out = np.zeros_like(xyz)
    out[turned] = (xyz[turned] / sin_half[turned, None]
                   * (2.0 * np.arctan2(sin_half[turned], np.abs(q[turned, 0])))[:, None])
    return out


def rotation_vector(rotation: np.ndarray) -> np.ndarray:
    """Axis · angle (rad) of one 3×3 rotation (:func:`rotation_vectors`)."""
    return rotation_vectors(rotation)[0]


def rotation_vectors_between(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """(K, 3) rotation vectors of the turns from (K, 3, 3) rotations ``start`` to ``end`` (``startᵀ · end``)."""
    return rotation_vectors(np.swapaxes(start, -1, -2) @ end)


@register_jitable(inline="always")
def _rodrigues(vx, vy, vz, kx, ky, kz, c, s):
    """(vx, vy, vz) turned about the unit axis (kx, ky, kz) by the angle whose cosine is ``c`` and sine ``s``."""
    along = (kx * vx + ky * vy + kz * vz) * (1.0 - c)
    return (vx * c + (ky * vz - kz * vy) * s + kx * along, vy * c + (kz * vx - kx * vz) * s + ky * along,
            vz * c + (kx * vy - ky * vx) * s + kz * along)


@register_jitable(inline="always")
def turned_row(vectors, j, axis, c, s, f, shift):
    """Row ``j`` of ``vectors`` (float64 arithmetic) turned about the unit ``axis`` by the angle whose cosine is ``c``
    and sine ``s``, plus ``f · shift``: one ray of :func:`rotate_about`, whose ``f`` is the ray's fraction."""
    x, y, z = _rodrigues(np.float64(vectors[j, 0]), np.float64(vectors[j, 1]), np.float64(vectors[j, 2]),
                         axis[0], axis[1], axis[2], c, s)
    return x + f * shift[0], y + f * shift[1], z + f * shift[2]


#: rays per task of _turn: a spinning lidar's column (up to 128 rays fired at once) shares one cos and sin
TURN_CHUNK = 4096


@njit(cache=True, nogil=True, parallel=True)
def _turn(vectors, axis, angle, fraction, shift, out):
    """out[i] = vectors[i] (or [0]) turned by ``fraction[i]·angle`` about the unit ``axis`` + ``fraction[i]·shift``."""
    one = vectors.shape[0] == 1
    n = out.shape[0]
    for chunk in prange((n + TURN_CHUNK - 1) // TURN_CHUNK):  # on every core
        last, c, s = np.nan, 1.0, 0.0
        for i in range(chunk * TURN_CHUNK, min(n, (chunk + 1) * TURN_CHUNK)):
            f = fraction[i]
            if f != last:  # rays fired together turn alike: a cos and a sin per firing, not per ray
                last = f
                c, s = math.cos(f * angle), math.sin(f * angle)
            out[i, 0], out[i, 1], out[i, 2] = turned_row(vectors, 0 if one else i, axis, c, s, f, shift)
    return out


@register_jitable
def fraction_at(time_offset_s, window_start_s, start_s, span):
    """:meth:`FrameMotion.fraction` of one ray (a column's last lasers may fire just past the view: posed at the
    view, never beyond)."""
    return min((window_start_s + np.float64(time_offset_s) - start_s) / span, 1.0) if span > 0 else 1.0


@njit(cache=True, nogil=True, parallel=True)
def _fire(time_offset_s, window, directions, origins, axis, angle, shift, fraction, turned, moved, extent):
    """A frame's rays as they fired, in one pass: ray ``i`` fires at ``fraction[i]`` of the window
    (``window``: its first firing, start and span, s; :meth:`FrameMotion.fraction`), and its direction
    (``turned``) and origin (``moved``; ``origins`` (1, 3): one for all) turned by ``(fraction[i] − 1)·angle`` about
    the unit ``axis`` and shifted by ``(fraction[i] − 1)·shift`` (the origin only), as :func:`rotate_about` turns
    them.
    ``extent[chunk]``: the fractions' least and greatest in each chunk of :data:`TURN_CHUNK` rays, and 1 where
    they do not fall from the chunk's first ray (or the one before it) on."""
    window_start_s, start_s, span = window[0], window[1], window[2]
    one = origins.shape[0] == 1
    still = np.zeros(3)
    n = fraction.shape[0]
    for chunk in prange((n + TURN_CHUNK - 1) // TURN_CHUNK):  # on every core
        first = chunk * TURN_CHUNK
        last, c, s = np.nan, 1.0, 0.0
        ox, oy, oz = 0.0, 0.0, 0.0
        low, high, falls = np.inf, -np.inf, 0.0
        previous = fraction_at(time_offset_s[first - 1], window_start_s, start_s, span) if first > 0 else np.nan
        for i in range(first, min(n, first + TURN_CHUNK)):
            f = fraction_at(time_offset_s[i], window_start_s, start_s, span)
            fraction[i] = f
            low, high = min(low, f), max(high, f)
            if f < previous:
                falls = 1.0
            previous = f
            b = f - 1.0
            if b != last:  # rays fired together turn alike: a cos and a sin per firing, not per ray
                last = b
                c, s = math.cos(b * angle), math.sin(b * angle)
                # (one origin for every ray turns alike over the whole firing too)
                ox, oy, oz = _rodrigues(origins[0, 0], origins[0, 1], origins[0, 2], axis[0], axis[1], axis[2], c, s)
            if angle == 0.0 and directions[i, 0] != 0.0 and directions[i, 1] != 0.0 and directions[i, 2] != 0.0:
                # no turn: v·1 plus signed zeros is v itself; only a zero component takes its sign from the sum
                turned[i, 0], turned[i, 1], turned[i, 2] = directions[i, 0], directions[i, 1], directions[i, 2]
            else:
                turned[i, 0], turned[i, 1], turned[i, 2] = turned_row(directions, i, axis, c, s, b, still)
            if one:
                moved[i, 0], moved[i, 1], moved[i, 2] = ox + b * shift[0], oy + b * shift[1], oz + b * shift[2]
            else:
                moved[i, 0], moved[i, 1], moved[i, 2] = turned_row(origins, i, axis, c, s, b, shift)
        extent[chunk, 0], extent[chunk, 1], extent[chunk, 2] = low, high, falls


@njit(cache=True, nogil=True, parallel=True)
def _turn_normals(points, ray_index, axis, angle, fraction):
    """Each return's normal turned by ``fraction[ray]·angle`` about the unit ``axis``, in the records, in place."""
    m = points.shape[0]
    for chunk in prange((m + TURN_CHUNK - 1) // TURN_CHUNK):  # a cos and a sin per firing, as in _turn
        last, c, s = np.nan, 1.0, 0.0
        for k in range(chunk * TURN_CHUNK, min(m, (chunk + 1) * TURN_CHUNK)):
            f = fraction[ray_index[k]]
            if f != last:
                last = f
                c, s = math.cos(f * angle), math.sin(f * angle)
            points[k]["normal_x"], points[k]["normal_y"], points[k]["normal_z"] = _rodrigues(
                points[k]["normal_x"], points[k]["normal_y"], points[k]["normal_z"], axis[0], axis[1], axis[2], c, s)


def axis_angle(rotvec: np.ndarray) -> tuple[np.ndarray, float]:
    """(unit axis (3,) float64, angle rad) of a rotation vector; a zero axis for no turn."""
    angle = float(np.linalg.norm(rotvec))
    return (np.asarray(rotvec, np.float64) / angle if angle > 0 else np.zeros(3)), angle


def rotate_about(vectors: np.ndarray, rotvec: np.ndarray, fraction, shift=None, dtype=np.float64) -> np.ndarray:
    """Each of ``vectors`` ((N, 3), or (1, 3) for all) turned by ``fraction[i] · rotvec`` (Rodrigues), plus
    ``fraction[i] · shift``; a compiled loop (numpy took 26 ms for an OS1-128 frame)."""
    fraction = np.ascontiguousarray(fraction, np.float64)
    axis, angle = axis_angle(rotvec)
    shift = np.zeros(3) if shift is None else np.asarray(shift, np.float64)
    out = np.empty((len(fraction), 3), dtype)
    return _turn(np.ascontiguousarray(vectors, np.float64), axis, angle, fraction, shift, out)


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only, contiguous view of ``array`` (a copy only where it is not contiguous)."""
    view = np.ascontiguousarray(array).view()
    view.flags.writeable = False
    return view


class Fired(NamedTuple):
    """A frame's rays as they fired (:func:`fire`)."""

    fraction: np.ndarray  # (N,) float64: where each ray fired between the start (0) and end (1) poses
    directions: np.ndarray  # (N, 3) float32: each ray's direction in the sensor frame at the end
    origins: np.ndarray  # (N, 3) float32: each ray's origin in the sensor frame at the end
    first: float  # the least fraction
    last: float  # the greatest
    in_order: bool  # the fractions never fall from one ray to the next (rays stored in firing order)


def fire(motion: FrameMotion, time_offset_s: np.ndarray, directions: np.ndarray, origins: np.ndarray,
         rotvec: np.ndarray, shift: np.ndarray) -> Fired:
    """Each ray's firing (:meth:`FrameMotion.fraction`) and, seen from the sensor at the frame's end, its direction
    and origin (``origins``: (N, 3), or (1, 3) for all) turned by ``(f − 1)·rotvec``, the origin also shifted by
    ``(f − 1)·shift`` (:func:`sensor_turn`), exactly as :func:`rotate_about` turns them: one compiled pass."""
    n = len(time_offset_s)
    axis, angle = axis_angle(rotvec)
    fraction = np.empty(n)
    turned, moved = np.empty((n, 3), np.float32), np.empty((n, 3), np.float32)
    extent = np.empty(((n + TURN_CHUNK - 1) // TURN_CHUNK, 3))
    window = np.array([motion.window_start_s, motion.start_s, motion.end_s - motion.start_s], np.float64)
    # the pattern's arrays read as they are (float32, no copy), as read-only views: Numba compiles a read-only array
    # a kernel of its own, and a caller's read-only pattern would otherwise compile one more in its first frame
    _fire(_read_only(time_offset_s), window, _read_only(directions), np.ascontiguousarray(origins, np.float64), axis,
          angle, np.asarray(shift, np.float64), fraction, turned, moved, extent)
    return Fired(fraction, turned, moved, float(extent[:, 0].min(initial=np.inf)),
                 float(extent[:, 1].max(initial=-np.inf)), not extent[:, 2].any())


class PoseInterpolation:
    """Poses of K objects between their ``start`` (K, 4, 4) and ``end`` poses: linear position, slerp rotation.

    Scaled poses (``R · diag(s)``, OSI boxes) keep a linearly interpolated
    scale. The rotation between the two is found once; :meth:`at` is then a
    few vectorized products (a frame's time slices pose every moving object).
    """

    def __init__(self, start, end):
        start = np.asarray(start, np.float64).reshape(-1, 4, 4)
        end = np.asarray(end, np.float64).reshape(-1, 4, 4)
        self.p0, self.p1 = start[:, :3, 3], end[:, :3, 3]
        self.r0, self.s0 = split_scale(start)
        r1, self.s1 = split_scale(end)
        rotvec = rotation_vectors_between(self.r0, r1)
        self.angle = np.linalg.norm(rotvec, axis=1)
        axis = rotvec / np.where(self.angle > 0, self.angle, 1.0)[:, None]
        skew = np.zeros((len(axis), 3, 3))
        skew[:, 0, 1], skew[:, 0, 2], skew[:, 1, 2] = -axis[:, 2], axis[:, 1], -axis[:, 0]
        skew[:, 1, 0], skew[:, 2, 0], skew[:, 2, 1] = axis[:, 2], -axis[:, 1], axis[:, 0]
        self.skew, self.skew2 = skew, skew @ skew

    def at(self, fraction: float) -> np.ndarray:
        """(K, 4, 4) poses ``fraction`` of the way (0: start, 1: end)."""
        phi = (fraction * self.angle)[:, None, None]
        turn = np.eye(3) + np.sin(phi) * self.skew + (1.0 - np.cos(phi)) * self.skew2  # Rodrigues
        poses = np.zeros((len(self.angle), 4, 4))
        poses[:, :3, :3] = (self.r0 @ turn) * (self.s0 + fraction * (self.s1 - self.s0))[:, None, :]
        poses[:, :3, 3] = self.p0 + fraction * (self.p1 - self.p0)
        poses[:, 3, 3] = 1.0
        return poses


def interpolate_pose(start: np.ndarray, end: np.ndarray, fraction: float) -> np.ndarray:
    """The 4×4 pose a ``fraction`` of the way from ``start`` (0) to ``end`` (1) (:class:`PoseInterpolation`)."""
    return PoseInterpolation(start, end).at(fraction)[0]


class StartPoses(Mapping):
    """Instance id → 4×4 world pose, held as two arrays (ids (K,), poses (K, 4, 4)): a busy road's thousand moving
    objects' start poses are found, kept and read all at once, never as a dict of a thousand arrays."""

    def __init__(self, ids: np.ndarray, poses: np.ndarray):
        self.ids, self.poses = np.asarray(ids, np.int64), np.asarray(poses, np.float64).reshape(-1, 4, 4)
        self._index: dict[int, int] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids.tolist())

    def __getitem__(self, instance_id: int) -> np.ndarray:
        if self._index is None:  # (built on the first lookup by id: the step's own work reads the arrays)
            self._index = {k: j for j, k in enumerate(self.ids.tolist())}
        return self.poses[self._index[int(instance_id)]]


@dataclass(frozen=True, eq=False)
class FrameMotion:
    """How the sensor and the objects moved over a frame, for :func:`cast_moving`.

    Scenario time (s): the *end* poses are the ones at ``end_s`` (the sensor
    pose passed to the scan, the scene's instance poses); the *start* poses
    the ones at ``start_s``. Rays fire from ``window_start_s`` on (a ray's
    ``time_offset_s`` counts from there), which may lie after ``start_s`` (a
    step longer than the frame) but not before it when poses are
    interpolated, only extrapolated.
    """

    start_s: float
    end_s: float
    window_start_s: float
    sensor_start_pose: np.ndarray  # 4×4 world_from_sensor at start_s
    #: instance id → 4×4 world pose at start_s, for the instances that moved (others stand still): a mapping, or
    #: :class:`StartPoses` (the same as two arrays, read all at once by :meth:`start_poses`)
    instance_start_poses: Mapping[int, np.ndarray] = field(default_factory=dict)

    def start_poses(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids (K,) int64, world poses at start_s (K, 4, 4)) of :attr:`instance_start_poses`, in its order."""
        starts = self.instance_start_poses
        if isinstance(starts, StartPoses):
            return starts.ids, starts.poses
        poses = np.stack(list(starts.values())) if starts else np.zeros((0, 4, 4))
        return np.fromiter(starts, np.int64, len(starts)), poses

    def fraction(self, time_offset_s: np.ndarray) -> np.ndarray:
        """(N,) float64: where each ray's firing lies between the start (0) and end (1) poses."""
        span = self.end_s - self.start_s
        t = self.window_start_s + np.asarray(time_offset_s, np.float64)
        # a column is fired in the step its first laser fires in; its last lasers (µs later) may fall just past
        # the view: posed at the view, never extrapolated beyond it
        return np.minimum((t - self.start_s) / span, 1.0) if span > 0 else np.ones(len(t))

    def is_still(self, sensor_end_pose: np.ndarray) -> bool:
        return not self.instance_start_poses and np.array_equal(self.sensor_start_pose, sensor_end_pose)


def first_firing_s(previous_s: float | None, now_s: float, period_s: float) -> float:
    """When a step's first ray fires: the window a lidar fires in for a view at ``now_s`` after one at
    ``previous_s`` (None, or not earlier: the first) opens at the previous view, or one frame period before this
    one when that is later or there is none (a step longer than a frame publishes the last frame period before
    its view); the points' ``time`` counts from there."""
    start = previous_s if previous_s is not None and previous_s < now_s else now_s - period_s
    return max(start, now_s - period_s)


def motion_since(scene, start_s: float, now_s: float, window_start_s: float, sensor_pose: np.ndarray,
                 previous, sensor_start_pose: np.ndarray, start_of_new) -> FrameMotion:
    """How the sensor and the scene's instances moved from ``start_s`` to ``now_s`` (the previous view to this one).

    ``previous``: ``(world_from_sensor, (instance ids, world poses))`` at the previous view, or ``None`` before
    the first one. Instances found there move from that pose to the one they have now, and the sensor from its
    pose then, unless the change is a jump (:func:`jumps`: taken as it comes, not interpolated). Otherwise the
    sensor starts at ``sensor_start_pose``, and an instance seen for the first time at
    ``start_of_new(instance id)`` (``None``: it stood still). With self-hits on, the host's own
    body is posed in the slices like any object: it moves with the sensor, so its points carry up to half a
    slice of the host's motion.
    """
    ids, poses = scene.instance_ids, scene.poses
    dt_s = now_s - start_s
    if previous is not None:
        sensor_then, (before_ids, before_poses) = previous
        # each instance's pose at the previous view, found by id (sorted once), all at once
        index, known = find_ids(before_ids, ids)
        then = before_poses[index[known]]
        moved = np.any(then != poses[known], axis=(1, 2)) & ~jumps(then, poses[known], dt_s)
        moved_ids, moved_starts = ids[known][moved], then[moved]
        new = ids[~known].tolist()
        sensor_start_pose = sensor_then if not jumps(sensor_then[None], sensor_pose[None], dt_s)[0] else sensor_pose
    else:
        moved_ids, moved_starts, new = np.zeros(0, np.int64), np.zeros((0, 4, 4)), ids.tolist()
    # (objects seen for the first time: one by one, but only in the step they appear)
    found = [(instance_id, start) for instance_id in new if (start := start_of_new(instance_id)) is not None]
    if found:
        moved_ids = np.concatenate([moved_ids, np.array([k for k, _ in found], np.int64)])
        moved_starts = np.concatenate([moved_starts, np.stack([start for _, start in found])])
    return FrameMotion(start_s, now_s, window_start_s, sensor_start_pose, StartPoses(moved_ids, moved_starts))


def sensor_turn(motion: FrameMotion, sensor_end_pose: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rotation vector, shift) of the sensor over the frame, in the sensor frame at its end: the sensor at a ray's
    firing, seen from the sensor at the end, is a turn ``(f − 1)·rotvec`` about that axis and a shift
    ``(f − 1)·shift`` (slerp's constant axis; ``f``: :meth:`FrameMotion.fraction`)."""
    r_start, _ = split_scale(motion.sensor_start_pose)
    r_end, _ = split_scale(sensor_end_pose)
    return rotation_vector(r_start.T @ r_end), r_end.T @ (sensor_end_pose[:3, 3] - motion.sensor_start_pose[:3, 3])


def cast_moving(backend, scene, pattern, sensor_end_pose: np.ndarray, motion: FrameMotion, model, max_range_m: float,
                slices: int, keep_order: bool = False):
    """The returns of ``pattern`` fired while the sensor and objects move (see the module doc) → ``Returns``.

    ``backend`` casts over ``scene``, whose instance poses are the end poses;
    they are moved for the slices and put back. Returns come in ray order,
    each in the sensor frame at its own firing time. ``keep_order``: the
    pattern's own order already groups rays for packets (a beam's sub-rays,
    :mod:`lidar_fmu.physics.echoes`): casters keep it.
    """
    job, after = plan_moving(scene, pattern, sensor_end_pose, motion, model, max_range_m, slices, keep_order)
    return after(backend.returns_together([job])[0])


class ScenePose:
    """Moving instances posed at one time, the ``pose`` of a run of a :class:`~lidar_fmu.raycast.CastJob`:
    calling it sets them; ``key`` is the same for the same poses (a rig's lidars then share one posing)."""

    def __init__(self, scene, ids: np.ndarray, poses: np.ndarray):
        self.scene, self.ids, self.poses = scene, ids, poses
        self.key = (ids.tobytes(), poses.tobytes())

    def __call__(self) -> None:
        self.scene.set_poses(self.ids, self.poses)


def plan_moving(scene, pattern, sensor_end_pose: np.ndarray, motion: FrameMotion, model, max_range_m: float,
                slices: int, keep_order: bool = False, coherence_key: np.ndarray | None = None):
    """:func:`cast_moving` up to the cast: (the :class:`~lidar_fmu.raycast.CastJob`, the function that takes its
    returns to the sensor frame at each ray's own firing time, in ray order). ``coherence_key``: the directions
    casters group the rays into packets by (default: the pattern's own)."""
    rotvec_end, shift_end = sensor_turn(motion, sensor_end_pose)
    origins_s = np.zeros((1, 3)) if pattern.origins is None else pattern.origins
    fired = fire(motion, pattern.time_offset_s, pattern.directions, origins_s, rotvec_end, shift_end)
    fraction, directions, origins = fired.fraction, fired.directions, fired.origins
    ids, start_poses, end_poses = _moving_in_reach(scene, motion, sensor_end_pose,
                                                   reach_m(origins, max_range_m, sensor_end_pose))
    if not len(ids):
        slices = 1
    key = pattern.directions if coherence_key is None else np.ascontiguousarray(coherence_key, np.float32)
    time_s = np.ascontiguousarray(pattern.time_offset_s, np.float32)
    beam_id = np.ascontiguousarray(pattern.beam_id, np.uint32)
    edges = np.linspace(fired.first, fired.last, slices + 1)
    bounds: list[int] | np.ndarray  # where each slice's run starts, and the end
    if slices == 1:  # the pattern's packet order (kept per pattern by the caster) still groups the turned rays
        rays = RayBatch(origins, directions, sensor_end_pose, time_s, beam_id, float(max_range_m),
                        coherence_key=None if keep_order else key, in_packet_order=keep_order)
        bounds, gather = [0, len(fraction)], None
    elif fired.in_order:  # rays stored in firing order (a spinning lidar's columns):
        # each slice is already a contiguous run of the pattern, nothing to gather or put back (a ray at an edge
        # goes to the later slice, as below); casters keep the pattern's packet order within each run
        bounds = np.r_[0, np.searchsorted(fraction, edges[1:-1], side="left"), len(fraction)]
        rays = RayBatch(origins, directions, sensor_end_pose, time_s, beam_id, float(max_range_m),
                        coherence_key=None if keep_order else key, in_packet_order=keep_order)
        gather = None
    else:  # rays gathered by slice once: each slice is a contiguous run, in firing order (neighbours together)
        slice_of = np.clip(np.searchsorted(edges, fraction, side="right") - 1, 0, slices - 1)
        gather = np.argsort(slice_of, kind="stable")
        bounds = np.searchsorted(slice_of[gather], np.arange(slices + 1))
        rays = RayBatch(origins[gather], directions[gather], sensor_end_pose, time_s[gather], beam_id[gather],
                        float(max_range_m), in_packet_order=True)
    if len(ids):
        objects = PoseInterpolation(start_poses, end_poses)
        # the caster poses the objects at each slice's middle, then casts its rays (one buffer of hits, one
        # physics pass for the whole frame)
        runs = [(int(a), int(b), ScenePose(scene, ids, objects.at(0.5 * (edges[j] + edges[j + 1]))))
                for j, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])) if a < b]
        job = CastJob(rays, model, runs, ScenePose(scene, ids, end_poses))
    else:
        job = CastJob(rays, model)
    return job, partial(_in_ray_order_at_own_time, gather, pattern, origins_s, rotvec_end, fraction)


def _moving_in_reach(scene, motion: FrameMotion, sensor_end_pose: np.ndarray, radius_m: float):
    """(ids, start poses, end poses: the scene's) of the instances of ``motion``'s start poses still in the
    scene that rays reaching ``radius_m`` (world) from the sensor's end position may meet somewhere on
    their way over the frame: position linear between the two, turns about their origins, scale between the
    two. The others stay at their end poses in every slice: posing them changes no point, and a busy road's
    thousand cars, most out of reach, are then not posed ten times a frame. ``radius_m``: the rays' bound
    (:func:`~lidar_fmu.raycast.rays.reach_m`, world)."""
    ids, start = motion.start_poses()
    index, known = find_ids(scene.instance_ids, ids)
    ids, index = ids[known], index[known]
    if not len(ids):
        return ids, np.zeros((0, 4, 4)), np.zeros((0, 4, 4))
    start, end = start[known], scene.poses[index]
    radii = scene.instance_radii_m(index)
    stretch = np.maximum(largest_scale(start), largest_scale(end))
    centre = sensor_end_pose[:3, 3]
    a, way = start[:, :3, 3], end[:, :3, 3] - start[:, :3, 3]
    length2 = np.einsum("ij,ij->i", way, way)
    along = np.clip(np.einsum("ij,ij->i", centre - a, way) / np.where(length2 > 0, length2, 1.0), 0.0, 1.0)
    near = np.linalg.norm(a + along[:, None] * way - centre, axis=1) <= radius_m + radii * stretch
    return ids[near], start[near], end[near]


def _in_ray_order_at_own_time(gather, pattern, origins_s, rotvec_end, fraction, returns: Returns) -> Returns:
    """A moving cast's returns (batch order, end frame) → ray order, each in the sensor frame when it fired."""
    if gather is not None:  # back to the pattern's ray order
        returns = returns._replace(ray_index=gather[returns.ray_index].astype(np.int32))
        if np.any(returns.ray_index[1:] < returns.ray_index[:-1]):
            returns = take_returns(returns, np.argsort(returns.ray_index, kind="stable"))
    _to_own_time(returns.points, returns.ray_index, pattern, origins_s, rotvec_end, fraction)
    return returns


def _to_own_time(points, ray_index, pattern, origins_s, rotvec_end, fraction) -> None:
    """Returns computed in the end frame → the sensor frame at each ray's own firing time, in place.

    Along its own ray the return lies ``range`` from the ray's origin, in
    that frame the ray is the pattern's: ``origin + range · direction``
    (float32, as the still path computes it). Normals turn back by the ray's
    own turn.
    """
    if len(points) == 0:
        return
    place_on_rays(points, ray_index, pattern.directions, np.ascontiguousarray(origins_s, np.float32))
    angle = float(np.linalg.norm(rotvec_end))
    if angle > 0:  # in the records: no (N, 3) copies out and back
        _turn_normals(points, np.ascontiguousarray(ray_index, np.int64), np.asarray(rotvec_end, np.float64) / angle,
                      angle, -(fraction - 1.0))  # (−(f − 1), not 1 − f: the turn's sign of zero as the rays')


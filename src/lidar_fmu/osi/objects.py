"""The object list a lidar's returns support: one OSI ``DetectedMovingObject`` per moving object it saw, one
``DetectedStationaryObject`` per stationary one.

An object of the ground truth (not the host) is reported when at least :data:`MIN_OBJECT_RETURNS` of the step's
returns (every lidar's) hit it; its box is fitted to those returns alone (:func:`fit_box`), so a partly hidden
object's box is what its points support, never the ground-truth box. ``header``: ``ground_truth_id`` and
``tracking_id`` its OSI id (the returns name what they hit: the association is exact, and stable over frames),
``existence_probability`` 1 − ∏(1 − pᵢ) over its returns' detection probabilities (the chance that at least one
is real), ``age`` how long it has been seen in consecutive steps, ``sensor_id`` the lidars that saw it;
``candidate`` its OSI class (a stationary one's type and material) with probability 1. Frames and conventions:
docs/fmu.md#osi-layers.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable
from osi3.osi_detectedobject_pb2 import DetectedItemHeader, DetectedMovingObject
from osi3.osi_object_pb2 import MovingObject, StationaryObject
from osi3.osi_sensordata_pb2 import DetectedEntityHeader, SensorData

from ..geometry.transforms import pose_matrix, roll_pitch_yaw
from .decode import MOVING_CLASSES, STATIONARY_CLASSES, STATIONARY_MATERIALS, VEHICLE_CLASSES
from .encode import set_timestamp
from .ground_truth import decode_stationary

#: fewer returns than this are no object (assumed: a box takes two faces of a few points each, and one or two
#: returns are as likely a mixed pixel at an edge as evidence of an object)
MIN_OBJECT_RETURNS = 5
#: the headings a box is tried at: every 5° over the quarter turn a rectangle repeats in, then every 0.5° within 5° of
#: the best of those
_COARSE_HEADINGS_RAD = np.radians(np.arange(0.0, 90.0, 5.0))
_FINE_HEADINGS_RAD = np.radians(np.arange(-5.0, 5.5, 0.5))
#: the points a heading is chosen by, at most (evenly spread over the object's): the criterion is a sum over points
_HEADING_POINTS = 512
#: the closeness criterion's floor (m): a point nearer an edge than this counts as on it (Zhang et al. 2017, §III-C)
_CLOSENESS_FLOOR_M = 0.01
_VEHICLE_TYPES = {name: code for code, name in VEHICLE_CLASSES.items()}
_MOVING_TYPES = {name: code for code, name in MOVING_CLASSES.items()}
_STATIONARY_TYPES = {name: code for code, name in STATIONARY_CLASSES.items()}
_STATIONARY_MATERIALS = {name: code for code, name in STATIONARY_MATERIALS.items()}


class Box(NamedTuple):
    """A box fitted to points: centre (3,) m, yaw rad, (length, width, height) m, all in the frame of the points."""

    centre_m: np.ndarray
    yaw_rad: float
    dimension_m: tuple[float, float, float]


@njit(cache=True, nogil=True)
def _closeness(xy, headings):
    """The closeness criterion (:func:`fit_box`) of the rectangle around ``xy`` (N, 2) at each of ``headings``."""
    n = xy.shape[0]
    out = np.zeros(headings.shape[0])
    along, across = np.empty(n), np.empty(n)
    for h in range(headings.shape[0]):
        cos, sin = math.cos(headings[h]), math.sin(headings[h])
        for i in range(n):  # each point along the heading and across it
            along[i] = xy[i, 0] * cos + xy[i, 1] * sin
            across[i] = xy[i, 1] * cos - xy[i, 0] * sin
        lo_a, hi_a, lo_c, hi_c = along.min(), along.max(), across.min(), across.max()
        for i in range(n):
            edge_m = min(along[i] - lo_a, hi_a - along[i], across[i] - lo_c, hi_c - across[i])
            out[h] += 1.0 / max(edge_m, _CLOSENESS_FLOOR_M)
    return out


@njit(cache=True, nogil=True)
def _best_heading(xyz, coarse, fine_offsets):
    """:func:`fit_box`'s heading (rad) for the points ``xyz`` (N, 3): the coarse heading of the best closeness, then
    the best of the fine ones about it (the first best where several tie), judged by every ceil(N/512)-th point."""
    step = max(1, -(-xyz.shape[0] // _HEADING_POINTS))
    xy = np.ascontiguousarray(xyz[::step, :2])
    coarse_closeness = _closeness(xy, coarse)
    fine = coarse[np.argmax(coarse_closeness)] + fine_offsets
    return fine[np.argmax(_closeness(xy, fine))]


@njit(cache=True, nogil=True)
def _extents(xyz, cos, sin):
    """(least, most) of the points ``xyz`` (N, 3) along the heading (cos, sin), across it and up: (6,)."""
    out = np.empty(6)
    out[0::2], out[1::2] = np.inf, -np.inf
    for i in range(xyz.shape[0]):
        along = xyz[i, 0] * cos + xyz[i, 1] * sin
        across = xyz[i, 1] * cos - xyz[i, 0] * sin
        out[0], out[1] = min(out[0], along), max(out[1], along)
        out[2], out[3] = min(out[2], across), max(out[3], across)
        out[4], out[5] = min(out[4], xyz[i, 2]), max(out[5], xyz[i, 2])
    return out


@njit(cache=True, nogil=True, parallel=True)
def _best_headings(xyz, groups, coarse, fine_offsets):
    """Each group's :func:`_best_heading`: the points ``xyz[groups[k, 0]:groups[k, 1]]`` (one task a group)."""
    out = np.empty(groups.shape[0])
    for k in prange(groups.shape[0]):
        out[k] = _best_heading(xyz[groups[k, 0]: groups[k, 1]], coarse, fine_offsets)
    return out


@njit(cache=True, nogil=True, parallel=True)
def _all_extents(xyz, groups, cos, sin):
    """Each group's :func:`_extents` along its heading (``cos[k]``, ``sin[k]``): (K, 6)."""
    out = np.empty((groups.shape[0], 6))
    for k in prange(groups.shape[0]):
        out[k] = _extents(xyz[groups[k, 0]: groups[k, 1]], cos[k], sin[k])
    return out


def fit_boxes(xyz: np.ndarray, groups: np.ndarray) -> list[Box]:
    """:func:`fit_box` of each group of the points ``xyz`` (N, 3): ``groups`` (K, 2) the [first, end) rows of each
    (at least one point), all groups' searches in one compiled pass."""
    xyz = np.ascontiguousarray(xyz, np.float64)
    groups = np.ascontiguousarray(np.asarray(groups, np.int64).reshape(-1, 2))
    yaws = [float(yaw) for yaw in _best_headings(xyz, groups, _COARSE_HEADINGS_RAD, _FINE_HEADINGS_RAD)]
    # (numpy's cos and sin of each heading alone, as one box's fit takes them)
    turns = np.array([(np.cos(yaw), np.sin(yaw)) for yaw in yaws]).reshape(-1, 2)
    extents = _all_extents(xyz, groups, np.ascontiguousarray(turns[:, 0]), np.ascontiguousarray(turns[:, 1]))
    return [_box(yaw, cos, sin, extent) for yaw, (cos, sin), extent in zip(yaws, turns, extents)]


def _box(yaw: float, cos: float, sin: float, extents: np.ndarray) -> Box:
    """The box of points whose extents (:func:`_extents`) along the heading ``yaw`` (its ``cos``, ``sin``) are
    ``extents``: the longer side the length, the yaw in (−π/2, π/2]."""
    lo_a, hi_a, lo_c, hi_c, lo_z, hi_z = extents
    mid_a, mid_c = (lo_a + hi_a) / 2, (lo_c + hi_c) / 2
    length, width = float(hi_a - lo_a), float(hi_c - lo_c)
    if width > length:  # the longer side is the length: turn a quarter
        length, width, yaw = width, length, yaw + np.pi / 2
    yaw = float(np.arctan2(np.sin(yaw), np.cos(yaw)))
    if yaw <= -np.pi / 2 or yaw > np.pi / 2:
        yaw = float(np.arctan2(np.sin(yaw + np.pi), np.cos(yaw + np.pi)))
    centre = np.array([mid_a * cos - mid_c * sin, mid_a * sin + mid_c * cos, (lo_z + hi_z) / 2])
    return Box(centre, yaw, (length, width, float(hi_z - lo_z)))


def fit_box(xyz: np.ndarray) -> Box:
    """The upright box around ``xyz`` (N, 3) (z up) whose sides the points hug: of the headings tried (every 5°,
    then every 0.5° about the best; judged by at most 512 of the points, evenly spread), the one whose rectangle
    around the points' x, y has them closest to its edges (the closeness criterion of X. Zhang, W. Xu, C. Dong,
    J. M. Dolan, "Efficient L-shape fitting for vehicle detection using laser scanners", IEEE IV 2017:
    Σ 1/max(d, 1 cm), d a point's distance to its nearest edge; the least area cannot choose for the L a lidar sees
    of a box, whose hull is a triangle that a rectangle along its long side encloses as tightly). Its longer side
    is the length (yaw in (−π/2, π/2]: one frame cannot tell an object's front from its back), the points' z extent
    the height."""
    return fit_boxes(xyz, np.array([[0, len(xyz)]]))[0]


def osi_type(object_class: str) -> tuple[int, int]:
    """(MovingObject.Type, VehicleClassification.Type) of a decoded object class (:func:`~.decode.object_class`)."""
    if object_class in _VEHICLE_TYPES:
        return MovingObject.TYPE_VEHICLE, _VEHICLE_TYPES[object_class]
    if object_class == "vehicle":
        return MovingObject.TYPE_VEHICLE, MovingObject.VehicleClassification.TYPE_UNKNOWN
    return _MOVING_TYPES.get(object_class, MovingObject.TYPE_UNKNOWN), 0


class ObjectReturns(NamedTuple):
    """One lidar's returns for the object list: its points (POINT_DTYPE, sensor frame), where it sits (4×4
    vehicle_from_sensor), their existence probabilities (one per point, or one for all) and the lidar's id."""

    points: np.ndarray
    mounting: np.ndarray
    existence: object
    sensor_id: int


@register_jitable(inline="always")
def posed_xyz(pose, x, y, z):
    """The point (x, y, z) (float64) in the frame the 4×4 ``pose`` places its own in (a sensor point in the vehicle
    frame by its mounting)."""
    return (pose[0, 0] * x + pose[0, 1] * y + pose[0, 2] * z + pose[0, 3],
            pose[1, 0] * x + pose[1, 1] * y + pose[1, 2] * z + pose[1, 3],
            pose[2, 0] * x + pose[2, 1] * y + pose[2, 2] * z + pose[2, 3])


@njit(cache=True, nogil=True)
def _vehicle_xyz(points, rows, mounting):
    """(len(rows), 3) float64: the points ``rows`` of ``points`` in the vehicle frame (``mounting``)."""
    out = np.empty((rows.shape[0], 3))
    for i in range(rows.shape[0]):
        p = points[rows[i]]
        out[i, 0], out[i, 1], out[i, 2] = posed_xyz(mounting, np.float64(p.x), np.float64(p.y), np.float64(p.z))
    return out


class ObjectList:
    """The objects a model's lidars saw, step by step (keeps how long each has been seen, and the view's stationary
    objects while their part of the ground truth stays the same)."""

    def __init__(self) -> None:
        self._first_seen_s: dict[int, float] = {}
        #: (the stationary part of the ground truth, its objects' (class, material) by id)
        self._stationary: tuple[bytes, dict[int, tuple[str, str]]] = (b"", {})

    def _stationary_classes(self, stationary_part: bytes) -> dict[int, tuple[str, str]]:
        if stationary_part != self._stationary[0]:
            objects, _ = decode_stationary(stationary_part)  # (what cannot be used, the scene update says)
            self._stationary = (stationary_part, {obj.id: (obj.object_class, obj.material) for obj in objects})
        return self._stationary[1]

    def serialized(self, returns: list[ObjectReturns], frame, vehicle_from_sensor: np.ndarray, timestamp_s: float,
                   cycle_counter: int) -> bytes:
        """SensorData's ``stationary_object_header``, ``stationary_object``, ``moving_object_header`` and
        ``moving_object`` fields (tags included) for this step: ``frame`` the decoded view (its moving objects,
        host and stationary part), ``vehicle_from_sensor`` the SensorData's own mounting (the frame the boxes are
        reported in)."""
        moving = {obj.id: obj.object_class for obj in frame.objects if obj.id != frame.host_vehicle_id}
        stationary = self._stationary_classes(frame.stationary_part)
        ids = np.fromiter([*moving, *stationary], np.uint64, len(moving) + len(stationary))
        message = SensorData()
        for header in (message.stationary_object_header, message.moving_object_header):
            set_timestamp(header.measurement_time, timestamp_s)
            header.cycle_counter = int(cycle_counter)
            header.data_qualifier = DetectedEntityHeader.DATA_QUALIFIER_AVAILABLE
        sensor_from_vehicle = np.linalg.inv(vehicle_from_sensor)
        seen: dict[int, float] = {}
        seen_now = _per_object(returns, ids)
        for object_id, box, existence, sensors in zip(seen_now.ids, fit_boxes(seen_now.xyz, seen_now.groups),
                                                      seen_now.existence, seen_now.sensors):
            pose = sensor_from_vehicle @ pose_matrix(box.centre_m, (0.0, 0.0, box.yaw_rad))
            seen[object_id] = self._first_seen_s.get(object_id, timestamp_s)
            detected = message.moving_object.add() if object_id in moving else message.stationary_object.add()
            _fill_header(detected.header, object_id, existence, timestamp_s - seen[object_id], sensors)
            base = detected.base
            base.position.x, base.position.y, base.position.z = (float(v) for v in pose[:3, 3])
            base.orientation.roll, base.orientation.pitch, base.orientation.yaw = roll_pitch_yaw(pose[:3, :3])
            base.dimension.length, base.dimension.width, base.dimension.height = box.dimension_m
            candidate = detected.candidate.add()
            candidate.probability = 1.0
            if object_id in moving:
                detected.reference_point = DetectedMovingObject.REFERENCE_POINT_CENTER
                candidate.type, vehicle_type = osi_type(moving[object_id])
                if candidate.type == MovingObject.TYPE_VEHICLE:
                    candidate.vehicle_classification.type = vehicle_type
            else:
                object_class, material = stationary[object_id]
                candidate.classification.type = _STATIONARY_TYPES.get(object_class, StationaryObject.Classification.TYPE_UNKNOWN)
                candidate.classification.material = _STATIONARY_MATERIALS.get(
                    material, StationaryObject.Classification.MATERIAL_UNKNOWN)
        self._first_seen_s = seen  # an object not seen this step starts its age again when it is
        return message.SerializeToString()


def _fill_header(header: DetectedItemHeader, object_id: int, existence: np.ndarray, age_s: float,
                 sensors: list[int]) -> None:
    header.tracking_id.value = object_id
    header.ground_truth_id.add().value = object_id
    header.existence_probability = float(1.0 - np.prod(1.0 - np.clip(existence, 0.0, 1.0)))
    header.age = float(age_s)
    header.measurement_state = DetectedItemHeader.MEASUREMENT_STATE_MEASURED
    for sensor_id in sensors:
        header.sensor_id.add().value = int(sensor_id)


@njit(cache=True, nogil=True)
def _group_by_id(object_id, ids):
    """The returns (by index into ``object_id``) whose id is one of ``ids`` (sorted), grouped by id in the order of
    ``ids`` and within an id in their own order, and where each id's group starts ((K + 1,)): one binary search a
    return and a counting sort (a stable argsort of the matched ids, without the sort)."""
    n, k_ids = object_id.shape[0], ids.shape[0]
    slot = np.full(n, -1, np.int64)
    starts = np.zeros(k_ids + 1, np.int64)
    if k_ids == 0:
        return np.zeros(0, np.int64), starts
    for k in range(n):
        value = object_id[k]
        if value < ids[0] or value > ids[k_ids - 1]:  # the environment's NO_OBJECT_ID, mostly
            continue
        lo = np.searchsorted(ids, value)  # the first id ≥ value
        if ids[lo] == value:
            slot[k] = lo
            starts[lo + 1] += 1
    starts = np.cumsum(starts)
    order = np.empty(starts[-1], np.int64)
    fill = starts[:-1].copy()
    for k in range(n):
        if slot[k] >= 0:
            order[fill[slot[k]]] = k
            fill[slot[k]] += 1
    return order, starts


class SeenObjects(NamedTuple):
    """The objects with at least :data:`MIN_OBJECT_RETURNS` returns, by id: their ids, their returns' vehicle
    positions (grouped by object; ``groups`` (K, 2): each one's [first, end) rows), each one's existence
    probabilities and the lidars that saw it."""

    ids: list[int]
    xyz: np.ndarray
    groups: np.ndarray
    existence: list[np.ndarray]
    sensors: list[list[int]]


def _per_object(returns: list[ObjectReturns], ids: np.ndarray) -> SeenObjects:
    """The objects of ``ids`` that ``returns`` saw (:class:`SeenObjects`)."""
    if not returns:
        return SeenObjects([], np.zeros((0, 3)), np.zeros((0, 2), np.int64), [], [])
    ids = np.sort(ids)

    def joined(arrays: list[np.ndarray]) -> np.ndarray:  # one lidar's as they are (no copy of its every return)
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)

    order, starts = _group_by_id(np.ascontiguousarray(joined([part.points["object_id"] for part in returns]),
                                                      np.uint64), ids)
    existence = joined([np.broadcast_to(np.asarray(part.existence, np.float64), (len(part.points),))
                        for part in returns])
    # the returns on objects alone put in the vehicle frame, grouped (most returns hit none): each lidar's by its
    # mounting
    first = np.cumsum([0, *(len(part.points) for part in returns)])
    lidar = np.searchsorted(first[1:], order, side="right")
    xyz = np.empty((len(order), 3))
    for n, part in enumerate(returns):
        mine = np.flatnonzero(lidar == n)
        xyz[mine] = _vehicle_xyz(np.ascontiguousarray(part.points), order[mine] - first[n],
                                 np.ascontiguousarray(part.mounting, np.float64))
    kept = np.flatnonzero(np.diff(starts) >= MIN_OBJECT_RETURNS)
    groups = np.stack([starts[kept], starts[kept + 1]], axis=1)
    sensors = [[returns[0].sensor_id] if len(returns) == 1 else
               sorted({int(returns[i].sensor_id) for i in np.unique(lidar[a:b])}) for a, b in groups]
    return SeenObjects([int(i) for i in ids[kept]], xyz, groups, [existence[order[a:b]] for a, b in groups], sensors)


__all__ = ["MIN_OBJECT_RETURNS", "Box", "ObjectList", "ObjectReturns", "SeenObjects", "fit_box", "fit_boxes", "osi_type",
           "posed_xyz"]

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
from functools import cache, cached_property
from itertools import repeat
from operator import attrgetter

import numpy as np
from numba import njit

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
class MovingObjects:
    """A view's moving objects as columns, in the view's order (what the scene update and the motion read for all
    objects at once; :meth:`state` is one of them as an :class:`ObjectState`). A field the view leaves unset is 0
    with its ``has_`` mask False."""

    ids: np.ndarray  # (N,) uint64
    position_m: np.ndarray  # (N, 3) bounding-box centres
    orientation_rad: np.ndarray  # (N, 3) roll, pitch, yaw
    dimension_m: np.ndarray  # (N, 3) length, width, height
    velocity_m_s: np.ndarray  # (N, 3)
    orientation_rate_rad_s: np.ndarray  # (N, 3)
    bbcenter_to_rear_m: np.ndarray  # (N, 3)
    has_velocity: np.ndarray  # (N,) bool
    has_rate: np.ndarray  # (N,) bool
    has_rear: np.ndarray  # (N,) bool
    #: (N,) each object's class as an index into :attr:`class_names` (its :attr:`ObjectState.object_class`)
    class_index: np.ndarray
    class_names: tuple[str, ...]
    #: each object's model_reference ("" where it has none)
    references: list[str]
    _first_index: dict[int, int] | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of_states(cls, states: list[ObjectState]) -> MovingObjects:
        """The columns of ``states`` (objects made one by one: the protobuf decode's, a test's)."""
        def column(values) -> np.ndarray:
            return np.array([v if v is not None else (0.0, 0.0, 0.0) for v in values], np.float64).reshape(-1, 3)

        names = tuple(dict.fromkeys(s.object_class for s in states))
        index_of = {name: k for k, name in enumerate(names)}
        return cls(np.array([s.id for s in states], np.uint64), column(s.position_m for s in states),
                   column(s.orientation_rad for s in states), column(s.dimension_m for s in states),
                   column(s.velocity_m_s for s in states), column(s.orientation_rate_rad_s for s in states),
                   column(s.bbcenter_to_rear_m for s in states),
                   np.array([s.velocity_m_s is not None for s in states], bool),
                   np.array([s.orientation_rate_rad_s is not None for s in states], bool),
                   np.array([s.bbcenter_to_rear_m is not None for s in states], bool),
                   np.array([index_of[s.object_class] for s in states], np.int64), names,
                   [s.model_reference for s in states])

    @property
    def referenced(self) -> np.ndarray:
        """(N,) whether each object names a model of its own."""
        return np.array([bool(r) for r in self.references], bool) if any(self.references) else np.zeros(len(self), bool)

    def first_of_id(self) -> np.ndarray:
        """(N,) whether each object is the first of its id in the view (the one the scene takes)."""
        first = np.zeros(len(self), bool)
        first[np.unique(self.ids, return_index=True)[1]] = True
        return first

    def first_index(self, object_id: int) -> int | None:
        """The index of the first object of id ``object_id``, None where there is none (the lookup built once)."""
        if self._first_index is None:  # (reversed: the first of an id is the one that stays)
            self._first_index = dict(zip(self.ids[::-1].tolist(), range(len(self) - 1, -1, -1)))
        return self._first_index.get(int(object_id))

    def object_class(self, k: int) -> str:
        return self.class_names[int(self.class_index[k])]

    def state(self, k: int) -> ObjectState:
        """Object ``k`` as an :class:`ObjectState`."""
        return ObjectState(int(self.ids[k]), tuple(self.position_m[k].tolist()),
                           tuple(self.orientation_rad[k].tolist()), tuple(self.dimension_m[k].tolist()),
                           self.references[k], True,
                           tuple(self.bbcenter_to_rear_m[k].tolist()) if self.has_rear[k] else None,
                           tuple(self.velocity_m_s[k].tolist()) if self.has_velocity[k] else None,
                           tuple(self.orientation_rate_rad_s[k].tolist()) if self.has_rate[k] else None,
                           self.object_class(k))

    def states(self) -> list[ObjectState]:
        """Every object as an :class:`ObjectState` (for what reads them one by one, off the step's hot path)."""
        count = len(self)

        def triples(values: np.ndarray, mask: np.ndarray | None = None) -> list:
            if mask is not None and not mask.any():
                return [None] * count
            rows = list(map(tuple, values.tolist()))
            return rows if mask is None else [v if m else None for v, m in zip(rows, mask.tolist())]

        classes = [self.class_names[k] for k in self.class_index.tolist()]
        return list(map(ObjectState, self.ids.tolist(), triples(self.position_m), triples(self.orientation_rad),
                        triples(self.dimension_m), self.references, repeat(True, count),
                        triples(self.bbcenter_to_rear_m, self.has_rear), triples(self.velocity_m_s, self.has_velocity),
                        triples(self.orientation_rate_rad_s, self.has_rate), classes))


@dataclass
class SensorViewFrame:
    timestamp_s: float
    sensor_id: int
    host_vehicle_id: int | None
    #: the moving objects (stationary ones are part of :attr:`stationary_part`); :attr:`objects` one by one
    moving: MovingObjects = field(default_factory=lambda: MovingObjects.of_states([]))
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

    @cached_property
    def objects(self) -> list[ObjectState]:
        """The moving objects one by one (made on first use: the step's own work reads :attr:`moving`)."""
        return self.moving.states()

    def object(self, object_id: int) -> ObjectState | None:
        k = self.moving.first_index(object_id)
        return None if k is None else self.moving.state(k)

    def host(self) -> ObjectState | None:
        """The host vehicle, if the view names one and its ground truth holds it."""
        return self.object(self.host_vehicle_id) if self.host_vehicle_id is not None else None

    def host_pose(self, dt_s: float = 0.0) -> np.ndarray | None:
        """4×4 world_from_vehicle (rear-axle frame) of the host, if it is in the ground truth (``dt_s`` later:
        :func:`~lidar_fmu.geometry.transforms.extrapolate_pose`)."""
        host = self.host()
        if host is None:
            return None
        pose = extrapolate_pose(host.pose, host.velocity_m_s, host.orientation_rate_rad_s, dt_s) if dt_s else host.pose
        if host.bbcenter_to_rear_m is not None:
            pose[:3, 3] += pose[:3, :3] @ np.asarray(host.bbcenter_to_rear_m)
        return pose


#: one C-level getter per field triple (a getattr per field costs more than the checks, 1,000 objects a step)
_GETTERS = {"xyz": attrgetter("x", "y", "z"), ("roll", "pitch", "yaw"): attrgetter("roll", "pitch", "yaw"),
            ("length", "width", "height"): attrgetter("length", "width", "height")}


def _vector(msg, names, what) -> tuple:
    """The fields ``names`` of ``msg``; SensorViewError naming ``what`` (a string, or a function giving it: built
    only for the error) when one is not finite."""
    values = _GETTERS[names](msg)
    # a sum is finite only if every term is (NaN and ±inf carry through); a finite sum that overflows is checked
    # term by term
    if not math.isfinite(sum(values)) and not all(map(math.isfinite, values)):
        raise SensorViewError(f"{what() if callable(what) else what} contains NaN or infinite values: {list(values)}")
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
    base = obj.base

    def what(field: str):  # the error's words, built only where there is an error
        return lambda: f"{'moving' if moving else 'stationary'}_object {obj.id.value} {field}"

    state = ObjectState(
        id=int(obj.id.value),
        position_m=_vector(base.position, "xyz", what("position")),
        orientation_rad=_vector(base.orientation, ("roll", "pitch", "yaw"), what("orientation")),
        dimension_m=_vector(base.dimension, ("length", "width", "height"), what("dimension")),
        model_reference=obj.model_reference,
        moving=moving,
        object_class=object_class(obj, moving),
    )
    if not moving:  # (its base polygon, bounded: lidar_fmu.osi.ground_truth.decode_stationary)
        state.material = STATIONARY_MATERIALS.get(obj.classification.material, "")
    if moving and base.HasField("velocity"):  # BaseStationary has neither
        state.velocity_m_s = _vector(base.velocity, "xyz", what("velocity"))
    if moving and base.HasField("orientation_rate"):
        state.orientation_rate_rad_s = _vector(base.orientation_rate, ("roll", "pitch", "yaw"),
                                               what("orientation_rate"))
    if moving and obj.HasField("vehicle_attributes") and obj.vehicle_attributes.HasField("bbcenter_to_rear"):
        state.bbcenter_to_rear_m = _vector(obj.vehicle_attributes.bbcenter_to_rear, "xyz", what("bbcenter_to_rear"))
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
    """Decode and validate one SensorView; its static part is only cut out (:func:`static_parts`), decoded by
    :mod:`lidar_fmu.osi.ground_truth` where it changes."""
    try:
        road_part, stationary_part, rest = static_parts(data)
    except SensorViewError:
        parse_sensor_view(data)  # the parser's own line where it finds the bytes malformed too
        raise
    view = parse_sensor_view(rest)
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
    walked = _moving_objects_at_wire_level(rest)
    if walked is None:
        states, left_out = _moving_objects(gt.moving_object, host_id)
        moving = MovingObjects.of_states(states)
    else:
        moving, left_out = walked
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
        moving=moving,
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
        dimension = _GETTERS["length", "width", "height"](message.base.dimension)
        if (not math.isfinite(sum(dimension)) and not all(map(math.isfinite, dimension))
                and int(message.id.value) != host_id):
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


#: what a ground truth field is to the walk (:func:`_ground_truth_runs`): kept in the view, road, stationary
_KEPT, _ROAD, _STATIONARY = 0, 1, 2
_FIELD_KIND = np.zeros(max(ROAD_FIELDS | {STATIONARY_FIELD}) + 1, np.int64)
_FIELD_KIND[sorted(ROAD_FIELDS)] = _ROAD
_FIELD_KIND[STATIONARY_FIELD] = _STATIONARY
#: why a walk stopped (the walk's error codes → the one line said)
_WALK_ERRORS = {1: "a varint runs past its message", 2: "a field runs past its message"}


@njit(cache=True, nogil=True)
def _varint(buf, pos, end):
    """(value, position after it) of the varint at ``buf[pos]``, or (0, −1) where it runs past ``end``."""
    value = np.uint64(0)
    shift = np.uint64(0)
    while pos < end and shift < np.uint64(64):
        byte = buf[pos]
        pos += 1
        value |= np.uint64(byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += np.uint64(7)
    return np.uint64(0), -1


@njit(cache=True, nogil=True)
def _field_end(buf, pos, end, wire):
    """The end of a field whose value starts at ``buf[pos]``: > ``end`` or −1 where it runs past; −2 an unknown
    wire type (groups, deprecated, never in OSI)."""
    if wire == 0:
        return _varint(buf, pos, end)[1]
    if wire == 1:
        return pos + 8
    if wire == 5:
        return pos + 4
    if wire == 2:
        length, pos = _varint(buf, pos, end)
        return -1 if pos < 0 else pos + np.int64(min(length, np.uint64(end)))
    return -2


@njit(cache=True, nogil=True)
def _next_field(buf, pos, end):
    """(field number, wire type, its value's first byte, its end, error: 0, or 1 or 2 of :data:`_WALK_ERRORS`, or
    −(wire type) − 1) of the field at ``buf[pos]`` of a message that ends at ``end``."""
    key, start = _varint(buf, pos, end)
    if start < 0:
        return 0, 0, start, start, 1
    wire, number = np.int64(key & np.uint64(7)), np.int64(key >> np.uint64(3))
    stop = _field_end(buf, start, end, wire)
    if stop == -2:
        return number, wire, start, stop, -wire - 1
    return number, wire, start, stop, 2 if stop < 0 or stop > end else 0


@njit(cache=True, nogil=True)
def _ground_truth_runs(buf, kind_of_field, views, runs):
    """The SensorView in ``buf`` walked by tags and lengths, nothing decoded. Writes each ``global_ground_truth``
    field as a row of ``views`` (its tag's first byte, its end, its first row of ``runs`` and the row after its
    last) and its fields as ``runs`` (first byte, end, kind of :data:`_FIELD_KIND`), adjacent fields of one
    kind as one run; → (views, runs, error of :func:`_next_field`, the field number it names). Rows past the
    arrays' size are counted, not written (the caller sizes them and walks again)."""
    n_views = n_runs = 0
    pos, end = 0, buf.shape[0]
    while pos < end:
        number, wire, start, stop, error = _next_field(buf, pos, end)
        if error:
            return n_views, n_runs, error, number
        if number != _GROUND_TRUTH_FIELD or wire != 2:
            pos = stop
            continue
        inner = _varint(buf, start, stop)[1]  # past the length: the ground truth's fields
        first_run = n_runs
        while inner < stop:
            number, _, _, field_end, error = _next_field(buf, inner, stop)
            if error:
                return n_views, n_runs, error, number
            kind = kind_of_field[number] if number < kind_of_field.shape[0] else _KEPT
            if n_runs > first_run and n_runs <= runs.shape[0] and runs[n_runs - 1, 2] == kind:
                runs[n_runs - 1, 1] = field_end  # the field goes on the run before it
            else:
                if n_runs < runs.shape[0]:
                    runs[n_runs, 0], runs[n_runs, 1], runs[n_runs, 2] = inner, field_end, kind
                n_runs += 1
            inner = field_end
        if n_views < views.shape[0]:
            views[n_views, 0], views[n_views, 1], views[n_views, 2], views[n_views, 3] = pos, stop, first_run, n_runs
        n_views += 1
        pos = stop
    return n_views, n_runs, 0, 0


def _length_prefixed(tag: int, size: int) -> bytes:
    """A length-delimited field's tag (one byte) and its length as a varint."""
    out = bytearray([tag])
    while True:
        byte = size & 0x7F
        size >>= 7
        out.append(byte | (0x80 if size else 0))
        if not size:
            return bytes(out)


def static_parts(sensor_view: bytes) -> tuple[bytes, bytes, bytes]:
    """(the road, the stationary objects, the rest) of a SensorView: the road and the stationary objects each as
    the bytes of a GroundTruth holding only those fields (b"" where it has none), the rest as the SensorView
    without them (the very bytes given where it has none).

    Found by a compiled walk of the wire format (tags and lengths, nothing decoded): a step compares its static
    content with the last one's by these bytes, decodes them only when they change (esmini sends the road only in
    its first message; other tools send it unchanged every step), and parses only the rest: 200,000 stationary
    objects took 0.44 s to walk in Python and 0.08 s to parse, every step.
    """
    buf = np.frombuffer(sensor_view, np.uint8)
    views, runs = np.empty((4, 4), np.int64), np.empty((64, 3), np.int64)
    n_views, n_runs, error, number = _ground_truth_runs(buf, _FIELD_KIND, views, runs)
    if not error and (n_views > len(views) or n_runs > len(runs)):
        views, runs = np.empty((n_views, 4), np.int64), np.empty((n_runs, 3), np.int64)
        n_views, n_runs, error, number = _ground_truth_runs(buf, _FIELD_KIND, views, runs)
    if error:
        why = _WALK_ERRORS.get(error) or f"wire type {-error - 1} of field {number}"
        raise SensorViewError(f"malformed SensorView: {why}")
    data = memoryview(sensor_view)
    road: list[memoryview] = []
    stationary: list[memoryview] = []
    rest: list[bytes | memoryview] = []
    last = 0
    for first, stop, first_run, end_run in views[:n_views].tolist():
        kept: list[memoryview] = []
        for a, b, kind in runs[first_run:end_run].tolist():
            (kept, road, stationary)[kind].append(data[a:b])
        rest += [data[last:first], _length_prefixed((_GROUND_TRUTH_FIELD << 3) | 2, sum(map(len, kept))), *kept]
        last = stop
    if not road and not stationary:
        return b"", b"", sensor_view
    return b"".join(road), b"".join(stationary), b"".join([*rest, data[last:]])


# ------------------------------------------------------------ the moving objects, read at the wire level

#: GroundTruth.moving_object
_MOVING_FIELD = 5
#: the float columns of a moving object's row (:func:`_moving_rows`), three each: base position, orientation,
#: dimension, velocity, orientation_rate, vehicle_attributes.bbcenter_to_rear
_POSITION, _ORIENTATION, _DIMENSION, _VELOCITY, _RATE, _REAR = 0, 3, 6, 9, 12, 15
#: its whole-number columns: id, type, vehicle_classification.type, whether velocity, orientation_rate and
#: bbcenter_to_rear are set, model_reference's first byte and end
_ID, _TYPE, _VEHICLE_TYPE, _HAS_VELOCITY, _HAS_RATE, _HAS_REAR, _REFERENCE, _REFERENCE_END = range(8)


def _enum_numbers(enum) -> np.ndarray:
    """A mask over the numbers an OSI enum defines (an undefined number on the wire leaves the field as it was:
    proto2's closed enums, as the protobuf decode reads them)."""
    numbers = list(enum.values_by_number)
    valid = np.zeros(max(numbers) + 1, np.bool_)
    valid[numbers] = True
    return valid


@njit(cache=True, nogil=True)
def _message_start(buf, start, stop):
    """The first byte of the length-delimited field whose length starts at ``buf[start]`` (ends at ``stop``)."""
    return _varint(buf, start, stop)[1]


@njit(cache=True, nogil=True)
def _triple(buf, pos, end, floats, row, column):
    """A Vector3d, Orientation3d or Dimension3d (doubles 1, 2, 3) at ``buf[pos:end]`` into ``floats[row,
    column:column + 3]``, the last of a repeated field kept (protobuf's merge); → the walk's error, 0 none."""
    while pos < end:
        number, wire, start, stop, error = _next_field(buf, pos, end)
        if error:
            return error
        if wire == 1 and 1 <= number <= 3:
            floats[row, column + number - 1] = buf[start:stop].view(np.float64)[0]
        pos = stop
    return 0


@njit(cache=True, nogil=True)
def _sub_varint(buf, pos, end, wanted):
    """(value, found) of the last varint field ``wanted`` of the message at ``buf[pos:end]``; found −1: an error."""
    value, found = np.uint64(0), 0
    while pos < end:
        number, wire, start, stop, error = _next_field(buf, pos, end)
        if error:
            return value, -1
        if number == wanted and wire == 0:
            value, found = _varint(buf, start, stop)[0], 1
        pos = stop
    return value, found


@njit(cache=True, nogil=True)
def _base_moving(buf, pos, end, floats, ints, row):
    """A BaseMoving at ``buf[pos:end]`` into row ``row``; → the walk's error, 0 none."""
    columns = (_DIMENSION, _POSITION, _ORIENTATION, _VELOCITY, -1, _RATE)  # by field number − 1
    while pos < end:
        number, wire, start, stop, error = _next_field(buf, pos, end)
        if error:
            return error
        if wire == 2 and 1 <= number <= 6 and columns[number - 1] >= 0:
            error = _triple(buf, _message_start(buf, start, stop), stop, floats, row, columns[number - 1])
            if error:
                return error
            if number == 4:
                ints[row, _HAS_VELOCITY] = 1
            elif number == 6:
                ints[row, _HAS_RATE] = 1
        pos = stop
    return 0


@njit(cache=True, nogil=True)
def _moving_object(buf, pos, end, types, vehicle_types, floats, ints, row):
    """A MovingObject at ``buf[pos:end]`` into row ``row`` of ``floats`` and ``ints`` (what it leaves unset: 0);
    → the walk's error, 0 none."""
    floats[row, :] = 0.0
    ints[row, :] = 0
    while pos < end:
        number, wire, start, stop, error = _next_field(buf, pos, end)
        if error:
            return error
        if wire == 2 and (number == 1 or number == 2 or number == 5 or number == 6):
            inner = _message_start(buf, start, stop)
            if number == 2:
                error = _base_moving(buf, inner, stop, floats, ints, row)
            elif number == 5:  # vehicle_attributes: its bbcenter_to_rear (4)
                while inner < stop and not error:
                    field, kind, first, field_end, error = _next_field(buf, inner, stop)
                    if not error and field == 4 and kind == 2:
                        error = _triple(buf, _message_start(buf, first, field_end), field_end, floats, row, _REAR)
                        ints[row, _HAS_REAR] = 1
                    inner = field_end
            else:  # id (1: its value) or vehicle_classification (6: its type)
                value, found = _sub_varint(buf, inner, stop, 1)
                if found < 0:
                    return 1
                if found and number == 1:
                    ints[row, _ID] = np.int64(value)
                elif found and value < np.uint64(vehicle_types.shape[0]) and vehicle_types[value]:
                    ints[row, _VEHICLE_TYPE] = np.int64(value)
            if error:
                return error
        elif wire == 2 and number == 7:  # model_reference
            ints[row, _REFERENCE], ints[row, _REFERENCE_END] = _message_start(buf, start, stop), stop
        elif wire == 0 and number == 3:  # type
            value = _varint(buf, start, stop)[0]
            if value < np.uint64(types.shape[0]) and types[value]:
                ints[row, _TYPE] = np.int64(value)
        pos = stop
    return 0


@njit(cache=True, nogil=True)
def _moving_rows(buf, types, vehicle_types, floats, ints):
    """The moving objects of the SensorView in ``buf``, one row each of ``floats`` and ``ints`` in the view's
    order; → (their count, the walk's error). Rows past the arrays' size are counted, not written."""
    count = 0
    pos, end = 0, buf.shape[0]
    while pos < end:
        number, wire, start, stop, error = _next_field(buf, pos, end)
        if error:
            return count, error
        if number == _GROUND_TRUTH_FIELD and wire == 2:
            inner = _message_start(buf, start, stop)
            while inner < stop:
                field, kind, first, field_end, error = _next_field(buf, inner, stop)
                if error:
                    return count, error
                if field == _MOVING_FIELD and kind == 2:
                    if count < floats.shape[0]:
                        error = _moving_object(buf, _message_start(buf, first, field_end), field_end, types,
                                               vehicle_types, floats, ints, count)
                        if error:
                            return count, error
                    count += 1
                inner = field_end
        pos = stop
    return count, 0


@cache
def _osi_enums() -> tuple[np.ndarray, np.ndarray]:
    """The numbers MovingObject.Type and VehicleClassification.Type define (:func:`_enum_numbers`)."""
    from osi3.osi_object_pb2 import MovingObject

    return (_enum_numbers(MovingObject.Type.DESCRIPTOR),
            _enum_numbers(MovingObject.VehicleClassification.Type.DESCRIPTOR))


def _moving_objects_at_wire_level(view: bytes) -> tuple[MovingObjects, list[tuple[int, str]]] | None:
    """:func:`_moving_objects` of the (parsed, so well-formed) SensorView bytes ``view``, read by a compiled walk
    instead of a protobuf object and a dozen lookups per object (1,000 objects: ~6 ms of a step); None where a value
    is not finite or a model_reference not UTF-8: the protobuf decode then says which, object by object."""
    types, vehicle_types = _osi_enums()
    buf = np.frombuffer(view, np.uint8)
    floats, ints = np.empty((64, 18)), np.empty((64, 8), np.int64)
    count, error = _moving_rows(buf, types, vehicle_types, floats, ints)
    if not error and count > len(floats):
        floats, ints = np.empty((count, 18)), np.empty((count, 8), np.int64)
        count, error = _moving_rows(buf, types, vehicle_types, floats, ints)
    floats, ints = floats[:count], ints[:count]
    if error or not np.isfinite(floats).all():
        return None
    # columns, no Python object per object (a thousand objects' tuples made the garbage collector run 15 times a
    # step); a model reference a string only where one is set
    references = [""] * count
    named = np.flatnonzero(ints[:, _REFERENCE_END] > ints[:, _REFERENCE])
    try:
        for k, a, b in zip(named.tolist(), ints[named, _REFERENCE].tolist(), ints[named, _REFERENCE_END].tolist()):
            references[k] = str(view[a:b], "utf-8")
    except UnicodeDecodeError:
        return None
    kind = ints[:, _TYPE] * (int(vehicle_types.shape[0])) + np.where(ints[:, _TYPE] == 2, ints[:, _VEHICLE_TYPE], 0)
    pairs, class_index = np.unique(kind, return_inverse=True)
    names = tuple(_class_name(*divmod(int(pair), int(vehicle_types.shape[0]))) for pair in pairs.tolist())
    flags = ints[:, _HAS_VELOCITY:_HAS_REAR + 1] != 0
    return MovingObjects(ints[:, _ID].view(np.uint64).copy(), floats[:, _POSITION:_POSITION + 3],
                         floats[:, _ORIENTATION:_ORIENTATION + 3], floats[:, _DIMENSION:_DIMENSION + 3],
                         floats[:, _VELOCITY:_VELOCITY + 3], floats[:, _RATE:_RATE + 3], floats[:, _REAR:_REAR + 3],
                         flags[:, 0], flags[:, 1], flags[:, 2], class_index.reshape(-1).astype(np.int64), names,
                         references), []


def _class_name(kind: int, vehicle_type: int) -> str:
    """The class of a moving object of MovingObject.Type ``kind`` and VehicleClassification.Type ``vehicle_type``
    (:func:`object_class`'s, from the numbers)."""
    return VEHICLE_CLASSES.get(vehicle_type, "vehicle") if kind == 2 else MOVING_CLASSES.get(kind, "")


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

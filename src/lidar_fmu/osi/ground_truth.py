"""The static part of OSI ground truth — the road and what stands beside it — as plain arrays.

What scenario tools send is ground truth, not meshes: lanes with their
boundary lines (points with width, height and dash attributes), road
markings, traffic signs and lights, stationary objects with classification
types and base polygons. :func:`decode_road` and :func:`decode_stationary`
turn the static part a SensorView carries (:func:`~lidar_fmu.osi.decode.static_parts`:
the bytes of a GroundTruth holding only those fields, parsed here first) into the dataclasses
below; :mod:`lidar_fmu.world` makes geometry of them.

Bad ground truth stays local: an element with points that are not finite or
lie beyond any world, with nothing usable left, or too large, is repaired
where that is unambiguous (points dropped, lines thinned out) or left out,
and each such element is named once in :attr:`RoadGroundTruth.problems`;
the rest decodes. Time and memory stay bounded whatever a message holds
(:data:`MAX_LINE_POINTS`, :data:`MAX_POLYGON_VERTICES`, :data:`MAX_ELEMENTS`).

Units and frames as OSI's: metres and radians, world frame; a base polygon is
in its object's frame (x forward, y left, origin at the bounding-box centre).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .decode import MAX_POSITION_M, ObjectState, SensorViewError, _object, in_world

#: points read of one boundary line, centerline or logical boundary; a longer one is thinned to this many, evenly
#: (a 10 km line keeps a point every 0.5 m)
MAX_LINE_POINTS = 20_000
#: vertices read of one base polygon (a building footprint, a road marking); more are thinned, evenly
MAX_POLYGON_VERTICES = 2_048
#: elements of one kind (lanes, boundaries, markings, signs, lights, stationary objects) decoded at most
MAX_ELEMENTS = 50_000
#: problems listed at most (each names its element); the count of the rest is said in one more line
MAX_PROBLEMS = 50

#: OSI LaneBoundary.BoundaryPoint.Dash codes
DASH_UNKNOWN, DASH_OTHER, DASH_START, DASH_CONTINUE, DASH_END, DASH_GAP = range(6)


@dataclass(frozen=True, eq=False)
class BoundaryLine:
    """An OSI LaneBoundary: a polyline with per-point width, height and dash state (OSI's carry-forward applied:
    a point without a width or height has its predecessor's)."""

    id: int
    kind: str  # the LaneBoundary type without TYPE_: "SOLID_LINE", "DASHED_LINE", "CURB", "GUARD_RAIL", …
    color: str  # "WHITE", "YELLOW", … ("" unknown)
    position_m: np.ndarray  # (N, 3) float64
    width_m: np.ndarray  # (N,) float64
    height_m: np.ndarray  # (N,) float64
    dash: np.ndarray  # (N,) int8 OSI Dash code, DASH_UNKNOWN where a point has none


@dataclass(frozen=True, eq=False)
class LaneStrip:
    """An OSI Lane (or LogicalLane): its kind, its centerline and the boundaries on either side."""

    id: int
    kind: str  # "DRIVING", "NONDRIVING", "INTERSECTION", "OTHER", "UNKNOWN"
    subtype: str  # "NORMAL", "SIDEWALK", "BORDER", "SHOULDER", "BIKING", … ("" unknown)
    centerline_m: np.ndarray  # (N, 3) float64, may be empty
    left_boundary_ids: tuple[int, ...]
    right_boundary_ids: tuple[int, ...]
    left_lane_ids: tuple[int, ...] = ()
    right_lane_ids: tuple[int, ...] = ()


@dataclass(frozen=True, eq=False)
class PlacedThing:
    """A road marking, a traffic sign plate or a traffic light: a box in the world, maybe with a base polygon."""

    id: int
    kind: str  # a marking's classification ("GENERIC_LINE"), a sign plate's ("main:STOP", "supplementary"), "light"
    position_m: tuple  # bounding-box centre
    orientation_rad: tuple  # roll, pitch, yaw; a sign's or light's +x is the normal of its face
    dimension_m: tuple  # length, width, height
    polygon_m: np.ndarray | None = None  # (P, 2) base polygon in its own frame
    color: str = ""


@dataclass(frozen=True, eq=False)
class RoadGroundTruth:
    """The road part of one ground truth, decoded; ``problems`` names each element that was repaired or left out."""

    lanes: tuple[LaneStrip, ...] = ()
    boundaries: tuple[BoundaryLine, ...] = ()
    markings: tuple[PlacedThing, ...] = ()
    signs: tuple[PlacedThing, ...] = ()
    lights: tuple[PlacedThing, ...] = ()
    country_code: int = 0
    problems: tuple[str, ...] = ()
    #: lanes built from OSI logical lanes (the source gave no physical ones)
    logical: bool = False

    @property
    def empty(self) -> bool:
        return not (self.lanes or self.boundaries or self.markings or self.signs or self.lights)


@dataclass
class _Problems:
    """Problems found while decoding, each named once, at most MAX_PROBLEMS listed."""

    lines: list[str] = field(default_factory=list)
    more: int = 0

    def add(self, message: str) -> None:
        if len(self.lines) < MAX_PROBLEMS:
            self.lines.append(message)
        else:
            self.more += 1

    def result(self) -> tuple[str, ...]:
        return tuple(self.lines) + ((f"and {self.more} more problems",) if self.more else ())


def _name(enum, code: int, prefix: str) -> str:
    """An OSI enum value's name without its prefix ("" for UNKNOWN and for numbers this OSI does not know)."""
    try:
        name = enum.Name(code)
    except ValueError:
        return ""
    name = name.removeprefix(prefix)
    return "" if name == "UNKNOWN" else name


def _chosen(count: int, limit: int) -> np.ndarray:
    """Indices of ``count`` items, thinned evenly to ``limit`` (first and last kept)."""
    if count <= limit:
        return np.arange(count)
    return np.unique(np.round(np.linspace(0, count - 1, limit)).astype(np.int64))


def _points(repeated, what: str, problems: _Problems, get) -> tuple[np.ndarray, np.ndarray]:
    """(the chosen indices, their (N, 3) positions) of a repeated field of points (``get(item) → Vector3d``), the
    ones that are not finite or lie beyond ±MAX_POSITION_M dropped (one problem line)."""
    count = len(repeated)
    chosen = _chosen(count, MAX_LINE_POINTS)
    if len(chosen) < count:
        problems.add(f"{what}: {count} points, thinned to {len(chosen)}")
    if not len(chosen):
        return chosen, np.zeros((0, 3))
    xyz = np.array([(v.x, v.y, v.z) for v in (get(repeated[int(i)]) for i in chosen)], np.float64)
    good = in_world(xyz, axis=1)
    if not good.all():
        problems.add(f"{what}: {int((~good).sum())} of its points are not finite or lie beyond "
                     f"±{MAX_POSITION_M:g} m; left out")
    return chosen[good], xyz[good]


def _carried(values: np.ndarray) -> np.ndarray:
    """OSI's carry-forward: a NaN (not set) takes the last value set before it, 0 before any."""
    given = ~np.isnan(values)
    last = np.maximum.accumulate(np.where(given, np.arange(len(values)), -1))
    return np.where(last >= 0, values[np.maximum(last, 0)], 0.0)


def _boundary(message, problems: _Problems, logical: bool = False) -> BoundaryLine | None:
    from osi3.osi_lane_pb2 import LaneBoundary

    identifier = int(message.id.value)
    what = f"{'logical_' if logical else ''}lane_boundary {identifier}"
    points = message.boundary_line
    chosen, xyz = _points(points, what, problems, lambda p: p.position)
    if len(xyz) < 2:
        problems.add(f"{what}: fewer than 2 usable points; left out")
        return None
    if logical:  # logical boundaries mark where a lane ends, nothing more: no paint, no height
        zeros = np.zeros(len(xyz))
        return BoundaryLine(identifier, "NO_LINE", "", xyz, zeros, zeros, np.zeros(len(xyz), np.int8))
    picked = [points[int(i)] for i in chosen]
    width = _carried(np.array([p.width if p.HasField("width") else np.nan for p in picked]))
    height = _carried(np.array([p.height if p.HasField("height") else np.nan for p in picked]))
    dash = np.array([p.dash if p.HasField("dash") else DASH_UNKNOWN for p in picked], np.int8)
    bad = ~np.isfinite(width) | ~np.isfinite(height)
    if bad.any():
        problems.add(f"{what}: width or height not finite at {int(bad.sum())} points; taken as 0")
        width, height = np.where(np.isfinite(width), width, 0.0), np.where(np.isfinite(height), height, 0.0)
    if (width < 0).any() or (height < 0).any():
        problems.add(f"{what}: negative width or height at {int(((width < 0) | (height < 0)).sum())} points; "
                     "taken as 0")
        width, height = np.maximum(width, 0.0), np.maximum(height, 0.0)
    classification = message.classification
    kind = _name(LaneBoundary.Classification.Type, classification.type, "TYPE_")
    color = _name(LaneBoundary.Classification.Color, classification.color, "COLOR_")
    return BoundaryLine(identifier, kind or "UNKNOWN", color, xyz, width, height, dash)


def _ids(repeated) -> tuple[int, ...]:
    return tuple(int(i.value) for i in repeated)


def _lane(message, problems: _Problems) -> LaneStrip:
    from osi3.osi_lane_pb2 import Lane

    c = message.classification
    identifier = int(message.id.value)
    _, centerline = _points(c.centerline, f"lane {identifier} centerline", problems, lambda p: p)
    return LaneStrip(identifier, _name(Lane.Classification.Type, c.type, "TYPE_") or "UNKNOWN",
                     _name(Lane.Classification.Subtype, c.subtype, "SUBTYPE_"), centerline,
                     _ids(c.left_lane_boundary_id), _ids(c.right_lane_boundary_id), _ids(c.left_adjacent_lane_id),
                     _ids(c.right_adjacent_lane_id))


def _logical_lane(message) -> LaneStrip:
    from osi3.osi_logicallane_pb2 import LogicalLane

    kind = _name(LogicalLane.Type, message.type, "TYPE_")
    return LaneStrip(int(message.id.value), "DRIVING" if kind in ("NORMAL", "EXIT", "ENTRY", "ONRAMP", "OFFRAMP",
                                                                   "CONNECTINGRAMP") else "NONDRIVING",
                     kind, np.zeros((0, 3)), _ids(message.left_boundary_id), _ids(message.right_boundary_id),
                     tuple(int(a.other_lane_id.value) for a in message.left_adjacent_lane),
                     tuple(int(a.other_lane_id.value) for a in message.right_adjacent_lane))


def _finite(values, what: str) -> tuple:
    values = tuple(float(v) for v in values)
    if not in_world(values):
        raise SensorViewError(f"{what} is not finite or lies beyond ±{MAX_POSITION_M:g} m: {list(values)}")
    return values


def _placed(identifier: int, kind: str, base, what: str, problems: _Problems, color: str = "") -> PlacedThing | None:
    """A PlacedThing of a BaseStationary (None, one problem line, when its pose or size is unusable)."""
    try:
        position = _finite((base.position.x, base.position.y, base.position.z), f"{what} position")
        orientation = _finite((base.orientation.roll, base.orientation.pitch, base.orientation.yaw),
                              f"{what} orientation")
        dimension = _finite((base.dimension.length, base.dimension.width, base.dimension.height),
                            f"{what} dimension")
    except SensorViewError as exc:
        problems.add(f"{exc}; left out")
        return None
    polygon = None
    if len(base.base_polygon):
        polygon = _polygon(base.base_polygon, what, problems)
    return PlacedThing(identifier, kind, position, orientation, dimension, polygon, color)


def _polygon(repeated, what: str, problems: _Problems) -> np.ndarray | None:
    count = len(repeated)
    chosen = _chosen(count, MAX_POLYGON_VERTICES)
    if len(chosen) < count:
        problems.add(f"{what}: base polygon of {count} vertices, thinned to {len(chosen)}")
    xy = np.array([(repeated[int(i)].x, repeated[int(i)].y) for i in chosen], np.float64).reshape(-1, 2)
    if not in_world(xy):
        problems.add(f"{what}: base polygon has vertices that are not finite; its box is used instead")
        return None
    return xy if len(xy) >= 3 else None


def _first(repeated, kind: str, problems: _Problems):
    """The first MAX_ELEMENTS of a repeated field (one problem line when there are more)."""
    if len(repeated) > MAX_ELEMENTS:
        problems.add(f"{len(repeated)} {kind}: only the first {MAX_ELEMENTS} are built")
        return [repeated[i] for i in range(MAX_ELEMENTS)]
    return repeated


def _ground_truth(part: bytes, what: str):
    """A static part's bytes → ``osi3.GroundTruth``; :class:`SensorViewError` naming ``what`` if they are not one
    (the SensorView around them was parsed without them)."""
    from google.protobuf.message import DecodeError
    from osi3.osi_groundtruth_pb2 import GroundTruth

    try:
        return GroundTruth.FromString(bytes(part)) if part else GroundTruth()
    except DecodeError as exc:
        raise SensorViewError(f"malformed SensorView: its ground truth's {what} ({len(part)} bytes): {exc}") from None
    except Exception as exc:  # the C++/upb parser may raise other types on garbage
        raise SensorViewError(f"cannot parse the SensorView's ground truth {what} ({len(part)} bytes): {exc}") from None


def decode_road(road_part: bytes, country_code: int = 0) -> RoadGroundTruth:
    """The road of a ground truth (:attr:`~lidar_fmu.osi.decode.SensorViewFrame.road_part`) as plain data.

    Physical lanes are used where the source gives them; a source that gives only logical lanes (OSI 3.6's
    reference lines with logical lanes and boundaries) gets its lanes from those.
    """
    from osi3.osi_roadmarking_pb2 import RoadMarking
    from osi3.osi_trafficsign_pb2 import TrafficSign

    gt = _ground_truth(road_part, "road")
    problems = _Problems()
    boundaries = [b for b in (_boundary(m, problems) for m in _first(gt.lane_boundary, "lane boundaries", problems))
                  if b is not None]
    lanes = [_lane(m, problems) for m in _first(gt.lane, "lanes", problems)]
    logical = False
    if not lanes and len(gt.logical_lane):
        logical = True
        boundaries += [b for b in (_boundary(m, problems, logical=True)
                                   for m in _first(gt.logical_lane_boundary, "logical lane boundaries", problems))
                       if b is not None]
        lanes = [_logical_lane(m) for m in _first(gt.logical_lane, "logical lanes", problems)]
    markings = []
    for m in _first(gt.road_marking, "road markings", problems):
        c = m.classification
        kind = _name(RoadMarking.Classification.Type, c.type, "TYPE_")
        color = _name(RoadMarking.Classification.Color, c.monochrome_color, "COLOR_")
        thing = _placed(int(m.id.value), kind, m.base, f"road_marking {m.id.value}", problems, color)
        if thing is not None:
            markings.append(thing)
    signs = []
    sign_type = TrafficSign.MainSign.Classification.Type
    for sign in _first(gt.traffic_sign, "traffic signs", problems):
        identifier = int(sign.id.value)
        main = "main:" + _name(sign_type, sign.main_sign.classification.type, "TYPE_")
        plates = [(main, sign.main_sign.base)] + [("supplementary", s.base) for s in sign.supplementary_sign]
        for kind, base in plates:
            thing = _placed(identifier, kind, base, f"traffic_sign {identifier} ({kind})", problems)
            if thing is not None:
                signs.append(thing)
    lights = [thing for thing in (_placed(int(light.id.value), "light", light.base, f"traffic_light {light.id.value}",
                                          problems)
                                  for light in _first(gt.traffic_light, "traffic lights", problems))
              if thing is not None]
    return RoadGroundTruth(tuple(lanes), tuple(boundaries), tuple(markings), tuple(signs), tuple(lights),
                           int(country_code or gt.country_code), problems.result(), logical)


def decode_stationary(stationary_part: bytes) -> tuple[list[ObjectState], tuple[str, ...]]:
    """The stationary objects of a ground truth (:attr:`~lidar_fmu.osi.decode.SensorViewFrame.stationary_part`) and
    the problems found: an object whose pose or size is not usable is left out, named in one line."""
    gt = _ground_truth(stationary_part, "stationary objects")
    problems = _Problems()
    objects = []
    for message in _first(gt.stationary_object, "stationary objects", problems):
        try:
            state = _object(message, False)
        except SensorViewError as exc:
            problems.add(f"{exc}; left out")
            continue
        if len(message.base.base_polygon):
            state.base_polygon_m = _polygon(message.base.base_polygon, f"stationary_object {state.id}", problems)
        objects.append(state)
    return objects, problems.result()


# ------------------------------------------------------------------------------------------------ GroundTruth traces


def host_of_ground_truth(ground_truth: bytes) -> tuple[int | None, list[int]]:
    """(the host_vehicle_id a GroundTruth message names, None where it names none; the ids of its moving objects)."""
    from osi3.osi_groundtruth_pb2 import GroundTruth

    gt = GroundTruth.FromString(ground_truth)
    host = int(gt.host_vehicle_id.value) if gt.HasField("host_vehicle_id") else None
    return host, [int(o.id.value) for o in gt.moving_object]


def ground_truth_view(ground_truth: bytes, host_vehicle_id: int, sensor_id: int = 0) -> bytes:
    """A GroundTruth message (a scenario tool's trace: esmini's ``--osi_file``) as the SensorView a sensor model
    takes: its version, timestamp and the host around it, the ground truth itself copied as it is (its bytes become
    the SensorView's ``global_ground_truth`` field: nothing is decoded and encoded again)."""
    from osi3.osi_groundtruth_pb2 import GroundTruth
    from osi3.osi_sensorview_pb2 import SensorView

    gt = GroundTruth()
    gt.MergeFromString(ground_truth)  # the version and timestamp (parsed lazily: the rest is not looked at)
    view = SensorView()
    if gt.HasField("version"):
        view.version.CopyFrom(gt.version)
    view.timestamp.CopyFrom(gt.timestamp)
    view.sensor_id.value = sensor_id
    view.host_vehicle_id.value = host_vehicle_id
    head = view.SerializeToString()
    # field 7 (global_ground_truth), wire type 2: the tag, the length as a varint, the message
    size, length = len(ground_truth), bytearray()
    while True:
        byte = size & 0x7F
        size >>= 7
        length.append(byte | (0x80 if size else 0))
        if not size:
            break
    return head + bytes([(7 << 3) | 2]) + bytes(length) + bytes(ground_truth)

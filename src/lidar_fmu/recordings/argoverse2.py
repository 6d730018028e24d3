"""An Argoverse 2 sensor log (map, annotations, ego poses, lidar calibration) → an OSI SensorView trace, a rig spec
of its two VLP-32C and a ``scenario.yaml`` that ``lidar-fmu replay`` runs.

The log's files are read directly (feather through pyarrow, the map's JSON); what becomes what, the world origin and
the ids: docs/replay.md#real-drives.
"""
from __future__ import annotations

import datetime
import glob
import os
from dataclasses import dataclass

import numpy as np

from ..documents import read_document
from ..errors import UserError
from ..geometry.transforms import roll_pitch_yaw
from ..world.lines import convex_pieces, offset

#: OSI ids: the kind of element in the bits from KIND_SHIFT up, a number unique within the kind below (every id stays
#: under the scene's environment ids, 2⁶²)
KIND_SHIFT = 56
KIND_LANE, KIND_BOUNDARY, KIND_SECOND_LINE, KIND_AREA, KIND_AREA_SIDE, KIND_CROSSING, KIND_TRACK = range(1, 8)
#: the host vehicle's OSI id
HOST_ID = 1
#: the two lidars' names in the calibration, and the sensor ids they get, in the rig's order
LIDARS = (("up_lidar", 1), ("down_lidar", 2))
#: the preset of the log's lidars (Argoverse 2's sensor suite: two Velodyne VLP-32C)
LIDAR_PRESET = "velodyne_vlp32c"
#: ISO 3166-1 numeric code of the United States, where every Argoverse 2 city is: the dashes' standard pattern
COUNTRY_CODE_USA = 840

#: the host, a Ford Fusion Hybrid (2nd generation, Argo AI's test car): 191.8 in long, 72.9 in wide, 58.2 in high,
#: 112.2 in wheelbase, the 2017 Fusion's published figures as we know them — assumed: no specification sheet could be
#: checked from here (the box matters only for the host's own shadow; the log has the ego's returns removed)
HOST_LENGTH_M, HOST_WIDTH_M, HOST_HEIGHT_M = 4.872, 1.852, 1.478
HOST_WHEELBASE_M = 2.850
#: the rear overhang (bumper to rear axle): assumed half of length − wheelbase, as no published figure was at hand
HOST_REAR_OVERHANG_M = 0.5 * (HOST_LENGTH_M - HOST_WHEELBASE_M)
#: the rear axle's height above the ground (the ego frame's origin): the shared log's own evidence, the boxes of the
#: 370 cars annotated within 8 m of the ego stand a median 0.374 m below it (a Fusion's 235/45 R18 tyre: 0.334 m radius)
HOST_AXLE_HEIGHT_M = 0.37

#: a painted line's width: MUTCD §3A.05 makes a normal line 4 to 6 in wide; 4 in assumed (city streets)
LINE_WIDTH_M = 0.1016
#: the gap between the two lines of a double line: MUTCD §3A.05 asks only for "a discernible space"; 4 in assumed
DOUBLE_LINE_GAP_M = 0.1016
#: a drivable area lies this far under the map's heights, so where it overlaps a lane the lane's surface (and id) is
#: met first (assumed: below the lidar's range resolution)
AREA_BELOW_LANES_M = 0.01
#: a drivable area's convex pieces are numbered in the low bits of their lane's id (the area's id above them)
PIECE_BITS = 12

#: Argoverse 2 lane mark types → the OSI lines they are, from the left looking along the lane: (type, colour) each
#: (a mixed double line, DASH_SOLID_* or SOLID_DASH_*, names its left line first: assumed)
LANE_MARKS = {
    "NONE": (("NO_LINE", ""),), "UNKNOWN": (("UNKNOWN", ""),),
    "SOLID_WHITE": (("SOLID_LINE", "WHITE"),), "SOLID_YELLOW": (("SOLID_LINE", "YELLOW"),),
    "SOLID_BLUE": (("SOLID_LINE", "BLUE"),),
    "DASHED_WHITE": (("DASHED_LINE", "WHITE"),), "DASHED_YELLOW": (("DASHED_LINE", "YELLOW"),),
    "DOUBLE_SOLID_WHITE": (("SOLID_LINE", "WHITE"), ("SOLID_LINE", "WHITE")),
    "DOUBLE_SOLID_YELLOW": (("SOLID_LINE", "YELLOW"), ("SOLID_LINE", "YELLOW")),
    "DOUBLE_DASH_WHITE": (("DASHED_LINE", "WHITE"), ("DASHED_LINE", "WHITE")),
    "DOUBLE_DASH_YELLOW": (("DASHED_LINE", "YELLOW"), ("DASHED_LINE", "YELLOW")),
    "DASH_SOLID_WHITE": (("DASHED_LINE", "WHITE"), ("SOLID_LINE", "WHITE")),
    "DASH_SOLID_YELLOW": (("DASHED_LINE", "YELLOW"), ("SOLID_LINE", "YELLOW")),
    "SOLID_DASH_WHITE": (("SOLID_LINE", "WHITE"), ("DASHED_LINE", "WHITE")),
    "SOLID_DASH_YELLOW": (("SOLID_LINE", "YELLOW"), ("DASHED_LINE", "YELLOW")),
}
#: Argoverse 2 lane types → OSI lane subtype (the type is DRIVING, INTERSECTION where the map flags it)
LANE_SUBTYPES = {"VEHICLE": "NORMAL", "BIKE": "BIKING", "BUS": "RESTRICTED"}

#: Argoverse 2's 30 cuboid categories → OSI: ("moving", MovingObject type, vehicle type or ""), ("stationary",
#: StationaryObject type) or ("sign", TrafficSign main sign type)
CATEGORIES = {
    "REGULAR_VEHICLE": ("moving", "VEHICLE", "CAR"), "LARGE_VEHICLE": ("moving", "VEHICLE", "HEAVY_TRUCK"),
    "BUS": ("moving", "VEHICLE", "BUS"), "SCHOOL_BUS": ("moving", "VEHICLE", "BUS"),
    "ARTICULATED_BUS": ("moving", "VEHICLE", "BUS"), "BOX_TRUCK": ("moving", "VEHICLE", "HEAVY_TRUCK"),
    "TRUCK": ("moving", "VEHICLE", "HEAVY_TRUCK"), "TRUCK_CAB": ("moving", "VEHICLE", "SEMITRACTOR"),
    "VEHICULAR_TRAILER": ("moving", "VEHICLE", "TRAILER"), "MESSAGE_BOARD_TRAILER": ("moving", "VEHICLE", "TRAILER"),
    "TRAFFIC_LIGHT_TRAILER": ("moving", "VEHICLE", "TRAILER"), "MOTORCYCLE": ("moving", "VEHICLE", "MOTORBIKE"),
    "MOTORCYCLIST": ("moving", "VEHICLE", "MOTORBIKE"), "BICYCLE": ("moving", "VEHICLE", "BICYCLE"),
    "BICYCLIST": ("moving", "VEHICLE", "BICYCLE"), "WHEELED_DEVICE": ("moving", "VEHICLE", "MICROMOBILITY_DEVICE"),
    "WHEELCHAIR": ("moving", "VEHICLE", "WHEELCHAIR"), "RAILED_VEHICLE": ("moving", "VEHICLE", "TRAM"),
    "PEDESTRIAN": ("moving", "PEDESTRIAN", ""), "OFFICIAL_SIGNALER": ("moving", "PEDESTRIAN", ""),
    "WHEELED_RIDER": ("moving", "PEDESTRIAN", ""), "STROLLER": ("moving", "OTHER", ""),
    "DOG": ("moving", "ANIMAL", ""), "ANIMAL": ("moving", "ANIMAL", ""),
    "BOLLARD": ("stationary", "POLE"), "CONSTRUCTION_CONE": ("stationary", "PYLON"),
    "CONSTRUCTION_BARREL": ("stationary", "CONSTRUCTION_SITE_ELEMENT"),
    "MOBILE_PEDESTRIAN_SIGN": ("stationary", "OTHER"),
    "STOP_SIGN": ("sign", "STOP"), "SIGN": ("sign", "OTHER"),
}

_POSE_COLUMNS = ("qw", "qx", "qy", "qz", "tx_m", "ty_m", "tz_m")
_ANNOTATION_COLUMNS = ("timestamp_ns", "track_uuid", "category", "length_m", "width_m", "height_m") + _POSE_COLUMNS


class DriveLogError(UserError):
    """An Argoverse 2 log that cannot be read: a file missing, damaged or without the columns it must have."""


@dataclass(frozen=True)
class Av2Log:
    """What convert takes of one log: frame timestamps, the ego's city poses, annotations, lidar mountings, map."""

    folder: str
    timestamps_ns: np.ndarray  # (T,) int64: the lidar sweeps' timestamps
    city_from_ego: np.ndarray  # (T, 4, 4) at those timestamps
    annotations: dict  # column → (A,) array
    ego_from_lidar: dict  # lidar name → 4×4
    vector_map: dict  # the map's JSON: lane_segments, drivable_areas, pedestrian_crossings


def _id(kind: int, number: int) -> int:
    return (kind << KIND_SHIFT) | int(number)


def read_feather(path: str, columns: tuple[str, ...]) -> dict:
    """The ``columns`` of a feather file as numpy arrays; one line naming the file and what is wrong otherwise."""
    import pyarrow.feather as feather

    if not os.path.isfile(path):
        raise DriveLogError(f"{path}: not found (is this an Argoverse 2 sensor log folder?)")
    try:
        table = feather.read_table(path)
    except Exception as exc:  # pyarrow's errors on a file that is no feather have no one base class
        raise DriveLogError(f"{path}: not a readable feather file ({type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise DriveLogError(f"{path}: has no column {', '.join(missing)} (it has {', '.join(table.column_names)})")
    return {c: table.column(c).to_numpy(zero_copy_only=False) for c in columns}


def poses(table: dict) -> np.ndarray:
    """(N, 4, 4) poses of the quaternion (qw, qx, qy, qz) and translation (tx_m, ty_m, tz_m) columns."""
    q = np.column_stack([table[k] for k in ("qw", "qx", "qy", "qz")]).astype(np.float64)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w, x, y, z = q.T
    out = np.zeros((len(q), 4, 4))
    out[:, :3, :3] = np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], axis=1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], axis=1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], axis=1)], axis=1)
    out[:, :3, 3] = np.column_stack([table[k] for k in ("tx_m", "ty_m", "tz_m")])
    out[:, 3, 3] = 1.0
    return out


def _map_path(folder: str) -> str:
    found = sorted(glob.glob(os.path.join(folder, "map", "log_map_archive_*.json")))
    if not found:
        raise DriveLogError(f"{os.path.join(folder, 'map')}: no log_map_archive_*.json (the log's vector map)")
    return found[0]


def read_map(folder: str) -> dict:
    """The log's vector map, its three element kinds checked to be there."""
    path = _map_path(folder)
    document = read_document(path, "Argoverse 2 vector map", DriveLogError, syntax="json")
    if not isinstance(document, dict):
        raise DriveLogError(f"{path}: not a vector map (a JSON object with lane_segments, drivable_areas, "
                            "pedestrian_crossings)")
    for key in ("lane_segments", "drivable_areas", "pedestrian_crossings"):
        if not isinstance(document.get(key, {}), dict):
            raise DriveLogError(f"{path}: {key} must be a JSON object of elements by id")
    return document


def read_log(folder) -> Av2Log:
    """The log in ``folder``; :class:`DriveLogError` naming the file at fault."""
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise DriveLogError(f"{folder}: not a folder (give an Argoverse 2 sensor log's folder)")
    ego = read_feather(os.path.join(folder, "city_SE3_egovehicle.feather"), ("timestamp_ns",) + _POSE_COLUMNS)
    annotations = read_feather(os.path.join(folder, "annotations.feather"), _ANNOTATION_COLUMNS)
    calibration_path = os.path.join(folder, "calibration", "egovehicle_SE3_sensor.feather")
    calibration = read_feather(calibration_path, ("sensor_name",) + _POSE_COLUMNS)
    names = [str(n) for n in calibration["sensor_name"]]
    mountings = dict(zip(names, poses(calibration)))
    for name, _ in LIDARS:
        if name not in mountings:
            raise DriveLogError(f"{calibration_path}: no row for {name} (its sensors: {', '.join(names)})")
    sweeps = [int(os.path.basename(p).split(".")[0]) for p in glob.glob(os.path.join(folder, "sensors", "lidar",
                                                                                         "*.feather"))
              if os.path.basename(p).split(".")[0].isdigit()]
    # Argoverse 2 annotates at every sweep's timestamp: they are the frames, with the sweeps a log carries
    timestamps = np.union1d(annotations["timestamp_ns"].astype(np.int64), np.array(sweeps, np.int64))
    if not len(timestamps):
        raise DriveLogError(f"{folder}: no lidar sweep timestamps (annotations.feather is empty, sensors/lidar/ "
                            "holds no sweep)")
    ego_times = ego["timestamp_ns"].astype(np.int64)
    at = np.searchsorted(ego_times, timestamps)
    at = np.minimum(at, len(ego_times) - 1)
    missing = ego_times[at] != timestamps
    if missing.any():
        raise DriveLogError(f"{os.path.join(folder, 'city_SE3_egovehicle.feather')}: no ego pose at "
                            f"{int(missing.sum())} sweep timestamps (the first: {int(timestamps[missing][0])} ns)")
    return Av2Log(folder, timestamps, poses(ego)[at], annotations, mountings, read_map(folder))


# ------------------------------------------------------------------------------------------------ the map


def _points(polyline, what: str) -> np.ndarray:
    try:
        xyz = np.array([(p["x"], p["y"], p["z"]) for p in polyline], np.float64).reshape(-1, 3)
    except (TypeError, KeyError) as exc:
        raise DriveLogError(f"{what}: not a list of points with x, y, z ({type(exc).__name__}: {exc})") from None
    if len(xyz) < 2 or not np.isfinite(xyz).all():
        raise DriveLogError(f"{what}: needs at least 2 finite points, has {len(xyz)}")
    return xyz


def _set_line(repeated, xyz: np.ndarray, width_m: float = 0.0) -> None:
    for k, (x, y, z) in enumerate(xyz):
        point = repeated.add()
        point.position.x, point.position.y, point.position.z = float(x), float(y), float(z)
        if k == 0 and width_m:  # OSI's carry-forward: the first point's width holds for the rest
            point.width = width_m


def _boundary(gt, identifier: int, xyz: np.ndarray, kind: str, color: str) -> None:
    b = gt.lane_boundary.add()
    b.id.value = identifier
    c = b.classification
    c.type = c.Type.Value(f"TYPE_{kind}")
    if color:
        c.color = c.Color.Value(f"COLOR_{color}")
    _set_line(b.boundary_line, xyz, LINE_WIDTH_M if kind in ("SOLID_LINE", "DASHED_LINE") else 0.0)


def _lane_side(gt, lane_id: int, side: int, xyz: np.ndarray, mark: str, where: str) -> int:
    """The lines of one side of a lane (``side``: 0 left, 1 right) → the id of the one the lane names. A double line's
    two lines lie half their spacing either side of the map's line; the one on the lane's side bounds it."""
    lines = LANE_MARKS.get(mark)
    if lines is None:
        raise DriveLogError(f"{where}: unknown lane mark type {mark!r} (known: {', '.join(LANE_MARKS)})")
    identifier = _id(KIND_BOUNDARY, lane_id << 1 | side)
    if len(lines) == 1:
        _boundary(gt, identifier, xyz, *lines[0])
        return identifier
    half = 0.5 * (LINE_WIDTH_M + DOUBLE_LINE_GAP_M)
    left, right = offset(xyz, half), offset(xyz, -half)
    inner, outer = (right, left) if side == 0 else (left, right)  # the lane lies right of its left line
    inner_line, outer_line = (lines[1], lines[0]) if side == 0 else (lines[0], lines[1])
    _boundary(gt, identifier, inner, *inner_line)
    _boundary(gt, _id(KIND_SECOND_LINE, lane_id << 1 | side), outer, *outer_line)
    return identifier


def _centerline(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The middle of a lane's two sides, each sampled at the same shares of its length."""
    def resampled(line, n):
        s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(line, axis=0), axis=1))])
        t = np.linspace(0.0, s[-1], n)
        return np.column_stack([np.interp(t, s, line[:, k]) for k in range(3)])

    n = max(len(left), len(right))
    return 0.5 * (resampled(left, n) + resampled(right, n))


def add_lanes(gt, segments: dict, origin: np.ndarray, where: str) -> None:
    """One OSI lane per lane segment, its boundaries, centerline, neighbours and successors."""
    from osi3.osi_lane_pb2 import Lane

    known = {int(k) for k in segments}
    for key in sorted(segments, key=int):
        segment = segments[key]
        what = f"{where}: lane_segments[{key}]"
        lane_id = int(key)
        left = _points(segment.get("left_lane_boundary"), f"{what}.left_lane_boundary") - origin
        right = _points(segment.get("right_lane_boundary"), f"{what}.right_lane_boundary") - origin
        lane = gt.lane.add()
        lane.id.value = _id(KIND_LANE, lane_id)
        c = lane.classification
        c.type = Lane.Classification.TYPE_INTERSECTION if segment.get("is_intersection") else \
            Lane.Classification.TYPE_DRIVING
        c.subtype = Lane.Classification.Subtype.Value(f"SUBTYPE_{LANE_SUBTYPES.get(segment.get('lane_type'), 'OTHER')}")
        c.left_lane_boundary_id.add().value = _lane_side(gt, lane_id, 0, left, segment.get("left_lane_mark_type"),
                                                         what)
        c.right_lane_boundary_id.add().value = _lane_side(gt, lane_id, 1, right, segment.get("right_lane_mark_type"),
                                                          what)
        for xyz in _centerline(left, right):
            point = c.centerline.add()
            point.x, point.y, point.z = (float(v) for v in xyz)
        c.centerline_is_driving_direction = True
        for field, neighbour in (("left_adjacent_lane_id", "left_neighbor_id"),
                                 ("right_adjacent_lane_id", "right_neighbor_id")):
            if segment.get(neighbour) is not None and int(segment[neighbour]) in known:
                getattr(c, field).add().value = _id(KIND_LANE, int(segment[neighbour]))
        for field, others in (("antecessor_lane_id", "predecessors"), ("successor_lane_id", "successors")):
            for other in segment.get(others) or ():
                if int(other) in known:
                    getattr(c.lane_pairing.add(), field).value = _id(KIND_LANE, int(other))


def _split_ring(ring: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A closed outline as two sides from its two farthest-apart vertices, both running from the one to the other."""
    gaps = np.linalg.norm(ring[:, None, :2] - ring[None, :, :2], axis=2)
    i, j = sorted(np.unravel_index(int(np.argmax(gaps)), gaps.shape))
    return ring[i:j + 1], np.concatenate([ring[j:], ring[:i + 1]])[::-1]


def add_drivable_areas(gt, areas: dict, origin: np.ndarray, where: str) -> None:
    """Each drivable area as OSI lanes of type OTHER (asphalt, no paint), one per convex piece of its outline
    (:func:`~lidar_fmu.world.lines.convex_pieces`), each between the two halves of its piece's outline, bounded by
    lines of no paint: what world/ paves, with the ground going on past its outline. A lane is a strip between two
    lines, so a concave outline (a junction's cross) paved as one would reach outside it across the blocks."""
    from osi3.osi_lane_pb2 import Lane

    for key in sorted(areas, key=int):
        what = f"{where}: drivable_areas[{key}].area_boundary"
        ring = _points(areas[key].get("area_boundary"), what) - origin - (0.0, 0.0, AREA_BELOW_LANES_M)
        if len(ring) > 3 and np.array_equal(ring[0], ring[-1]):
            ring = ring[:-1]  # a closed outline repeats its first point
        if len(ring) < 3:
            raise DriveLogError(f"{what}: an area needs at least 3 points, has {len(ring)}")
        area_id = int(key)
        pieces = convex_pieces(ring[:, :2])
        if len(pieces) > 1 << PIECE_BITS:
            raise DriveLogError(f"{what}: {len(ring)} points make {len(pieces)} convex pieces, more than the "
                                f"{1 << PIECE_BITS} an area's ids can number")
        for piece, corners in enumerate(pieces):
            number = area_id << PIECE_BITS | piece
            lane = gt.lane.add()
            lane.id.value = _id(KIND_AREA, number)
            lane.classification.type = Lane.Classification.TYPE_OTHER
            for side, xyz in enumerate(_split_ring(ring[corners])):
                identifier = _id(KIND_AREA_SIDE, number << 1 | side)
                _boundary(gt, identifier, xyz, "NO_LINE", "")
                (lane.classification.right_lane_boundary_id if side else
                 lane.classification.left_lane_boundary_id).add().value = identifier


def _frame_of(corners: np.ndarray, along: np.ndarray) -> np.ndarray:
    """A 3×3 rotation: x along ``along`` in the corners' best-fit plane, z that plane's upward normal."""
    centred = corners - corners.mean(axis=0)
    normal = np.linalg.svd(centred)[2][-1]
    normal = normal if normal[2] >= 0 else -normal
    x = along - np.dot(along, normal) * normal
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(normal, x), normal])


def add_crossings(gt, crossings: dict, origin: np.ndarray, where: str) -> None:
    """Each pedestrian crossing as an OSI road marking (a painted zebra-crossing sign) with its outline as base
    polygon, in the plane that fits its corners best."""
    from osi3.osi_roadmarking_pb2 import RoadMarking
    from osi3.osi_trafficsign_pb2 import TrafficSign

    for key in sorted(crossings, key=int):
        what = f"{where}: pedestrian_crossings[{key}]"
        edge1 = _points(crossings[key].get("edge1"), f"{what}.edge1") - origin
        edge2 = _points(crossings[key].get("edge2"), f"{what}.edge2") - origin
        if np.dot(edge1[-1] - edge1[0], edge2[-1] - edge2[0]) < 0:  # the two edges run the same way
            edge2 = edge2[::-1]
        corners = np.concatenate([edge1, edge2[::-1]])
        rotation = _frame_of(corners, edge1[-1] - edge1[0])
        centre = corners.mean(axis=0)
        local = (corners - centre) @ rotation
        marking = gt.road_marking.add()
        marking.id.value = _id(KIND_CROSSING, int(key))
        c = marking.classification
        c.type = RoadMarking.Classification.TYPE_PAINTED_TRAFFIC_SIGN
        c.traffic_main_sign_type = TrafficSign.MainSign.Classification.TYPE_ZEBRA_CROSSING
        c.monochrome_color = RoadMarking.Classification.COLOR_WHITE
        _set_base(marking.base, centre, rotation, np.ptp(local[:, 0]), np.ptp(local[:, 1]), 0.0)
        for x, y in local[:, :2]:
            vertex = marking.base.base_polygon.add()
            vertex.x, vertex.y = float(x), float(y)


def _set_base(base, position, rotation: np.ndarray, length: float, width: float, height: float) -> None:
    base.position.x, base.position.y, base.position.z = (float(v) for v in position)
    base.orientation.roll, base.orientation.pitch, base.orientation.yaw = roll_pitch_yaw(rotation)
    base.dimension.length, base.dimension.width, base.dimension.height = float(length), float(width), float(height)


def road_ground_truth(vector_map: dict, origin: np.ndarray, where: str) -> bytes:
    """The map as the road part of an OSI GroundTruth (lanes, boundaries, drivable areas, crossings), serialized."""
    from osi3.osi_groundtruth_pb2 import GroundTruth

    gt = GroundTruth()
    gt.country_code = COUNTRY_CODE_USA
    add_lanes(gt, vector_map.get("lane_segments", {}), origin, where)
    add_drivable_areas(gt, vector_map.get("drivable_areas", {}), origin, where)
    add_crossings(gt, vector_map.get("pedestrian_crossings", {}), origin, where)
    return gt.SerializeToString()


# ------------------------------------------------------------------------------------------------ objects


def world_origin(city_from_ego: np.ndarray) -> np.ndarray:
    """The world frame's origin in the city frame: the first ego position rounded to 1 m (float32 geometry near the
    log then keeps mm precision)."""
    return np.round(city_from_ego[0, :3, 3])


def track_ids(uuids: np.ndarray) -> dict[str, int]:
    """Each track uuid's OSI id: its rank among the log's sorted uuids, under the track kind (stable, unique)."""
    return {str(u): _id(KIND_TRACK, k) for k, u in enumerate(sorted({str(u) for u in uuids}))}


def _rates(times_s: np.ndarray, positions: np.ndarray, rpy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Velocity (m/s) and orientation rate (rad/s) by central differences (one-sided at the ends; zero alone)."""
    if len(times_s) < 2:
        return np.zeros_like(positions), np.zeros_like(rpy)
    return (np.gradient(positions, times_s, axis=0),
            np.gradient(np.unwrap(rpy, axis=0), times_s, axis=0))


@dataclass
class _Track:
    identifier: int
    category: str
    rows: np.ndarray  # row indices into the annotations, in time order
    world_from_box: np.ndarray  # (R, 4, 4)
    velocity: np.ndarray  # (R, 3)
    rate: np.ndarray  # (R, 3)


def _tracks(log: Av2Log, origin: np.ndarray, times_s: np.ndarray) -> list[_Track]:
    a = log.annotations
    frame_of = {int(t): k for k, t in enumerate(log.timestamps_ns)}
    frames = np.array([frame_of[int(t)] for t in a["timestamp_ns"]], np.int64)
    boxes = np.einsum("nij,njk->nik", log.city_from_ego[frames], poses(a))
    boxes[:, :3, 3] -= origin
    ids = track_ids(a["track_uuid"])
    out = []
    for uuid, identifier in sorted(ids.items(), key=lambda item: item[1]):
        rows = np.flatnonzero(a["track_uuid"] == uuid)
        rows = rows[np.argsort(frames[rows], kind="stable")]
        category = str(a["category"][rows[0]])
        if category not in CATEGORIES:
            raise DriveLogError(f"{os.path.join(log.folder, 'annotations.feather')}: unknown category {category!r} "
                                f"(track {uuid})")
        rpy = np.array([roll_pitch_yaw(b[:3, :3]) for b in boxes[rows]]).reshape(-1, 3)
        velocity, rate = _rates(times_s[frames[rows]], boxes[rows, :3, 3], rpy)
        out.append(_Track(identifier, category, rows, boxes[rows], velocity, rate))
    return out


def _moving(gt, track: _Track, k: int, size) -> None:
    from osi3.osi_object_pb2 import MovingObject

    _, kind, vehicle = CATEGORIES[track.category]
    obj = gt.moving_object.add()
    obj.id.value = track.identifier
    obj.type = MovingObject.Type.Value(f"TYPE_{kind}")
    if vehicle:
        obj.vehicle_classification.type = MovingObject.VehicleClassification.Type.Value(f"TYPE_{vehicle}")
    pose = track.world_from_box[k]
    _set_base(obj.base, pose[:3, 3], pose[:3, :3], *size)
    obj.base.velocity.x, obj.base.velocity.y, obj.base.velocity.z = (float(v) for v in track.velocity[k])
    rate = obj.base.orientation_rate
    rate.roll, rate.pitch, rate.yaw = (float(v) for v in track.rate[k])


def _standing(gt, track: _Track, size) -> None:
    """A stationary object or sign at its first annotated pose: it does not move, and a pose that stays the same
    keeps the static part of the ground truth the same from view to view (not built again)."""
    from osi3.osi_object_pb2 import StationaryObject
    from osi3.osi_trafficsign_pb2 import TrafficSign

    pose = track.world_from_box[0]
    what, kind = CATEGORIES[track.category]
    if what == "sign":
        sign = gt.traffic_sign.add()
        sign.id.value = track.identifier
        sign.main_sign.classification.type = TrafficSign.MainSign.Classification.Type.Value(f"TYPE_{kind}")
        _set_base(sign.main_sign.base, pose[:3, 3], pose[:3, :3], *size)
        return
    obj = gt.stationary_object.add()
    obj.id.value = track.identifier
    obj.classification.type = StationaryObject.Classification.Type.Value(f"TYPE_{kind}")
    _set_base(obj.base, pose[:3, 3], pose[:3, :3], *size)


def _host(gt, world_from_ego: np.ndarray, velocity, rate) -> None:
    """The host: the ego frame is OSI's vehicle frame (origin at the rear axle's centre, x forward, z up)."""
    from osi3.osi_object_pb2 import MovingObject

    centre_in_ego = np.array([HOST_LENGTH_M / 2 - HOST_REAR_OVERHANG_M, 0.0, HOST_HEIGHT_M / 2 - HOST_AXLE_HEIGHT_M])
    host = gt.moving_object.add()
    host.id.value = HOST_ID
    host.type = MovingObject.TYPE_VEHICLE
    host.vehicle_classification.type = MovingObject.VehicleClassification.TYPE_CAR
    _set_base(host.base, world_from_ego[:3, :3] @ centre_in_ego + world_from_ego[:3, 3], world_from_ego[:3, :3],
              HOST_LENGTH_M, HOST_WIDTH_M, HOST_HEIGHT_M)
    host.base.velocity.x, host.base.velocity.y, host.base.velocity.z = (float(v) for v in velocity)
    host.base.orientation_rate.roll, host.base.orientation_rate.pitch, host.base.orientation_rate.yaw = \
        (float(v) for v in rate)
    rear = host.vehicle_attributes.bbcenter_to_rear
    rear.x, rear.y, rear.z = (float(-v) for v in centre_in_ego)


def _mounting(message, pose: np.ndarray) -> None:
    message.position.x, message.position.y, message.position.z = (float(v) for v in pose[:3, 3])
    message.orientation.roll, message.orientation.pitch, message.orientation.yaw = roll_pitch_yaw(pose[:3, :3])


def sensor_views(log: Av2Log, origin: np.ndarray):
    """Yield each frame's serialized SensorView: the road, the host, the annotated objects, both lidars' mountings."""
    from osi3.osi_sensorview_pb2 import SensorView

    from ..osi.encode import default_interface_version, set_timestamp

    times_s = (log.timestamps_ns - log.timestamps_ns[0]) * 1e-9
    road = road_ground_truth(log.vector_map, origin, _map_path(log.folder))
    world_from_ego = log.city_from_ego.copy()
    world_from_ego[:, :3, 3] -= origin
    ego_rpy = np.array([roll_pitch_yaw(p[:3, :3]) for p in world_from_ego])
    ego_velocity, ego_rate = _rates(times_s, world_from_ego[:, :3, 3], ego_rpy)
    tracks = _tracks(log, origin, times_s)
    a = log.annotations
    frame_of_row = np.searchsorted(log.timestamps_ns, a["timestamp_ns"].astype(np.int64))
    version = default_interface_version()
    for k in range(len(log.timestamps_ns)):
        view = SensorView()
        view.version.CopyFrom(version)
        set_timestamp(view.timestamp, float(times_s[k]))
        view.sensor_id.value = LIDARS[0][1]
        view.host_vehicle_id.value = HOST_ID
        for name, sensor_id in LIDARS:
            config = view.lidar_sensor_view.add().view_configuration
            config.sensor_id.value = sensor_id
            _mounting(config.mounting_position, log.ego_from_lidar[name])
        gt = view.global_ground_truth
        gt.MergeFromString(road)
        gt.version.CopyFrom(version)
        gt.timestamp.CopyFrom(view.timestamp)
        gt.host_vehicle_id.value = HOST_ID
        _host(gt, world_from_ego[k], ego_velocity[k], ego_rate[k])
        for track in tracks:
            here = np.flatnonzero(frame_of_row[track.rows] == k)
            if not len(here):
                continue
            row = track.rows[here[0]]
            size = (a["length_m"][row], a["width_m"][row], a["height_m"][row])
            if CATEGORIES[track.category][0] == "moving":
                _moving(gt, track, int(here[0]), size)
            else:
                _standing(gt, track, size)
        yield view.SerializeToString()


# ------------------------------------------------------------------------------------------------ the outputs


def rig_spec(log: Av2Log) -> dict:
    """The rig of the log's lidars: each the VLP-32C preset at its calibrated pose on the vehicle (the lower one
    upside down: its roll near ±180°)."""
    sensors = []
    for name, sensor_id in LIDARS:
        pose = log.ego_from_lidar[name]
        sensors.append({"preset": LIDAR_PRESET, "sensor_id": sensor_id,
                        "mounting": {"xyz_m": [round(float(v), 6) for v in pose[:3, 3]],
                                     "rpy_deg": [round(float(np.degrees(v)), 6) for v in roll_pitch_yaw(pose[:3, :3])]}})
    return {"name": f"Argoverse 2 log {os.path.basename(os.path.normpath(log.folder))}: {', '.join(n for n, _ in LIDARS)}",
            "sensors": sensors}


def convert(log_folder, out_dir) -> dict:
    """Convert the log in ``log_folder`` into ``out_dir`` (made if needed): the SensorView trace, ``rig.yaml`` and
    ``scenario.yaml``; returns what was written (paths, frames, the origin, bytes)."""
    import yaml

    from ..osi.trace import trace_name, write_trace

    log = read_log(log_folder)
    origin = world_origin(log.city_from_ego)
    name = os.path.basename(os.path.normpath(log.folder))
    os.makedirs(out_dir, exist_ok=True)
    # the log's own clock dates the trace (Argoverse's ns since the Unix epoch): the same log gives the same name
    when = datetime.datetime.fromtimestamp(int(log.timestamps_ns[0]) // 10**9, datetime.timezone.utc)
    trace = trace_name("sv", len(log.timestamps_ns), f"argoverse2_{name}", when=when)
    trace_path = os.path.join(out_dir, trace)
    frames = write_trace(trace_path, sensor_views(log, origin))
    rig_path = os.path.join(out_dir, "rig.yaml")
    with open(rig_path, "w", encoding="utf-8") as f:
        yaml.safe_dump(rig_spec(log), f, sort_keys=False, allow_unicode=True)
    scenario = {"name": f"argoverse2_{name}",
                "description": (f"Argoverse 2 sensor log {name} converted by lidar-fmu convert: its map and annotated "
                                f"cuboids as OSI ground truth, {frames} views at its sweeps' timestamps (time 0 = "
                                f"{int(log.timestamps_ns[0])} ns); world = city frame − "
                                f"({', '.join(f'{v:g}' for v in origin)}) m"),
                "trace": trace, "sensor": "rig.yaml"}
    with open(os.path.join(out_dir, "scenario.yaml"), "w", encoding="utf-8") as f:
        yaml.safe_dump(scenario, f, sort_keys=False, allow_unicode=True)
    return {"trace": trace_path, "rig": rig_path, "scenario": os.path.join(out_dir, "scenario.yaml"),
            "frames": frames, "origin_m": [float(v) for v in origin], "trace_bytes": os.path.getsize(trace_path)}

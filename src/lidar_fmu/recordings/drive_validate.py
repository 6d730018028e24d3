"""A real drive against its replay: an Argoverse 2 log's real sweeps beside our simulation of the same sweeps (the
FMU stepped on the converted log's views, ``tools/validate_command.py``), both lidars' points in the ego frame at
each sweep's timestamp, compared cloud to cloud. What each measure is and its figures on the shared log:
docs/validation.md#real-drives.
"""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from ..documents import read_document
from ..world.nearest import PointIndex
from .argoverse2 import LIDARS, LINE_WIDTH_M, Av2Log, DriveLogError, poses, read_feather
from .validate import figure_text, json_ready

#: the measures look within this distance of the ego (m, horizontal)
COMPARE_RANGE_M = 40.0
#: a point counts as matched for the F-score when the other cloud has a point this close (m): about a 0.2° beam's
#: footprint at 40 m plus the VLP-32C's ±3 cm range accuracy (assumed; Argoverse's float16 coordinates add ≤ 2 cm)
F_SCORE_THRESHOLD_M = 0.2
#: a point is ground when within this of the map's ground height raster (m; the raster's cells are 0.3 m)
GROUND_TOLERANCE_M = 0.3
#: the ground's reach is measured per azimuth sector of this width (degrees, ego frame)
SECTOR_DEG = 10.0
#: how far the ground is seen in a sector: this percentile of its ground points' horizontal ranges
REACH_PERCENTILE = 95.0
#: a ground point is on paint when within half a line's width plus this of a lane mark's polyline (m): the sweeps'
#: float16 coordinates (≤ 2 cm at 40 m) and the map's own accuracy (assumed a few cm)
PAINT_TOLERANCE_M = 0.05
#: asphalt: a ground point inside a drivable area at least this far from every lane mark (m; assumed: clear of a
#: line's beam footprint and of the map's error)
ASPHALT_CLEARANCE_M = 1.0
#: lane marks are sampled this finely to measure a point's distance to them (m)
MARK_SAMPLE_M = 0.02
#: an annotated object counts when the real unit has at least this many points inside its box
MIN_OBJECT_POINTS = 5
#: the nearest-neighbour grid's cell (m; assumed: about the spacing of a sweep's rings at 20 m)
GRID_CELL_M = 1.0
#: groups of rings by their elevation in the ego frame (degrees, [low, high)): the usual comparison's columns; the band
#: edges lie between the VLP-32C's rings (−1.67° and −1.33°, +1.33° and +1.67°, −4.67° and −5.33°)
RING_GROUPS = {"upper": {"all": (-90.0, 90.0), "-4.7..-1.7 deg": (-5.0, -1.5), "around 0 deg": (-1.5, 1.5),
                         "above +1.7 deg": (1.5, 90.0), "-15.6..-1.7 deg": (-16.0, -1.5)},
               "lower": {"all": (-90.0, 90.0), "upward": (0.0, 90.0)}}
#: the lidars' names in the report, in the rig's order (Argoverse 2's up_lidar and down_lidar)
LIDAR_NAMES = ("upper", "lower")


@dataclass
class Sweep:
    """One lidar's points of one sweep in the ego frame: positions (N, 3) m, intensity (N,) (the real unit's 0–255,
    our intensity %: each compared only with its own kind), ring (N,) (the simulated unit's beam_id)."""

    xyz_m: np.ndarray
    intensity: np.ndarray
    ring: np.ndarray


@dataclass
class Unit:
    """What a lidar's return fractions are counted against: its rays per ring per sweep and each ring's elevation
    in the ego frame (degrees), from the simulated unit's pattern and mounting."""

    rays_per_ring: np.ndarray
    elevation_deg: np.ndarray


@dataclass
class DriveMap:
    """What the measures take of the log's map, in the city frame: the ground height raster and its transform, the
    lane marks' sample points and the drivable areas' outlines."""

    ground_height_m: np.ndarray
    city_to_raster: dict
    marks: PointIndex
    areas: list


# ------------------------------------------------------------------------------------------------ reading


def is_drive_log(path) -> bool:
    """``path`` is an Argoverse 2 sensor log folder (its ego poses and lidar sweeps), not a unit's recording."""
    path = os.fspath(path)
    return os.path.isfile(os.path.join(path, "city_SE3_egovehicle.feather")) and os.path.isdir(
        os.path.join(path, "sensors", "lidar"))


def sweep_timestamps(folder: str) -> np.ndarray:
    """(S,) int64 timestamps of the log's real lidar sweeps, in order."""
    names = [os.path.basename(p).split(".")[0] for p in glob.glob(os.path.join(folder, "sensors", "lidar", "*.feather"))]
    found = np.array(sorted(int(n) for n in names if n.isdigit()), np.int64)
    if not len(found):
        raise DriveLogError(f"{os.path.join(folder, 'sensors', 'lidar')}: no <timestamp>.feather sweep to compare with")
    return found


def read_sweeps(folder: str, timestamp_ns: int) -> list[Sweep]:
    """The real sweep at ``timestamp_ns`` as one :class:`Sweep` per lidar (ring: the Velodyne laser number as
    Argoverse gives it, mapped to our rings by :func:`ring_of_laser`)."""
    path = os.path.join(folder, "sensors", "lidar", f"{timestamp_ns}.feather")
    table = read_feather(path, ("x", "y", "z", "intensity", "laser_number"))
    xyz = np.column_stack([table[k] for k in "xyz"]).astype(np.float64)
    laser = table["laser_number"].astype(np.int64)
    out = []
    for k in range(len(LIDARS)):
        mine = (laser >= 32 * k) & (laser < 32 * (k + 1))  # 0–31 the upper lidar, 32–63 the lower
        out.append(Sweep(xyz[mine], table["intensity"][mine].astype(np.float64), laser[mine] - 32 * k))
    return out


def elevations_in_unit_deg(xyz_ego: np.ndarray, ego_from_lidar: np.ndarray) -> np.ndarray:
    """Each point's elevation in the lidar's own frame (degrees)."""
    local = (xyz_ego - ego_from_lidar[:3, 3]) @ ego_from_lidar[:3, :3]
    return np.degrees(np.arctan2(local[:, 2], np.hypot(local[:, 0], local[:, 1])))


def ring_of_laser(sweep: Sweep, ego_from_lidar: np.ndarray, beam_elevation_deg: np.ndarray) -> np.ndarray:
    """(32,) our ring of each Argoverse laser number: the ring whose elevation is nearest the laser's points' median
    elevation in the unit's frame. Argoverse numbers the lasers in the unit's firing order, not ours (the VLP-32C
    calibration's order, ``sensors/velodyne.py``): matched by elevation, as the rings are 0.33° or more apart."""
    elevation = elevations_in_unit_deg(sweep.xyz_m, ego_from_lidar)
    out = np.full(32, -1, np.int64)
    for laser in range(32):
        mine = elevation[sweep.ring == laser]
        if len(mine):
            out[laser] = int(np.argmin(np.abs(beam_elevation_deg - np.median(mine))))
    return out


def read_drive_map(folder: str, log: Av2Log) -> DriveMap:
    """The ground height raster (``map/*_ground_height_surface____*.npy`` and its ``*_Sim2_city.json``), the lane
    marks (every lane boundary whose mark type paints a line) and the drivable areas of the log's map."""
    rasters = sorted(glob.glob(os.path.join(folder, "map", "*_ground_height_surface____*.npy")))
    transforms = sorted(glob.glob(os.path.join(folder, "map", "*_Sim2_city.json")))
    if not rasters or not transforms:
        raise DriveLogError(f"{os.path.join(folder, 'map')}: no ground height raster (*_ground_height_surface____*.npy "
                            "with its *_Sim2_city.json)")
    sim2 = read_document(transforms[0], "Argoverse 2 raster transform", DriveLogError, syntax="json")
    if not isinstance(sim2, dict) or not {"R", "t", "s"} <= set(sim2):
        raise DriveLogError(f"{transforms[0]}: not a Sim2 transform (a JSON object with R, t, s)")
    samples = []
    for segment in log.vector_map.get("lane_segments", {}).values():
        for side in ("left", "right"):
            if segment.get(f"{side}_lane_mark_type") not in ("NONE", "UNKNOWN", None):
                samples.append(_sampled(np.array([(p["x"], p["y"], p["z"])
                                                  for p in segment[f"{side}_lane_boundary"]], np.float64)))
    areas = [np.array([(p["x"], p["y"]) for p in area["area_boundary"]], np.float64)
             for area in log.vector_map.get("drivable_areas", {}).values()]
    return DriveMap(np.load(rasters[0]).astype(np.float64), sim2,
                    PointIndex(np.concatenate(samples) if samples else np.empty((0, 3)), cell_m=GRID_CELL_M), areas)


def _sampled(line: np.ndarray) -> np.ndarray:
    """A polyline's points every :data:`MARK_SAMPLE_M` or closer."""
    out = [line[:1]]
    for a, b in zip(line[:-1], line[1:]):
        n = max(1, int(np.ceil(np.linalg.norm(b - a) / MARK_SAMPLE_M)))
        out.append(a + np.outer(np.arange(1, n + 1) / n, b - a))
    return np.concatenate(out)


def ground_height_m(drive_map: DriveMap, xy_city: np.ndarray) -> np.ndarray:
    """The raster's ground height under each city-frame (x, y); NaN off the raster (Argoverse's Sim2: raster
    (column, row) = s·(R·xy + t))."""
    rotation = np.asarray(drive_map.city_to_raster["R"], np.float64).reshape(2, 2)
    pixel = np.round(float(drive_map.city_to_raster["s"]) * (xy_city @ rotation.T
                                                             + np.asarray(drive_map.city_to_raster["t"]))).astype(int)
    rows, cols = drive_map.ground_height_m.shape
    inside = (pixel[:, 0] >= 0) & (pixel[:, 0] < cols) & (pixel[:, 1] >= 0) & (pixel[:, 1] < rows)
    out = np.full(len(xy_city), np.nan)
    out[inside] = drive_map.ground_height_m[pixel[inside, 1], pixel[inside, 0]]
    return out


# ------------------------------------------------------------------------------------------------ the measures


def near_ego(xyz_m: np.ndarray, range_m: float = COMPARE_RANGE_M) -> np.ndarray:
    """The points within ``range_m`` of the ego's origin, horizontally."""
    return np.hypot(xyz_m[:, 0], xyz_m[:, 1]) <= range_m


def ring_fractions(rings: list[np.ndarray], unit: Unit) -> np.ndarray:
    """(R,) the fraction of each ring's rays that returned over the sweeps whose points' rings are ``rings``."""
    counts = sum((np.bincount(r[r >= 0], minlength=len(unit.rays_per_ring)) for r in rings),
                 np.zeros(len(unit.rays_per_ring), np.int64))
    return counts / (unit.rays_per_ring * max(len(rings), 1))


def ring_groups(rings: list[np.ndarray], unit: Unit, groups: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """Each group's return fraction (its rings' returns over their rays) and its rings' lowest and highest."""
    fractions = ring_fractions(rings, unit)
    out: dict[str, Any] = {}
    for name, (low, high) in groups.items():
        mine = (unit.elevation_deg >= low) & (unit.elevation_deg < high)
        rays = float((unit.rays_per_ring[mine]).sum())
        out[name] = {"fraction": float((fractions[mine] * unit.rays_per_ring[mine]).sum() / rays) if rays else None,
                     "ring_min": float(fractions[mine].min()) if mine.any() else None,
                     "ring_max": float(fractions[mine].max()) if mine.any() else None, "rings": int(mine.sum())}
    return out


def ground_reach_m(xyz_m: np.ndarray, sector_deg: float = SECTOR_DEG,
                   percentile: float = REACH_PERCENTILE) -> list[float | None]:
    """Per azimuth sector (from −180°, counter-clockwise), the ``percentile`` of the ground points' horizontal
    ranges; None where a sector has no ground point."""
    azimuth = np.degrees(np.arctan2(xyz_m[:, 1], xyz_m[:, 0]))
    sector = np.minimum(((azimuth + 180.0) // sector_deg).astype(int), int(round(360 / sector_deg)) - 1)
    reach = np.hypot(xyz_m[:, 0], xyz_m[:, 1])
    return [float(np.percentile(reach[sector == k], percentile)) if (sector == k).any() else None
            for k in range(int(round(360 / sector_deg)))]


def paint_ratio(intensity: np.ndarray, mark_distance_m: np.ndarray, on_road: np.ndarray) -> dict[str, Any]:
    """Mean intensity of ground points on lane-mark paint ÷ of asphalt (on road, clear of every mark)."""
    painted = mark_distance_m <= 0.5 * LINE_WIDTH_M + PAINT_TOLERANCE_M
    asphalt = on_road & (mark_distance_m >= ASPHALT_CLEARANCE_M)
    paint_mean = float(intensity[painted].mean()) if painted.any() else None
    asphalt_mean = float(intensity[asphalt].mean()) if asphalt.any() else None
    return {"ratio": paint_mean / asphalt_mean if paint_mean is not None and asphalt_mean else None,
            "paint_points": int(painted.sum()), "asphalt_points": int(asphalt.sum()),
            "paint_mean": paint_mean, "asphalt_mean": asphalt_mean}


def points_in_boxes(xyz_m: np.ndarray, ego_from_box: np.ndarray, size_m: np.ndarray) -> np.ndarray:
    """(B,) how many of the points lie inside each box (``ego_from_box`` (B, 4, 4), ``size_m`` (B, 3): length,
    width, height about the box's centre)."""
    out = np.zeros(len(ego_from_box), np.int64)
    for k, (pose, size) in enumerate(zip(ego_from_box, size_m)):
        local = (xyz_m - pose[:3, 3]) @ pose[:3, :3]
        out[k] = int(np.all(np.abs(local) <= 0.5 * size, axis=1).sum())
    return out


def object_ratios(real: np.ndarray, sim: np.ndarray, categories: np.ndarray,
                  min_points: int = MIN_OBJECT_POINTS) -> dict[str, Any]:
    """Points per object, ours ÷ the unit's, over the objects the unit sees with ≥ ``min_points``: median, 10th
    and 90th percentiles; and the objects among them we see with none, with their categories."""
    seen = real >= min_points
    ratio = sim[seen] / real[seen]
    missed = seen & (sim == 0)
    return {"objects": int(seen.sum()), "median": float(np.median(ratio)) if len(ratio) else None,
            "p10": float(np.percentile(ratio, 10)) if len(ratio) else None,
            "p90": float(np.percentile(ratio, 90)) if len(ratio) else None,
            "missed": int(missed.sum()), "missed_categories": sorted({str(c) for c in categories[missed]})}


@njit(cache=True, nogil=True)
def _nearest_3d(queries, points, order, starts, low, cell, shape, out):
    """Each query's distance to its nearest point: the grid's cells searched shell by shell (a shell s cells out
    is at least (s − 1) cells away) until no nearer point can lie farther out."""
    nx, ny, nz = shape[0], shape[1], shape[2]
    for q in range(queries.shape[0]):
        c = np.floor((queries[q] - low) / cell).astype(np.int64)
        last = max(max(c[0], nx - 1 - c[0]), max(max(c[1], ny - 1 - c[1]), max(c[2], nz - 1 - c[2])))
        best = np.inf
        for s in range(last + 1):
            if s > 0 and (s - 1) * cell > best:
                break
            for ix in range(max(c[0] - s, 0), min(c[0] + s, nx - 1) + 1):
                for iy in range(max(c[1] - s, 0), min(c[1] + s, ny - 1) + 1):
                    face = abs(ix - c[0]) == s or abs(iy - c[1]) == s
                    for iz in range(max(c[2] - s, 0), min(c[2] + s, nz - 1) + 1):
                        if not face and abs(iz - c[2]) != s:
                            continue
                        key = (ix * ny + iy) * nz + iz
                        for k in range(starts[key], starts[key + 1]):
                            p = order[k]
                            d = np.sqrt(np.sum((points[p] - queries[q]) ** 2))
                            if d < best:
                                best = d
        out[q] = best


def nearest_distance_m(queries: np.ndarray, points: np.ndarray, cell_m: float = GRID_CELL_M) -> np.ndarray:
    """(Q,) each query's distance to the nearest of ``points`` (3D; inf where there are none)."""
    queries = np.ascontiguousarray(queries, np.float64).reshape(-1, 3)
    points = np.ascontiguousarray(points, np.float64).reshape(-1, 3)
    out = np.full(len(queries), np.inf)
    if not len(points) or not len(queries):
        return out
    low = points.min(axis=0)
    shape = (np.floor((points.max(axis=0) - low) / cell_m).astype(np.int64) + 1)
    cells = np.floor((points - low) / cell_m).astype(np.int64)
    keys = (cells[:, 0] * shape[1] + cells[:, 1]) * shape[2] + cells[:, 2]
    order = np.argsort(keys, kind="stable")
    starts = np.searchsorted(keys[order], np.arange(int(np.prod(shape)) + 1))
    _nearest_3d(queries, points, order, starts, low, float(cell_m), shape, out)
    return out


def chamfer(real_to_sim_m: np.ndarray, sim_to_real_m: np.ndarray,
            threshold_m: float = F_SCORE_THRESHOLD_M) -> dict[str, Any]:
    """Chamfer distance each way (the mean of each point's distance to the other cloud's nearest) and the F-score
    at ``threshold_m`` (precision: our points with a real one that near; recall: real points with one of ours)."""
    precision = float((sim_to_real_m <= threshold_m).mean()) if len(sim_to_real_m) else 0.0
    recall = float((real_to_sim_m <= threshold_m).mean()) if len(real_to_sim_m) else 0.0
    return {"real_to_sim_m": float(real_to_sim_m.mean()) if len(real_to_sim_m) else None,
            "sim_to_real_m": float(sim_to_real_m.mean()) if len(sim_to_real_m) else None,
            "precision": precision, "recall": recall,
            "f_score": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
            "real_points": int(len(real_to_sim_m)), "sim_points": int(len(sim_to_real_m))}


# ------------------------------------------------------------------------------------------------ one drive


@dataclass
class SweepPair:
    """One timestamp's real and simulated sweeps (one :class:`Sweep` per lidar each), the ego's city pose then and
    the objects annotated then (ego frame)."""

    timestamp_ns: int
    real: list[Sweep]
    sim: list[Sweep]
    city_from_ego: np.ndarray
    ego_from_box: np.ndarray
    box_size_m: np.ndarray
    box_category: np.ndarray


def annotated_boxes(log: Av2Log, timestamp_ns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cuboids annotated at ``timestamp_ns`` within :data:`COMPARE_RANGE_M`: ego_from_box, sizes, categories."""
    a = log.annotations
    rows = np.flatnonzero(a["timestamp_ns"].astype(np.int64) == timestamp_ns)
    boxes = poses({k: a[k][rows] for k in ("qw", "qx", "qy", "qz", "tx_m", "ty_m", "tz_m")})
    keep = np.hypot(boxes[:, 0, 3], boxes[:, 1, 3]) <= COMPARE_RANGE_M
    size = np.column_stack([a[k][rows] for k in ("length_m", "width_m", "height_m")]).astype(np.float64)
    return boxes[keep], size[keep], a["category"][rows][keep]


def _ground_and_marks(sweep: Sweep, pair: SweepPair, drive_map: DriveMap) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which of a sweep's points (within the compared range) are ground, their distance to the nearest lane mark
    and whether they lie in a drivable area."""
    from matplotlib.path import Path

    city = sweep.xyz_m @ pair.city_from_ego[:3, :3].T + pair.city_from_ego[:3, 3]
    ground = np.abs(city[:, 2] - ground_height_m(drive_map, city[:, :2])) <= GROUND_TOLERANCE_M  # NaN: not ground
    ground &= near_ego(sweep.xyz_m)
    distance = np.full(len(city), np.inf)
    distance[ground] = drive_map.marks.nearest(city[ground], 2 * ASPHALT_CLEARANCE_M)[0]
    on_road = np.zeros(len(city), bool)
    for area in drive_map.areas:
        on_road[ground] |= Path(area).contains_points(city[ground, :2])
    return ground, distance, on_road


def _lidar_figures(pairs: list[SweepPair], k: int, unit: Unit, groups: dict, drive_map: DriveMap) -> dict[str, Any]:
    """Lidar ``k``'s measures, the unit's and ours, over every sweep."""
    out: dict[str, Any] = {}
    for side in ("real", "sim"):
        sweeps = [getattr(p, side)[k] for p in pairs]
        ground = [_ground_and_marks(s, p, drive_map) for s, p in zip(sweeps, pairs)]
        cat = np.concatenate
        out[side] = {
            "ring_fraction": [float(v) for v in ring_fractions([s.ring for s in sweeps], unit)],
            "ring_groups": ring_groups([s.ring for s in sweeps], unit, groups),
            "ground_reach_m": ground_reach_m(cat([s.xyz_m[g[0]] for s, g in zip(sweeps, ground)])),
            "paint": paint_ratio(cat([s.intensity[g[0]] for s, g in zip(sweeps, ground)]),
                                 cat([g[1][g[0]] for g in ground]), cat([g[2][g[0]] for g in ground])),
            "_boxes": cat([points_in_boxes(s.xyz_m, p.ego_from_box, p.box_size_m) for s, p in zip(sweeps, pairs)])}
    out["objects"] = object_ratios(out["real"].pop("_boxes"), out["sim"].pop("_boxes"),
                                   np.concatenate([p.box_category for p in pairs]))
    out["chamfer"] = _chamfer_over(pairs, [k])
    return out


def _chamfer_over(pairs: list[SweepPair], lidars: list[int]) -> dict[str, Any]:
    """The Chamfer distances and F-score of ``lidars``' points within the compared range, over every sweep."""
    to_sim, to_real = [], []
    for p in pairs:
        real = np.concatenate([p.real[k].xyz_m for k in lidars])
        sim = np.concatenate([p.sim[k].xyz_m for k in lidars])
        real, sim = real[near_ego(real)], sim[near_ego(sim)]
        to_sim.append(nearest_distance_m(real, sim))
        to_real.append(nearest_distance_m(sim, real))
    return chamfer(np.concatenate(to_sim), np.concatenate(to_real))


def compare_drive(pairs: list[SweepPair], units: list[Unit], drive_map: DriveMap) -> dict[str, Any]:
    """Every measure, per lidar and over both: the figures of ``validation.json``."""
    both_objects = object_ratios(
        np.concatenate([sum(points_in_boxes(s.xyz_m, p.ego_from_box, p.box_size_m) for s in p.real) for p in pairs]),
        np.concatenate([sum(points_in_boxes(s.xyz_m, p.ego_from_box, p.box_size_m) for s in p.sim) for p in pairs]),
        np.concatenate([p.box_category for p in pairs]))
    return {"lidars": {name: _lidar_figures(pairs, k, units[k], RING_GROUPS[name], drive_map)
                       for k, name in enumerate(LIDAR_NAMES)},
            "both": {"chamfer": _chamfer_over(pairs, list(range(len(LIDAR_NAMES)))), "objects": both_objects}}


COMPARED = {
    "frame": "both clouds in the ego frame at each sweep's timestamp (the real sweeps are motion-compensated to it; "
             "ours are cast with motion_distortion: false, every ray from the pose of the view at that timestamp)",
    "ring_fraction": "returns per ring ÷ the simulated unit's rays per ring per sweep (its pattern: columns per "
                     "rotation), the real lasers matched to our rings by elevation",
    "ground": f"points within {GROUND_TOLERANCE_M} m of the map's ground height raster, within {COMPARE_RANGE_M:g} m; "
              f"reach: the {REACH_PERCENTILE:g}th percentile horizontal range per {SECTOR_DEG:g}° sector from -180°",
    "paint": f"mean intensity of ground points within {0.5 * LINE_WIDTH_M + PAINT_TOLERANCE_M:.3f} m of a lane "
             f"mark's polyline ÷ of ground points in a drivable area ≥ {ASPHALT_CLEARANCE_M:g} m from every mark "
             "(the unit's 0-255 intensity, our intensity %)",
    "objects": f"points inside each cuboid annotated at the sweep's timestamp within {COMPARE_RANGE_M:g} m, ours ÷ "
               f"the unit's over the objects with ≥ {MIN_OBJECT_POINTS} real points (median, p10, p90)",
    "chamfer": f"mean nearest-neighbour distance each way of the points within {COMPARE_RANGE_M:g} m (3D), F-score "
               f"at {F_SCORE_THRESHOLD_M} m",
}


# ------------------------------------------------------------------------------------------------ the report


def _pair(real, sim) -> str:
    return f"{figure_text(real)} / {figure_text(sim)}"


def table_lines(r: dict[str, Any]) -> list[str]:
    """The human table of a drive's comparison (markdown, so the docs can hold it as printed)."""
    lines = [f"{r['log']}: {len(r['sweeps'])} sweep(s), simulated as {r['sensor']}, environment "
             f"{r.get('environment', 'auto')}", "",
             "| measure | real / ours |", "|---|---|"]
    for name, lidar in r["lidars"].items():
        for group, real in lidar["real"]["ring_groups"].items():
            sim = lidar["sim"]["ring_groups"][group]
            lines.append(f"| {name} lidar: rays that return, {group} ({real['rings']} rings; per ring "
                         f"{figure_text(real['ring_min'])}–{figure_text(real['ring_max'])} / {figure_text(sim['ring_min'])}–"
                         f"{figure_text(sim['ring_max'])}) | {_pair(real['fraction'], sim['fraction'])} |")
        reach = [(a, b) for a, b in zip(lidar["real"]["ground_reach_m"], lidar["sim"]["ground_reach_m"])]
        seen = [(a, b) for a, b in reach if a is not None]
        lines.append(f"| {name} lidar: ground reach (p{REACH_PERCENTILE:g} per {SECTOR_DEG:g}° sector), median over "
                     f"sectors the unit sees, m | {_pair(_median(a for a, _ in seen), _median(b for _, b in seen))} |")
        lines.append(f"| {name} lidar: painted lines ÷ asphalt intensity | "
                     f"{_pair(lidar['real']['paint']['ratio'], lidar['sim']['paint']['ratio'])} |")
        lines += _object_and_chamfer_lines(f"{name} lidar", lidar["objects"], lidar["chamfer"])
    lines += _object_and_chamfer_lines("both lidars", r["both"]["objects"], r["both"]["chamfer"])
    lines.append(f"| run time | {r['run_s']:.1f} s |")
    return lines


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def _object_and_chamfer_lines(who: str, objects: dict, c: dict) -> list[str]:
    missed = f"{objects['missed']} of {objects['objects']}" + (
        f" ({', '.join(objects['missed_categories'])})" if objects["missed"] else "")
    return [f"| {who}: points per annotated object, ours ÷ real, median (p10–p90) | – / {figure_text(objects['median'])} "
            f"({figure_text(objects['p10'])}–{figure_text(objects['p90'])}) |",
            f"| {who}: objects the unit sees with ≥ {MIN_OBJECT_POINTS} points, we with none | – / {missed} |",
            f"| {who}: Chamfer real→sim / sim→real within {COMPARE_RANGE_M:g} m, m | – / "
            f"{figure_text(c['real_to_sim_m'])} / {figure_text(c['sim_to_real_m'])} |",
            f"| {who}: F-score at {F_SCORE_THRESHOLD_M} m (precision, recall) | – / {figure_text(c['f_score'])} "
            f"({figure_text(c['precision'])}, {figure_text(c['recall'])}) |"]


def plot_drive(path: str, pair: SweepPair, range_m: float = COMPARE_RANGE_M) -> None:
    """Real and simulated sweep side by side, bird's-eye in the ego frame, both lidars, coloured by intensity (each
    on its own scale: the unit's 0–255, our %, up to its 99th percentile)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(14, 7.2), sharex=True, sharey=True)
    for ax, sweeps, title, unit in ((axes[0], pair.real, "real (Argoverse 2)", "0–255"),
                                    (axes[1], pair.sim, "simulated (lidar-fmu)", "%")):
        xyz = np.concatenate([s.xyz_m for s in sweeps])
        intensity = np.concatenate([s.intensity for s in sweeps])
        keep = near_ego(xyz, range_m)
        top = float(np.percentile(intensity[keep], 99)) if keep.any() else 1.0
        shown = ax.scatter(xyz[keep, 0], xyz[keep, 1], c=intensity[keep], s=0.3, cmap="viridis", vmin=0.0,
                           vmax=max(top, 1e-6), linewidths=0)
        ax.set(title=f"{title}: {int(keep.sum()):,} points", xlabel="x (m, ego frame)", aspect="equal",
               xlim=(-range_m, range_m), ylim=(-range_m, range_m), facecolor="0.1")
        fig.colorbar(shown, ax=ax, shrink=0.8, label=f"intensity ({unit})")
    axes[0].set_ylabel("y (m)")
    fig.suptitle(f"sweep {pair.timestamp_ns}: both lidars, within {range_m:g} m")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_report(output: str, result: dict[str, Any], pair: SweepPair) -> None:
    """``validation.json`` (the result's public part) and ``validation.png`` (of ``pair``) into ``output``."""
    os.makedirs(output, exist_ok=True)
    with open(os.path.join(output, "validation.json"), "w", encoding="utf-8") as f:
        json.dump(json_ready(result), f, indent=1)
    plot_drive(os.path.join(output, "validation.png"), pair)

"""What the world builder keeps of a road's ground truth: lines within a working radius, sizes within their bounds.

A line may run anywhere inside the world's ±10⁷ m, but what a lidar sees lies within a kilometre of it:
:func:`bounded` cuts every boundary line and centerline to the part of it within :data:`WORKING_RADIUS_M` of the
host (horizontally), so that a two-point line 2·10⁷ m long costs what a 40 km one does. A line that leaves the
circle and comes back keeps the part that comes nearest the host; a dashed line keeps its dashes where the whole
line has them. The caller builds the road again around the host once it has moved :data:`REBUILD_AFTER_M`.

Widths and heights of boundary lines are clamped to a bound per kind (:data:`LINE_BOUNDS_M`), and road markings,
sign plates and lights larger than theirs (:data:`PLACED_BOUNDS_M`) are left out, each named in one problem line
(docs/world.md, "Bad ground truth stays local").
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..osi.ground_truth import (
    DASH_CONTINUE,
    DASH_END,
    DASH_GAP,
    DASH_START,
    BoundaryLine,
    PlacedThing,
    RoadGroundTruth,
)
from .lines import SAME_POINT_M, arc_length
from .road import dash_intervals

#: lines are built this far from the host (m), horizontally: twenty times the farthest the terrain and the street
#: reach (:data:`lidar_fmu.world.MAX_REACH_M`, 1 km; assumed: a real road map's lines of tens of km stay whole
#: around a drive, an absurd one is cut)
WORKING_RADIUS_M = 20_000.0
#: a road that was cut is built again around the host once it is this far from where it was built (m): the cut
#: then lies at least as far from the host, ten times the terrain's reach
REBUILD_AFTER_M = 0.5 * WORKING_RADIUS_M
#: the widest and the tallest a boundary line of each kind is taken to be (m; None: the builder does not use it).
#: Paint: MUTCD 2009 §3B.16 stop lines, 12–24 in (0.30–0.61 m), the widest line a standard paints. Kerbs: DIN 483
#: kerbstones are 0.08–0.30 m wide with a 0.10–0.15 m reveal, bus-stop kerbs up to 0.24 m (assumed: 0.5 m is past
#: any). Guard rails and barriers: EN 1317 and AASHTO systems stand 0.6–1.4 m high (assumed: 2 m). Walls: noise
#: barriers are 2–6 m high (ZTV-Lsw; assumed: 10 m, 2 m thick)
LINE_BOUNDS_M = {"SOLID_LINE": (0.6, None), "DASHED_LINE": (0.6, None), "CURB": (0.5, 0.5),
                 "GUARD_RAIL": (None, 2.0), "BARRIER": (2.0, 2.0), "SOUND_BARRIER": (2.0, 10.0),
                 "STRUCTURE": (2.0, 10.0)}
#: the largest (length, width, height) of a placed thing (m; assumed): a sign plate 1 m thick and 10 m across (the
#: largest motorway direction signs are 4–8 m wide), a signal head 2 × 5 × 5 m, a road marking's area 200 × 200 m
#: (a hatched area or a whole crossing as one marking), 1 m thick
PLACED_BOUNDS_M = {"traffic_sign": (1.0, 10.0, 10.0), "traffic_light": (2.0, 5.0, 5.0),
                   "road_marking": (200.0, 200.0, 1.0)}


@dataclasses.dataclass(frozen=True)
class Bounded:
    """A road within the bounds: its ground truth, and how many lines were cut to the working radius."""

    road: RoadGroundTruth
    cut_lines: int


def bounded(road: RoadGroundTruth, centre_xy, radius_m: float = WORKING_RADIUS_M) -> Bounded:
    """``road`` with its lines cut to ``radius_m`` around ``centre_xy`` and its sizes within their bounds; every
    element repaired or left out is named in the result's ``problems``."""
    problems = list(road.problems)
    centre = np.asarray(centre_xy, np.float64)[:2]
    boundaries, gone = [], set()
    cut = 0
    for line in road.boundaries:
        kept = _cut_line(line, centre, radius_m, road.country_code, problems)
        cut += kept is not line
        if kept is None:
            gone.add(line.id)
            continue
        boundaries.append(_sized_line(kept, problems))
    lanes = []
    for lane in road.lanes:
        centerline = lane.centerline_m
        if len(centerline) >= 2 and not _inside(centerline, centre, radius_m):
            cut += 1
            piece = _piece(centerline, centre, radius_m)
            centerline = np.zeros((0, 3)) if piece is None else _points_of(centerline, *piece)
        ids = lane.left_boundary_ids + lane.right_boundary_ids
        if not len(centerline) and ids and all(i in gone for i in ids):
            continue  # all of the lane lies beyond the working radius
        lanes.append(dataclasses.replace(lane, centerline_m=centerline) if centerline is not lane.centerline_m
                     else lane)
    if cut:
        problems.append(f"{cut} lines reach farther than {radius_m:g} m from the host at ({centre[0]:.0f}, "
                        f"{centre[1]:.0f}) m: built within that radius (again around the host once it has moved "
                        f"{REBUILD_AFTER_M:g} m)")
    sized = {kind: [t for t in things if _placed_fits(t, what, problems)]
             for kind, things, what in (("markings", road.markings, "road_marking"),
                                        ("signs", road.signs, "traffic_sign"),
                                        ("lights", road.lights, "traffic_light"))}
    return Bounded(dataclasses.replace(road, lanes=tuple(lanes), boundaries=tuple(boundaries),
                                       markings=tuple(sized["markings"]), signs=tuple(sized["signs"]),
                                       lights=tuple(sized["lights"]), problems=tuple(problems)), cut)


# ------------------------------------------------------------------------------------------------ the working radius


def _inside(points: np.ndarray, centre: np.ndarray, radius_m: float) -> bool:
    """Does every point lie within the circle (then the whole line does: a disc is convex)?"""
    return bool((((points[:, :2] - centre) ** 2).sum(axis=1) <= radius_m ** 2).all())


def _piece(points: np.ndarray, centre: np.ndarray, radius_m: float) -> tuple[int, float, int, float] | None:
    """(first segment, its parameter where the part inside starts, last segment, its parameter where it ends) of
    the run of segments inside the circle that comes nearest ``centre``; None when no segment reaches inside."""
    p = points[:-1, :2] - centre
    d = np.diff(points[:, :2], axis=0)
    dd, pd, pp = (d * d).sum(axis=1), (p * d).sum(axis=1), (p * p).sum(axis=1)
    # |p + t·d|² = r² where the segment enters and leaves the circle; a segment of no horizontal length is in or out
    flat = dd <= 0
    root = np.sqrt(np.maximum(pd * pd - dd * (pp - radius_m ** 2), 0.0))
    safe = np.where(flat, 1.0, dd)
    start = np.where(flat, 0.0, np.clip((-pd - root) / safe, 0.0, 1.0))
    end = np.where(flat, 1.0, np.clip((-pd + root) / safe, 0.0, 1.0))
    nearest_t = np.where(flat, 0.0, np.clip(-pd / safe, 0.0, 1.0))
    reach = ((p + nearest_t[:, None] * d) ** 2).sum(axis=1)  # squared distance of each segment from the centre
    has = (reach <= radius_m ** 2) & (end > start)
    if not has.any():
        return None
    # runs: a segment goes on from the one before when both are inside and the first leaves only at its end
    goes_on = has[1:] & has[:-1] & (end[:-1] >= 1.0) & (start[1:] <= 0.0)
    run = np.concatenate([[0], np.cumsum(~goes_on)])
    best = int(np.argmin(np.where(has, reach, np.inf)))
    members = np.flatnonzero((run == run[best]) & has)
    first, last = int(members[0]), int(members[-1])
    return first, float(start[first]), last, float(end[last])


def _points_of(points: np.ndarray, first: int, t0: float, last: int, t1: float) -> np.ndarray:
    """The polyline from segment ``first`` at ``t0`` to segment ``last`` at ``t1``."""
    a = points[first] + t0 * (points[first + 1] - points[first])
    b = points[last] + t1 * (points[last + 1] - points[last])
    return np.concatenate([a[None], points[first + 1:last + 1], b[None]])


def _cut_line(line: BoundaryLine, centre: np.ndarray, radius_m: float, country_code: int,
              problems: list[str]) -> BoundaryLine | None:
    """``line`` itself where it lies within the circle, else the part of it that does (None: no part)."""
    points = line.position_m
    if len(points) < 2 or _inside(points, centre, radius_m):
        return line
    piece = _piece(points, centre, radius_m)
    if piece is None:
        return None
    first, t0, last, t1 = piece
    s = arc_length(points)
    span = (s[first] + t0 * (s[first + 1] - s[first]), s[last] + t1 * (s[last + 1] - s[last]))
    stations = np.concatenate([[span[0]], s[first + 1:last + 1], [span[1]]])
    dash = np.full(len(stations), line.dash[0])
    if line.kind == "DASHED_LINE":  # the dashes the whole line has there, said by dash states
        intervals = dash_intervals(line, s, country_code, problems, span)
        intervals = intervals[intervals[:, 1] - intervals[:, 0] > SAME_POINT_M]
        stations = np.unique(np.concatenate([stations, intervals.ravel()]))
        dash = _dash_states(stations, intervals)
    at = [np.interp(stations, s, values) for values in (*points.T, line.width_m, line.height_m)]
    return dataclasses.replace(line, position_m=np.column_stack(at[:3]), width_m=at[3], height_m=at[4], dash=dash)


def _dash_states(stations: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    """OSI dash states of points at arc lengths ``stations`` that make exactly the dashes ``intervals`` (sorted,
    apart): DASH_START and DASH_END at their ends, DASH_CONTINUE inside, DASH_GAP between them."""
    starts, ends = intervals[:, 0], intervals[:, 1]
    k = np.searchsorted(starts, stations, side="right") - 1
    inside = (k >= 0) & (stations < ends[np.maximum(k, 0)])
    opens, closes = np.isin(stations, starts), np.isin(stations, ends)
    states = np.where(inside, DASH_CONTINUE, DASH_GAP).astype(np.int8)
    states[opens & ~closes] = DASH_START
    states[closes & ~opens] = DASH_END
    return states


# ------------------------------------------------------------------------------------------------ sizes


def _sized_line(line: BoundaryLine, problems: list[str]) -> BoundaryLine:
    """``line`` with its widths and heights clamped to its kind's bounds (one problem line per field clamped)."""
    limits = LINE_BOUNDS_M.get(line.kind, (None, None))
    values = {"width": line.width_m, "height": line.height_m}
    for (field, given), limit in zip(values.items(), limits):
        if limit is None or not (given > limit).any():
            continue
        problems.append(f"lane_boundary {line.id} ({line.kind}): {field} above {limit:g} m at "
                        f"{int((given > limit).sum())} points (up to {given.max():g} m); taken as {limit:g} m")
        values[field] = np.minimum(given, limit)
    if values["width"] is line.width_m and values["height"] is line.height_m:
        return line
    return dataclasses.replace(line, width_m=values["width"], height_m=values["height"])


def _placed_fits(thing: PlacedThing, what: str, problems: list[str]) -> bool:
    """Is ``thing`` no larger than a ``what`` may be (else one problem line naming it and the field)?"""
    for field, value, limit in zip(("length", "width", "height"), thing.dimension_m, PLACED_BOUNDS_M[what]):
        if value > limit:
            kind = f" ({thing.kind})" if what == "traffic_sign" else ""
            problems.append(f"{what} {thing.id}{kind}: dimension.{field} {value:g} m is above the {limit:g} m a "
                            f"{what.replace('_', ' ')} may have; left out")
            return False
    return True

"""The road from ground truth: lane surfaces, paint, kerbs, guard rails, walls and road markings, labelled by OSI id.

:func:`build_road` turns a :class:`~lidar_fmu.osi.ground_truth.RoadGroundTruth` into shapes on a
:class:`~.shapes.MeshBuilder` and says where the road ends (its outer edges, for :mod:`.terrain`): lanes become
surfaces between their boundaries (else their centerline widened, :data:`DEFAULT_LANE_WIDTH_M`; material by
:data:`LANE_MATERIALS`); boundaries by type become paint strips and dashes (:func:`standard_dashes`), Botts' dots,
kerbs, guard rails, barriers and walls (the ``*_EDGE`` types name the ground beyond them,
:data:`EDGE_MATERIALS`); road markings become paint of their base polygon (else their box). docs/world.md, "What
becomes what", says each rule in full.

Every face carries the OSI id of the lane, boundary or marking it came from.
Values a trace leaves out are standard ones, each cited where it is defined.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..geometry.semantic import BARRIER, KERB, LANE_MARKING, ROAD, SIDEWALK, TERRAIN
from ..geometry.transforms import pose_matrix
from ..osi.ground_truth import (
    DASH_CONTINUE,
    DASH_END,
    DASH_GAP,
    DASH_START,
    BoundaryLine,
    LaneStrip,
    PlacedThing,
    RoadGroundTruth,
)
from .lines import (
    SAME_POINT_M,
    aligned,
    arc_length,
    chain,
    clean,
    cut,
    fill_polygon,
    footprint,
    kept,
    left_normals,
    loft,
    offset,
    ribbon,
    sweep,
)
from .nearest import PointIndex
from .shapes import MeshBuilder, box, tile, unit_icosphere

# ------------------------------------------------------------------------------------------------ standard values

#: lane width (m) where a lane has neither boundaries nor neighbours to take it from: 3.5 m, the standard lane of
#: German rural roads and motorways (RAA 2008 / RAL 2012, 3.50–3.75 m) and close to AASHTO's 12 ft (3.66 m)
DEFAULT_LANE_WIDTH_M = 3.5
#: paint width (m) of a line whose points give none: RMS-1 (FGSV, 1993) narrow line on roads other than motorways,
#: 0.12 m (motorways 0.15 m); MUTCD 2009 §3A.06: a normal line is 4–6 in (0.10–0.15 m) wide
DEFAULT_LINE_WIDTH_M = 0.12
#: how far paint stands above the surface under it (m): thermoplastic road marking is ~3 mm thick (EN 1436 profiled
#: markings more); 5 mm keeps it apart from the surface in float32 at any range a lidar reaches (60 µm at 1 km)
PAINT_LIFT_M = 0.005
#: dash and gap (m) of a dashed line whose trace says neither: RMS-1 (FGSV 1993): guide lines 1:2, on motorways
#: 6 m : 12 m; for the United States (ISO 3166 840) MUTCD 2009 §3A.06: 10 ft lines, 30 ft gaps (3.05 m : 9.14 m)
STANDARD_DASHES_M = {840: (3.048, 9.144)}
DEFAULT_DASH_M = (6.0, 12.0)
#: kerb height (m) where a CURB's points give none: DIN 483 kerbs are set with a 10–15 cm reveal, AASHTO vertical
#: curbs are 150–200 mm; 0.15 m taken
DEFAULT_CURB_HEIGHT_M = 0.15
#: kerbstone width (m) where the points give none: DIN 483 "Hochbord" H 15×30, 15 cm
DEFAULT_CURB_WIDTH_M = 0.15
#: guard rail: W-beam depth 312 mm and corrugation 83 mm (AASHTO M 180 class A), rail top 0.75 m above the road
#: where the points give no height (EN 1317 systems and AASHTO's 27¾–31 in), posts every 2 m (German ESP and
#: AASHTO's 6 ft 3 in, 1.905 m), C-posts 100 × 50 mm
RAIL_DEPTH_M, RAIL_BULGE_M, DEFAULT_RAIL_TOP_M = 0.312, 0.083, 0.75
RAIL_POST_SPACING_M, RAIL_POST_SIZE_M = 2.0, (0.05, 0.1)
#: concrete safety-shape barrier (New Jersey shape, AASHTO Roadside Design Guide): 32 in (0.81 m) high, 24 in
#: (0.61 m) at the base, 6 in (0.15 m) at the top, breaking slope 13 in (0.33 m) above the road
JERSEY_PROFILE_M = np.array([[0.305, 0.0], [0.18, 0.075], [0.125, 0.33], [0.075, 0.81], [-0.075, 0.81],
                             [-0.125, 0.33], [-0.18, 0.075], [-0.305, 0.0]])
#: walls where the points give no height (m): noise barriers 3 m (assumed: German ZTV-Lsw walls are 2–6 m), other
#: structures 1 m (assumed); thickness where they give no width: 0.15 m panels, 0.3 m structures (assumed)
DEFAULT_WALL = {"SOUND_BARRIER": (3.0, 0.15), "STRUCTURE": (1.0, 0.3)}
#: Botts' dots: ceramic domes 4 in (0.10 m) across, about 0.7 in (18 mm) high (Caltrans standard plan A20, assumed)
BOTTS_DOT_RADIUS_M, BOTTS_DOT_HEIGHT_M = 0.05, 0.018
#: the surfaces are densified to at most this point spacing along a lane (m): the lane's middle is then near a
#: point of the road, which :mod:`.terrain` asks to keep ground from running onto the road
MAX_SPACING_M = 4.0
#: a trace's dash segments count as a pattern when dashes and gaps each stay within this share of their mean and
#: differ from each other by more than DASH_GAP_CONTRAST (assumed: tolerant of a scenario tool's rounding, strict
#: enough to tell a dash pattern from a line broken by the tool's own sampling)
DASH_STEADY_SHARE = 0.25
DASH_GAP_CONTRAST = 0.1
#: lane widths (m) taken from the centre lines of neighbours only within these bounds (assumed: narrower is a
#: mistake in the trace, wider two lanes apart; standard lanes are 2.75–3.75 m, RAA 2008 / AASHTO)
LANE_WIDTH_BOUNDS_M = (0.5, 10.0)
#: samples across a W-beam's depth for its profile (a smooth corrugation at lidar ranges; assumed)
RAIL_PROFILE_SAMPLES = 13
#: a rail post stands this far behind the beam and this far below its top (m; assumed: C-posts bolted behind the
#: beam through a block-out, AASHTO M 180 drawings)
RAIL_POST_SETBACK_M = 0.01
RAIL_POST_BELOW_TOP_M = 0.05

# ------------------------------------------------------------------------------------------------ materials
#: IR material of a lane by OSI subtype (OSI follows OpenDRIVE 1.6's lane types): paved lanes asphalt, sidewalks
#: concrete paving, BORDER ("soft border at the edge of the road") gravel, medians grass, rail track ballast
#: gravel; by type where the subtype says nothing
LANE_MATERIALS = {"SIDEWALK": "concrete", "CURB": "concrete", "BORDER": "gravel", "MEDIAN": "grass",
                  "RAIL": "gravel", "TRAM": "gravel"}
LANE_TYPE_MATERIALS = {"NONDRIVING": "concrete"}
#: ground named by a boundary that ends the road (OSI LaneBoundary TYPE_*_EDGE)
EDGE_MATERIALS = {"GRASS_EDGE": "grass", "GRAVEL_EDGE": "gravel", "SOIL_EDGE": "soil", "SNOW_EDGE": "snow"}
#: ground past the road where nothing names it
DEFAULT_GROUND = "grass"
#: lane kinds a kerb never lifts (the carriageway is the low side)
CARRIAGEWAY = frozenset({"DRIVING", "INTERSECTION"})
#: lane subtypes that are a semantic class of their own (docs/world.md#labels); any other lane is road, or terrain
#: where its surface is one of GROUND_MATERIALS (a grass median, a gravel border or track bed)
LANE_SEMANTIC = {"SIDEWALK": SIDEWALK, "CURB": KERB}
GROUND_MATERIALS = frozenset({"grass", "gravel", "soil", "snow"})


def ir(name: str) -> str:
    """The visual material name that names IR material ``name`` itself (:mod:`lidar_fmu.physics.materials`)."""
    return f"ir:{name}"


def paint_material(color: str) -> str:
    return ir("road_marking_yellow" if color in ("YELLOW", "ORANGE") else "road_marking_white")


# ------------------------------------------------------------------------------------------------ result


@dataclass
class RoadEdge:
    """Where the road ends: a polyline, the horizontal direction away from the road at each point, the height
    the ground starts at there and what it is."""

    points: np.ndarray  # (N, 3)
    outward: np.ndarray  # (N, 3) horizontal, unit (or stretched at corners)
    lift_m: float
    material: str
    #: the end of a lane (from its left side's end to its right side's): the ground goes on straight ahead
    cap: bool = False


@dataclass
class Road:
    """What :func:`build_road` made: the shapes (on ``builder``), the road's points (surface vertices and lines, to
    find the ground under signs and where terrain must stop), its outer edges and the problems met."""

    builder: MeshBuilder
    points: np.ndarray  # (P, 3)
    edges: list[RoadEdge] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class _LaneSides:
    lane: LaneStrip
    left: np.ndarray
    right: np.ndarray
    #: the height of the kerb the lane stands behind (m; 0: none), and that kerb's points: the low side's heights
    lift_m: float = 0.0
    kerb: np.ndarray | None = None
    #: how far each side is raised above its points (m): the kerb's height less what the points already stand above
    #: the kerb's foot (a trace that gives a sidewalk's height in its points is not lifted twice)
    left_lift_m: float = 0.0
    right_lift_m: float = 0.0

    def side_lift(self, line_id: int) -> float:
        """How far the side of this lane that boundary ``line_id`` bounds is raised (m)."""
        return self.left_lift_m if line_id in self.lane.left_boundary_ids else self.right_lift_m


# ------------------------------------------------------------------------------------------------ dashes


def standard_dashes(country_code: int) -> tuple[float, float]:
    """(dash, gap) m of a dashed line in the country (ISO 3166-1 numeric) whose trace gives no dashes."""
    return STANDARD_DASHES_M.get(int(country_code), DEFAULT_DASH_M)


def dash_intervals(line: BoundaryLine, s: np.ndarray, country_code: int, problems: list[str],
                   span_m: tuple[float, float] | None = None) -> np.ndarray:
    """(K, 2) arc-length intervals (m) of a dashed line's dashes (``span_m``: only those within this stretch of
    arc length, cut to it: the standard pattern of a long line is then laid out there alone).

    The points' ``dash`` states where given (a dash runs from a DASH_START over DASH_CONTINUE points to a DASH_END);
    else OSI's rule for dashed lines, "one BoundaryPoint at the start and another at the end of each dashed line
    segment", when the points follow it (segments that alternate between two lengths, or one dash); else (points
    that only sample the line, evenly) the country's standard pattern from the first point on.
    """
    states = line.dash
    if np.isin(states, (DASH_START, DASH_CONTINUE, DASH_END, DASH_GAP)).any():
        intervals, ok = _dashes_by_state(states, s)
        if ok:
            return _within(intervals, span_m)
        problems.append(f"lane_boundary {line.id}: dash states out of order (a DASH_END without its DASH_START, or "
                        "a DASH_START inside a dash); its dashes are placed by OSI's point rule instead")
    segments = np.diff(s)
    if len(s) % 2 == 0 and (len(segments) == 1 or _alternating(segments)):
        return _within(np.column_stack([s[0::2], s[1::2]]), span_m)
    dash, gap = standard_dashes(country_code)
    first, last = s[0], s[-1]
    if span_m is not None:  # the pattern's dashes from the one that reaches into the span on, as the whole line has them
        first = s[0] + max(0.0, np.floor((span_m[0] - s[0]) / (dash + gap))) * (dash + gap)
        last = min(last, span_m[1])
    starts = np.arange(first, last, dash + gap)
    return _within(np.column_stack([starts, np.minimum(starts + dash, s[-1])]), span_m)


def _within(intervals: np.ndarray, span_m: tuple[float, float] | None) -> np.ndarray:
    """The intervals that reach into ``span_m``, cut to it (all of them where it is None)."""
    if span_m is None:
        return intervals
    cut_to = np.clip(intervals, *span_m)
    return cut_to[cut_to[:, 1] > cut_to[:, 0]]


def _alternating(segments: np.ndarray) -> bool:
    """Do the segments alternate between a dash length and a different gap length (each steady within 25 %)?"""
    dashes, gaps = segments[0::2], segments[1::2]
    if len(gaps) == 0:
        return False
    steady = (np.ptp(dashes) <= DASH_STEADY_SHARE * dashes.mean()) and (np.ptp(gaps) <= DASH_STEADY_SHARE * gaps.mean())
    return bool(steady and abs(dashes.mean() - gaps.mean()) > DASH_GAP_CONTRAST * max(dashes.mean(), gaps.mean()))


def _dashes_by_state(states: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, bool]:
    out, start = [], None
    for k, state in enumerate(states.tolist()):
        if state == DASH_START:
            if start is not None:
                return np.zeros((0, 2)), False
            start = s[k]
        elif state == DASH_END:
            if start is None:
                return np.zeros((0, 2)), False
            out.append((start, s[k]))
            start = None
        elif state == DASH_GAP and start is not None:
            return np.zeros((0, 2)), False
    if start is not None:  # a dash that runs to the end of the line
        out.append((start, s[-1]))
    return np.array(out, np.float64).reshape(-1, 2), True


# ------------------------------------------------------------------------------------------------ lanes


def _densified(points: np.ndarray, spacing_m: float = MAX_SPACING_M) -> np.ndarray:
    """The polyline with points added so no two follow each other farther apart than ``spacing_m``."""
    if len(points) < 2:
        return points
    s = arc_length(points)
    extra = np.ceil(np.diff(s) / spacing_m).astype(np.int64)
    if (extra <= 1).all():
        return points
    # each segment i gets extra[i] stations at its own fractions k / extra[i], k = 0 … extra[i] − 1
    segment = np.repeat(np.arange(len(extra)), extra)
    k = np.arange(len(segment)) - np.repeat(np.cumsum(extra) - extra, extra)
    t = np.concatenate([s[segment] + np.diff(s)[segment] * k / extra[segment], s[-1:]])
    return np.column_stack([np.interp(t, s, points[:, k]) for k in range(3)])


def _lane_width(lane: LaneStrip, centerlines: dict[int, np.ndarray]) -> float:
    """Twice the median half-distance to the lane's neighbours' centerlines, else the default width."""
    own = lane.centerline_m
    widths = []
    for other in lane.left_lane_ids + lane.right_lane_ids:
        line = centerlines.get(other)
        if line is None or not len(line):
            continue
        # each point's nearest neighbour point from a spatial index (memory and time as the points, not their
        # product), searched only as far as a median still kept can need: a gap past twice the widest width kept
        # stands above that median (and one of two middle gaps past it puts their mean above the bound too)
        gap, _ = PointIndex(line).nearest(own, 2 * LANE_WIDTH_BOUNDS_M[1])
        widths.append(float(np.median(gap)))
    good = [w for w in widths if LANE_WIDTH_BOUNDS_M[0] <= w <= LANE_WIDTH_BOUNDS_M[1]]
    return float(np.median(good)) if good else DEFAULT_LANE_WIDTH_M


def _sides(road: RoadGroundTruth, problems: list[str]) -> list[_LaneSides]:
    lines = {b.id: clean(b.position_m) for b in road.boundaries}
    centerlines = {lane.id: clean(lane.centerline_m) for lane in road.lanes}
    out = []
    for lane in road.lanes:
        missing = [i for i in lane.left_boundary_ids + lane.right_boundary_ids if i not in lines]
        left = chain([lines[i] for i in lane.left_boundary_ids if i in lines])
        right = chain([lines[i] for i in lane.right_boundary_ids if i in lines])
        centre = centerlines[lane.id]
        if (len(left) < 2 or len(right) < 2) and len(centre) >= 2:
            if len(left) >= 2:  # one side known: the other is its mirror image in the centerline
                right = _mirror(aligned(centre, left), centre)
            elif len(right) >= 2:
                left = _mirror(aligned(centre, right), centre)
            else:
                half = 0.5 * _lane_width(lane, centerlines)
                left, right = offset(centre, half), offset(centre, -half)
        named = f" (it names boundaries the ground truth does not have, or that were left out: {missing[:5]})" \
            if missing else ""
        if len(left) < 2 or len(right) < 2:
            problems.append(f"lane {lane.id}: no usable boundary or centerline on "
                            f"{'both sides' if len(left) < 2 and len(right) < 2 else 'one side'}{named}; no surface")
            continue
        if missing:
            problems.append(f"lane {lane.id}{named}; built from the others")
        left = _densified(left)
        out.append(_LaneSides(lane, left, _densified(aligned(left, right))))
    return out


def _mirror(side: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """The other side of a lane whose one side and centerline are known: the side reflected through the centerline
    (each side point through the centerline's point at the same share of its length)."""
    t_side, t_centre = arc_length(side), arc_length(centre)
    t = t_side / max(t_side[-1], 1e-9) * t_centre[-1]
    on_centre = np.column_stack([np.interp(t, t_centre, centre[:, k]) for k in range(3)])
    return 2 * on_centre - side


def _lane_material(lane: LaneStrip, edge_kinds: set[str]) -> str:
    for kind in edge_kinds:  # a non-driving lane a GRASS_EDGE (…) bounds is that ground
        if kind in EDGE_MATERIALS and lane.kind not in CARRIAGEWAY:
            return EDGE_MATERIALS[kind]
    return LANE_MATERIALS.get(lane.subtype) or LANE_TYPE_MATERIALS.get(lane.kind, "asphalt")


def _lane_semantic(lane: LaneStrip, material: str) -> int:
    """A lane's semantic class: its subtype's (sidewalk, kerb), else terrain on bare ground, else road."""
    return LANE_SEMANTIC.get(lane.subtype, TERRAIN if material in GROUND_MATERIALS else ROAD)


# ------------------------------------------------------------------------------------------------ sides of lines


def _side_of(line: np.ndarray, reference: np.ndarray) -> float:
    """+1 when ``reference`` (a polyline) lies to the left of ``line``, −1 to its right (at their closest points)."""
    k = len(line) // 2
    p, n = line[k], left_normals(line)[k]
    q = reference[np.argmin(np.linalg.norm(reference[:, :2] - p[:2], axis=1))]
    return 1.0 if float(np.dot(q - p, n)) >= 0 else -1.0


def _lanes_beside(road: RoadGroundTruth, sides: list[_LaneSides]) -> dict[int, dict[float, list[_LaneSides]]]:
    """Per boundary id: the lanes on its left (+1) and on its right (−1)."""
    lines = {b.id: clean(b.position_m) for b in road.boundaries}
    out: dict[int, dict[float, list[_LaneSides]]] = {}
    for ls in sides:
        for ids, other in ((ls.lane.left_boundary_ids, ls.right), (ls.lane.right_boundary_ids, ls.left)):
            for i in ids:
                if i in lines and len(lines[i]) >= 2:
                    out.setdefault(i, {1.0: [], -1.0: []})[_side_of(lines[i], other)].append(ls)
    return out


def _height(line: BoundaryLine, default: float) -> float:
    given = line.height_m[line.height_m > 0]
    return float(np.median(given)) if len(given) else default


def _width(line: BoundaryLine, default: float) -> float:
    given = line.width_m[line.width_m > 0]
    return float(np.median(given)) if len(given) else default


def _lift_lanes(road: RoadGroundTruth, sides: list[_LaneSides], beside) -> dict[int, float]:
    """Kerbs lift what lies on their high side — the side away from the nearest driving lane — by their height:
    the lanes there (a sidewalk, a verge, whatever their type) or, at the road's edge, the ground beyond; the lift
    carries on across other boundaries to the non-driving lanes beyond. → per kerb id, the side that is high (+1
    left, −1 right, 0 neither: a free-standing kerbstone, where no driving lane says which side is low)."""
    by_id = {b.id: b for b in road.boundaries}
    carriageway = [_middle(ls.left, ls.right) for ls in sides if ls.lane.kind in CARRIAGEWAY]
    carriageway_points = np.concatenate(carriageway) if carriageway else np.zeros((0, 3))
    high: dict[int, float] = {}
    for line_id, lanes in beside.items():
        line = by_id[line_id]
        if line.kind != "CURB":
            continue
        side = 0.0
        points = clean(line.position_m)
        if len(carriageway_points) and len(points) >= 2:
            side = -_side_of(points, carriageway_points)
        high[line_id] = side
        height = _height(line, DEFAULT_CURB_HEIGHT_M)
        if side:
            for ls in lanes[side]:
                if height > ls.lift_m:
                    ls.lift_m, ls.kerb = height, points
    # the lift carries on to non-driving neighbours across boundaries that are not kerbs
    changed = True
    while changed:
        changed = False
        for line_id, lanes in beside.items():
            if by_id[line_id].kind == "CURB":
                continue
            group = lanes[1.0] + lanes[-1.0]
            top = max(group, key=lambda ls: ls.lift_m, default=None)
            if top is None:
                continue
            for ls in group:
                if ls.lane.kind not in CARRIAGEWAY and ls.lift_m < top.lift_m:
                    ls.lift_m, ls.kerb, changed = top.lift_m, top.kerb, True
    for ls in sides:
        if ls.lift_m > 0 and ls.kerb is not None:
            ls.left_lift_m, ls.right_lift_m = (_side_lift(side, ls.kerb, ls.lift_m) for side in (ls.left, ls.right))
            ls.left = ls.left + (0.0, 0.0, ls.left_lift_m)
            ls.right = ls.right + (0.0, 0.0, ls.right_lift_m)
    return high


def _side_lift(side: np.ndarray, kerb: np.ndarray, height_m: float) -> float:
    """How far a lane's side behind a kerb of ``height_m`` is raised: the kerb's height less how far the side's
    points already stand above the kerb's foot (their median height over the nearest kerb point), within 0 … the
    kerb's height. A trace whose points give the sidewalk's height has it lifted once, not twice."""
    _, nearest = PointIndex(kerb).nearest(side)
    above = float(np.median(side[:, 2] - kerb[nearest, 2]))
    return float(np.clip(height_m - above, 0.0, height_m))


# ------------------------------------------------------------------------------------------------ building


def build_road(road: RoadGroundTruth, builder: MeshBuilder | None = None) -> Road:
    """Shapes of ``road`` on ``builder`` (a new one if None), and its points, outer edges and problems."""
    builder = builder if builder is not None else MeshBuilder()
    problems = list(road.problems)
    sides = _sides(road, problems)
    beside = _lanes_beside(road, sides)
    kerb_high = _lift_lanes(road, sides, beside)
    kinds: dict[int, str] = {}
    for b in road.boundaries:  # the first boundary of an id names its kind
        kinds.setdefault(b.id, b.kind)
    edge_kinds: dict[int, set[str]] = {}
    for line_id, lanes in beside.items():
        for ls in lanes[1.0] + lanes[-1.0]:
            edge_kinds.setdefault(ls.lane.id, set()).add(kinds.get(line_id, ""))
    points = []
    for ls in sides:
        vertices, faces = loft(ls.left, ls.right)
        material = _lane_material(ls.lane, edge_kinds.get(ls.lane.id, set()))
        builder.add((vertices, faces), ir(material), ls.lane.id, _lane_semantic(ls.lane, material))
        points.append(vertices)
        points.append(_middle(ls.left, ls.right))
    _fill_gaps(builder, sides, edge_kinds, points)
    lifts = {line_id: _lifts(line_id, lanes) for line_id, lanes in beside.items()}
    for line in road.boundaries:
        line_points = clean(line.position_m)
        if len(line_points) < 2:
            problems.append(f"lane_boundary {line.id}: its {len(line.position_m)} points lie within "
                            f"{SAME_POINT_M * 1e3:g} mm of one another (no length); left out")
            continue
        points.append(_densified(line_points))
        _boundary(builder, line, line_points, lifts.get(line.id, (0.0, 0.0)), kerb_high.get(line.id, 0.0),
                  beside.get(line.id), road.country_code, problems)
    for marking in road.markings:
        _marking(builder, marking, problems)
    all_points = np.concatenate(points) if points else np.zeros((0, 3))
    return Road(builder, all_points, _edges(road, sides, beside, kerb_high), problems)


#: neighbouring lanes whose facing sides lie apart by more than GAP_MIN_M and less than GAP_MAX_M (m): the road
#: between them is paved (a double line's two lines are each its own lane's boundary, 0.1–0.5 m apart)
GAP_MIN_M, GAP_MAX_M = 0.02, 2.0


def _fill_gaps(builder: MeshBuilder, sides: list[_LaneSides], edge_kinds, points: list) -> None:
    """Pave the strip between a lane and its right-hand neighbour where their facing sides lie apart (labelled as
    the lane on the strip's left)."""
    by_id = {ls.lane.id: ls for ls in sides}
    for ls in sides:
        for neighbour_id in ls.lane.right_lane_ids:
            other = by_id.get(neighbour_id)
            if other is None:
                continue
            facing = other.left if ls.lane.id in other.lane.left_lane_ids or not other.lane.left_lane_ids else None
            if facing is None:
                continue
            probe = ls.right[:: max(1, len(ls.right) // 8)]
            gap = np.median(np.linalg.norm(probe[:, None, :2] - facing[None, :, :2], axis=2).min(axis=1))
            if not GAP_MIN_M < gap < GAP_MAX_M:
                continue
            vertices, faces = loft(ls.right, aligned(ls.right, facing))  # both sides at their lanes' heights
            material = _lane_material(ls.lane, edge_kinds.get(ls.lane.id, set()))
            builder.add((vertices, faces), ir(material), ls.lane.id, _lane_semantic(ls.lane, material))
            points.append(vertices)


def _middle(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Points along a lane's middle (its sides matched by their share of length)."""
    tl, tr = arc_length(left), arc_length(right)
    if tl[-1] <= 0 or tr[-1] <= 0:
        return np.zeros((0, 3))
    on_right = np.column_stack([np.interp(tl / tl[-1], tr / tr[-1], right[:, k]) for k in range(3)])
    return 0.5 * (left + on_right)


def _lifts(line_id: int, lanes: dict[float, list[_LaneSides]]) -> tuple[float, float]:
    """(how far the lanes on the left are raised along boundary ``line_id``, those on the right): the ground each
    side stands on."""
    left, right = (max((ls.side_lift(line_id) for ls in lanes[side]), default=0.0) for side in (1.0, -1.0))
    return left, right


def _boundary(builder: MeshBuilder, line: BoundaryLine, points: np.ndarray, lifts: tuple[float, float],
              kerb_high: float, lanes, country_code: int, problems: list[str]) -> None:
    kind, osi_id = line.kind, line.id
    low = min(lifts)
    if kind in ("SOLID_LINE", "DASHED_LINE"):
        width = np.where(line.width_m > 0, line.width_m, DEFAULT_LINE_WIDTH_M)[kept(line.position_m)]
        lifted = points + (0.0, 0.0, low)
        if kind == "SOLID_LINE":
            builder.add(ribbon(lifted, width, PAINT_LIFT_M), paint_material(line.color), osi_id, LANE_MARKING)
            return
        s = arc_length(lifted)
        for start, end in dash_intervals(line, arc_length(line.position_m), country_code, problems):
            piece = cut(lifted, s, float(start), float(end))
            if len(piece) >= 2:
                builder.add(ribbon(piece, np.interp(arc_length(piece) + start, s, width), PAINT_LIFT_M),
                            paint_material(line.color), osi_id, LANE_MARKING)
    elif kind == "BOTTS_DOTS":
        dome = unit_icosphere(1)
        upper = dome[0][:, 2] >= 0  # the dome: the upper half of a sphere, flattened
        vertices = dome[0] * (BOTTS_DOT_RADIUS_M, BOTTS_DOT_RADIUS_M, BOTTS_DOT_HEIGHT_M)
        keep = upper[dome[1]].all(axis=1)
        builder.add(tile((vertices, dome[1][keep]), points + (0.0, 0.0, low)), ir("plastic_white"), osi_id,
                    LANE_MARKING)
    elif kind == "CURB":
        height = _height(line, DEFAULT_CURB_HEIGHT_M)
        base = points + (0.0, 0.0, low)
        if kerb_high:  # a step: the face from the low side up to the lifted ground
            builder.add(sweep(base, [[0.0, 0.0], [0.0, height]]), ir("concrete"), osi_id, KERB)
        else:  # a kerbstone standing free between two lanes of one kind
            half = 0.5 * _width(line, DEFAULT_CURB_WIDTH_M)
            profile = [[half, 0.0], [half, height], [-half, height], [-half, 0.0]]
            builder.add(sweep(base, profile), ir("concrete"), osi_id, KERB)
    elif kind == "GUARD_RAIL":
        _guard_rail(builder, line, points + (0.0, 0.0, low), lanes, osi_id)
    elif kind == "BARRIER":
        scale = _height(line, JERSEY_PROFILE_M[:, 1].max()) / JERSEY_PROFILE_M[:, 1].max()
        width = _width(line, 2 * JERSEY_PROFILE_M[0, 0]) / (2 * JERSEY_PROFILE_M[0, 0])
        builder.add(sweep(points + (0.0, 0.0, low), JERSEY_PROFILE_M * (width, scale), closed=True),
                    ir("concrete"), osi_id, BARRIER)
    elif kind in DEFAULT_WALL:
        height_default, thickness_default = DEFAULT_WALL[kind]
        height, half = _height(line, height_default), 0.5 * _width(line, thickness_default)
        profile = [[half, 0.0], [half, height], [-half, height], [-half, 0.0]]
        builder.add(sweep(points + (0.0, 0.0, low), profile, closed=True), ir("concrete"), osi_id, BARRIER)


def _guard_rail(builder: MeshBuilder, line: BoundaryLine, points: np.ndarray, lanes, osi_id: int) -> None:
    """A W-beam facing the lanes beside it, on C-posts behind it every RAIL_POST_SPACING_M."""
    toward = 1.0
    if lanes is not None and not lanes[1.0] and lanes[-1.0]:
        toward = -1.0
    top = _height(line, DEFAULT_RAIL_TOP_M)
    z = np.linspace(-RAIL_DEPTH_M, 0.0, RAIL_PROFILE_SAMPLES) + top
    bulge = RAIL_BULGE_M * 0.5 * (1 - np.cos(4 * np.pi * (z - z[0]) / RAIL_DEPTH_M))
    builder.add(sweep(points, np.column_stack([toward * bulge, z])), ir("steel_galvanized"), osi_id, BARRIER)
    s = arc_length(points)
    stations = np.arange(0.5 * RAIL_POST_SPACING_M, s[-1], RAIL_POST_SPACING_M)
    if not len(stations):
        return
    at = np.column_stack([np.interp(stations, s, points[:, k]) for k in range(3)])
    normal = left_normals(points)
    n = np.column_stack([np.interp(stations, s, normal[:, k]) for k in range(3)])
    post_height = top - RAIL_POST_BELOW_TOP_M
    centre = at - n * toward * (RAIL_POST_SIZE_M[1] / 2 + RAIL_POST_SETBACK_M) + (0.0, 0.0, post_height / 2)
    yaw = np.arctan2(n[:, 1], n[:, 0])
    for c, a in zip(centre, yaw):
        builder.add(box(c, (RAIL_POST_SIZE_M[1], RAIL_POST_SIZE_M[0], post_height), float(a)),
                    ir("steel_galvanized"), osi_id, BARRIER)


def _marking(builder: MeshBuilder, marking: PlacedThing, problems: list[str]) -> None:
    """A road marking's base polygon (else its box's footprint) as paint on the road."""
    length, width, height = marking.dimension_m
    polygon = footprint(marking.polygon_m, length, width, f"road_marking {marking.id}", problems)
    if polygon is None:
        problems.append(f"road_marking {marking.id}: neither a base polygon nor a size; left out")
        return
    faces = fill_polygon(polygon)
    local = np.column_stack([polygon, np.full(len(polygon), -0.5 * height + PAINT_LIFT_M)])
    pose = pose_matrix(marking.position_m, marking.orientation_rad)
    vertices = local @ pose[:3, :3].T + pose[:3, 3]
    builder.add((vertices, faces), paint_material(marking.color), marking.id, LANE_MARKING)


# ------------------------------------------------------------------------------------------------ edges


def _edges(road: RoadGroundTruth, sides: list[_LaneSides], beside, kerb_high: dict[int, float]) -> list[RoadEdge]:
    """Outer edges: boundaries with lanes on one side only (ground continues on the other), and lane sides built
    from a centerline where the lane has no neighbour on that side."""
    by_id = {b.id: b for b in road.boundaries}
    known = {ls.lane.id for ls in sides}
    # boundaries with a neighbour lane across them (a double line's two lines, each its own lane's): no edge
    facing = {i for ls in sides for ids, neighbours in ((ls.lane.left_boundary_ids, ls.lane.left_lane_ids),
                                                        (ls.lane.right_boundary_ids, ls.lane.right_lane_ids))
              if any(n in known for n in neighbours) for i in ids}
    edges = []
    for line_id, lanes in beside.items():
        if bool(lanes[1.0]) == bool(lanes[-1.0]) or line_id in facing:
            continue
        inside = 1.0 if lanes[1.0] else -1.0
        line = by_id[line_id]
        points = clean(line.position_m)
        lift = max(ls.side_lift(line_id) for ls in lanes[inside])
        if line.kind == "CURB" and kerb_high.get(line_id) == -inside:
            lift += _height(line, DEFAULT_CURB_HEIGHT_M)
        material = EDGE_MATERIALS.get(line.kind, DEFAULT_GROUND)
        edges.append(RoadEdge(points, -inside * left_normals(points), lift, material))
    referenced = set(beside)
    for ls in sides:
        lane = ls.lane
        for ids, neighbours, side, sign in ((lane.left_boundary_ids, lane.left_lane_ids, ls.left, 1.0),
                                            (lane.right_boundary_ids, lane.right_lane_ids, ls.right, -1.0)):
            if any(i in referenced for i in ids) or any(n in known for n in neighbours):
                continue  # a neighbour the ground truth does not have leaves the side free: the ground goes on
            inside = _side_of(side, ls.right if sign > 0 else ls.left)
            edges.append(RoadEdge(side, -inside * left_normals(side), 0.0, DEFAULT_GROUND))  # side: raised already
        for end, other in ((0, 1), (-1, -2)):  # where the lane begins and where it ends, looking out of it
            across = _densified(np.array([ls.left[end], ls.right[end]]), 1.0)
            direction = ls.left[end] - ls.left[other] + ls.right[end] - ls.right[other]
            direction[2] = 0.0
            length = np.linalg.norm(direction)
            if length > 0 and np.linalg.norm(across[-1] - across[0]) > 0:
                edges.append(RoadEdge(across, np.broadcast_to(direction / length, across.shape).copy(), 0.0,
                                      DEFAULT_GROUND, cap=True))
    return edges

"""The street around the road, on request: frontages, trees, lights, poles, fences, hedges and barriers built from
the road's own outer edges (``environment: urban | suburban | rural | highway``; docs/world.md, "The street
around the road").

:func:`build_street` walks every outer edge of a :class:`~.road.Road` (not the ends of lanes) and places a
style's parts at setbacks from it: a part whose footprint would come onto the road's surface (a lane, a sidewalk,
a kerb, another road at a junction), into a ground-truth object's box or onto a part already placed is left out,
so frontages break at junctions by themselves. Every random choice (widths, storeys, gaps, driveways) comes from
one generator seeded by the road's content (:func:`street_seed`): the same road gives the same street, byte for
byte. Each part carries its semantic class beside its material (:class:`StreetPart`).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..geometry.scene import Mesh
from ..geometry.semantic import SEMANTIC_CLASSES
from .lines import arc_length
from .road import Road, RoadEdge, ir
from .shapes import MeshBuilder, box, cylinder_between, leaf_cloud, quads

#: the styles ``environment`` may name
STREET_STYLES = ("urban", "suburban", "rural", "highway")

# ------------------------------------------------------------------------------------------------ standard values
#: storey height (m): 3.0 m floor to floor in housing (2.5 m clear room height, DIN 18011 / the German
#: Musterbauordnung's 2.40 m, plus a 0.2–0.3 m slab and finish); the ground floor of a shop front 4.0 m (assumed)
STOREY_M, GROUND_STOREY_M = 3.0, 4.0
#: a window's sill and head above its storey's floor (m): sill 0.9 m (DIN 18065's 0.90 m parapet for low
#: windows), head 2.3 m (assumed: a 2.5 m room less the lintel)
SILL_M, HEAD_M = 0.9, 2.3
#: a window bay's width and the pier between windows (m; assumed: 1.2–1.5 m windows in 2.5–3 m bays of
#: residential façades)
BAY_M, PIER_M = 2.6, 1.1
#: how far a window's glass sits behind the façade's face (m): the reveal of a window in a 0.3 m wall (assumed)
WINDOW_RECESS_M, FACADE_DEPTH_M = 0.15, 0.3
#: the rooms behind the windows (m): a beam through the glass ends on the building's core this far in (assumed: a
#: room 4–5 m deep)
ROOM_DEPTH_M = 4.5
#: walls reach this far below the ground they stand on (m), so a slope never shows a gap under them (assumed)
FOUNDATION_M = 0.5
#: nothing lower than this (m above the road) may stand over the road's surface: 4.0 m, the EU's highest vehicle
#: (Directive 96/53/EC), plus 0.5 m (assumed)
CLEARANCE_HEIGHT_M = 4.5
#: a footprint keeps this far (m) off the road's surface and every ground-truth object's box (assumed)
SURFACE_MARGIN_M = 0.2
#: the cells of the hash that finds the boxes and footprints near a new one (m; assumed: about a building's width,
#: so a footprint touches a few cells and a cell holds a few shapes)
SHAPE_CELL_M = 16.0
#: parts placed may touch: a footprint overlapping one by less than this (m) is still free (float rounding of
#: two buildings side by side)
TOUCH_M = 0.05
#: the road's surface is kept as the square cells of this side (m) that its triangles touch, a footprint as the
#: cells of a lattice this far apart over it: a part keeps SURFACE_MARGIN_M off the road to within a cell, and
#: nothing slips between (assumed: far narrower than any lane or sidewalk)
SURFACE_CELL_M = 0.25
#: outer edges whose ends lie this close (m) and face the same way are one edge to the street: a map cuts its lanes
#: at every crossing and junction (an Argoverse 2 lane segment is 5–30 m), a frontage runs on past the cuts
#: (assumed: within a kerb's width; a map's consecutive segments share their end points)
CHAIN_GAP_M = 0.5
#: ends nearer to one another than this (m) meet at one point, where the tie rule of chained_edges chooses
#: (assumed: a map's rounding of shared end points, far below a kerb's width)
CHAIN_TIE_M = 0.01

#: street lights: poles of 8 m (urban, suburban) and 12 m (highway) at a spacing of 3.5–4 times their height,
#: EN 13201-2's lighting classes M and P met with single-sided layouts (CEN/TR 13201-1; 30 m and 45 m taken);
#: 0.09 m radius (EN 40 steel poles 76–168 mm), an arm of 1.5 m over the road, a 0.6 × 0.3 × 0.15 m luminaire
LIGHT_URBAN = (8.0, 30.0)
LIGHT_HIGHWAY = (12.0, 45.0)
LIGHT_RADIUS_M, LIGHT_ARM_M, LUMINAIRE_M = 0.09, 1.5, (0.6, 0.3, 0.15)
#: utility poles: 10.7 m (35 ft class poles, ANSI O5.1) of 0.14 m radius, spans of 45 m (assumed: US
#: distribution spans are 38–46 m)
UTILITY_POLE = (10.7, 0.14, 45.0)
#: sign posts: a 2.0 m high plate bottom (German StVO VwV: 2.0 m over footways) on a 60.3 mm tube, a 0.6 m plate,
#: one every 60 m (assumed)
SIGN_POST_M, SIGN_PLATE_M, SIGN_SPACING_M = 2.0, 0.6, 60.0
#: trees: 8–14 m tall, crowns 5–8 m across from 3 m up (assumed for medium trees: lime, plane, maple); street
#: trees 8–15 m apart (FLL's "Empfehlungen für Baumpflanzungen": 8–12 m for medium trees), 1.5 m from the kerb,
#: crowns 4–6 m across pruned to clear traffic (CLEARANCE_HEIGHT_M up; EAE 06 asks 4.5 m over carriageways)
TREE_HEIGHT_M, TREE_CROWN_M, TREE_CROWN_BASE_M, TRUNK_RADIUS_M = (8.0, 14.0), (5.0, 8.0), 3.0, 0.15
STREET_TREE_SPACING_M, STREET_TREE_OUT_M, STREET_TREE_CROWN_M = (8.0, 15.0), 1.5, (4.0, 6.0)
#: leaves per m³ of crown and each leaf facet's side (m): 7 facets of 0.3 m per m³ give a beam crossing 4.5 m of
#: crown an optical depth of about 1.4 (7 · 0.09 m² · 0.5 projection · 4.5 m): part passes, part returns (assumed)
LEAF_DENSITY_PER_M3, LEAF_FACET_M = 7.0, 0.3
#: hedges 1.2–1.8 m high, 0.8 m deep (assumed: clipped privet/beech garden hedges); fences 1.2 m with posts every
#: 2.5 m, three rails (assumed: post-and-rail field fences); noise barriers 2–6 m (ZTV-Lsw 06), 4 m taken, 0.15 m
#: panels between posts 4 m apart (ZTV-Lsw's standard 4–5 m post spacing)
HEDGE_M, HEDGE_DEPTH_M = (1.2, 1.8), 0.8
FENCE_M, FENCE_POST_SPACING_M, FENCE_RAILS = 1.2, 2.5, 3
NOISE_BARRIER_M, NOISE_PANEL_M, NOISE_POST_SPACING_M = 4.0, 0.15, 4.0


#: a building that does not fit is tried again (width share, set back farther by m): behind what stands on the
#: sidewalk in front of it, then half as wide (the rest of its width left to the next), then both (assumed)
FRONTAGE_RETRIES = ((1.0, 0.0), (1.0, 1.5), (0.5, 0.0), (0.5, 1.5))
#: no building narrower than this (m; assumed: a narrow row house's plot, 5 m)
MIN_BUILDING_M = 5.0


@dataclass(frozen=True)
class Frontage:
    """How a style's buildings stand: front setback range from the edge (m), width, depth and gap ranges (m),
    storeys, the share of gaps that are driveways/alleys, and whether they have windows on the street."""

    setback_m: tuple[float, float]
    width_m: tuple[float, float]
    depth_m: tuple[float, float]
    storeys: tuple[int, int]
    gap_m: tuple[float, float]
    gap_share: float
    materials: tuple[str, ...]


#: urban: continuous frontages of 3–6 storeys on the back of the sidewalk, a 4 m alley or driveway behind one
#: building in five; 3.0–5.0 m from the kerb: NACTO's Urban Street Design Guide sidewalk zones, a 4–6 ft furniture
#: and planting zone, a 5–7 ft (residential) to 8–12 ft (downtown) pedestrian through zone and a 0–2 ft frontage
#: zone, taken from the residential to the middle of the downtown range (the map may not carry the sidewalk)
URBAN = Frontage((3.0, 5.0), (10.0, 25.0), (12.0, 18.0), (3, 6), (3.5, 5.0), 0.2, ("plaster", "brick", "concrete"))
#: suburban: detached houses of 2 storeys, 10–14 m wide, set back 6–10 m (front yards; assumed, US zoning's
#: 20–30 ft), 5–12 m between them (side yards and driveways)
SUBURBAN = Frontage((6.0, 10.0), (9.0, 14.0), (9.0, 12.0), (2, 2), (5.0, 12.0), 1.0, ("plaster", "brick", "wood"))
#: rural: farmhouses and barns 15–40 m off the road, 40–200 m apart (assumed)
RURAL = Frontage((15.0, 40.0), (10.0, 20.0), (8.0, 14.0), (1, 2), (40.0, 200.0), 1.0, ("plaster", "wood", "brick"))


@dataclass(frozen=True)
class StreetPart:
    """One shape of the street: its visual material (``ir:<IR material>``) and semantic class (a name of
    :mod:`lidar_fmu.geometry`'s semantic classes: building, vegetation, pole, traffic_sign, barrier, terrain)."""

    semantic: str
    material: str
    shape: tuple[np.ndarray, np.ndarray]


def street_seed(road_content: bytes) -> int:
    """The street's seed: a hash of the road's content (the same road gives the same street)."""
    return int.from_bytes(hashlib.blake2b(road_content, digest_size=8).digest(), "little")


def check_street_style(style: str) -> str:
    """``style`` lower-cased if it is one of :data:`STREET_STYLES`, else ''."""
    value = (style or "").strip().lower()
    return value if value in STREET_STYLES else ""


# ------------------------------------------------------------------------------------------------ where parts may go


class Ground:
    """Where a part may stand: off the road's surface (its triangles sampled), off every object's box (by
    SURFACE_MARGIN_M) and off the parts already placed (each kept as its footprint; touching one is allowed, so
    a frontage may run on without gaps). Boxes and footprints are found through a hash of SHAPE_CELL_M cells."""

    def __init__(self, surface: Mesh | None, avoid_boxes: np.ndarray):
        self.surface = _surface_cells(surface) if surface is not None else np.zeros(0, np.int64)
        #: (4, 2) corners of the boxes to keep out of (the first ``boxes``), then of the parts placed
        self.shapes: list[np.ndarray] = []
        self.cells: dict[tuple[int, int], list[int]] = {}
        for shape in np.asarray(avoid_boxes, float).reshape(-1, 4, 2):
            self.take(shape)
        self.boxes = len(self.shapes)

    def free(self, corners: np.ndarray) -> bool:
        """Whether the rectangle ``corners`` (4, 2) stays off the road, the boxes and the parts placed."""
        grown, shrunk = _grown(corners, SURFACE_MARGIN_M), _grown(corners, -TOUCH_M)
        if len(self.surface):
            keys = _cell_keys(_rectangle_samples(grown, SURFACE_CELL_M))
            at = np.minimum(np.searchsorted(self.surface, keys), len(self.surface) - 1)
            if (self.surface[at] == keys).any():
                return False
        near = {i for cell in _cells_of(grown) for i in self.cells.get(cell, ())}
        return not any(_overlap(grown if i < self.boxes else shrunk, self.shapes[i]) for i in near)

    def take(self, corners: np.ndarray) -> None:
        """Claim the rectangle ``corners`` (4, 2): later parts keep off it."""
        shape = np.asarray(corners, float)
        for cell in _cells_of(shape):
            self.cells.setdefault(cell, []).append(len(self.shapes))
        self.shapes.append(shape)


def _cells_of(corners: np.ndarray) -> list[tuple[int, int]]:
    """The SHAPE_CELL_M cells the bounding rectangle of ``corners`` (4, 2) touches."""
    low = np.floor(corners.min(axis=0) / SHAPE_CELL_M).astype(int)
    high = np.floor(corners.max(axis=0) / SHAPE_CELL_M).astype(int)
    return [(i, j) for i in range(low[0], high[0] + 1) for j in range(low[1], high[1] + 1)]


def _surface_cells(mesh: Mesh) -> np.ndarray:
    """The sorted keys (:func:`_cell_keys`) of the SURFACE_CELL_M cells that ``mesh``'s triangles touch (seen from
    above)."""
    triangles = np.ascontiguousarray(np.asarray(mesh.vertices, np.float64)[np.asarray(mesh.faces)][:, :, :2])
    counts = np.zeros(len(triangles), np.int64)
    _touched_cells(triangles, SURFACE_CELL_M, counts, np.zeros(0, np.int64))  # first how many, then which
    keys = np.empty(int(counts.sum()), np.int64)
    _touched_cells(triangles, SURFACE_CELL_M, counts, keys)
    keys.sort()  # (np.unique hashes first: slower on millions)
    return keys[np.r_[True, keys[1:] != keys[:-1]]] if len(keys) else keys


#: a cell key packs the column into the high 32 bits and the row into the low ones, both offset to stay positive
KEY_OFFSET = 1 << 31


def _cell_keys(xy: np.ndarray) -> np.ndarray:
    cells = np.floor(np.asarray(xy, np.float64) / SURFACE_CELL_M).astype(np.int64) + KEY_OFFSET
    return (cells[:, 0] << 32) | cells[:, 1]


@njit(cache=True, nogil=True)
def _touched_cells(triangles, cell, counts, keys):
    """For each triangle (T, 3, 2) the cells whose centre lies within half a cell's diagonal of it: their number
    into ``counts`` where ``keys`` is empty, else their keys into ``keys`` (in the order of ``counts``)."""
    reach = 0.5 * np.sqrt(2.0) * cell
    at = 0
    for t in range(triangles.shape[0]):
        a, b, c = triangles[t, 0], triangles[t, 1], triangles[t, 2]
        x0 = int(np.floor((min(a[0], b[0], c[0]) - reach) / cell))
        x1 = int(np.floor((max(a[0], b[0], c[0]) + reach) / cell))
        y0 = int(np.floor((min(a[1], b[1], c[1]) - reach) / cell))
        y1 = int(np.floor((max(a[1], b[1], c[1]) + reach) / cell))
        n = 0
        for i in range(x0, x1 + 1):
            for j in range(y0, y1 + 1):
                px, py = (i + 0.5) * cell, (j + 0.5) * cell
                if _distance_to_triangle(px, py, a, b, c) <= reach:
                    if keys.shape[0]:
                        keys[at] = ((i + KEY_OFFSET) << 32) | (j + KEY_OFFSET)
                        at += 1
                    n += 1
        counts[t] = n


@njit(cache=True, nogil=True)
def _distance_to_triangle(px, py, a, b, c):
    """Horizontal distance (m) from (px, py) to the triangle a, b, c (0 inside)."""
    d1 = (px - b[0]) * (a[1] - b[1]) - (a[0] - b[0]) * (py - b[1])
    d2 = (px - c[0]) * (b[1] - c[1]) - (b[0] - c[0]) * (py - c[1])
    d3 = (px - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (py - a[1])
    if not ((d1 < 0 or d2 < 0 or d3 < 0) and (d1 > 0 or d2 > 0 or d3 > 0)):
        return 0.0
    return min(_distance_to_segment(px, py, a, b), _distance_to_segment(px, py, b, c),
               _distance_to_segment(px, py, c, a))


@njit(cache=True, nogil=True)
def _distance_to_segment(px, py, a, b):
    ux, uy = b[0] - a[0], b[1] - a[1]
    length2 = ux * ux + uy * uy
    t = 0.0 if length2 <= 0 else min(1.0, max(0.0, ((px - a[0]) * ux + (py - a[1]) * uy) / length2))
    dx, dy = px - a[0] - t * ux, py - a[1] - t * uy
    return np.sqrt(dx * dx + dy * dy)


def _rectangle_samples(corners: np.ndarray, step_m: float) -> np.ndarray:
    """(N, 2) a lattice over the rectangle ``corners`` (4, 2), less than ``step_m`` apart, its rim included."""
    c = np.asarray(corners, float)
    u, v = c[1] - c[0], c[3] - c[0]
    nu = int(np.floor(np.linalg.norm(u) / step_m)) + 1
    nv = int(np.floor(np.linalg.norm(v) / step_m)) + 1
    a, b = np.meshgrid(np.linspace(0, 1, nu + 1), np.linspace(0, 1, nv + 1), indexing="ij")
    return c[0] + a.reshape(-1, 1) * u + b.reshape(-1, 1) * v


def _grown(corners: np.ndarray, margin_m: float) -> np.ndarray:
    centre = corners.mean(axis=0)
    out = corners - centre
    return centre + out + margin_m * np.sign(out) * (np.abs(out) > 0)


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two convex quadrilaterals (4, 2) overlap (separating axes)."""
    for poly in (a, b):
        edges = np.roll(poly, -1, axis=0) - poly
        normals = np.column_stack([-edges[:, 1], edges[:, 0]])
        pa, pb = a @ normals.T, b @ normals.T
        if np.any((pa.max(axis=0) < pb.min(axis=0)) | (pb.max(axis=0) < pa.min(axis=0))):
            return False
    return True


def box_corners(position_m: np.ndarray, yaw_rad: np.ndarray, size_m: np.ndarray) -> np.ndarray:
    """(K, 4, 2) horizontal corners of boxes at ``position_m`` (K, ≥2), turned by ``yaw_rad`` (K,), of (length,
    width) ``size_m`` (K, ≥2): the boxes of ground-truth objects the street keeps out of."""
    position, yaw, size = (np.asarray(position_m, float).reshape(-1, 3)[:, :2], np.asarray(yaw_rad, float).ravel(),
                           np.asarray(size_m, float).reshape(-1, 3)[:, :2])
    signs = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], float) * 0.5
    local = signs[None] * size[:, None, :]
    c, s = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
    return np.stack([position[:, None, 0] + c * local[..., 0] - s * local[..., 1],
                     position[:, None, 1] + s * local[..., 0] + c * local[..., 1]], axis=-1)


# ------------------------------------------------------------------------------------------------ along an edge


@dataclass(frozen=True)
class Station:
    """A place along an edge: the point (on the ground beyond it), the direction along and the one away from the
    road (horizontal, unit)."""

    point: np.ndarray
    along: np.ndarray
    out: np.ndarray

    def at(self, along_m: float, out_m: float, up_m: float = 0.0) -> np.ndarray:
        return self.point + along_m * self.along + out_m * self.out + np.array([0.0, 0.0, up_m])

    def rectangle(self, along_m: tuple[float, float], out_m: tuple[float, float]) -> np.ndarray:
        """(4, 2) corners of the rectangle spanning ``along_m`` × ``out_m`` from here."""
        return np.array([self.at(a, o)[:2] for a, o in ((along_m[0], out_m[0]), (along_m[1], out_m[0]),
                                                          (along_m[1], out_m[1]), (along_m[0], out_m[1]))])


def end_pairs(ends_xy: np.ndarray, reach_m: float) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i < j) of the points ``ends_xy`` (N, 2) within ``reach_m`` of each other, found through a hash of
    cells ``reach_m`` wide: memory grows with the pairs, not with N²."""
    cells = np.floor(ends_xy / reach_m).astype(np.int64)
    cells -= cells.min(axis=0) - 1  # a cell's neighbours keep non-negative coordinates
    rows = int(cells[:, 1].max()) + 2
    key = cells[:, 0] * rows + cells[:, 1]
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    firsts, seconds = [], []
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            lo = np.searchsorted(sorted_key, key + dx * rows + dy, side="left")
            counts = np.searchsorted(sorted_key, key + dx * rows + dy, side="right") - lo
            run = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
            firsts.append(np.repeat(np.arange(len(key)), counts))
            seconds.append(order[np.repeat(lo, counts) + run])
    i, j = np.concatenate(firsts), np.concatenate(seconds)
    near = (i < j) & (np.linalg.norm(ends_xy[i] - ends_xy[j], axis=1) <= reach_m)
    return i[near], j[near]


def chained_edges(edges: list[RoadEdge]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The side edges of a road (not the ends of lanes) joined end to end where one ends within CHAIN_GAP_M of
    where the next starts and both face the same way: (points (N, 3) m with each edge's kerb lift added, outward
    (N, 3)) per chain. Each end joins at most one other: the nearest (to within CHAIN_TIE_M); among ends as near,
    the one that turns most towards the edge's outward side (a kerb wraps round its block's corner where a map's
    lanes run on across a junction), then the straightest, then the first in the road's order."""
    sides = [(np.asarray(e.points, float) + [0.0, 0.0, e.lift_m], np.asarray(e.outward, float))
             for e in edges if not e.cap and len(e.points) >= 2]
    if not sides:
        return []
    # ends[2k] the start of side k, ends[2k + 1] its end, with the outward direction there and the direction the
    # edge runs in through it (from its start to its end)
    ends = np.array([p[i, :2] for p, _ in sides for i in (0, -1)])
    facing = np.array([o[i, :2] for _, o in sides for i in (0, -1)])
    running = np.array([p[i + 1, :2] - p[i, :2] for p, _ in sides for i in (0, -2)])
    running /= np.maximum(np.linalg.norm(running, axis=1, keepdims=True), 1e-12)
    i, j = end_pairs(ends, CHAIN_GAP_M)
    keep = (i // 2 != j // 2) & (np.einsum("ik,ik->i", facing[i], facing[j]) > 0.0)
    i, j = i[keep], j[keep]
    # leaving through end i and entering the next side through end j: a side runs on out of its end and from its
    # start, backwards out of its start and from its end
    out_of = np.where((i % 2 == 1)[:, None], running[i], -running[i])
    into = np.where((j % 2 == 0)[:, None], running[j], -running[j])
    gap_steps = np.floor(np.linalg.norm(ends[i] - ends[j], axis=1) / CHAIN_TIE_M)
    side = facing[i] / np.maximum(np.linalg.norm(facing[i], axis=1, keepdims=True), 1e-12)
    outward_turn = np.einsum("ik,ik->i", side, into)
    straight = np.einsum("ik,ik->i", out_of, into)
    partner = np.full(len(ends), -1)
    for k in np.lexsort((j, i, -straight, -outward_turn, gap_steps)).tolist():
        if partner[i[k]] < 0 and partner[j[k]] < 0:
            partner[i[k]], partner[j[k]] = j[k], i[k]
    chains, used = [], np.zeros(len(sides), bool)
    starts = [k for k in range(len(sides)) if partner[2 * k] < 0 or partner[2 * k + 1] < 0] + list(range(len(sides)))
    for first in starts:
        if used[first]:
            continue
        # walk away from a free end (a closed loop starts anywhere)
        k, enter = first, (2 * first if partner[2 * first] < 0 or partner[2 * first + 1] >= 0 else 2 * first + 1)
        points: list[np.ndarray] = []
        outward: list[np.ndarray] = []
        while k >= 0 and not used[k]:
            used[k] = True
            p, o = sides[k]
            if enter % 2:
                p, o = p[::-1], o[::-1]
            points.append(p if not points else p[1:])
            outward.append(o if not outward else o[1:])
            leave = enter ^ 1
            nxt = partner[leave]
            k, enter = (int(nxt) // 2, int(nxt)) if nxt >= 0 else (-1, -1)
        chains.append((np.concatenate(points), np.concatenate(outward)))
    return chains


class EdgeWalk:
    """An outer edge as arc length: its stations at any distance along."""

    def __init__(self, points: np.ndarray, outward: np.ndarray, lift_m: float = 0.0):
        self.points = np.asarray(points, float) + np.array([0.0, 0.0, lift_m])
        self.outward = np.asarray(outward, float)
        self.s = arc_length(self.points)
        self.length_m = float(self.s[-1]) if len(self.s) else 0.0

    def station(self, s_m: float) -> Station:
        i = int(np.clip(np.searchsorted(self.s, s_m, side="right") - 1, 0, len(self.s) - 2))
        span = max(self.s[i + 1] - self.s[i], 1e-9)
        t = float(np.clip((s_m - self.s[i]) / span, 0.0, 1.0))
        point = self.points[i] + t * (self.points[i + 1] - self.points[i])
        along = self.points[i + 1] - self.points[i]
        along[2] = 0.0
        along /= max(float(np.linalg.norm(along)), 1e-9)
        out = np.array([-along[1], along[0], 0.0])
        if np.dot(out, self.outward[i]) < 0:
            out = -out
        return Station(point, along, out)


# ------------------------------------------------------------------------------------------------ the parts


def _building(parts: list, st: Station, width_m: float, depth_m: float, storeys: int, material: str,
              ground_floor_m: float) -> None:
    """A building on ``st``'s ground from 0 to ``width_m`` along and 0 to ``depth_m`` out: a core behind rooms
    whose street façade is piers and bands of wall with recessed glass between them (beams through the glass end
    on the core, ROOM_DEPTH_M in)."""
    height = ground_floor_m + (storeys - 1) * STOREY_M
    wall = ir(material)

    def block(a0, a1, o0, o1, z0, z1, what=wall, semantic="building"):
        corners = [st.at(a, o, z) for a, o, z in ((a0, o0, z0), (a1, o1, z1))]
        centre = 0.5 * (corners[0] + corners[1])
        yaw = float(np.arctan2(st.along[1], st.along[0]))
        parts.append(StreetPart(semantic, what, box(centre, (a1 - a0, o1 - o0, z1 - z0), yaw)))

    core = min(ROOM_DEPTH_M, 0.5 * depth_m)
    block(0.0, width_m, core, depth_m, -FOUNDATION_M, height)  # the core, roofed
    block(0.0, width_m, 0.0, core, height - FACADE_DEPTH_M, height)  # the roof over the rooms
    for a0 in (0.0, width_m - FACADE_DEPTH_M):  # the ends of the rooms
        block(a0, a0 + FACADE_DEPTH_M, 0.0, core, -FOUNDATION_M, height)
    floors = [0.0] + [ground_floor_m + k * STOREY_M for k in range(storeys - 1)]
    bands = [(-FOUNDATION_M, SILL_M)] + [(f - STOREY_M + HEAD_M, f + SILL_M) for f in floors[1:]]
    bands.append((floors[-1] + HEAD_M, height - FACADE_DEPTH_M))
    for z0, z1 in bands:  # wall between one storey's window heads and the next one's sills
        block(0.0, width_m, 0.0, FACADE_DEPTH_M, z0, z1)
    bays = max(1, int(width_m // BAY_M))
    pitch = width_m / bays
    for k in range(bays + 1):  # piers between the windows
        centre = k * pitch
        a0, a1 = max(0.0, centre - 0.5 * PIER_M), min(width_m, centre + 0.5 * PIER_M)
        block(a0, a1, 0.0, FACADE_DEPTH_M, -FOUNDATION_M, height)
    glass = [st.at(a, WINDOW_RECESS_M, z) for a, z in ((width_m, 0.0), (0.0, 0.0), (0.0, height), (width_m, height))]
    parts.append(StreetPart("building", ir("glass_clear"), quads(np.array([glass]))))


def _tree(parts: list, rng: np.random.Generator, base: np.ndarray, height_m: float, crown_m: float,
          crown_base_m: float) -> None:
    """A trunk and a porous crown of leaf facets (part of a beam passes, part returns at several depths)."""
    crown_half = 0.5 * (height_m - crown_base_m)
    centre = base + np.array([0.0, 0.0, crown_base_m + crown_half])
    parts.append(StreetPart("vegetation", ir("bark"),
                            cylinder_between(base - [0, 0, FOUNDATION_M], centre, TRUNK_RADIUS_M, 8)))
    radii = np.array([0.5 * crown_m, 0.5 * crown_m, crown_half])
    count = int(LEAF_DENSITY_PER_M3 * 4.0 / 3.0 * np.pi * np.prod(radii))
    parts.append(StreetPart("vegetation", ir("leaves_deciduous"),
                            leaf_cloud(rng, centre, radii - LEAF_FACET_M, count, LEAF_FACET_M)))


def _light(parts: list, st: Station, out_m: float, height_m: float) -> None:
    """A street light: pole, arm over the road, luminaire."""
    foot, top = st.at(0.0, out_m, -FOUNDATION_M), st.at(0.0, out_m, height_m)
    end = st.at(0.0, out_m - LIGHT_ARM_M, height_m)
    parts.append(StreetPart("pole", ir("steel_galvanized"), cylinder_between(foot, top, LIGHT_RADIUS_M, 8)))
    parts.append(StreetPart("pole", ir("steel_galvanized"), cylinder_between(top, end, 0.5 * LIGHT_RADIUS_M, 6)))
    yaw = float(np.arctan2(st.out[1], st.out[0]))
    parts.append(StreetPart("pole", ir("metal_painted_dark"), box(end - [0, 0, LUMINAIRE_M[2]], LUMINAIRE_M, yaw)))


def _pole(parts: list, st: Station, out_m: float, height_m: float, radius_m: float, material: str) -> None:
    parts.append(StreetPart("pole", ir(material),
                            cylinder_between(st.at(0, out_m, -FOUNDATION_M), st.at(0, out_m, height_m), radius_m, 8)))


def _sign(parts: list, st: Station, out_m: float) -> None:
    """A sign post and its plate, facing the road."""
    _pole(parts, st, out_m, SIGN_POST_M + SIGN_PLATE_M, 0.03, "steel_galvanized")
    yaw = float(np.arctan2(st.out[1], st.out[0]))
    parts.append(StreetPart("traffic_sign", ir("retroreflector"),
                            box(st.at(0, out_m - 0.05, SIGN_POST_M + 0.5 * SIGN_PLATE_M),
                                (0.003, SIGN_PLATE_M, SIGN_PLATE_M), yaw)))


def _run(parts: list, st: Station, length_m: float, out_m: float, kind: str, rng: np.random.Generator) -> None:
    """A hedge, fence or noise barrier from ``st`` ``length_m`` along, ``out_m`` from the edge."""
    yaw = float(np.arctan2(st.along[1], st.along[0]))
    if kind == "hedge":
        height = float(rng.uniform(*HEDGE_M))
        parts.append(StreetPart("vegetation", ir("leaves_deciduous"),
                                box(st.at(0.5 * length_m, out_m + 0.5 * HEDGE_DEPTH_M, 0.5 * height - 0.1),
                                    (length_m, HEDGE_DEPTH_M, height + 0.2), yaw)))
        return
    height, post_spacing, material = ((FENCE_M, FENCE_POST_SPACING_M, "wood") if kind == "fence"
                                      else (NOISE_BARRIER_M, NOISE_POST_SPACING_M, "concrete"))
    for a in np.arange(0.0, length_m + 1e-6, post_spacing):
        parts.append(StreetPart("barrier", ir("wood" if kind == "fence" else "steel_galvanized"),
                                box(st.at(a, out_m, 0.5 * (height - FOUNDATION_M)),
                                    (0.12, 0.12, height + FOUNDATION_M), yaw)))
    if kind == "fence":
        for z in np.linspace(0.3, height - 0.1, FENCE_RAILS):
            parts.append(StreetPart("barrier", ir(material), box(st.at(0.5 * length_m, out_m, z),
                                                                  (length_m, 0.04, 0.1), yaw)))
    else:
        parts.append(StreetPart("barrier", ir(material), box(st.at(0.5 * length_m, out_m + 0.1, 0.5 * height),
                                                              (length_m, NOISE_PANEL_M, height), yaw)))


# ------------------------------------------------------------------------------------------------ the styles


def _frontage(parts: list, walk: EdgeWalk, ground: Ground, rng: np.random.Generator, style: Frontage,
              reach_m: float, shop_fronts: bool) -> None:
    """Buildings along ``walk``, one after another with the style's gaps. One that does not fit (a junction, a
    pole or a person on the sidewalk in front, the next street behind) is tried set back farther, then narrower
    (FRONTAGE_RETRIES), and left out only if none fits."""
    s = float(rng.uniform(0.0, style.gap_m[1]))
    while s < walk.length_m:
        width = float(rng.uniform(*style.width_m))
        depth = float(rng.uniform(*style.depth_m))
        setback = float(rng.uniform(*style.setback_m))
        storeys = int(rng.integers(style.storeys[0], style.storeys[1] + 1))
        material = str(rng.choice(style.materials))
        for width_share, back_m in FRONTAGE_RETRIES:
            # the last building of a frontage ends where the edge does (a junction's corner), if it is not too narrow
            wide = min(width * width_share, walk.length_m - s)
            if wide < MIN_BUILDING_M:
                break
            st = walk.station(s + 0.5 * wide)
            start = Station(st.at(-0.5 * wide, setback + back_m), st.along, st.out)
            corners = start.rectangle((0.0, wide), (0.0, depth))
            if setback + back_m + depth <= reach_m and ground.free(corners):
                ground.take(corners)
                _building(parts, start, wide, depth, storeys, material,
                          GROUND_STOREY_M if shop_fronts else STOREY_M)
                width = wide
                break
        gap = float(rng.uniform(*style.gap_m)) if rng.random() < style.gap_share else 0.0
        s += width + gap


def _point_things(parts: list, walk: EdgeWalk, ground: Ground, rng: np.random.Generator, spacing_m, out_m,
                  radius_m: float, make) -> None:
    """``make(station, out_m)`` every ``spacing_m`` (a range: drawn each time) along ``walk``, where a square of
    ``radius_m`` around it is free."""
    lo, hi = spacing_m if isinstance(spacing_m, tuple) else (spacing_m, spacing_m)
    s = float(rng.uniform(0.0, hi))
    while s < walk.length_m:
        st = walk.station(s)
        out = float(rng.uniform(*out_m)) if isinstance(out_m, tuple) else out_m
        corners = Station(st.at(0.0, out), st.along, st.out).rectangle((-radius_m, radius_m), (-radius_m, radius_m))
        if ground.free(corners):
            ground.take(corners)
            make(st, out)
        s += float(rng.uniform(lo, hi))


def _trees(parts, walk, ground, rng, spacing_m, out_m, street: bool = False) -> None:
    """Trees every ``spacing_m`` at ``out_m`` from the edge: street trees (``street``) claim their trunk's ground
    and hold their crowns above CLEARANCE_HEIGHT_M (they may reach over the road); others claim their crown's."""
    crown_m, base_m = (STREET_TREE_CROWN_M, CLEARANCE_HEIGHT_M) if street else (TREE_CROWN_M, TREE_CROWN_BASE_M)

    def make(st: Station, out: float) -> None:
        height = float(rng.uniform(*TREE_HEIGHT_M))
        _tree(parts, rng, st.at(0.0, out), height, float(rng.uniform(*crown_m)), base_m)
    _point_things(parts, walk, ground, rng, spacing_m, out_m, 0.5 if street else 0.5 * crown_m[1], make)


def _lines(parts, walk, ground, rng, out_m: float, depth_m: float, kinds: tuple[str, ...], piece_m: float,
           gap_share: float) -> None:
    """Hedges, fences or barriers in pieces of ``piece_m`` along ``walk``; a piece left open with ``gap_share``."""
    s = 0.0
    while s + 1.0 < walk.length_m:
        length = min(piece_m, walk.length_m - s)
        st = walk.station(s)
        corners = st.rectangle((0.0, length), (out_m, out_m + depth_m))
        kind = str(rng.choice(kinds))
        if rng.random() >= gap_share and ground.free(corners):
            ground.take(corners)
            _run(parts, st, length, out_m, kind, rng)
        s += length


def _style_edge(style: str, parts: list, walk: EdgeWalk, ground: Ground, rng: np.random.Generator,
                reach_m: float) -> None:
    """One edge's street in ``style``: near things first (they claim their ground before the buildings behind)."""
    if style == "urban":
        _point_things(parts, walk, ground, rng, LIGHT_URBAN[1], 0.75, 0.15,
                      lambda st, out: _light(parts, st, out, LIGHT_URBAN[0]))
        _point_things(parts, walk, ground, rng, SIGN_SPACING_M, 0.75, 0.15, lambda st, out: _sign(parts, st, out))
        _trees(parts, walk, ground, rng, STREET_TREE_SPACING_M, STREET_TREE_OUT_M, street=True)
        _frontage(parts, walk, ground, rng, URBAN, reach_m, shop_fronts=True)
    elif style == "suburban":
        _point_things(parts, walk, ground, rng, UTILITY_POLE[2], 1.0, 0.2,
                      lambda st, out: _pole(parts, st, out, UTILITY_POLE[0], UTILITY_POLE[1], "wood"))
        _point_things(parts, walk, ground, rng, LIGHT_URBAN[1] * 1.5, 0.75, 0.15,
                      lambda st, out: _light(parts, st, out, LIGHT_URBAN[0]))
        _lines(parts, walk, ground, rng, 2.0, HEDGE_DEPTH_M, ("hedge", "fence"), 12.0, 0.3)
        _trees(parts, walk, ground, rng, (12.0, 25.0), (5.0, 8.0))
        _frontage(parts, walk, ground, rng, SUBURBAN, reach_m, shop_fronts=False)
    elif style == "rural":
        _point_things(parts, walk, ground, rng, UTILITY_POLE[2], 1.5, 0.2,
                      lambda st, out: _pole(parts, st, out, UTILITY_POLE[0], UTILITY_POLE[1], "wood"))
        _lines(parts, walk, ground, rng, 3.0, 0.2, ("fence",), 25.0, 0.4)
        _trees(parts, walk, ground, rng, (10.0, 40.0), (6.0, 25.0))
        _frontage(parts, walk, ground, rng, RURAL, reach_m, shop_fronts=False)
    else:  # highway
        _point_things(parts, walk, ground, rng, LIGHT_HIGHWAY[1], 1.0, 0.15,
                      lambda st, out: _light(parts, st, out, LIGHT_HIGHWAY[0]))
        _lines(parts, walk, ground, rng, 4.0, 0.3, ("noise barrier",), 40.0, 0.3)
        _trees(parts, walk, ground, rng, (6.0, 14.0), (8.0, 30.0))


def build_street(road: Road, style: str, reach_m: float, avoid_boxes: np.ndarray | None = None,
                 seed: int = 0) -> list[StreetPart]:
    """The street of ``style`` (one of :data:`STREET_STYLES`) around ``road`` (as :func:`~.road.build_road` made
    it, before signs and terrain), out to ``reach_m`` from its edges; nothing in ``avoid_boxes`` ((K, 4, 2)
    corners, :func:`box_corners`); random choices from ``seed`` (:func:`street_seed`)."""
    if style not in STREET_STYLES:
        raise ValueError(f"environment style {style!r} is not one of {', '.join(STREET_STYLES)}")
    ground = Ground(road.builder.mesh("road surface"), np.zeros((0, 4, 2)) if avoid_boxes is None else avoid_boxes)
    rng = np.random.default_rng(seed)
    parts: list[StreetPart] = []
    for points, outward in chained_edges(road.edges):  # a lane's end (a cap) gets none: the road goes on there
        walk = EdgeWalk(points, outward)
        if walk.length_m > 1.0:
            _style_edge(style, parts, walk, ground, rng, float(reach_m))
    return parts


def street_mesh(parts: list[StreetPart]) -> Mesh | None:
    """The parts as one mesh, each face tagged with its part's semantic class (no OSI id: the faces take their
    instance's, the environment's); ``None`` for none."""
    builder = MeshBuilder()
    for part in parts:
        builder.add(part.shape, part.material, None, SEMANTIC_CLASSES.index(part.semantic))
    return builder.mesh("street")

"""Polylines made into surfaces: strips between two lines, ribbons along one, profiles swept along one, cuts by
arc length, and flat polygons triangulated.

A polyline is (N, 3) float64 points in metres (world frame, Z up). Lateral
directions are taken in the horizontal plane (a road's lines run roughly
level), so a ribbon stays flat across and follows the line's heights along.
Everything is vectorised numpy; the polygon ear clipping, which walks its
vertices, is compiled (Numba).
"""
from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import ArrayLike

#: consecutive points closer than this (m) are one point
SAME_POINT_M = 1e-4
#: a corner's offset is stretched by at most this much (a miter limit: at sharper corners the ribbon is pinched
#: instead of shooting out; 2 allows corners up to 120°)
MITER_LIMIT = 2.0
#: a sum of two unit vectors shorter than this is a turn back (no direction of its own; float rounding), and the
#: floor its length is divided by
TURN_BACK_TOLERANCE, DIVISION_FLOOR = 1e-9, 1e-12
#: a polygon with less area than this (m²) has none, and so has a triangle whose edges' cross product (twice its
#: area) is shorter
NO_AREA_M2 = 1e-9


def clean(points: np.ndarray) -> np.ndarray:
    """``points`` without consecutive duplicates (closer than SAME_POINT_M)."""
    points = np.asarray(points, np.float64).reshape(-1, 3)
    if len(points) < 2:
        return points
    return points[kept(points)]


def kept(points: np.ndarray) -> np.ndarray:
    """Indices of the points :func:`clean` keeps (a line's per-point values follow them)."""
    points = np.asarray(points, np.float64).reshape(-1, 3)
    keep = np.ones(len(points), bool)
    keep[1:] = np.linalg.norm(np.diff(points, axis=0), axis=1) > SAME_POINT_M
    return np.flatnonzero(keep)


def arc_length(points: np.ndarray) -> np.ndarray:
    """(N,) distance along the polyline from its first point (m)."""
    if len(points) == 0:
        return np.zeros(0)
    return np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))])


def left_normals(points: np.ndarray) -> np.ndarray:
    """(N, 3) horizontal unit-ish vectors to the left of the line at each point, stretched at corners so an offset
    along them keeps its distance from both segments (up to MITER_LIMIT); zero where the line is vertical."""
    n = len(points)
    if n < 2:
        return np.zeros((n, 3))
    d = np.diff(points[:, :2], axis=0)
    length = np.linalg.norm(d, axis=1)
    ok = length > SAME_POINT_M
    # a vertical segment takes the direction of the nearest level one before it (or after, at the start)
    if not ok.any():
        return np.zeros((n, 3))
    index = np.where(ok, np.arange(len(d)), -1)
    index = np.maximum.accumulate(index)
    index[index < 0] = int(np.argmax(ok))
    d = d[index] / length[index, None]
    seg_left = np.column_stack([-d[:, 1], d[:, 0]])
    left = np.empty((n, 2))
    left[0], left[-1] = seg_left[0], seg_left[-1]
    if n > 2:
        mid = seg_left[:-1] + seg_left[1:]
        norm = np.linalg.norm(mid, axis=1)
        cos_half = np.clip(0.5 * norm, 1.0 / MITER_LIMIT, 1.0)  # cos of half the turn between the two segments
        unit = np.where(norm[:, None] > TURN_BACK_TOLERANCE, mid / np.maximum(norm, DIVISION_FLOOR)[:, None],
                        seg_left[:-1])
        left[1:-1] = unit / cos_half[:, None]
    return np.column_stack([left, np.zeros(n)])


def strip(left: np.ndarray, right: np.ndarray):
    """Quads between two polylines of equal length, point i to point i (two triangles each), facing up (their
    normal's z ≥ 0 where the strip is level)."""
    n = len(left)
    vertices = np.concatenate([left, right])
    i = np.arange(n - 1)
    # left[i] → right[i] → right[i+1] is counter-clockwise seen from above when right lies to the right of left
    faces = np.concatenate([np.column_stack([i, n + i, n + i + 1]), np.column_stack([i, n + i + 1, i + 1])])
    return vertices, _facing_up(vertices, faces)


def _facing_up(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """``faces`` with every triangle whose normal points down turned over."""
    if len(faces) == 0:
        return faces.reshape(0, 3)
    a, b, c = vertices[faces[:, 0]], vertices[faces[:, 1]], vertices[faces[:, 2]]
    z = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    return np.where((z < 0)[:, None], faces[:, ::-1], faces)


def ribbon(points: np.ndarray, width_m, lift_m: float = 0.0):
    """A flat strip ``width_m`` wide (scalar or per point) centred on the polyline, ``lift_m`` above it."""
    normal = left_normals(points) * (0.5 * np.broadcast_to(np.asarray(width_m, np.float64), (len(points),)))[:, None]
    up = np.array([0.0, 0.0, lift_m])
    return strip(points + normal + up, points - normal + up)


def offset(points: np.ndarray, distance_m) -> np.ndarray:
    """The polyline moved ``distance_m`` (scalar or per point) to its left (negative: right), horizontally."""
    return points + left_normals(points) * np.broadcast_to(np.asarray(distance_m, np.float64), (len(points),))[:, None]


def sweep(points: np.ndarray, profile: ArrayLike, closed: bool = False):
    """A cross-section ``profile`` (K, 2): (m to the left, m up) swept along the polyline: the surface of a kerb, a
    wall, a guard rail's beam. ``closed``: the profile's last point joins its first."""
    profile = np.asarray(profile, np.float64)
    n, k = len(points), len(profile)
    left = left_normals(points)
    rings = points[:, None, :] + left[:, None, :] * profile[None, :, 0, None]
    rings[:, :, 2] += profile[None, :, 1]
    edges = np.arange(k if closed else k - 1)
    nxt = (edges + 1) % k
    i = np.arange(n - 1)[:, None]
    a, b = i * k + edges, i * k + nxt
    c, d = (i + 1) * k + nxt, (i + 1) * k + edges
    faces = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([a, c, d], -1).reshape(-1, 3)])
    return rings.reshape(-1, 3), faces


def cut(points: np.ndarray, s: np.ndarray, start_m: float, end_m: float) -> np.ndarray:
    """The part of a polyline (arc lengths ``s``) between ``start_m`` and ``end_m``, its ends interpolated."""
    start_m, end_m = max(start_m, 0.0), min(end_m, float(s[-1]))
    if end_m - start_m <= SAME_POINT_M:
        return np.zeros((0, 3))
    inside = (s > start_m) & (s < end_m)
    ends = np.column_stack([np.interp([start_m, end_m], s, points[:, k]) for k in range(3)])
    return np.concatenate([ends[:1], points[inside], ends[1:]])


def aligned(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """``other`` in the direction of ``reference`` (reversed when its ends lie the other way round)."""
    same = np.linalg.norm(reference[0] - other[0]) + np.linalg.norm(reference[-1] - other[-1])
    swapped = np.linalg.norm(reference[0] - other[-1]) + np.linalg.norm(reference[-1] - other[0])
    return other[::-1] if swapped < same else other


def chain(pieces: list[np.ndarray]) -> np.ndarray:
    """Polylines that follow one another (a lane's boundaries on one side, each either way round) joined into one:
    from the end of a piece that lies farthest from every other piece's ends (the chain's free end), each next
    piece the one with an end nearest the chain's, turned to continue it."""
    pieces = [p for p in pieces if len(p) >= 2]
    if len(pieces) <= 1:
        return pieces[0] if pieces else np.zeros((0, 3))
    ends = np.array([[p[0], p[-1]] for p in pieces])  # (P, 2, 3)
    flat = ends.reshape(-1, 3)
    gap = np.linalg.norm(flat[:, None, :] - flat[None, :, :], axis=2)
    owner = np.repeat(np.arange(len(pieces)), 2)
    gap[owner[:, None] == owner[None, :]] = np.inf  # a piece's own ends do not count
    free = int(np.argmax(gap.min(axis=1)))
    first = free // 2
    line = [pieces[first] if free % 2 == 0 else pieces[first][::-1]]
    left = [p for k, p in enumerate(pieces) if k != first]
    while left:
        tail = line[-1][-1]
        to_start = [np.linalg.norm(p[0] - tail) for p in left]
        to_end = [np.linalg.norm(p[-1] - tail) for p in left]
        k = int(np.argmin(np.minimum(to_start, to_end)))
        piece = left.pop(k)
        line.append(piece if to_start[k] <= to_end[k] else piece[::-1])
    return clean(np.concatenate(line))


def loft(a: np.ndarray, b: np.ndarray):
    """Triangles between two polylines running the same way (a lane's two sides), facing up.

    Each side is parametrised by its share of its own length; walking both in
    order of that parameter, each step adds the triangle of the two current
    points and the next point of the side that comes first. Every point of
    both sides is a corner, so the surface follows both lines' heights.
    """
    ta, tb = arc_length(a), arc_length(b)
    if ta[-1] <= 0 or tb[-1] <= 0:
        return np.zeros((0, 3)), np.zeros((0, 3), np.int64)
    ta, tb = ta / ta[-1], tb / tb[-1]
    na, nb = len(a), len(b)
    steps = np.concatenate([ta[1:], tb[1:]])
    side = np.concatenate([np.zeros(na - 1, bool), np.ones(nb - 1, bool)])  # True: the step advances b
    order = np.argsort(steps, kind="stable")
    side = side[order]
    ia = np.concatenate([[0], np.cumsum(~side)])[:-1]  # a's index before each step
    ib = np.concatenate([[0], np.cumsum(side)])[:-1]
    nxt = np.where(side, na + ib + 1, ia + 1)
    faces = np.column_stack([ia, na + ib, nxt])
    vertices = np.concatenate([a, b])
    area = np.linalg.norm(np.cross(vertices[faces[:, 1]] - vertices[faces[:, 0]],
                                   vertices[faces[:, 2]] - vertices[faces[:, 0]]), axis=1)
    return vertices, _facing_up(vertices, faces[area > NO_AREA_M2])


# ------------------------------------------------------------------------------------------------ polygons


def polygon_problem(xy: np.ndarray) -> str:
    """Why a closed polygon (P, 2) cannot be filled as it is ('' when it can): too few vertices, no area, or edges
    that cross."""
    if len(xy) < 3:
        return "fewer than 3 vertices"
    if _self_intersects(np.ascontiguousarray(xy, np.float64)):
        return "edges that cross each other"
    if abs(signed_area(xy)) < NO_AREA_M2:
        return "no area"
    return ""


def signed_area(xy: np.ndarray) -> float:
    """Shoelace area (m²), positive counter-clockwise."""
    x, y = xy[:, 0], xy[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y))


@njit(cache=True, nogil=True)
def _cross(ax, ay, bx, by, cx, cy):
    return (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)


@njit(cache=True, nogil=True)
def _self_intersects(xy):
    """Do two non-adjacent edges of the closed polygon cross (O(P²), P ≤ MAX_POLYGON_VERTICES)?"""
    n = xy.shape[0]
    for i in range(n):
        ax, ay = xy[i, 0], xy[i, 1]
        bx, by = xy[(i + 1) % n, 0], xy[(i + 1) % n, 1]
        for j in range(i + 2, n):
            if i == 0 and j == n - 1:
                continue  # the edge before the first shares its vertex
            cx, cy = xy[j, 0], xy[j, 1]
            dx, dy = xy[(j + 1) % n, 0], xy[(j + 1) % n, 1]
            d1 = _cross(cx, cy, dx, dy, ax, ay)
            d2 = _cross(cx, cy, dx, dy, bx, by)
            d3 = _cross(ax, ay, bx, by, cx, cy)
            d4 = _cross(ax, ay, bx, by, dx, dy)
            if ((d1 > 0) != (d2 > 0)) and ((d3 > 0) != (d4 > 0)) and d1 != 0 and d2 != 0 and d3 != 0 and d4 != 0:
                return True
    return False


@njit(cache=True, nogil=True)
def _ear_clip(xy):
    """Triangles (P − 2, 3) of a simple counter-clockwise polygon by ear clipping (O(P²)); fewer rows if it gives up
    on a degenerate remainder."""
    n = xy.shape[0]
    out = np.empty((max(n - 2, 0), 3), np.int64)
    prev = np.empty(n, np.int64)
    nxt = np.empty(n, np.int64)
    for i in range(n):
        prev[i] = (i - 1) % n
        nxt[i] = (i + 1) % n
    count = 0
    remaining = n
    i = 0
    misses = 0
    while remaining > 3 and misses < remaining:
        a, b, c = prev[i], i, nxt[i]
        ax, ay, bx, by, cx, cy = xy[a, 0], xy[a, 1], xy[b, 0], xy[b, 1], xy[c, 0], xy[c, 1]
        ear = _cross(ax, ay, bx, by, cx, cy) > 0
        if ear:  # no other vertex inside the triangle
            j = nxt[c]
            while j != a:
                px, py = xy[j, 0], xy[j, 1]
                if (_cross(ax, ay, bx, by, px, py) >= 0 and _cross(bx, by, cx, cy, px, py) >= 0
                        and _cross(cx, cy, ax, ay, px, py) >= 0):
                    ear = False
                    break
                j = nxt[j]
        if ear:
            out[count, 0], out[count, 1], out[count, 2] = a, b, c
            count += 1
            nxt[a] = c
            prev[c] = a
            remaining -= 1
            misses = 0
            i = c
        else:
            misses += 1
            i = nxt[i]
    if remaining == 3:
        out[count, 0], out[count, 1], out[count, 2] = prev[i], i, nxt[i]
        count += 1
    return out[:count]


def footprint(polygon: np.ndarray | None, length_m: float, width_m: float, what: str,
              problems: list[str]) -> np.ndarray | None:
    """A base polygon to fill, counter-clockwise: the one OSI gives (its convex hull where its edges cross, said in
    ``problems`` naming ``what``), else the rectangle of the box's length and width (None: neither is usable)."""
    if polygon is not None:
        problem = polygon_problem(polygon)
        if problem:
            problems.append(f"{what}: base polygon has {problem}; its convex hull is used")
            polygon = polygon[convex_hull(polygon)]
    if polygon is None or len(polygon) < 3:
        if not (length_m > 0 and width_m > 0):
            return None
        polygon = np.array([[-length_m, -width_m], [length_m, -width_m], [length_m, width_m],
                            [-length_m, width_m]]) / 2
    return polygon if signed_area(polygon) > 0 else polygon[::-1]


def fill_polygon(xy: np.ndarray) -> np.ndarray:
    """Triangles (index triples into ``xy``) filling a simple polygon given in either orientation, counter-clockwise
    seen from above; the convex hull's when the polygon is not simple (its caller says so)."""
    xy = np.ascontiguousarray(xy, np.float64)
    if signed_area(xy) < 0:
        return len(xy) - 1 - _ear_clip(xy[::-1].copy())
    return _ear_clip(xy)


def convex_pieces(xy: np.ndarray) -> list[np.ndarray]:
    """A simple polygon (P, 2) cut into convex pieces, each as indices into ``xy`` counter-clockwise: its
    triangles (:func:`fill_polygon`) merged across their shared sides wherever the union stays convex (Hertel and
    Mehlhorn 1983: at most four times the fewest pieces)."""
    xy = np.ascontiguousarray(xy, np.float64)
    triangles = fill_polygon(xy)
    pieces: dict[int, list[int]] = {k: [int(v) for v in t] for k, t in enumerate(triangles)}
    owner: dict[tuple[int, int], int] = {}  # a directed side (u, v) → the piece that has it
    for k, piece in pieces.items():
        for c, d in zip(piece, piece[1:] + piece[:1]):
            owner[(c, d)] = k
    for u, v in list(owner):
        first, second = owner.get((u, v)), owner.get((v, u))
        if first is None or second is None or first == second:
            continue
        one, other = pieces[first], pieces[second]
        # ``one`` runs u → v; from v round to u, then ``other`` from u round to v without its ends
        i, j = one.index(v), other.index(u)
        merged = one[i:] + one[:i] + (other[j:] + other[:j])[1:-1]
        if not _convex(xy[merged]):
            continue
        pieces[first] = merged
        del pieces[second]
        for c, d in zip(merged, merged[1:] + merged[:1]):
            owner[(c, d)] = first
        owner.pop((u, v), None)
        owner.pop((v, u), None)
    return [np.array(piece, np.int64) for piece in pieces.values()]


def _convex(ring: np.ndarray) -> bool:
    """Whether a counter-clockwise ring (P, 2) turns left (or goes straight) at every vertex."""
    after, before = np.roll(ring, -1, axis=0), np.roll(ring, 1, axis=0)
    turn = (ring[:, 0] - before[:, 0]) * (after[:, 1] - ring[:, 1]) - (ring[:, 1] - before[:, 1]) * (after[:, 0] - ring[:, 0])
    return bool((turn >= -1e-9 * np.abs(ring).max() ** 2).all())


def convex_hull(xy: np.ndarray) -> np.ndarray:
    """Indices of the convex hull of points (P, 2), counter-clockwise (Andrew's monotone chain)."""
    order = np.lexsort((xy[:, 1], xy[:, 0]))

    def half(indices):
        out: list[int] = []
        for k in indices:
            while len(out) >= 2 and _cross(*xy[out[-2]], *xy[out[-1]], *xy[k]) <= 0:
                out.pop()
            out.append(int(k))
        return out

    lower, upper = half(order), half(order[::-1])
    return np.array(lower[:-1] + upper[:-1], np.int64)

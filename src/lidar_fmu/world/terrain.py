"""The ground goes on: terrain past the road's outer edges out to the sensor's reach, or a ground plane.

From each outer edge (:class:`~.road.RoadEdge`) the ground runs outward in rings
(:data:`RING_OFFSETS_M`), at the edge's height (plus a kerb's lift) and
:data:`VERGE_DROP_M` below it past the first ring, as the material the edge
names (grass where it names none). Rings are sampled more coarsely the
farther out they lie. A ring point stops where it would come nearer to some
road point than to its own edge (the inside of a bend, a second carriageway,
another road): ground never runs over a road. A trace without lanes gets
:func:`ground_plane` instead.
"""
from __future__ import annotations

import numpy as np

from ..geometry.semantic import TERRAIN
from .lines import arc_length, loft
from .nearest import PointIndex
from .road import Road, RoadEdge, ir
from .shapes import MeshBuilder, grid

#: distances (m) of the terrain's rings from the road edge; the last ring lies at the reach
RING_OFFSETS_M = (0.0, 0.5, 1.5, 3.0, 6.0, 12.0, 25.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0)
#: how far the ground beyond the first ring lies below the road edge (m): only so that ground reaching under another
#: road at the same height stays below that road's surface (float32 keeps 60 µm at 1 km), small enough that the
#: ground past an edge continues at the edge's height (assumed)
VERGE_DROP_M = 0.01
#: a ring point stops when some road point is nearer than this share of its distance from its own edge (less
#: STOP_SLACK_M): nearer than its own edge can be, so it has come onto a road. Two roads' ground therefore runs
#: on a little past halfway between them and overlaps there (10 % of the gap for 0.8)
STOP_SHARE, STOP_SLACK_M = 0.8, 0.25
#: halvings of the gap between the last ring a point reaches and the first it does not, to find where it stops
#: (1/64 of the gap: well inside the overlap STOP_SHARE leaves)
REFINE_STEPS = 6
#: a side edge's end is open (the road ends there) when no road point lies within this of the point this far
#: beyond it (m)
OPEN_END_PROBE_M = 1.0
#: ring points are this share of the ring's distance from the edge apart along it, at least and at most this (m)
#: (assumed: a few points per ring near the road, where the ground is seen closely, few far out)
RING_SPACING_DIVISOR, MIN_RING_SPACING_M, MAX_RING_SPACING_M = 3.0, 1.0, 50.0
#: an open end is carried on in this many steps out to the reach
OPEN_END_STEPS = 8
#: the ground plane's cells along each side (assumed: the plane is flat, so the count changes only how many
#: triangles draw it)
GROUND_PLANE_CELLS = 32


def build_terrain(builder: MeshBuilder, road: Road, reach_m: float, index: PointIndex | None = None) -> None:
    """Terrain past every outer edge of ``road`` out to ``reach_m``, on ``builder`` (the environment's: no OSI id).
    ``index``: of ``road.points``, where the caller has one already."""
    if not road.edges:
        return
    if index is None:
        index = PointIndex(road.points)
    offsets = [d for d in RING_OFFSETS_M if d < reach_m] + [float(reach_m)]
    for edge in road.edges:
        if not edge.cap:
            edge = _extended(edge, index, float(reach_m))
        s = arc_length(edge.points)
        if s[-1] <= 0:
            continue
        rings = []
        for r, distance in enumerate(offsets):
            spacing = float(np.clip(distance / RING_SPACING_DIVISOR, MIN_RING_SPACING_M, MAX_RING_SPACING_M))
            stations = np.linspace(0.0, s[-1], max(2, int(np.ceil(s[-1] / spacing)) + 1))
            base = np.column_stack([np.interp(stations, s, edge.points[:, k]) for k in range(3)])
            out = np.column_stack([np.interp(stations, s, edge.outward[:, k]) for k in range(3)])
            allowed = _stop_distances(index, base, out, offsets[:r + 1])
            if r >= 2 and (allowed < offsets[r - 1]).all():
                break  # every point stopped inside the last ring: it already runs where the ground ends
            ring = base + out * allowed[:, None]
            ring[:, 2] += edge.lift_m - np.where(allowed > 0, VERGE_DROP_M, 0.0)
            rings.append(ring)
        for inner, outer in zip(rings[:-1], rings[1:]):
            builder.add(loft(inner, outer), ir(edge.material), semantic=TERRAIN)


def _stop_distances(index: PointIndex, base: np.ndarray, out: np.ndarray, distances: list[float]) -> np.ndarray:
    """How far (m, at most ``distances[-1]``) the ground runs out from each of the edge's ``base`` points along
    ``out``: until it would come onto another road (:func:`_clear`), found between the ring distances that bracket
    that point to 2^−REFINE_STEPS of their gap, so that the ground of two roads runs on to meet, a little past
    halfway between them, wherever the rings happen to lie (no strip left open between them)."""
    allowed = np.full(len(base), float(distances[-1]))
    last_clear = np.zeros(len(base))
    going = np.ones(len(base), bool)
    for d in distances[1:]:
        stops = going & ~_clear(index, base, out, np.full(len(base), d))
        allowed[stops] = d
        going &= ~stops
        last_clear[going] = d
    stopped = ~going
    if stopped.any():
        low, high = last_clear[stopped], allowed[stopped]
        for _ in range(REFINE_STEPS):
            middle = 0.5 * (low + high)
            ok = _clear(index, base[stopped], out[stopped], middle)
            low, high = np.where(ok, middle, low), np.where(ok, high, middle)
        allowed[stopped] = low
    return allowed


def _clear(index: PointIndex, base: np.ndarray, out: np.ndarray, distance_m: np.ndarray) -> np.ndarray:
    """Is the point ``distance_m`` out from each base point still off the road: no road point nearer than
    STOP_SHARE of that distance (less STOP_SLACK_M), as its own edge is?"""
    near, _ = index.nearest(base + out * distance_m[:, None], distance_m)
    return near >= STOP_SHARE * distance_m - STOP_SLACK_M


def _extended(edge: RoadEdge, index: PointIndex, reach_m: float) -> RoadEdge:
    """A side edge whose end is open (no road goes on there: the road ends) carried on straight for ``reach_m``, or
    until it comes onto a road (:func:`_clear`), so the ground beside the road goes on past its end as the ground
    ahead of it (the lane's cap) does."""
    points, outward = edge.points, edge.outward
    for end, before in ((-1, -2), (0, 1)):
        tangent = points[end] - points[before]
        tangent[2] = 0.0
        length = np.linalg.norm(tangent)
        if length <= 0:
            continue
        tangent /= length
        probe = points[end] + OPEN_END_PROBE_M * tangent
        near, _ = index.nearest(probe[None, :], OPEN_END_PROBE_M)
        if np.isfinite(near[0]):
            continue  # another lane goes on from here
        # carried on only as far as it stays off the road, tried at the rings' distances as a ring is: a side whose
        # road goes on past the probe (a map's next lane, its first point metres on) would otherwise run straight on
        # at its end's height, over that road where it bends away or goes down a hill
        tried = [0.0] + [d for d in RING_OFFSETS_M if 0.0 < d < reach_m] + [reach_m]
        length_m = _stop_distances(index, points[end][None, :], tangent[None, :], tried)[0]
        if length_m <= 0:
            continue
        extra = points[end] + np.linspace(0.0, length_m, OPEN_END_STEPS + 1)[1:, None] * tangent
        extra_out = np.broadcast_to(outward[end], extra.shape)
        if end == -1:
            points, outward = np.concatenate([points, extra]), np.concatenate([outward, extra_out])
        else:
            points, outward = np.concatenate([extra[::-1], points]), np.concatenate([extra_out[::-1], outward])
    return RoadEdge(points, outward, edge.lift_m, edge.material, edge.cap)


def ground_plane(reach_m: float) -> tuple[np.ndarray, np.ndarray]:
    """A square of side 2·``reach_m`` at z = 0 centred on the origin, in GROUND_PLANE_CELLS² cells (a trace without lanes:
    it is placed under the host each step; asphalt, for where a scenario gives no road its vehicles still drive
    on one)."""
    return grid(-reach_m, reach_m, -reach_m, reach_m, 0.0, GROUND_PLANE_CELLS, GROUND_PLANE_CELLS)


__all__ = ["build_terrain", "ground_plane", "RING_OFFSETS_M", "VERGE_DROP_M"]

"""Nearest points in the horizontal plane: a compiled spatial hash over a road's points.

:class:`PointIndex` buckets points (x, y) into square cells, their cell keys sorted once; a query searches the cells
ring by ring around it and stops when no nearer point can lie farther out or beyond its search radius. Used to ask
how far the nearest road point is (terrain that would run onto another road stops there) and how high the ground
is under a sign or a light.
"""
from __future__ import annotations

import numpy as np
from numba import njit

#: side of the hash's square cells (m) where the caller names none (assumed: about a lane's width, so a cell holds
#: a few road points and a query's rings end soon)
DEFAULT_CELL_M = 5.0
#: a search stops this far out (m) whatever it found: about the Earth's circumference, farther than any two points
#: of one scene lie
MAX_SEARCH_M = 4.0e7


class PointIndex:
    """Points (N, 3) m, searchable by horizontal distance."""

    def __init__(self, points: np.ndarray, cell_m: float = DEFAULT_CELL_M):
        self.points = np.ascontiguousarray(points, np.float64).reshape(-1, 3)
        self.cell_m = float(cell_m)
        if len(self.points):
            self.origin = self.points[:, :2].min(axis=0) - self.cell_m
            extent = self.points[:, :2].max(axis=0) + self.cell_m - self.origin
            self.rows = int(extent[1] // self.cell_m) + 2
        else:
            self.origin, self.rows = np.zeros(2), 1
        keys = _keys(self.points[:, :2], self.origin, self.cell_m, self.rows)
        self.order = np.argsort(keys, kind="stable")
        self.sorted_keys = keys[self.order]

    def __len__(self) -> int:
        return len(self.points)

    def nearest(self, queries: np.ndarray, max_distance_m: float | np.ndarray = np.inf) -> tuple[np.ndarray, np.ndarray]:
        """(distance (Q,) m, index (Q,)) of each query's nearest point within ``max_distance_m`` (scalar or per
        query); inf and −1 where none is."""
        queries = np.ascontiguousarray(queries, np.float64).reshape(-1, queries.shape[-1])[:, :2]
        limit = np.broadcast_to(np.asarray(max_distance_m, np.float64), (len(queries),)).copy()
        distance = np.full(len(queries), np.inf)
        index = np.full(len(queries), -1, np.int64)
        if len(self.points) and len(queries):
            _nearest(queries, self.points[:, :2], self.order, self.sorted_keys, self.origin, self.cell_m, self.rows,
                     limit, distance, index)
        return distance, index


def _keys(xy: np.ndarray, origin: np.ndarray, cell_m: float, rows: int) -> np.ndarray:
    cells = np.floor((xy - origin) / cell_m).astype(np.int64)
    return cells[:, 0] * rows + cells[:, 1]


@njit(cache=True, nogil=True)
def _nearest(queries, xy, order, sorted_keys, origin, cell, rows, limit, distance, index):
    for q in range(queries.shape[0]):
        qx, qy = queries[q, 0], queries[q, 1]
        cx = int(np.floor((qx - origin[0]) / cell))
        cy = int(np.floor((qy - origin[1]) / cell))
        best, best_i = np.inf, -1
        ring = 0
        while True:
            # every point of ring r lies at least (r − 1) cells away
            if ring > 0 and (ring - 1) * cell > min(best, limit[q]):
                break
            if ring > 0 and ring * cell > MAX_SEARCH_M:
                break
            for ix in range(cx - ring, cx + ring + 1):
                on_edge = ix == cx - ring or ix == cx + ring
                for iy in range(cy - ring, cy + ring + 1):
                    if not on_edge and iy != cy - ring and iy != cy + ring:
                        continue
                    if iy < 0 or iy >= rows or ix < 0:
                        continue
                    key = ix * rows + iy
                    k = np.searchsorted(sorted_keys, key)
                    while k < sorted_keys.shape[0] and sorted_keys[k] == key:
                        p = order[k]
                        d = np.sqrt((xy[p, 0] - qx) ** 2 + (xy[p, 1] - qy) ** 2)
                        if d < best:
                            best, best_i = d, p
                        k += 1
            ring += 1
            if ring * cell > limit[q] + 2 * cell and best == np.inf:
                break
        if best <= limit[q]:
            distance[q] = best
            index[q] = best_i

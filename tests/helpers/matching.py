"""Nearest points in 3-D for the decoder checks: how far each reference point lies from the nearest decoded one."""
import numpy as np


def nearest_distances(points: np.ndarray, queries: np.ndarray, cell_m: float = 0.01) -> np.ndarray:
    """(M,) distance (m) from each of ``queries`` (M, 3) to the nearest of ``points`` (N, 3) within ``cell_m``
    (inf where none is that near): the points hashed into cubes of ``cell_m``, each query searching its cube and
    the 26 around it."""
    points = np.asarray(points, np.float64)
    queries = np.asarray(queries, np.float64)
    origin = np.minimum(points.min(axis=0), queries.min(axis=0)) - 2 * cell_m
    span = np.maximum(points.max(axis=0), queries.max(axis=0)) - origin + 2 * cell_m
    dims = (span // cell_m).astype(np.int64) + 2

    def keys(cells):
        return (cells[:, 0] * dims[1] + cells[:, 1]) * dims[2] + cells[:, 2]

    point_keys = keys(((points - origin) // cell_m).astype(np.int64))
    order = np.argsort(point_keys, kind="stable")
    sorted_keys = point_keys[order]
    query_cells = ((queries - origin) // cell_m).astype(np.int64)
    best = np.full(len(queries), np.inf)
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dz in (-1, 0, 1):
                k = keys(query_cells + np.array([dx, dy, dz]))
                lo, hi = np.searchsorted(sorted_keys, k), np.searchsorted(sorted_keys, k, side="right")
                count = hi - lo
                if not count.any():
                    continue
                query = np.repeat(np.arange(len(queries)), count)
                first = np.repeat(lo - np.cumsum(count) + count, count)  # each run's start, minus its offset
                candidate = order[first + np.arange(count.sum())]
                distance = np.linalg.norm(points[candidate] - queries[query], axis=1)
                np.minimum.at(best, query, distance)
    best[best > cell_m] = np.inf
    return best


def same_returns(decoded, reference) -> np.ndarray:
    """Per reference point (a structured array of nebula's fields): the azimuth difference (°) to the nearest
    decoded point of the same laser (ring), distance (1 mm) and intensity (inf: none)."""
    xyz = np.stack([decoded["x"], decoded["y"], decoded["z"]], axis=1).astype(np.float64)
    distance = np.linalg.norm(xyz, axis=1)
    azimuth = np.degrees(np.arctan2(xyz[:, 1], xyz[:, 0]))
    key = (decoded["ring"].astype(np.int64) * 256 + decoded["intensity"].astype(np.int64)) * 100_000 + np.rint(
        distance * 1000).astype(np.int64)
    order = np.argsort(key, kind="stable")
    ref_azimuth = np.degrees(np.arctan2(reference["y"], reference["x"]))
    best = np.full(len(reference), np.inf)
    for step in (-1, 0, 1):  # distances rounded to mm: the neighbouring millimetre too
        ref_key = (reference["channel"].astype(np.int64) * 256 + reference["intensity"].astype(np.int64)) * 100_000 \
            + np.rint(reference["distance"] * 1000).astype(np.int64) + step
        lo, hi = np.searchsorted(key[order], ref_key), np.searchsorted(key[order], ref_key, side="right")
        for k in np.flatnonzero(hi > lo):
            candidates = order[lo[k]:hi[k]]
            difference = np.abs((azimuth[candidates] - ref_azimuth[k] + 180.0) % 360.0 - 180.0)
            best[k] = min(best[k], float(difference.min()))
    return best

"""What every backend returns: the closest hit per ray, as named arrays."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit
from numpy.typing import ArrayLike, NDArray


@dataclass
class Hits:
    """Closest hit per ray, structure of arrays (world frame, metres).

    ``range_m`` is the distance along the unit direction from the ray's
    origin (``inf`` on a miss; behind transparent surfaces it counts the whole
    way); ``normal`` is the unit geometric normal turned to face the ray
    (zero on a miss); ``instance_id`` the scene instance hit (``-1`` on a miss);
    ``primitive_id`` the triangle index in that instance's mesh (``-1`` on a
    miss); ``u``, ``v`` the barycentric coordinates of the hit in that
    triangle; ``instance_index`` the instance's position in the scene's
    instance arrays at cast time (``-1`` on a miss), for per-instance lookups
    (every kernel and physics pass calls it the same).
    """

    range_m: NDArray[np.float32]  # (N,) float32
    hit: NDArray[np.bool_]  # (N,) bool
    normal: NDArray[np.float32]  # (N, 3) float32
    instance_id: NDArray[np.int64]  # (N,) int64
    primitive_id: NDArray[np.int32]  # (N,) int32
    u: NDArray[np.float32]  # (N,) float32
    v: NDArray[np.float32]  # (N,) float32
    instance_index: NDArray[np.int32]  # (N,) int32
    #: (N,) float32 share of power the ray's mirrors kept, out and back (None: no mirror on any ray, all 1)
    path_gain: NDArray[np.float32] | None = None

    def __len__(self) -> int:
        return len(self.range_m)

    @classmethod
    def from_instance_index(cls, range_m: NDArray[np.float32], normal: NDArray[np.float32],
                            instance_index: NDArray[np.int32], primitive_id: NDArray[np.int32],
                            u: NDArray[np.float32], v: NDArray[np.float32], instance_ids: ArrayLike,
                            path_gain: NDArray[np.float32] | None = None) -> Hits:
        """Hits from per-ray instance indices (``-1`` = miss); ``instance_ids`` maps index → scene instance id."""
        hit = np.empty(len(range_m), np.bool_)
        instance_id = np.empty(len(range_m), np.int64)
        _instance_ids_of(np.asarray(instance_index, np.int32), np.asarray(instance_ids, np.int64), range_m, hit,
                         instance_id)
        return cls(range_m, hit, normal, instance_id, primitive_id, u, v, instance_index, path_gain)

    @classmethod
    def empty(cls, n: int, path_gain: bool = False) -> Hits:
        """Uninitialised arrays for ``n`` rays, for a caster to fill (``out=`` of ``cast_batch``)."""
        return cls(np.empty(n, np.float32), np.empty(n, np.bool_), np.empty((n, 3), np.float32),
                   np.empty(n, np.int64), np.empty(n, np.int32), np.empty(n, np.float32), np.empty(n, np.float32),
                   np.empty(n, np.int32), np.empty(n, np.float32) if path_gain else None)

    def span(self, start: int, stop: int) -> Hits:
        """Rays ``start:stop`` as views: a caster filling them fills this batch (one time slice of a frame)."""
        # only path_gain may be None, and it stays None
        return Hits(*(None if a is None else a[start:stop] for a in self._arrays()))  # type: ignore[arg-type]

    def assign(self, other: Hits) -> Hits:
        """Copy ``other`` (same length) into these arrays; rays without a path gain in ``other`` keep all power."""
        for mine, theirs in zip(self._arrays()[:-1], other._arrays()[:-1]):
            mine[...] = theirs
        if self.path_gain is not None:
            self.path_gain[...] = 1.0 if other.path_gain is None else other.path_gain
        return self

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                               np.ndarray, np.ndarray | None]:
        return (self.range_m, self.hit, self.normal, self.instance_id, self.primitive_id, self.u, self.v,
                self.instance_index, self.path_gain)

    @classmethod
    def missed(cls, n: int) -> Hits:
        """``n`` rays that hit nothing."""
        return cls.from_instance_index(
            np.full(n, np.inf, np.float32), np.zeros((n, 3), np.float32), np.full(n, -1, np.int32),
            np.full(n, -1, np.int32), np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(0, np.int64))

    def replace(self, rays: np.ndarray, other: Hits, range_m: np.ndarray) -> None:
        """Overwrite rays ``rays`` with ``other``'s hits (``range_m`` their new ranges; misses where ``other`` missed)."""
        hit = other.hit & np.isfinite(range_m)
        self.range_m[rays] = np.where(hit, range_m, np.inf)
        self.hit[rays] = hit
        self.normal[rays] = np.where(hit[:, None], other.normal, 0.0)
        self.instance_id[rays] = np.where(hit, other.instance_id, -1)
        self.instance_index[rays] = np.where(hit, other.instance_index, -1)
        self.primitive_id[rays] = np.where(hit, other.primitive_id, -1)
        self.u[rays] = np.where(hit, other.u, 0.0)
        self.v[rays] = np.where(hit, other.v, 0.0)
        if other.path_gain is not None:
            if self.path_gain is None:
                self.path_gain = np.ones(len(self.range_m), np.float32)
            self.path_gain[rays] = other.path_gain


@njit(cache=True, nogil=True)
def _instance_ids_of(instance_index, instance_ids, range_m, hit, instance_id):  # type: ignore[no-untyped-def]
    """hit, instance id (−1 on a miss) and ``inf`` range of misses in one pass (numpy took five, ~2 ms a frame)."""
    for i in range(instance_index.shape[0]):
        k = instance_index[i]
        if k >= 0:
            hit[i] = True
            instance_id[i] = instance_ids[k]
        else:
            hit[i] = False
            instance_id[i] = -1
            range_m[i] = np.inf

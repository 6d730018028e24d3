"""Ray casting backends behind one interface.

A backend is built from a :class:`~lidar_fmu.scene.Scene`, follows the scene's
instance poses (``update()``, called by ``cast`` when the scene changed) and
casts rays given in the world frame into :class:`Hits`::

    backend = make_backend("auto", scene)
    hits = backend.cast(origins, directions, max_range_m=120.0)

Every backend returns the same named arrays for the same rays.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Hits", "BackendError", "make_backend", "available_backends"]


class BackendError(RuntimeError):
    """A backend was asked for that cannot run here."""


@dataclass
class Hits:
    """Closest hit per ray, structure of arrays (world frame, metres).

    ``range_m`` is the ray parameter along the unit direction (``inf`` on a
    miss); ``normal`` is the unit geometric normal turned to face the ray
    (zero on a miss); ``instance_id`` the scene instance hit (``-1`` on a miss);
    ``primitive_id`` the triangle index in that instance's mesh (``-1`` on a
    miss); ``u``, ``v`` the barycentric coordinates of the hit in that
    triangle; ``instance_index`` the instance's position in the scene's
    instance arrays at cast time (``-1`` on a miss), for per-instance lookups.
    """

    range_m: np.ndarray  # (N,) float32
    hit: np.ndarray  # (N,) bool
    normal: np.ndarray  # (N, 3) float32
    instance_id: np.ndarray  # (N,) int64
    primitive_id: np.ndarray  # (N,) int32
    u: np.ndarray  # (N,) float32
    v: np.ndarray  # (N,) float32
    instance_index: np.ndarray  # (N,) int32

    def __len__(self) -> int:
        return len(self.range_m)

    @classmethod
    def from_slots(cls, range_m, normal, instance_index, primitive_id, u, v, instance_ids) -> "Hits":
        """Hits from per-ray instance slots (``-1`` = miss); ``instance_ids`` maps slot → scene instance id."""
        hit = instance_index >= 0
        range_m[~hit] = np.inf
        slot = np.maximum(instance_index, 0)
        instance_id = np.where(hit, instance_ids[slot] if len(instance_ids) else 0, -1).astype(np.int64)
        return cls(range_m, hit, normal, instance_id, primitive_id, u, v, instance_index)

    @classmethod
    def missed(cls, n: int) -> "Hits":
        """``n`` rays that hit nothing."""
        slot = np.full(n, -1, np.int32)
        return cls.from_slots(np.full(n, np.inf, np.float32), np.zeros((n, 3), np.float32), slot,
                              np.full(n, -1, np.int32), np.zeros(n, np.float32), np.zeros(n, np.float32),
                              np.zeros(0, np.int64))

    def replace(self, rays: np.ndarray, other: "Hits", range_m: np.ndarray) -> None:
        """Overwrite rays ``rays`` with ``other``'s hits (``range_m`` their new ranges; misses where ``other`` missed)."""
        hit = other.hit & np.isfinite(range_m)
        self.range_m[rays] = np.where(hit, range_m, np.inf)
        self.hit[rays] = hit
        self.normal[rays] = other.normal
        self.instance_id[rays] = np.where(hit, other.instance_id, -1)
        self.instance_index[rays] = np.where(hit, other.instance_index, -1)
        self.primitive_id[rays] = np.where(hit, other.primitive_id, -1)
        self.u[rays] = other.u
        self.v[rays] = other.v


def as_rays(origins, directions):
    """Validate and normalise ray arrays → (origins (N,3) or (3,), unit directions (N,3)) float32."""
    d = np.asarray(directions, dtype=np.float32)
    if d.ndim != 2 or d.shape[1] != 3:
        raise ValueError(f"directions must be (N, 3), got {d.shape}")
    o = np.asarray(origins, dtype=np.float32)
    if o.shape not in ((3,), (len(d), 3)):
        raise ValueError(f"origins must be (3,) or ({len(d)}, 3), got {o.shape}")
    if not (np.all(np.isfinite(o)) and np.all(np.isfinite(d))):
        raise ValueError("ray origins/directions contain NaN or infinite values")
    squared = np.einsum("ij,ij->i", d, d)
    if np.abs(squared - 1.0).max(initial=0.0) > 1e-5:
        if np.any(squared == 0):
            raise ValueError("ray directions must be non-zero")
        d = d / np.sqrt(squared)[:, None]
    return np.ascontiguousarray(o), np.ascontiguousarray(d)


def available_backends() -> list[str]:
    names = ["embree"]
    if _has_cuda_backend() and cuda_available():
        names.insert(0, "cuda")
    return names


def cuda_available() -> bool:
    """True when numba-cuda sees a GPU (or the CUDA simulator is switched on)."""
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


def make_backend(name: str, scene):
    """Backend ``'auto' | 'embree' | 'embreex' | 'cuda'`` over ``scene``.

    ``embree`` calls the Embree 4 library of the embreex wheel directly (native
    instancing, ray packets) and falls back to ``embreex``, the same casts
    through embreex's Python API, where that library cannot be loaded.
    """
    name = (name or "auto").lower()
    if name == "auto":
        # the CUDA simulator runs ~1k rays/s: only a real GPU makes cuda the default
        name = "cuda" if _has_cuda_backend() and cuda_available() and not _cuda_simulated() else "embree"
    if name == "embree":
        from .embree_native import NativeEmbreeBackend, NativeEmbreeUnavailable

        try:
            return NativeEmbreeBackend(scene)
        except NativeEmbreeUnavailable:
            name = "embreex"
    if name == "embreex":
        from .embree import EmbreeBackend

        return EmbreeBackend(scene)
    if name == "cuda":
        if not _has_cuda_backend():
            raise BackendError("the CUDA backend is not part of this installation")
        if not cuda_available():
            raise BackendError(
                "backend 'cuda' needs an NVIDIA GPU with numba-cuda (or NUMBA_ENABLE_CUDASIM=1 for the simulator)"
            )
        from .cuda import CudaBackend

        return CudaBackend(scene)
    raise BackendError(f"unknown backend {name!r}; choose auto, embree, embreex or cuda")


def _cuda_simulated() -> bool:
    import os

    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _has_cuda_backend() -> bool:
    import importlib.util

    return importlib.util.find_spec(__name__ + ".cuda") is not None

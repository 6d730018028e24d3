"""Which backends this machine can run, and making one over a scene (:func:`make_backend`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .backend import Backend, BackendError

if TYPE_CHECKING:
    from ..geometry.scene import Scene


#: what :func:`make_backend` takes as a name (``--backend`` of every command)
BACKEND_NAMES = ("auto", "embree", "embreex", "cuda")


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


def make_backend(name: str, scene: Scene) -> Backend:
    """Backend ``'auto' | 'embree' | 'embreex' | 'cuda'`` over ``scene``.

    ``embree`` calls the Embree 4 library of the embreex wheel directly (native
    instancing, ray packets) and falls back to ``embreex``, the same casts
    through embreex's Python API, where that library cannot be loaded.
    """
    # each backend is imported once chosen: cuda brings numba-cuda (~0.4 s), embree4 loads the Embree library
    name = (name or "auto").lower()
    if name == "auto":
        # the CUDA simulator runs ~1k rays/s: only a real GPU makes cuda the default
        real_gpu = not _cuda_simulated() and _cuda_driver_present() and _has_cuda_backend() and cuda_available()
        name = "cuda" if real_gpu else "embree"
    if name == "embree":
        from .embree4 import EmbreeBackend, EmbreeUnavailable

        try:
            return EmbreeBackend(scene)
        except EmbreeUnavailable:
            name = "embreex"
    if name == "embreex":
        from .embreex import EmbreexBackend

        return EmbreexBackend(scene)
    if name == "cuda":
        if not _has_cuda_backend():
            raise BackendError("the CUDA backend is not part of this installation")
        if not cuda_available():
            raise BackendError(
                "backend 'cuda' needs an NVIDIA GPU with numba-cuda (or NUMBA_ENABLE_CUDASIM=1 for the simulator)"
            )
        from .cuda import CudaBackend

        return CudaBackend(scene)
    raise BackendError(f"unknown backend {name!r}; choose {', '.join(BACKEND_NAMES[:-1])} or {BACKEND_NAMES[-1]}")


def _cuda_driver_present() -> bool:
    """Any sign of an NVIDIA driver (device node or libcuda)? Cheap: no CUDA import, so ``auto`` on a
    machine without a GPU does not pay numba.cuda's ~0.4 s import at every start."""
    import ctypes.util
    import os

    return os.path.exists("/dev/nvidiactl") or any(ctypes.util.find_library(n) for n in ("cuda", "nvcuda"))


def _cuda_simulated() -> bool:
    import os

    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _has_cuda_backend() -> bool:
    import importlib.util

    return importlib.util.find_spec(__package__ + ".cuda") is not None

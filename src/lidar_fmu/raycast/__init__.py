"""Ray casting backends behind one contract (:class:`Backend`).

A backend is built from a :class:`~lidar_fmu.geometry.scene.Scene`, follows the scene's
instance poses and casts a :class:`RayBatch` into :class:`Hits`::

    backend = make_backend("auto", scene)
    hits = backend.cast_batch(RayBatch.from_pattern(sensor.pattern, world_from_sensor, sensor.max_range_m))
    hits = backend.cast(origins, directions, max_range_m=120.0)    # world-frame rays, the shorthand

* ``embree`` (:mod:`.embree4`): Embree 4's C API called directly (native instancing,
  8-ray packets); the default without a GPU;
* ``embreex`` (:mod:`.embreex`): the same casts through embreex's Python API,
  used where the Embree library cannot be loaded directly;
* ``cuda`` (:mod:`.cuda`): a two-level BVH on an NVIDIA GPU with Numba CUDA.

Every backend returns the same named arrays for the same rays.
"""
from __future__ import annotations

from ..physics.hit_rules import Continuation
from .backend import Backend, BackendError, CastJob
from .factory import available_backends, cuda_available, make_backend
from .hits import Hits
from .rays import RayBatch, as_rays

__all__ = ["Backend", "BackendError", "CastJob", "Continuation", "Hits", "RayBatch", "as_rays", "available_backends",
           "cuda_available", "make_backend"]

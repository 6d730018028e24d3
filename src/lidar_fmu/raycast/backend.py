"""The contract every caster keeps, and what they share.

A backend is built over a :class:`~lidar_fmu.scene.Scene`, follows its
instance poses (:meth:`Backend.update`, called by every cast) and answers two
calls with the same meaning on every device:

* :meth:`Backend.cast_batch`: a :class:`~.rays.RayBatch` (and a
  :class:`~.rays.Continuation`) → :class:`~.hits.Hits`, world frame
  (:meth:`Backend.cast` is its shorthand for world-frame rays);
* :meth:`Backend.returns`: a batch and a :class:`~lidar_fmu.physics.ReturnModel`
  → :class:`~lidar_fmu.physics.Returns`. By default the hits go through the
  CPU physics pass; a backend that runs the physics where its hits are (the
  CUDA one) overrides it, with results equal to the default's.

Rmagine's simulators, Open3D's ``RaycastingScene`` and trimesh's two
intersectors work this way: one interface, the device a constructor argument.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from .. import physics
from .hits import Hits
from .rays import Continuation, RayBatch

if TYPE_CHECKING:
    from ..physics import ReturnModel, Returns
    from ..scene import Scene

#: rays per thread below which splitting a batch over threads costs more than it saves
MIN_RAYS_PER_THREAD = 2048


class Backend(ABC):
    """A ray caster over one scene. Subclasses implement :meth:`update` and :meth:`cast_batch`."""

    #: the name ``make_backend`` knows it by
    name: ClassVar[str]

    def __init__(self, scene: Scene):
        self.scene = scene
        #: seconds of the last :meth:`returns`: ``cast`` (hits) and ``points`` (physics)
        self.last_timings: dict[str, float] = {}

    @abstractmethod
    def update(self) -> None:
        """Follow the scene: new meshes and instances, new poses (cheap when nothing changed)."""

    @abstractmethod
    def cast_batch(self, rays: RayBatch, through: Continuation | None = None) -> Hits:
        """Closest hit of every ray (world frame); rays go on through the surfaces ``through`` names."""

    def returns(self, rays: RayBatch, model: ReturnModel) -> Returns:
        """The returns of ``rays`` (in the batch's frame, ray order) under ``model``."""
        t0 = time.perf_counter()
        hits = self.cast_batch(rays, model.continuation())
        t1 = time.perf_counter()
        returns = physics.returns_of_hits(hits, rays, model)
        self.last_timings = {"cast": t1 - t0, "points": time.perf_counter() - t1}
        return returns

    def cast(self, origins, directions, max_range_m: float = np.inf) -> Hits:
        """Closest hits of world-frame rays ``origins + t·directions``, ``t ≤ max_range_m`` (m): a shorthand.

        ``origins``: ``(3,)`` or ``(N, 3)``; ``directions``: ``(N, 3)``,
        normalised here. Rays stop at the first surface.
        """
        return self.cast_batch(RayBatch.in_world(origins, directions, max_range_m))


def continue_by_recasting(cast_once, rays: RayBatch, through: Continuation) -> Hits:
    """:meth:`Backend.cast_batch` with a continuation, for a caster that can only stop at the first surface.

    ``cast_once(batch) → Hits``. Rays that :func:`~lidar_fmu.physics.goes_on`
    are cast again from :data:`~lidar_fmu.physics.CONTINUATION_STEP_M` behind
    their hit, in the same frame, and their ranges add up.
    """
    hits = cast_once(rays)
    for surfaces_passed in range(through.max_surfaces):
        going = np.flatnonzero(physics.rays_going_on(
            hits.instance_index, hits.primitive_id, surfaces_passed, through.max_surfaces,
            through.triangle_material, through.first_triangle, through.class_code))
        if len(going) == 0:
            break
        ahead = rays.select(going)
        travelled = (hits.range_m[going] + physics.CONTINUATION_STEP_M).astype(np.float32)
        starts = (ahead.origins + ahead.directions * travelled[:, None]).astype(np.float32)
        behind = cast_once(RayBatch(starts, ahead.directions, rays.world_from_frame, ahead.time_s, ahead.beam_id,
                                    max(rays.max_range_m - float(travelled.min()), 0.0)))
        total = behind.range_m + travelled
        hits.replace(going, behind, np.where(total <= rays.max_range_m, total, np.inf))
    return hits


__all__ = ["MIN_RAYS_PER_THREAD", "Backend", "continue_by_recasting"]

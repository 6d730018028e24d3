"""The contract every caster keeps, and what they share.

A backend is built over a :class:`~lidar_fmu.geometry.scene.Scene`, follows its
instance poses (:meth:`Backend.update`, called by every cast) and answers two
calls with the same meaning on every device:

* :meth:`Backend.cast_batch`: a :class:`~.rays.RayBatch` (and a
  :class:`~.rays.Continuation`) → :class:`~.hits.Hits`, world frame
  (:meth:`Backend.cast` is its shorthand for world-frame rays);
* :meth:`Backend.returns`: a batch and a :class:`~lidar_fmu.physics.returns.ReturnModel`
  → :class:`~lidar_fmu.pointcloud.Returns`, optionally in time slices (the scene
  posed anew before each run of rays: motion); :meth:`Backend.returns_together`
  does several such :class:`CastJob` (a rig's lidars) at once, posing the
  scene once for runs of different jobs that fire into the same poses. By
  default the hits of each batch go into one buffer, kept for the next frame,
  and then through one CPU physics pass; a backend that runs the physics
  where its hits are (the CUDA one) overrides it, with results equal to the
  default's.
"""
from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, ClassVar, NamedTuple, Protocol

import numpy as np
from numpy.typing import ArrayLike

from ..errors import LidarFmuError
from ..physics.hit_rules import CONTINUATION_STEP_M, PASS, REFLECT, STOP, Continuation, segments_after
from ..pointcloud import Returns
from .hits import Hits
from .rays import RayBatch

if TYPE_CHECKING:
    from ..geometry.scene import Scene

#: rays per thread below which splitting a batch over threads costs more than it saves
MIN_RAYS_PER_THREAD = 2048


class BackendError(LidarFmuError, RuntimeError):
    """A backend was asked for that cannot run here."""


class ReturnModel(Protocol):
    """What a job brings besides its rays: which surfaces rays go on through, and how hits become returns.

    :class:`lidar_fmu.physics.returns.ReturnModel` is the one implementation; a caster never imports it (the
    returns stage stands above the casters), it calls these two methods, and the CUDA backend also reads the
    model's arrays to run the same per-hit rules on the GPU.
    """

    def continuation(self) -> Continuation: ...

    def returns_of(self, hits: Hits, rays: RayBatch) -> Returns: ...


class SlicePose(Protocol):
    """The ``pose`` of a run of a :class:`CastJob` (:class:`lidar_fmu.scan.motion.ScenePose`): calling it poses the
    scene's moving instances ``ids``; poses with equal ``key`` set the same poses."""

    @property
    def key(self) -> Hashable: ...

    @property
    def ids(self) -> np.ndarray: ...

    def __call__(self) -> None: ...


class CastJob(NamedTuple):
    """One batch of rays to cast and turn into returns (:meth:`Backend.returns_together`)."""

    rays: RayBatch
    model: ReturnModel
    #: ``(start, stop, pose)`` runs of the batch, in firing order and covering it: ``pose()`` sets the scene as
    #: it stood while those rays fired, and poses with equal ``pose.key`` set the same poses
    #: (:class:`lidar_fmu.scan.motion.ScenePose`); ``None``: the whole batch into the scene as it is
    slices: Sequence[tuple[int, int, SlicePose | None]] | None = None
    #: puts the scene back once every job is cast (the end poses, after motion's slices)
    restore: Callable[[], None] | None = None


class Backend(ABC):
    """A ray caster over one scene. Subclasses implement :meth:`update` and :meth:`cast_batch`."""

    #: the name ``make_backend`` knows it by
    name: ClassVar[str]

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        #: seconds of the last :meth:`returns`: ``cast`` (hits) and ``points`` (physics)
        self.last_timings: dict[str, float] = {}
        self._hit_buffers: dict[tuple, Hits] = {}  # (thread, job, rays, with path gain) → hits of a job, reused

    @abstractmethod
    def update(self) -> None:
        """Follow the scene: new meshes and instances, new poses (cheap when nothing changed)."""

    @abstractmethod
    def cast_batch(self, rays: RayBatch, through: Continuation | None = None, out: Hits | None = None) -> Hits:
        """Closest hit of every ray (world frame); rays go on through the surfaces ``through`` names.

        ``out``: :class:`~.hits.Hits` of ``len(rays)`` to fill and return (every slot is written), e.g. a
        buffer kept across frames or one time slice of a frame's (:meth:`Hits.span`); with a
        ``through.max_bounces`` it needs a ``path_gain`` (:meth:`Hits.empty`).
        """

    def returns(self, rays: RayBatch, model: ReturnModel,
                slices: Sequence[tuple[int, int, SlicePose | None]] | None = None) -> Returns:
        """The returns of ``rays`` (in the batch's frame, ray order) under ``model``; ``slices``: as
        :attr:`CastJob.slices` (:func:`lidar_fmu.scan.motion.cast_moving`)."""
        return self.returns_together([CastJob(rays, model, slices)])[0]

    def returns_together(self, jobs: list[CastJob]) -> list[Returns]:
        """The returns of each job, cast into one scene: the runs of all jobs grouped by the poses they fire
        into, each group cast after one posing (a rig of lidars with the same frame shares its motion slices'
        scene updates), the scene as it is first; then each job's physics pass."""
        t0 = time.perf_counter()
        through = [job.model.continuation() for job in jobs]
        hits = [self._hit_buffer(k, len(job.rays), bool(t.max_bounces)) for k, (job, t) in enumerate(zip(jobs, through))]
        # pose key → (pose, [(job, start, stop)]), in first-fired order
        groups: dict[Hashable, tuple[SlicePose | None, list[tuple[int, int, int]]]] = {None: (None, [])}
        for k, job in enumerate(jobs):
            for start, stop, pose in job.slices or [(0, len(job.rays), None)]:
                groups.setdefault(None if pose is None else pose.key, (pose, []))[1].append((k, start, stop))
        posed: frozenset[int] = frozenset()  # the instances the last group moved away from their end poses
        self.focus(jobs)
        try:
            for pose, runs in groups.values():
                if pose is not None:
                    if not posed <= set(pose.ids.tolist()):  # a group moving fewer instances than the last: the
                        for job in jobs:  # others back to their end poses first
                            if job.restore is not None:
                                job.restore()
                    pose()
                    posed = frozenset(pose.ids.tolist())
                for k, start, stop in runs:
                    self.cast_span(jobs[k].rays, start, stop, through[k], hits[k])
        finally:
            self.focus(None)
            for job in jobs:
                if job.restore is not None:
                    job.restore()
        t1 = time.perf_counter()
        returns = [job.model.returns_of(h, job.rays) for h, job in zip(hits, jobs)]
        self.last_timings = {"cast": t1 - t0, "points": time.perf_counter() - t1}
        return returns

    def focus(self, jobs: list[CastJob] | None) -> None:
        """The casts to come are ``jobs``' rays (None: any rays): a caster may leave out of its scene what none of
        them can reach. This one keeps everything."""
        return None

    def cast_span(self, rays: RayBatch, start: int, stop: int, through: Continuation, hits: Hits) -> None:
        """Rays ``start:stop`` of ``rays`` into the same slots of ``hits`` (one time slice of a frame). A caster
        that orders rays for speed overrides it to keep the whole batch's order."""
        whole = stop - start == len(rays)  # the batch itself, not a view: casters key packet orders by its arrays
        self.cast_batch(rays if whole else rays.span(start, stop), through, out=hits if whole else hits.span(start, stop))

    def _hit_buffer(self, job: int, n: int, path_gain: bool) -> Hits:
        """Hits for ``n`` rays of job ``job``, the same arrays frame after frame (the physics pass copies out
        what it keeps): fresh arrays cost their page faults, ~1 ms per OS1-128 frame. Kept per thread, so
        that scans of a still scene from several threads do not share them (a scene posed for motion slices
        is one scan's at a time: :class:`~lidar_fmu.cosim.sensor_model.OsiSensorModel` steps its lidars together)."""
        key = (threading.get_ident(), job, n, path_gain)
        hits = self._hit_buffers.get(key)
        if hits is None:
            if len(self._hit_buffers) >= 8:  # a rig's lidars, a partial sweep: the last few sizes
                evict_oldest(self._hit_buffers)
            hits = self._hit_buffers[key] = Hits.empty(n, path_gain)
        return hits

    def cast(self, origins: ArrayLike, directions: ArrayLike, max_range_m: float = np.inf) -> Hits:
        """Closest hits of world-frame rays ``origins + t·directions``, ``t ≤ max_range_m`` (m): a shorthand.

        ``origins``: ``(3,)`` or ``(N, 3)``; ``directions``: ``(N, 3)``,
        normalised here. Rays stop at the first surface.
        """
        return self.cast_batch(RayBatch.in_world(origins, directions, max_range_m))


def into(out: Hits | None, hits: Hits) -> Hits:
    """``hits``, or copied into ``out`` when the caller gave one (a caster that cannot write in place)."""
    if out is None:
        return hits
    check_out(out, len(hits), None)
    if hits.path_gain is not None and out.path_gain is None:
        raise BackendError("out= has no path_gain for a cast that reflected off mirrors (Hits.empty(n, True))")
    return out.assign(hits)


def check_out(out: Hits, n: int, through: Continuation | None) -> None:
    """A caller's ``out=`` fits a cast of ``n`` rays (BackendError naming what does not)."""
    if len(out) != n:
        raise BackendError(f"out= holds {len(out)} rays, the cast has {n}")
    if through is not None and through.max_bounces and out.path_gain is None:
        raise BackendError("out= has no path_gain, and the cast may reflect off mirrors (Hits.empty(n, True))")


def evict_oldest(cache: dict) -> None:
    """Drop a small cache's oldest entry; another thread may be changing it (then there is nothing to do)."""
    try:
        cache.pop(next(iter(cache)), None)
    except (RuntimeError, StopIteration):  # changed during iteration, or emptied meanwhile
        pass


def continue_by_recasting(cast_once: Callable[[RayBatch], Hits], rays: RayBatch, through: Continuation) -> Hits:
    """:meth:`Backend.cast_batch` with a continuation, for a caster that can only stop at the first surface.

    ``cast_once(batch) → Hits``. Rays that :func:`~lidar_fmu.physics.hit_rules.segment_after` sends on are cast again
    in the same frame: behind a transparent surface from
    :data:`~lidar_fmu.physics.hit_rules.CONTINUATION_STEP_M` beyond it along the ray, off a mirror from that step
    along the reflected direction; their path lengths add up.
    """
    hits = cast_once(rays)
    if not (through.max_surfaces or through.max_bounces):
        return hits
    n = len(rays)
    # each ray's current segment: where it starts (frame), its direction (frame), the path length there
    seg_origin = np.broadcast_to(rays.origins, (n, 3)).astype(np.float32)
    seg_direction = rays.directions.copy()
    seg_path = np.zeros(n, np.float32)
    passed, bounced = np.zeros(n, np.int32), np.zeros(n, np.int32)
    unfold = gain = None  # per ray: the mirrors' reflection so far (world frame), the power they kept
    frame_from_world = np.asarray(rays.world_from_frame, np.float64)[:3, :3].T
    for _ in range(through.max_surfaces + through.max_bounces):
        action = segments_after(hits.instance_index, hits.primitive_id, passed, through.max_surfaces,
                                        bounced, through.max_bounces, through.triangle_material,
                                        through.first_triangle, through.class_code)
        going = np.flatnonzero(action != STOP)
        if len(going) == 0:
            break
        along = hits.range_m[going] - seg_path[going]  # from the segment's start to the surface
        mirrored = going[action[going] == REFLECT]
        if len(mirrored):
            if unfold is None:
                unfold, gain = np.tile(np.eye(3, dtype=np.float32), (n, 1, 1)), np.ones(n, np.float32)
            assert gain is not None  # set with unfold
            at = action[going] == REFLECT
            normal_world = hits.normal[mirrored].astype(np.float32)
            seg_origin[mirrored] += seg_direction[mirrored] * along[at][:, None]
            seg_path[mirrored] = hits.range_m[mirrored]
            along[at] = 0.0
            normal = (normal_world.astype(np.float64) @ frame_from_world.T).astype(np.float32)
            d = seg_direction[mirrored]
            seg_direction[mirrored] = d - 2.0 * np.einsum("ij,ij->i", d, normal)[:, None] * normal
            # M ← M·(I − 2nnᵀ), as physics.unfold_after does per ray in the compiled casters
            unfold[mirrored] -= 2.0 * np.einsum("kij,kj->ki", unfold[mirrored], normal_world)[:, :, None] \
                * normal_world[:, None, :]
            material = through.triangle_material[through.first_triangle[hits.instance_index[mirrored]]
                                                 + hits.primitive_id[mirrored]]
            gain[mirrored] *= through.specular[material] ** 2
            bounced[mirrored] += 1
        passed[going[action[going] == PASS]] += 1
        offset = (along + CONTINUATION_STEP_M).astype(np.float32)  # from the segment start to the next start
        starts = (seg_origin[going] + seg_direction[going] * offset[:, None]).astype(np.float32)
        travelled = (seg_path[going] + offset).astype(np.float32)
        behind = cast_once(RayBatch(starts, np.ascontiguousarray(seg_direction[going]), rays.world_from_frame,
                                    rays.time_s[going], rays.beam_id[going],
                                    max(rays.max_range_m - float(travelled.min()), 0.0)))
        total = behind.range_m + travelled
        hits.replace(going, behind, np.where(total <= rays.max_range_m, total, np.inf))
    if unfold is not None:  # the final surface's normal mirrored back into the original ray's frame
        ghosts = np.flatnonzero((bounced > 0) & hits.hit)
        hits.normal[ghosts] = np.einsum("kij,kj->ki", unfold[ghosts], hits.normal[ghosts])
        hits.path_gain = gain
    return hits


__all__ = ["MIN_RAYS_PER_THREAD", "Backend", "BackendError", "CastJob", "ReturnModel", "SlicePose", "check_out",
           "continue_by_recasting", "evict_oldest", "into"]

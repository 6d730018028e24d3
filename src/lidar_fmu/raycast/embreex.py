"""The ``embreex`` backend: Embree through embreex's Python API, where :mod:`.embree4` cannot load the library.

embreex offers one triangle scene per ``EmbreeScene``, single rays, float32,
no instancing, and ignores geometry added after the first ``run``. So each
distinct mesh gets one Embree scene in its own frame, built once; instances
are handled by moving candidate rays into their frames
(:mod:`.instancing`). ``run`` releases the GIL, so big batches are split
over a thread pool. Rays that go on through a surface are cast again from
behind it (:func:`.backend.continue_by_recasting`).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..geometry.transforms import rotate
from ..physics.hit_rules import Continuation
from .backend import MIN_RAYS_PER_THREAD, Backend, continue_by_recasting, into
from .hits import Hits
from .instancing import N_AZIMUTH_CELLS, N_Z_CELLS, InstanceTable, bin_directions, gather_candidates, merge_hits
from .rays import RayBatch

_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="embree")
    return _POOL


def build_mesh_scene(mesh):
    """One committed Embree scene for a mesh in its own frame."""
    from embreex import rtcore_scene
    from embreex.mesh_construction import TriangleMesh

    escene = rtcore_scene.EmbreeScene()
    TriangleMesh(escene, mesh.vertices, mesh.faces)
    # embreex commits on the first run; do it now so the build is paid here.
    escene.run(np.zeros((1, 3), np.float32), np.array([[1.0, 0.0, 0.0]], np.float32))
    return escene


class EmbreexBackend(Backend):
    """Two-level Embree caster over a :class:`~lidar_fmu.geometry.scene.Scene` through embreex's Python API."""

    name = "embreex"

    def __init__(self, scene, threads: int | None = None):
        super().__init__(scene)
        self.threads = max(1, threads or os.cpu_count() or 1)
        # id(mesh) → (mesh, EmbreeScene) for the scene's current meshes; the mesh is kept to check identity
        # (Python reuses a freed mesh's id)
        self._mesh_scenes: dict[int, tuple] = {}
        self._revision = -1
        self._pose_revision = -1
        self._bins_for = None
        self._bins_cached: tuple[np.ndarray, np.ndarray]  # (cell starts, ray order), set with _bins_for
        self.update()

    # -- scene following ------------------------------------------------------
    def update(self) -> None:
        """Build scenes for new meshes and re-read instance poses."""
        scene = self.scene
        if scene.revision != self._revision:
            kept = {}  # meshes that left the scene are dropped with their Embree scenes
            for mesh in scene.meshes:
                entry = self._mesh_scenes.get(id(mesh))
                kept[id(mesh)] = entry if entry is not None and entry[0] is mesh else (mesh, build_mesh_scene(mesh))
            self._mesh_scenes = kept
            self._table = InstanceTable([m.bounds for m in scene.meshes])
            mesh_index = np.asarray(scene.instance_mesh_index)
            # Big meshes first: the world usually occludes most rays, and its
            # hits shorten every later candidate test.
            by_size = sorted(set(mesh_index.tolist()), key=lambda m: -scene.meshes[m].triangle_count)
            self._groups = [(m, np.flatnonzero(mesh_index == m).astype(np.int32)) for m in by_size]
            self._revision = scene.revision
            self._pose_revision = -1
        if scene.pose_revision != self._pose_revision:
            self._table.refresh(scene)
            self._instance_ids = np.asarray(scene.instance_ids).copy()
            self._pose_revision = scene.pose_revision

    # -- casting ----------------------------------------------------------------
    def _all_rays(self, table, index, origin, rays, directions, best_t):
        """Every ray of ``rays`` (an index slice) as a candidate of instance ``index``."""
        M = table.local_from_frame[index]
        ld = directions[rays]
        if np.array_equal(M, np.eye(3, 4)):
            lo = origin
        else:
            lo = (M[:, :3] @ origin + M[:, 3]).astype(np.float32)
            ld = rotate(ld, M[:, :3])
        n = len(ld)
        ray = np.arange(rays.start, rays.start + n * rays.step, rays.step, dtype=np.int32)
        lo = np.broadcast_to(lo, (n, 3))  # embreex reads strided arrays; no copy
        return ray, np.full(n, index, np.int32), lo, ld, best_t[rays].copy()

    def _bins(self, directions, cache: bool):
        """Angular buckets of the rays (kept while the same pattern array is cast)."""
        if cache and self._bins_for is directions:
            return self._bins_cached
        bins = bin_directions(directions, N_AZIMUTH_CELLS, N_Z_CELLS)
        if cache:
            self._bins_for, self._bins_cached = directions, bins
        return bins

    def _cast_part(self, table, origins, directions, bins, best, part, parts):
        """Cast the rays ``i % parts == part`` through every mesh; writes only their entries of ``best``."""
        best_t, best_prim, best_inst, best_u, best_v, best_normal = best
        single_origin = origins.ndim == 1
        origins2d = origins[None, :] if single_origin else origins
        for mesh_index, instance_indices in self._groups:
            if single_origin and len(instance_indices) == 1 and table.contains(instance_indices[0], origins):
                # The sensor sits inside this instance's bounds (the world mesh):
                # every ray is a candidate, so move them all at once.
                ray, inst, lo, ld, tfar = self._all_rays(
                    table, instance_indices[0], origins, slice(part, len(directions), parts), directions, best_t)
            else:
                ray, inst, lo, ld, tfar = gather_candidates(
                    origins2d, directions, best_t, single_origin, bins[0], bins[1],
                    N_AZIMUTH_CELLS, N_Z_CELLS, instance_indices, table.local_from_frame,
                    table.box_lo, table.box_hi, table.center, table.radius, part, parts,
                )
            if len(ray) == 0:
                continue
            escene = self._mesh_scenes[id(self.scene.meshes[mesh_index])][1]
            res = escene.run(lo, ld, dists=tfar, output=1)  # overwrites tfar: it is ours
            merge_hits(
                ray, inst, res["tfar"], res["primID"], res["geomID"], res["u"], res["v"],
                res["Ng"], table.normal_from_local, directions,
                best_t, best_prim, best_inst, best_u, best_v, best_normal,
            )

    def _cast(self, table, origins, directions, max_range_m, cache_bins=False):
        """Closest hits with rays and instances expressed in one frame (normals in that frame).

        The rays are dealt out to the threads interleaved (ray i to thread
        i mod T), so neighbouring beams share the work evenly and each thread
        runs gather → Embree → merge on its own rays without locks.
        """
        n = len(directions)
        limit = np.float32(min(max_range_m, 3.0e38))
        best = (np.full(n, limit, np.float32), np.full(n, -1, np.int32), np.full(n, -1, np.int32),
                np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros((n, 3), np.float32))
        if origins.ndim == 1:
            bins = self._bins(directions, cache_bins)
        else:
            bins = (np.zeros(1, np.int64), np.zeros(0, np.int32))
        parts = min(self.threads, max(1, n // MIN_RAYS_PER_THREAD))
        futures = [_pool().submit(self._cast_part, table, origins, directions, bins, best, p, parts)
                   for p in range(1, parts)]
        self._cast_part(table, origins, directions, bins, best, 0, parts)
        for future in futures:
            future.result()
        best_t, best_prim, best_inst, best_u, best_v, best_normal = best
        return Hits.from_instance_index(best_t, best_normal, best_inst, best_prim, best_u, best_v, self._instance_ids)

    def cast_batch(self, rays: RayBatch, through: Continuation | None = None, out: Hits | None = None) -> Hits:
        self.update()
        if through is not None and (through.max_surfaces or through.max_bounces):  # glass or mirrors to follow
            return into(out, continue_by_recasting(self._cast_once, rays, through))
        return into(out, self._cast_once(rays))

    def _cast_once(self, rays: RayBatch) -> Hits:
        """Closest hits, stopping at the first surface.

        Rays in a sensor frame are cast against the instances moved into that
        frame (not the rays into the world), and the rays' angular buckets are
        kept between calls with the same ``directions`` array, so a lidar frame
        costs only its hits. Normals come back to the world frame.
        """
        origins = rays.origins[0] if rays.shared_origin else rays.origins
        if rays.in_world_frame:
            return self._cast(self._table, origins, rays.directions, rays.max_range_m, cache_bins=True)
        pose = rays.world_from_frame
        hits = self._cast(self._table.seen_from(pose), origins, rays.directions, rays.max_range_m, cache_bins=True)
        hits.normal = rotate(hits.normal, pose[:3, :3])
        return hits

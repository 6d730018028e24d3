"""Embree (``embreex``) backend: the CPU caster and default without a GPU.

embreex offers one triangle scene per ``EmbreeScene``, single rays, float32,
no instancing, and ignores geometry added after the first ``run``. So each
distinct mesh gets one Embree scene in its own frame, built once; instances
are handled by moving candidate rays into their frames
(:mod:`.instancing`). ``run`` releases the GIL, so big batches are split
over a thread pool.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import Hits, as_rays
from .instancing import (
    N_AZIMUTH_CELLS,
    N_Z_CELLS,
    InstanceTable,
    bin_directions,
    gather_candidates,
    merge_hits,
)

#: Rays per thread below which splitting a batch costs more than it saves.
MIN_RAYS_PER_THREAD = 2048
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


class EmbreeBackend:
    """Two-level Embree caster over a :class:`~lidar_fmu.scene.Scene`."""

    name = "embree"

    def __init__(self, scene, threads: int | None = None):
        self.scene = scene
        self.threads = max(1, threads or os.cpu_count() or 1)
        self._mesh_scenes: dict[int, object] = {}  # id(mesh) → EmbreeScene
        self._revision = -1
        self._pose_revision = -1
        self._arange = np.zeros(0, np.int32)
        self.update()

    # -- scene following ------------------------------------------------------
    def update(self) -> None:
        """Build scenes for new meshes and re-read instance poses."""
        scene = self.scene
        if scene.revision != self._revision:
            for mesh in scene.meshes:
                if id(mesh) not in self._mesh_scenes:
                    self._mesh_scenes[id(mesh)] = build_mesh_scene(mesh)
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
    def _run(self, escene, lo, ld, tfar):
        """embreex ``run`` over a batch, split across threads when it pays."""
        n = len(ld)
        parts = min(4 * self.threads, n // MIN_RAYS_PER_THREAD) if self.threads > 1 else 1
        if parts <= 1:
            return [(slice(0, n), escene.run(lo, ld, dists=tfar.copy(), output=1))]
        bounds = np.linspace(0, n, parts + 1).astype(int)
        slices = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        futures = [_pool().submit(escene.run, lo[s], ld[s], tfar[s].copy(), "INTERSECT", 1) for s in slices]
        return [(s, f.result()) for s, f in zip(slices, futures)]

    def _all_rays(self, slot, origin, directions, best_t):
        n = len(directions)
        if len(self._arange) < n:
            self._arange = np.arange(n, dtype=np.int32)
        M = self._table.local_from_world[slot]
        if np.array_equal(M, np.eye(3, 4)):
            lo, ld = origin, directions
        else:
            lo = (M[:, :3] @ origin + M[:, 3]).astype(np.float32)
            ld = directions @ M[:, :3].T.astype(np.float32)
        lo = np.broadcast_to(lo, (n, 3))  # embreex reads strided arrays; no copy
        return self._arange[:n], np.full(n, slot, np.int32), lo, ld, best_t

    def cast(self, origins, directions, max_range_m: float = np.inf) -> Hits:
        """Closest hits of rays ``origins + t·directions`` (world frame, m), t ≤ ``max_range_m``."""
        origins, directions = as_rays(origins, directions)
        self.update()
        n = len(directions)
        single_origin = origins.ndim == 1
        origins2d = origins[None, :] if single_origin else origins
        if single_origin:
            cell_start, order = bin_directions(directions, N_AZIMUTH_CELLS, N_Z_CELLS)
        else:
            cell_start, order = np.zeros(1, np.int64), np.zeros(0, np.int32)
        limit = np.float32(min(max_range_m, 3.0e38))
        best_t = np.full(n, limit, np.float32)
        best_prim = np.full(n, -1, np.int32)
        best_inst = np.full(n, -1, np.int32)
        best_u = np.zeros(n, np.float32)
        best_v = np.zeros(n, np.float32)
        best_normal = np.zeros((n, 3), np.float32)
        table = self._table
        for mesh_slot, slots in self._groups:
            if single_origin and len(slots) == 1 and table.contains(slots[0], origins):
                # The sensor sits inside this instance's bounds (the world mesh):
                # every ray is a candidate, so move them all at once.
                ray, inst, lo, ld, tfar = self._all_rays(slots[0], origins, directions, best_t)
            else:
                ray, inst, lo, ld, tfar = gather_candidates(
                    origins2d, directions, best_t, single_origin, cell_start, order,
                    N_AZIMUTH_CELLS, N_Z_CELLS, slots, table.local_from_world,
                    table.box_lo, table.box_hi, table.center, table.radius,
                )
            if len(ray) == 0:
                continue
            escene = self._mesh_scenes[id(self.scene.meshes[mesh_slot])]
            for part, res in self._run(escene, lo, ld, tfar):
                merge_hits(
                    ray[part], inst[part], res["tfar"], res["primID"], res["geomID"], res["u"], res["v"],
                    res["Ng"], table.normal_from_local, directions,
                    best_t, best_prim, best_inst, best_u, best_v, best_normal,
                )
        hit = best_inst >= 0
        best_t[~hit] = np.inf
        instance_id = np.where(hit, self._instance_ids[np.maximum(best_inst, 0)], -1) if len(self._instance_ids) else np.full(n, -1, np.int64)
        return Hits(best_t, hit, best_normal, instance_id.astype(np.int64), best_prim, best_u, best_v)

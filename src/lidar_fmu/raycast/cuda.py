"""Ray casting on an NVIDIA GPU with Numba CUDA (or its simulator, ``NUMBA_ENABLE_CUDASIM=1``).

Data on the device:

* built once per mesh (cached by ``id(mesh)``) and uploaded once per set of
  meshes: every mesh's BVH (:mod:`.bvh`) concatenated into single node and
  triangle arrays, each mesh found by its root node index;
* per step (``update()``, when ``scene.pose_revision`` changes): per instance
  its root node, ``local_from_world`` (3×4), ``normal_to_world`` (3×3 inverse
  transpose) and world box, all float32.

Kernel: one thread per ray. Each thread loops over all instances, culls them
by a slab test against their world box, moves the ray into the instance frame
(without renormalising, so ``t`` is the world range) and walks that mesh's
BVH with the same traversal code the CPU reference runs. The linear instance
loop costs O(instances) per ray; a top-level BVH over the instance boxes is
the next step for scenes with many instances.

Transparent surfaces are not handled here (``sees_through = False``): the
caller re-casts behind glass itself.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from . import Hits, as_rays
from .bvh import (
    STACK_SIZE,
    _intersect_closest_py,
    build_bvh,
    concatenate,
    instance_table,
    make_closest_over_instances,
)

THREADS_PER_BLOCK = 128
_INF = np.float32(np.inf)  # a float32 global: a literal would be float64 on the GPU

_traverse = cuda.jit(device=True)(_intersect_closest_py)
_closest = make_closest_over_instances(cuda.jit(device=True), _traverse)


@cuda.jit
def _cast_kernel(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, tri_index,
                 roots, local_from_world, normal_to_world, world_lo, world_hi,
                 origins, rotation, directions, tmax,
                 out_range, out_slot, out_prim, out_u, out_v, out_normal):
    """Closest hit of ray ``i`` = ``origins[i or 0] + t·rotation·directions[i]`` (world, m)."""
    i = cuda.grid(1)
    if i >= directions.shape[0]:
        return
    stack = cuda.local.array(STACK_SIZE, np.int32)
    io = i if origins.shape[0] > 1 else 0
    R = rotation
    sx, sy, sz = directions[i, 0], directions[i, 1], directions[i, 2]
    dx = R[0, 0] * sx + R[0, 1] * sy + R[0, 2] * sz
    dy = R[1, 0] * sx + R[1, 1] * sy + R[1, 2] * sz
    dz = R[2, 0] * sx + R[2, 1] * sy + R[2, 2] * sz
    t, slot, tri, u, v, nx, ny, nz = _closest(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2,
                                              roots, local_from_world, normal_to_world, world_lo, world_hi,
                                              origins[io, 0], origins[io, 1], origins[io, 2], dx, dy, dz,
                                              tmax, stack)
    out_slot[i] = slot
    if slot >= 0:
        out_range[i] = t
        out_prim[i] = tri_index[tri]
    else:
        out_range[i] = _INF
        out_prim[i] = -1
    # zeros on a miss (what the closest-hit search returns then)
    out_u[i] = u
    out_v[i] = v
    out_normal[i, 0] = nx
    out_normal[i, 1] = ny
    out_normal[i, 2] = nz


def kernel_signature():
    """Argument types of :func:`_cast_kernel` (for ahead-of-time PTX compilation checks)."""
    from numba import types as T

    f2, f3 = T.float32[:, ::1], T.float32[:, :, ::1]
    i1, f1 = T.int32[::1], T.float32[::1]
    return (f2, f2, i1, i1, f2, f2, f2, i1,  # BVH arrays, tri_index
            i1, f3, f3, f2, f2,  # instance table
            f2, f2, f2, T.float32,  # origins, rotation, directions, tmax
            f1, i1, i1, f1, f1, f2)  # outputs


class CudaBackend:
    """Numba-CUDA closest-hit caster over a :class:`~lidar_fmu.scene.Scene` (BVH per mesh, instance loop)."""

    name = "cuda"
    #: transparent surfaces are not stepped through here; the caller handles glass
    sees_through = False

    def __init__(self, scene):
        self.scene = scene
        self._bvhs: dict[int, tuple] = {}  # id(mesh) → (mesh, BVH); the mesh keeps its id unique
        self._uploaded_for: tuple = ()
        self._revision = -1
        self._pose_revision = -1
        self.update()

    def _bvh(self, mesh):
        entry = self._bvhs.get(id(mesh))
        if entry is None or entry[0] is not mesh:
            entry = (mesh, build_bvh(mesh.vertices, mesh.faces))
            self._bvhs[id(mesh)] = entry
        return entry[1]

    def _upload_meshes(self) -> None:
        """Concatenate every mesh's BVH into one set of device arrays (only when the meshes changed)."""
        meshes = tuple(id(m) for m in self.scene.meshes)
        if meshes == self._uploaded_for:
            return
        bvhs = [self._bvh(m) for m in self.scene.meshes]
        self._mesh_bvhs = bvhs
        if bvhs:
            arrays, tri_index, self._mesh_roots = concatenate(bvhs)
            self._d_bvh = tuple(cuda.to_device(a) for a in arrays) + (cuda.to_device(tri_index),)
        self._uploaded_for = meshes

    def update(self) -> None:
        """Follow the scene: upload new meshes' BVHs, then this step's instance table."""
        scene = self.scene
        if scene.revision == self._revision and scene.pose_revision == self._pose_revision:
            return
        if scene.revision != self._revision:
            self._upload_meshes()
            self._revision = scene.revision
        poses = np.asarray(scene.poses, dtype=np.float64).reshape(-1, 4, 4)
        mesh_index = np.asarray(scene.instance_mesh_index, dtype=np.int64)
        self._count = len(poses)
        if self._count:
            table = instance_table(self._mesh_bvhs, self._mesh_roots, mesh_index, poses)
            self._d_instances = tuple(cuda.to_device(a) for a in table)
        self._instance_ids = np.asarray(scene.instance_ids, dtype=np.int64).copy()
        self._pose_revision = scene.pose_revision

    def _cast(self, origins, directions, rotation, max_range_m) -> Hits:
        self.update()
        n = len(directions)
        if not (n and self._count):
            return Hits.missed(n)
        # every output element is written by the kernel: no upload of initial values
        outputs = (cuda.device_array(n, np.float32), cuda.device_array(n, np.int32), cuda.device_array(n, np.int32),
                   cuda.device_array(n, np.float32), cuda.device_array(n, np.float32),
                   cuda.device_array((n, 3), np.float32))
        rays = (cuda.to_device(np.ascontiguousarray(origins.reshape(-1, 3), dtype=np.float32)),
                cuda.to_device(np.ascontiguousarray(rotation, dtype=np.float32)),
                cuda.to_device(np.ascontiguousarray(directions, dtype=np.float32)))
        # a float32 scalar argument: a Python float would make the kernel compare in float64
        tmax = np.float32(min(max_range_m, 3.0e38))
        blocks = (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
        _cast_kernel[blocks, THREADS_PER_BLOCK](*self._d_bvh, *self._d_instances, *rays, tmax, *outputs)
        range_m, slot, prim, u, v, normal = (a.copy_to_host() for a in outputs)
        return Hits.from_slots(range_m, normal, slot, prim, u, v, self._instance_ids)

    def cast(self, origins, directions, max_range_m: float = np.inf) -> Hits:
        """Closest hits of rays ``origins + t·directions`` (world frame, m), t ≤ ``max_range_m``."""
        origins, directions = as_rays(origins, directions)
        return self._cast(origins, directions, np.eye(3), max_range_m)

    def cast_frame(self, world_from_sensor, directions, max_range_m: float = np.inf, see_through=None) -> Hits:
        """Cast unit ``directions`` given in a sensor frame from its origin; hits in the world frame.

        ``see_through`` is ignored (``sees_through = False``).
        """
        pose = np.asarray(world_from_sensor, dtype=np.float64)
        directions = np.ascontiguousarray(directions, dtype=np.float32)
        return self._cast(pose[:3, 3], directions, pose[:3, :3], max_range_m)

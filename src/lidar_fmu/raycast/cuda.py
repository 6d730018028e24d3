"""Ray casting on an NVIDIA GPU with Numba CUDA (or its simulator, ``NUMBA_ENABLE_CUDASIM=1``).

:class:`CudaBackend` keeps the scene's BVHs (:mod:`.bvh`, built on the CPU) resident on the device and uploads per
step only the instance table and a top-level BVH. Kernels, one thread per ray, walk the same two-level traversal
as the CPU twin (:func:`.bvh.cast_instances`): :func:`_cast_kernel` (:meth:`CudaBackend.cast_batch`: closest hits,
on through a :class:`~.rays.Continuation`'s surfaces, :func:`_closest_through`); :func:`_returns_kernel`
(:meth:`CudaBackend.returns`: the cast, then :func:`lidar_fmu.physics.hit_rules.return_of_hit`), whose returns
:func:`_compact_kernel` packs in ray order; :func:`_ranges_kernel` (:meth:`CudaBackend.cast_poses`: a range image
per pose). What lives on the device, the tests without a GPU and the parity: docs/backends.md#cuda-numba-cuda.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
from numba import cuda
from numba.cuda.extending import register_jitable  # type: ignore[attr-defined]  # not in numba's hints

from ..physics.hit_rules import (
    CONTINUATION_STEP_M,
    PASS,
    STOP,
    Continuation,
    face_reflectance_of_hit,
    material_of_hit,
    object_id_of,
    object_id_of_hit,
    reflect,
    return_of_hit,
    segment_after,
    semantic_of_hit,
    unfold_after,
)
from ..pointcloud import POINT_DTYPE, Returns, concatenate_returns
from .backend import Backend, into
from .bvh import (
    STACK_SIZE,
    _box_hit,
    _enter_nearer_child,
    _intersect_closest_py,
    _reciprocal,
    cached_bvh,
    concatenate,
    instance_table,
    make_closest_over_instances,
)
from .hits import Hits
from .rays import RayBatch

THREADS_PER_BLOCK = 128
_INF = np.float32(np.inf)  # float32 globals: a literal would be float64 on the GPU
_STEP = np.float32(CONTINUATION_STEP_M)
#: per-ray record of a return before packing: x, y, z, range, reflectivity, normal x, y, z (sensor frame),
#: intensity %, beam id, saturated, ray index, IR material, semantic class (integers exact in float32 below 2**24)
RECORD_FIELDS = ("x", "y", "z", "range", "reflectivity", "normal_x", "normal_y", "normal_z", "intensity", "beam_id",
                 "saturated", "ray_index", "material_id", "semantic")
_WIDTH = len(RECORD_FIELDS)

# the BVH's node steps, which both levels of the traversal call (before the traversal is compiled)
for _node_test in (_box_hit, _enter_nearer_child, _reciprocal):
    register_jitable(inline="always")(_node_test)
_traverse = cuda.jit(device=True)(_intersect_closest_py)
_closest = make_closest_over_instances(cuda.jit(device=True), _traverse)
# the CPU pass's own per-hit functions, compiled into these kernels (numba-cuda keeps its own registry)
for _per_hit in (material_of_hit, face_reflectance_of_hit, segment_after, reflect, unfold_after, object_id_of,
                 object_id_of_hit, semantic_of_hit, return_of_hit):
    register_jitable(inline="always")(_per_hit)


@cuda.jit(device=True)
def _to_world(P, x, y, z, w):
    """``P[:, :3]·(x, y, z) + w·P[:, 3]`` for a 3×4 pose: a point (w = 1) or a direction (w = 0)."""
    return (P[0, 0] * x + P[0, 1] * y + P[0, 2] * z + w * P[0, 3],
            P[1, 0] * x + P[1, 1] * y + P[1, 2] * z + w * P[1, 3],
            P[2, 0] * x + P[2, 1] * y + P[2, 2] * z + w * P[2, 3])


@cuda.jit(device=True)
def _closest_through(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, tri_index,
                     roots, local_from_world, normal_to_world, tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
                     ox, oy, oz, dx, dy, dz, tmax, max_surfaces, max_bounces, triangle_material, first_triangle,
                     class_code, specular, stack, top_stack):
    """Closest hit of a world ray, going on through the surfaces and off the mirrors :func:`segment_after` names.

    → (path length, instance index (-1: miss), BVH triangle, u, v, world
    normal, power kept by mirrors); behind a surface the ray starts again
    ``along`` its segment, off a mirror a step along the reflected direction,
    as :func:`~.backend.continue_by_recasting` does on the CPU; a ghost's
    normal is mirrored back into the original ray's frame. Zeros but the
    range (inf) on a miss.
    """
    zero = np.float32(0.0)
    one = np.float32(1.0)
    path = zero  # path length at the segment's origin (o)
    along = zero  # where along the segment the cast starts
    passed = 0
    bounced = 0
    gain = one
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = one, zero, zero, zero, one, zero, zero, zero, one
    for _ in range(max_surfaces + max_bounces + 1):
        t, index, tri, u, v, nx, ny, nz = _closest(
            node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, roots, local_from_world,
            normal_to_world, tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
            ox + dx * along, oy + dy * along, oz + dz * along, dx, dy, dz, tmax - path - along,
            stack, top_stack)
        t = t + along  # along the segment
        if index < 0 or path + t > tmax:
            break
        action = segment_after(index, tri_index[tri], passed, max_surfaces, bounced, max_bounces, triangle_material,
                               first_triangle, class_code)
        if action == STOP:
            if bounced > 0:
                nx, ny, nz = (m00 * nx + m01 * ny + m02 * nz, m10 * nx + m11 * ny + m12 * nz,
                              m20 * nx + m21 * ny + m22 * nz)
            return path + t, index, tri, u, v, nx, ny, nz, gain
        if action == PASS:
            passed += 1
            along = t + _STEP
        else:
            s = specular[material_of_hit(index, tri_index[tri], triangle_material, first_triangle)]
            gain = gain * s * s
            ox, oy, oz = ox + dx * t, oy + dy * t, oz + dz * t
            path = path + t
            dx, dy, dz = reflect(dx, dy, dz, nx, ny, nz)
            m00, m01, m02, m10, m11, m12, m20, m21, m22 = unfold_after(m00, m01, m02, m10, m11, m12, m20, m21, m22,
                                                                       nx, ny, nz)
            bounced += 1
            along = _STEP
    return _INF, -1, -1, zero, zero, zero, zero, zero, one


@cuda.jit
def _cast_kernel(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, tri_index,
                 roots, local_from_world, normal_to_world, tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
                 world_from_frame, origins, directions, tmax, max_surfaces, max_bounces, triangle_material,
                 first_triangle, class_code, specular, out_range, out_instance_index, out_prim, out_u, out_v,
                 out_normal, out_gain):
    """Closest hit of ray ``i`` = ``origins[i or 0] + t·directions[i]`` (a frame placed by the 3×4 ``world_from_frame``)."""
    i = cuda.grid(1)
    if i >= directions.shape[0]:
        return
    stack = cuda.local.array(STACK_SIZE, np.int32)
    top_stack = cuda.local.array(STACK_SIZE, np.int32)
    o = i if origins.shape[0] > 1 else 0
    ox, oy, oz = _to_world(world_from_frame, origins[o, 0], origins[o, 1], origins[o, 2], np.float32(1.0))
    dx, dy, dz = _to_world(world_from_frame, directions[i, 0], directions[i, 1], directions[i, 2], np.float32(0.0))
    t, index, tri, u, v, nx, ny, nz, gain = _closest_through(
        node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, tri_index, roots, local_from_world,
        normal_to_world, tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance, ox, oy, oz, dx, dy, dz, tmax,
        max_surfaces, max_bounces, triangle_material, first_triangle, class_code, specular, stack, top_stack)
    out_instance_index[i] = index
    out_gain[i] = gain
    out_range[i] = t
    out_prim[i] = tri_index[tri] if index >= 0 else -1
    out_u[i] = u
    out_v[i] = v
    out_normal[i, 0] = nx
    out_normal[i, 1] = ny
    out_normal[i, 2] = nz


@cuda.jit
def _returns_kernel(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, tri_index,
                    roots, local_from_world, normal_to_world, tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
                    world_from_frame, origins, directions, tmax, max_surfaces, max_bounces, triangle_material,
                    first_triangle, class_code, specular, frame_from_world, beam_id, instance_ids, reflectance_table,
                    lambertian_rho0, triangle_reflectance, triangle_object_id, triangle_semantic, instance_semantic,
                    min_range_m, limit_code, limit_a, limit_b, limit_c, limit_tail_refl, limit_tail_m, limit_max,
                    limit_floor_m, record, object_id, keep, block_count):
    """Ray ``i`` of a batch → its return, if any: the cast of :func:`_cast_kernel`, then :func:`return_of_hit`.

    Writes ``record[i]`` (:data:`RECORD_FIELDS`), ``object_id[i]`` and
    ``keep[i]``, and per block the number of returns (for packing).
    """
    i = cuda.grid(1)
    kept = False
    if i < directions.shape[0]:
        stack = cuda.local.array(STACK_SIZE, np.int32)
        top_stack = cuda.local.array(STACK_SIZE, np.int32)
        o = i if origins.shape[0] > 1 else 0
        fox, foy, foz = origins[o, 0], origins[o, 1], origins[o, 2]
        fdx, fdy, fdz = directions[i, 0], directions[i, 1], directions[i, 2]
        ox, oy, oz = _to_world(world_from_frame, fox, foy, foz, np.float32(1.0))
        dx, dy, dz = _to_world(world_from_frame, fdx, fdy, fdz, np.float32(0.0))
        t, index, tri, _u, _v, nx, ny, nz, gain = _closest_through(
            node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, tri_index, roots, local_from_world,
            normal_to_world, tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance, ox, oy, oz, dx, dy, dz, tmax,
            max_surfaces, max_bounces, triangle_material, first_triangle, class_code, specular, stack, top_stack)
        if index >= 0:
            material = material_of_hit(index, tri_index[tri], triangle_material, first_triangle)
            face_rho0 = face_reflectance_of_hit(index, tri_index[tri], triangle_reflectance, first_triangle)
            ok, px, py, pz, nsx, nsy, nsz, rho, percent, saturated = return_of_hit(
                t, material, face_rho0, nx, ny, nz,
                fox, foy, foz, fdx, fdy, fdz, frame_from_world, min_range_m, limit_code, limit_a, limit_b, limit_c,
                limit_tail_refl, limit_tail_m, limit_max, limit_floor_m, class_code, reflectance_table,
                lambertian_rho0, gain)
            if ok:
                kept = True
                record[i, 0] = px
                record[i, 1] = py
                record[i, 2] = pz
                record[i, 3] = t
                record[i, 4] = rho
                record[i, 5] = nsx
                record[i, 6] = nsy
                record[i, 7] = nsz
                record[i, 8] = percent
                record[i, 9] = beam_id[i]
                record[i, 10] = 1 if saturated else 0
                record[i, 11] = i
                record[i, 12] = material
                record[i, 13] = semantic_of_hit(index, tri_index[tri], triangle_semantic, first_triangle,
                                                instance_semantic)
                object_id[i] = object_id_of_hit(index, tri_index[tri], instance_ids[index], triangle_object_id,
                                                first_triangle)
        keep[i] = 1 if kept else 0
    count = cuda.syncthreads_count(1 if kept else 0)
    if cuda.threadIdx.x == 0:
        block_count[cuda.blockIdx.x] = count


@cuda.jit
def _compact_kernel(record, object_id, keep, block_count, out_record, out_object_id):
    """Pack the kept records in ray order: block ``b`` starts after the returns of blocks < b."""
    tid = cuda.threadIdx.x
    b = cuda.blockIdx.x
    i = b * THREADS_PER_BLOCK + tid
    partial = cuda.shared.array(THREADS_PER_BLOCK, np.int32)
    total = 0
    for j in range(tid, b, THREADS_PER_BLOCK):
        total += block_count[j]
    partial[tid] = total
    cuda.syncthreads()
    stride = THREADS_PER_BLOCK // 2
    while stride > 0:
        if tid < stride:
            partial[tid] += partial[tid + stride]
        cuda.syncthreads()
        stride //= 2
    base = partial[0]
    # inclusive scan of the keep flags within the block (Hillis–Steele)
    scan = cuda.shared.array(THREADS_PER_BLOCK, np.int32)
    flag = keep[i] if i < keep.shape[0] else 0
    scan[tid] = flag
    cuda.syncthreads()
    offset = 1
    while offset < THREADS_PER_BLOCK:
        add = scan[tid - offset] if tid >= offset else 0
        cuda.syncthreads()
        scan[tid] += add
        cuda.syncthreads()
        offset *= 2
    if flag:
        k = base + scan[tid] - 1
        for f in range(record.shape[1]):
            out_record[k, f] = record[i, f]
        out_object_id[k] = object_id[i]


@cuda.jit
def _ranges_kernel(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2,
                   roots, local_from_world, normal_to_world, tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
                   world_from_sensor, directions, tmax, out_range):
    """Ray ``j`` of pose ``p`` (thread ``p·N + j``) → ``out_range[p, j]`` (m, inf on a miss)."""
    i = cuda.grid(1)
    n = directions.shape[0]
    if i >= world_from_sensor.shape[0] * n:
        return
    p = i // n
    j = i - p * n
    stack = cuda.local.array(STACK_SIZE, np.int32)
    top_stack = cuda.local.array(STACK_SIZE, np.int32)
    P = world_from_sensor
    sx, sy, sz = directions[j, 0], directions[j, 1], directions[j, 2]
    dx = P[p, 0, 0] * sx + P[p, 0, 1] * sy + P[p, 0, 2] * sz
    dy = P[p, 1, 0] * sx + P[p, 1, 1] * sy + P[p, 1, 2] * sz
    dz = P[p, 2, 0] * sx + P[p, 2, 1] * sy + P[p, 2, 2] * sz
    t, index, _tri, _u, _v, _nx, _ny, _nz = _closest(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1,
                                                    tri_v2, roots, local_from_world, normal_to_world,
                                                    tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
                                                    P[p, 0, 3], P[p, 1, 3], P[p, 2, 3], dx, dy, dz, tmax, stack, top_stack)
    out_range[p, j] = t if index >= 0 else _INF


def kernel_signatures() -> dict:
    """Argument types of every kernel, as the backend passes them (for PTX compilation without a GPU)."""
    from numba import types as T

    f1, f2, f3 = T.float32[::1], T.float32[:, ::1], T.float32[:, :, ::1]
    i1 = T.int32[::1]
    bvh = (f2, f2, i1, i1, f2, f2, f2)
    instances = (i1, f3, f3, f2, f2, i1, i1, i1)
    # world_from_frame, origins, directions, tmax, then the Continuation
    rays = (f2, f2, f2, T.float32, T.int32, T.int32, T.int16[::1], T.int64[::1], T.int8[::1], f1)
    # frame_from_world, beam_id, instance_ids, reflectance_table, lambertian_rho0, triangle_reflectance,
    # triangle_object_id, triangle_semantic, instance_semantic, then ReturnModel.limit_args(): min_range_m, fit code,
    # a, b, c, tail R_lo, tail r_lo, max range, limit_floor_m
    physics = (T.float64[:, ::1], T.uint32[::1], T.int64[::1], f2, T.float64[::1], f1, T.uint64[::1], T.uint8[::1],
               T.uint8[::1], T.float32, T.int64, T.float64, T.float64, T.float64, T.float64, T.float64, T.float64, T.float64[::1])
    return {
        "_cast_kernel": (_cast_kernel, bvh + (i1,) + instances + rays + (f1, i1, i1, f1, f1, f2, f1)),
        "_returns_kernel": (_returns_kernel, bvh + (i1,) + instances + rays + physics + (f2, T.uint64[::1], i1, i1)),
        "_compact_kernel": (_compact_kernel, (f2, T.uint64[::1], i1, i1, f2, T.uint64[::1])),
        "_ranges_kernel": (_ranges_kernel, bvh + instances + (f3, f2, T.float32, f2)),
    }


def _blocks(n: int) -> int:
    return (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK


def _tmax(max_range_m: float) -> np.float32:
    # a float32 scalar argument: a Python float would make the kernel compare in float64
    return np.float32(min(max_range_m, 3.0e38))


class CudaBackend(Backend):
    """Numba-CUDA caster over a :class:`~lidar_fmu.geometry.scene.Scene`: BVH per mesh, top-level BVH over instances.

    :meth:`returns` runs a whole batch on the GPU (cast, continuation,
    :func:`~lidar_fmu.physics.hit_rules.return_of_hit`) and copies back only returns.
    """

    name = "cuda"
    #: poses per batched launch at most rays × poses ≤ this (bounds the device range image, 4 B per ray)
    BATCH_RAYS = 1 << 27

    def __init__(self, scene):
        super().__init__(scene)
        # id(mesh) → (mesh, BVH) for the scene's current meshes; the mesh is kept to check identity
        self._bvhs: dict[int, tuple] = {}
        self._resident: dict[str, tuple] = {}  # name → (host array, device array)
        self._buffers: dict[str, Any] = {}  # device arrays (numba-cuda has no type hints)
        self._uploaded_for: tuple = ()  # the meshes (objects, not ids: ids are reused) last uploaded
        self._revision = -1
        self._pose_revision = -1
        #: seconds of the last :meth:`update` spent building BVHs (per-mesh builds or disk loads, the top level)
        self.build_s = 0.0
        self.update()

    # ------------------------------------------------------------------ residency
    def _bvh(self, mesh):
        entry = self._bvhs.get(id(mesh))
        if entry is None or entry[0] is not mesh:
            entry = (mesh, cached_bvh(mesh.vertices, mesh.faces))
            self._bvhs[id(mesh)] = entry
        return entry[1]

    def _on_device(self, name: str, host: np.ndarray):
        """``host`` on the device, uploaded only when a different host array comes under ``name``."""
        entry = self._resident.get(name)
        if entry is None or entry[0] is not host:
            entry = (host, cuda.to_device(np.ascontiguousarray(host)))
            self._resident[name] = entry
        return entry[1]

    def _buffer(self, name: str, shape, dtype):
        """A device scratch array of at least ``shape[0]`` rows, reused across frames (no allocation per step)."""
        buf = self._buffers.get(name)
        if buf is None or buf.shape[0] < shape[0] or buf.shape[1:] != tuple(shape[1:]):
            buf = cuda.device_array((max(shape[0], 1),) + tuple(shape[1:]), dtype)
            self._buffers[name] = buf
        return buf

    def _upload_meshes(self) -> None:
        """Concatenate every mesh's BVH into one set of device arrays (only when the meshes changed)."""
        meshes = tuple(self.scene.meshes)
        if len(meshes) == len(self._uploaded_for) and all(a is b for a, b in zip(meshes, self._uploaded_for)):
            return
        bvhs = [self._bvh(m) for m in meshes]
        # meshes that left the scene are dropped with their BVHs
        self._bvhs = {id(m): self._bvhs[id(m)] for m in meshes}
        self._mesh_bvhs = bvhs
        if bvhs:
            arrays, tri_index, self._mesh_roots = concatenate(bvhs)
            self._d_bvh = tuple(cuda.to_device(a) for a in arrays)
            self._d_tri_index = cuda.to_device(tri_index)
        self._uploaded_for = meshes

    def update(self) -> None:
        """Follow the scene: upload new meshes' BVHs, then this step's instance table and top-level BVH."""
        scene = self.scene
        if scene.revision == self._revision and scene.pose_revision == self._pose_revision:
            return
        t0 = time.perf_counter()
        if scene.revision != self._revision:  # meshes or instances added/removed: ids and instance indices change too
            self._upload_meshes()
            self._instance_ids = np.asarray(scene.instance_ids, dtype=np.int64).copy()
            self._d_instance_ids = cuda.to_device(self._instance_ids if len(self._instance_ids)
                                                  else np.zeros(1, np.int64))
            self._revision = scene.revision
        poses = np.asarray(scene.poses, dtype=np.float64).reshape(-1, 4, 4)
        mesh_index = np.asarray(scene.instance_mesh_index, dtype=np.int64)
        self._count = len(poses)
        if self._count:
            table = instance_table(self._mesh_bvhs, self._mesh_roots, mesh_index, poses)
            self._d_instances = tuple(cuda.to_device(a) for a in table)
        self._pose_revision = scene.pose_revision
        self.build_s = time.perf_counter() - t0

    # ------------------------------------------------------------------ the contract
    def _ray_args(self, rays: RayBatch, through: Continuation) -> tuple:
        """The kernels' ray and continuation arguments; the pattern's arrays stay resident between frames."""
        return (cuda.to_device(np.ascontiguousarray(rays.world_from_frame[:3, :4], np.float32)),
                self._on_device("origins", rays.origins), self._on_device("directions", rays.directions),
                _tmax(rays.max_range_m), np.int32(through.max_surfaces), np.int32(through.max_bounces),
                self._on_device("triangle_material", through.triangle_material),
                self._on_device("first_triangle", through.first_triangle),
                self._on_device("class_code", through.class_code), self._on_device("specular", through.specular))

    def cast_batch(self, rays: RayBatch, through: Continuation | None = None, out: Hits | None = None) -> Hits:
        self.update()
        n = len(rays)
        if not (n and self._count):
            return into(out, Hits.missed(n))
        # every output element is written by the kernel: no upload of initial values
        through = through or Continuation.none()
        outputs = (cuda.device_array(n, np.float32), cuda.device_array(n, np.int32), cuda.device_array(n, np.int32),
                   cuda.device_array(n, np.float32), cuda.device_array(n, np.float32),
                   cuda.device_array((n, 3), np.float32), cuda.device_array(n, np.float32))
        _cast_kernel[_blocks(n), THREADS_PER_BLOCK](*self._d_bvh, self._d_tri_index, *self._d_instances,
                                                    *self._ray_args(rays, through), *outputs)
        range_m, instance_index, prim, u, v, normal, gain = (a.copy_to_host() for a in outputs)
        return into(out, Hits.from_instance_index(range_m, normal, instance_index, prim, u, v, self._instance_ids,
                                                  gain if through.max_bounces else None))

    def returns(self, rays: RayBatch, model, slices=None) -> Returns:
        """The whole batch on the GPU, slice by slice; equal to the CPU pass over :meth:`cast`'s hits (the
        simulator test holds it)."""
        if slices is None:
            return self._returns(rays, model)
        t0, parts = time.perf_counter(), []
        for start, stop, pose in slices:
            pose()
            part = self._returns(rays.span(start, stop), model)
            parts.append(part._replace(ray_index=part.ray_index + np.int32(start)))
        self.last_timings = {"cast": time.perf_counter() - t0, "points": 0.0}
        return concatenate_returns(parts)

    def returns_together(self, jobs) -> list[Returns]:
        """Job by job (each slice's physics runs on the GPU with its hits), the scene put back after each job's
        slices: the next job may fire into the scene as it is."""
        t0, out = time.perf_counter(), []
        for job in jobs:
            try:
                out.append(self.returns(job.rays, job.model, job.slices))
            finally:
                if job.restore is not None:
                    job.restore()
        self.last_timings = {"cast": time.perf_counter() - t0, "points": 0.0}
        return out

    def _returns(self, rays: RayBatch, model) -> Returns:
        t0 = time.perf_counter()
        self.update()
        n = len(rays)
        if not (n and self._count):
            self.last_timings = {"cast": time.perf_counter() - t0, "points": 0.0}
            return Returns(np.zeros(0, POINT_DTYPE), np.zeros(0, np.int32), np.zeros(0, np.float32),
                           np.zeros(0, np.int16), np.zeros(0, np.uint8))
        blocks = _blocks(n)
        record = self._buffer("record", (n, _WIDTH), np.float32)
        object_id = self._buffer("object_id", (n,), np.uint64)
        keep = self._buffer("keep", (n,), np.int32)
        block_count = self._buffer("block_count", (blocks,), np.int32)
        out_record = self._buffer("out_record", (n, _WIDTH), np.float32)
        out_object_id = self._buffer("out_object_id", (n,), np.uint64)
        min_range_m, *limit, limit_floor_m = model.limit_args()
        _returns_kernel[blocks, THREADS_PER_BLOCK](
            *self._d_bvh, self._d_tri_index, *self._d_instances, *self._ray_args(rays, model.continuation()),
            cuda.to_device(np.ascontiguousarray(rays.world_from_frame[:3, :3].T, np.float64)),
            self._on_device("beam_id", rays.beam_id), self._d_instance_ids,
            self._on_device("reflectance_table", model.reflectance_table),
            self._on_device("lambertian_rho0", model.lambertian_rho0),
            self._on_device("triangle_reflectance", model.triangle_reflectance),
            self._on_device("triangle_object_id", model.triangle_object_id),
            self._on_device("triangle_semantic", model.triangle_semantic),
            self._on_device("instance_semantic", model.instance_semantic),
            min_range_m, *limit, self._on_device("limit_floor_m", limit_floor_m),
            record, object_id, keep, block_count)
        _compact_kernel[blocks, THREADS_PER_BLOCK](record, object_id, keep[:n], block_count[:blocks],
                                                   out_record, out_object_id)
        m = int(block_count[:blocks].copy_to_host().sum())
        packed = out_record[:m].copy_to_host() if m else np.zeros((0, _WIDTH), np.float32)
        points = np.empty(m, POINT_DTYPE)
        for k, name in enumerate(("x", "y", "z", "range", "reflectivity", "normal_x", "normal_y", "normal_z")):
            points[name] = packed[:, k]
        points["beam_id"] = packed[:, 9]
        points["saturated"] = packed[:, 10]
        points["object_id"] = out_object_id[:m].copy_to_host() if m else np.zeros(0, np.uint64)
        points["echo"] = 0
        self.last_timings = {"cast": time.perf_counter() - t0, "points": 0.0}
        return Returns(points, packed[:, 11].astype(np.int32), np.ascontiguousarray(packed[:, 8]),
                       packed[:, 12].astype(np.int16), packed[:, 13].astype(np.uint8))

    def cast_poses(self, world_from_sensor, directions, max_range_m: float = np.inf, to_host: bool = True):
        """Batched casting: ``directions`` (N, 3, sensor frame) from each of ``world_from_sensor`` (P, 4, 4).

        → range image (P, N) float32 in m, ``inf`` on a miss: a host array, or
        with ``to_host=False`` the device array (the last launch's poses only
        when the batch needed several launches).
        """
        self.update()
        poses = np.asarray(world_from_sensor, np.float64).reshape(-1, 4, 4)
        d = np.ascontiguousarray(directions, np.float32)
        n = len(d)
        out = np.full((len(poses), n), np.inf, np.float32) if to_host else None
        if not (n and self._count and len(poses)):
            return out if to_host else cuda.to_device(np.full((len(poses), n), np.inf, np.float32))
        d_dirs = cuda.to_device(d)
        per_launch = max(1, self.BATCH_RAYS // n)
        for start in range(0, len(poses), per_launch):
            chunk = np.ascontiguousarray(poses[start:start + per_launch, :3, :4], np.float32)
            ranges = self._buffer("ranges", (len(chunk), n), np.float32)[:len(chunk)]
            _ranges_kernel[_blocks(len(chunk) * n), THREADS_PER_BLOCK](
                *self._d_bvh, *self._d_instances, cuda.to_device(chunk), d_dirs, _tmax(max_range_m), ranges)
            if out is not None:  # to_host
                ranges.copy_to_host(out[start:start + len(chunk)])
        return out if to_host else ranges


def device_name() -> str:
    """The GPU numba-cuda uses, for benchmark headers."""
    try:
        device = cuda.get_current_device()
        name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
        return f"{name} (compute capability {'.'.join(map(str, device.compute_capability))})"
    except Exception as exc:  # simulator or no driver
        return f"unknown device ({exc.__class__.__name__})"


__all__ = ["RECORD_FIELDS", "CudaBackend", "device_name", "kernel_signatures"]

"""Ray casting on an NVIDIA GPU with Numba CUDA (or its simulator, ``NUMBA_ENABLE_CUDASIM=1``).

Resident on the device:

* every mesh's BVH (:mod:`.bvh`, built on the CPU, cached on disk per asset)
  concatenated into single node and triangle arrays, each mesh found by its
  root node index; uploaded when the set of meshes changes;
* the sensor pattern's directions and beam ids, and the scene's per-triangle
  IR materials, uploaded once;
* per step (when ``scene.pose_revision`` changes): per instance its root node,
  ``local_from_world`` (3×4) and ``normal_to_world`` (3×3), plus a top-level
  BVH over the instances' world boxes, rebuilt on the CPU (only poses change).

Kernels, one thread per ray, all walking the same two-level traversal the
CPU twin (:func:`.bvh.cast_instances`) runs:

* :func:`_returns_kernel`: a frame from a sensor pose (only the 3×4 pose goes
  up; rays are made on the GPU from the resident pattern), cast on through
  transparent surfaces, and the per-hit physics of
  :func:`lidar_fmu.physics.return_of_hit` (materials, incidence angle, range
  limit); :func:`_compact_kernel` then packs the returns in ray order, so only
  returns come back;
* :func:`_cast_kernel`: plain closest hits (:class:`~lidar_fmu.raycast.Hits`),
  the interface every backend shares;
* :func:`_ranges_kernel`: many sensor poses in one launch → a range image per
  pose (batched casting).
"""
from __future__ import annotations

import time

import numpy as np
from numba import cuda

from ..physics import (
    INTENSITY_REFERENCE_RANGE_M,
    TRANSPARENT,
    TRANSPARENT_STEP_M,
    make_return_of_hit,
)
from ..pointcloud import ENVIRONMENT_ID_BASE, NO_OBJECT_ID, POINT_DTYPE
from ..range_limit import range_limit_m
from . import Hits, as_rays
from .bvh import (
    STACK_SIZE,
    _intersect_closest_py,
    cached_bvh,
    concatenate,
    instance_table,
    make_closest_over_instances,
)

THREADS_PER_BLOCK = 128
_INF = np.float32(np.inf)  # float32 globals: a literal would be float64 on the GPU
_STEP = np.float32(TRANSPARENT_STEP_M)
_TRANSPARENT = np.int8(TRANSPARENT)
#: per-ray record of a return before packing: x, y, z, range, reflectivity, normal x, y, z (sensor frame),
#: intensity %, beam id, saturated, ray index (integers exact in float32 below 2**24)
RECORD_FIELDS = ("x", "y", "z", "range", "reflectivity", "normal_x", "normal_y", "normal_z", "intensity", "beam_id",
                 "saturated", "ray_index")
_WIDTH = len(RECORD_FIELDS)

_traverse = cuda.jit(device=True)(_intersect_closest_py)
_closest = make_closest_over_instances(cuda.jit(device=True), _traverse)
_return_of_hit = make_return_of_hit(cuda.jit(device=True), cuda.jit(device=True)(range_limit_m.py_func))


@cuda.jit
def _cast_kernel(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, tri_index,
                 roots, local_from_world, normal_to_world, tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
                 origins, rotation, directions, tmax,
                 out_range, out_slot, out_prim, out_u, out_v, out_normal):
    """Closest hit of ray ``i`` = ``origins[i or 0] + t·rotation·directions[i]`` (world, m)."""
    i = cuda.grid(1)
    if i >= directions.shape[0]:
        return
    stack = cuda.local.array(STACK_SIZE, np.int32)
    top_stack = cuda.local.array(STACK_SIZE, np.int32)
    io = i if origins.shape[0] > 1 else 0
    R = rotation
    sx, sy, sz = directions[i, 0], directions[i, 1], directions[i, 2]
    dx = R[0, 0] * sx + R[0, 1] * sy + R[0, 2] * sz
    dy = R[1, 0] * sx + R[1, 1] * sy + R[1, 2] * sz
    dz = R[2, 0] * sx + R[2, 1] * sy + R[2, 2] * sz
    t, slot, tri, u, v, nx, ny, nz = _closest(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2,
                                              roots, local_from_world, normal_to_world,
                                              tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
                                              origins[io, 0], origins[io, 1], origins[io, 2], dx, dy, dz,
                                              tmax, stack, top_stack)
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


@cuda.jit
def _returns_kernel(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, tri_index,
                    roots, local_from_world, normal_to_world, tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
                    world_from_sensor, sensor_from_world, directions, beam_id, instance_ids, tmax, max_layers,
                    triangles, slot_offset, class_code, reflectance_table, lambertian_rho0,
                    min_range_m, limit_code, limit_a, limit_b, limit_c, limit_max, limit_floor_m,
                    env_base, no_object, reference_range_m,
                    record, object_id, keep, block_count):
    """Ray ``i`` of the pattern from ``world_from_sensor`` (3×4, float32) → its return, if any.

    Writes ``record[i]`` (:data:`RECORD_FIELDS`), ``object_id[i]`` and
    ``keep[i]``, and per block the number of returns (for packing).
    """
    i = cuda.grid(1)
    kept = False
    if i < directions.shape[0]:
        stack = cuda.local.array(STACK_SIZE, np.int32)
        top_stack = cuda.local.array(STACK_SIZE, np.int32)
        P = world_from_sensor
        sx, sy, sz = directions[i, 0], directions[i, 1], directions[i, 2]
        dx = P[0, 0] * sx + P[0, 1] * sy + P[0, 2] * sz
        dy = P[1, 0] * sx + P[1, 1] * sy + P[1, 2] * sz
        dz = P[2, 0] * sx + P[2, 1] * sy + P[2, 2] * sz
        # behind a transparent surface the ray goes on straight from just past it: the same starts
        # (origin + travelled·d) and ranges (travelled + t) as the CPU re-cast
        travelled = np.float32(0.0)
        slot = -1
        t = travelled
        material = 0
        nx = ny = nz = travelled
        for layer in range(max_layers + 1):
            t, slot, tri, _u, _v, nx, ny, nz = _closest(
                node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, roots, local_from_world,
                normal_to_world, tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
                P[0, 3] + dx * travelled, P[1, 3] + dy * travelled, P[2, 3] + dz * travelled, dx, dy, dz,
                tmax - travelled, stack, top_stack)
            if slot < 0:
                break
            t = t + travelled
            if t > tmax:
                slot = -1
                break
            material = triangles[slot_offset[slot] + tri_index[tri]]
            if class_code[material] != _TRANSPARENT or layer == max_layers:
                break
            travelled = t + _STEP
        if slot >= 0:
            ok, nsx, nsy, nsz, rho, percent, saturated = _return_of_hit(
                t, material, nx, ny, nz, sx, sy, sz, sensor_from_world, min_range_m, limit_code, limit_a, limit_b,
                limit_c, limit_max, limit_floor_m, class_code, reflectance_table, lambertian_rho0, reference_range_m)
            if ok:
                kept = True
                record[i, 0] = t * sx
                record[i, 1] = t * sy
                record[i, 2] = t * sz
                record[i, 3] = t
                record[i, 4] = rho
                record[i, 5] = nsx
                record[i, 6] = nsy
                record[i, 7] = nsz
                record[i, 8] = percent
                record[i, 9] = beam_id[i]
                record[i, 10] = 1 if saturated else 0
                record[i, 11] = i
                iid = instance_ids[slot]
                object_id[i] = no_object if iid >= env_base else np.uint64(iid)
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
    t, slot, _tri, _u, _v, _nx, _ny, _nz = _closest(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1,
                                                    tri_v2, roots, local_from_world, normal_to_world,
                                                    tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
                                                    P[p, 0, 3], P[p, 1, 3], P[p, 2, 3], dx, dy, dz, tmax, stack, top_stack)
    out_range[p, j] = t if slot >= 0 else _INF


def kernel_signatures() -> dict:
    """Argument types of every kernel, as the backend passes them (for PTX compilation without a GPU)."""
    from numba import types as T

    f1, f2, f3 = T.float32[::1], T.float32[:, ::1], T.float32[:, :, ::1]
    i1 = T.int32[::1]
    bvh = (f2, f2, i1, i1, f2, f2, f2)
    instances = (i1, f3, f3, f2, f2, i1, i1, i1)
    physics = (T.int16[::1], T.int64[::1], T.int8[::1], f2, T.float64[::1],
               T.float32, T.int64, T.float64, T.float64, T.float64, T.float64, T.float64[::1],
               T.int64, T.uint64, T.float64)
    return {
        "_cast_kernel": (_cast_kernel, bvh + (i1,) + instances + (f2, f2, f2, T.float32) + (f1, i1, i1, f1, f1, f2)),
        "_returns_kernel": (_returns_kernel, bvh + (i1,) + instances
                            + (f2, T.float64[:, ::1], f2, T.uint32[::1], T.int64[::1], T.float32, T.int32)
                            + physics + (f2, T.uint64[::1], i1, i1)),
        "_compact_kernel": (_compact_kernel, (f2, T.uint64[::1], i1, i1, f2, T.uint64[::1])),
        "_ranges_kernel": (_ranges_kernel, bvh + instances + (f3, f2, T.float32, f2)),
    }


def _blocks(n: int) -> int:
    return (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK


def _tmax(max_range_m: float) -> np.float32:
    # a float32 scalar argument: a Python float would make the kernel compare in float64
    return np.float32(min(max_range_m, 3.0e38))


class CudaBackend:
    """Numba-CUDA caster over a :class:`~lidar_fmu.scene.Scene`: BVH per mesh, top-level BVH over instances."""

    name = "cuda"
    #: :meth:`cast` / :meth:`cast_frame` return closest hits; glass is handled in :meth:`cast_returns`
    sees_through = False
    #: :meth:`cast_returns` runs the whole frame (cast, glass, physics) on the GPU
    casts_returns = True
    #: poses per batched launch at most rays × poses ≤ this (bounds the device range image, 4 B per ray)
    BATCH_RAYS = 1 << 27

    def __init__(self, scene):
        self.scene = scene
        self._bvhs: dict[int, tuple] = {}  # id(mesh) → (mesh, BVH); the mesh keeps its id unique
        self._resident: dict[str, tuple] = {}  # name → (host array, device array)
        self._buffers: dict[str, object] = {}
        self._uploaded_for: tuple = ()
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
        meshes = tuple(id(m) for m in self.scene.meshes)
        if meshes == self._uploaded_for:
            return
        bvhs = [self._bvh(m) for m in self.scene.meshes]
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
        if scene.revision != self._revision:  # meshes or instances added/removed: ids and slots change too
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

    # ------------------------------------------------------------------ closest hits
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
        _cast_kernel[_blocks(n), THREADS_PER_BLOCK](*self._d_bvh, self._d_tri_index, *self._d_instances, *rays,
                                                    _tmax(max_range_m), *outputs)
        range_m, slot, prim, u, v, normal = (a.copy_to_host() for a in outputs)
        return Hits.from_slots(range_m, normal, slot, prim, u, v, self._instance_ids)

    def cast(self, origins, directions, max_range_m: float = np.inf) -> Hits:
        """Closest hits of rays ``origins + t·directions`` (world frame, m), t ≤ ``max_range_m``."""
        origins, directions = as_rays(origins, directions)
        return self._cast(origins, directions, np.eye(3), max_range_m)

    def cast_frame(self, world_from_sensor, directions, max_range_m: float = np.inf, see_through=None) -> Hits:
        """Cast unit ``directions`` given in a sensor frame from its origin; hits in the world frame.

        ``see_through`` is ignored (``sees_through = False``): :meth:`cast_returns` handles glass.
        """
        pose = np.asarray(world_from_sensor, dtype=np.float64)
        directions = np.ascontiguousarray(directions, dtype=np.float32)
        return self._cast(pose[:3, 3], directions, pose[:3, :3], max_range_m)

    # ------------------------------------------------------------------ whole frames
    def cast_returns(self, world_from_sensor, pattern, model):
        """One frame of ``pattern`` from ``world_from_sensor`` (4×4, m) → (points, ray index, intensity %).

        Cast, transparent layers and :class:`~lidar_fmu.physics.ReturnModel`
        on the GPU; ``points`` is a :data:`~lidar_fmu.pointcloud.POINT_DTYPE`
        array of the returns in ray order, sensor frame, as the CPU pass
        (:func:`~lidar_fmu.physics.hits_to_returns`) gives them.
        """
        self.update()
        n = len(pattern.directions)
        if not (n and self._count):
            return np.zeros(0, POINT_DTYPE), np.zeros(0, np.int32), np.zeros(0, np.float32)
        pose = np.asarray(world_from_sensor, np.float64)
        blocks = _blocks(n)
        record = self._buffer("record", (n, _WIDTH), np.float32)
        object_id = self._buffer("object_id", (n,), np.uint64)
        keep = self._buffer("keep", (n,), np.int32)
        block_count = self._buffer("block_count", (blocks,), np.int32)
        out_record = self._buffer("out_record", (n, _WIDTH), np.float32)
        out_object_id = self._buffer("out_object_id", (n,), np.uint64)
        _returns_kernel[blocks, THREADS_PER_BLOCK](
            *self._d_bvh, self._d_tri_index, *self._d_instances,
            cuda.to_device(np.ascontiguousarray(pose[:3, :4], np.float32)),
            cuda.to_device(np.ascontiguousarray(pose[:3, :3].T)),
            self._on_device("directions", pattern.directions), self._on_device("beam_id", pattern.beam_id),
            self._d_instance_ids, _tmax(model.max_range_m), np.int32(model.max_transparent_layers),
            self._on_device("triangles", model.triangles), self._on_device("slot_offset", model.slot_offset),
            self._on_device("class_code", model.class_code),
            self._on_device("reflectance_table", model.reflectance_table),
            self._on_device("lambertian_rho0", model.lambertian_rho0),
            *model.kernel_args()[:-1], self._on_device("limit_floor_m", model.limit_floor_m),
            np.int64(ENVIRONMENT_ID_BASE), NO_OBJECT_ID, np.float64(INTENSITY_REFERENCE_RANGE_M),
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
        return points, packed[:, 11].astype(np.int32), np.ascontiguousarray(packed[:, 8])

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
            if to_host:
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

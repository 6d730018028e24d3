"""Embree 4 through the library the ``embreex`` wheel ships, called from compiled loops.

embreex's Python API has no instancing and no ray packets, and every ``run``
goes through Python-level buffers. Its wheel, however, carries the complete
Embree 4 library, so this backend calls it directly:

* one Embree scene per distinct mesh, in the mesh's own frame, built once;
* a top-level scene of Embree *instances* (one per scene instance) whose
  transforms are rewritten when poses change. Embree moves rays into each
  instance's frame and culls them by instance bounds in its top-level BVH, so
  cost follows the rays that reach an instance, not instances × rays;
* rays cast in packets of :data:`PACKET` angular neighbours
  (``rtcIntersect8``) from a Numba ``prange`` over the cores (packets dealt
  out interleaved, so every thread gets a fair share of sky and street).

Struct layouts are Embree 4's public ``RTCRayHit`` / ``RTCRayHitN`` (SoA);
the library is located next to the embreex package.
"""
from __future__ import annotations

import ctypes
import glob
import os
import warnings

import numpy as np
import numba
from numba import njit, prange

from . import Hits, as_rays

PACKET = 8
# embreex ships an older TBB than numba's TBB layer wants; numba then says so
# once and uses OpenMP or its own workqueue, which is what we want anyway.
warnings.filterwarnings("ignore", message="The TBB threading layer requires")
_RTC_GEOMETRY_TYPE_TRIANGLE = 0
_RTC_GEOMETRY_TYPE_INSTANCE = 121
_RTC_BUFFER_TYPE_INDEX, _RTC_BUFFER_TYPE_VERTEX = 0, 1
_RTC_FORMAT_UINT3, _RTC_FORMAT_FLOAT3 = 0x5003, 0x9003
_RTC_FORMAT_FLOAT3X4_ROW_MAJOR = 0x9134
_RTC_SCENE_FLAG_DYNAMIC = 1
#: watertight traversal: a closed mesh must not leak rays between its triangles
_RTC_SCENE_FLAG_ROBUST = 4
_RTC_BUILD_QUALITY_LOW = 0
#: float slots of one SoA lane array block we reserve (ray 12 + hit ≥ 8 arrays)
_SOA_ARRAYS = 32
_INVALID = -1  # RTC_INVALID_GEOMETRY_ID as int32
#: how far behind a transparent surface a ray starts again (m)
_TRANSPARENT_STEP_M = 1e-3
_NO_SEE_THROUGH = (0, np.zeros(1, np.int16), np.zeros(1, np.int64), np.zeros(1, np.int8))


class NativeEmbreeUnavailable(RuntimeError):
    pass


def _find_library() -> str:
    try:
        import embreex
    except ImportError as exc:
        raise NativeEmbreeUnavailable(f"embreex is not installed: {exc}") from None
    site = os.path.dirname(os.path.dirname(os.path.abspath(embreex.__file__)))
    for pattern in ("embreex.libs/libembree4*.so*", "embreex/.dylibs/libembree4*.dylib", "embreex.libs/embree4*.dll"):
        found = sorted(glob.glob(os.path.join(site, pattern)))
        if found:
            return found[0]
    raise NativeEmbreeUnavailable("no Embree 4 library found next to embreex")


class _Embree:
    """The few Embree 4 entry points we use, typed for ctypes."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        vp, u32, i32, size = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_size_t
        signatures = {
            "rtcNewDevice": (vp, [ctypes.c_char_p]),
            "rtcGetDeviceError": (i32, [vp]),
            "rtcNewScene": (vp, [vp]),
            "rtcSetSceneFlags": (None, [vp, i32]),
            "rtcSetSceneBuildQuality": (None, [vp, i32]),
            "rtcCommitScene": (None, [vp]),
            "rtcReleaseScene": (None, [vp]),
            "rtcNewGeometry": (vp, [vp, i32]),
            "rtcSetSharedGeometryBuffer": (None, [vp, i32, u32, i32, vp, size, size, size]),
            "rtcSetGeometryInstancedScene": (None, [vp, vp]),
            "rtcSetGeometryTransform": (None, [vp, u32, i32, vp]),
            "rtcCommitGeometry": (None, [vp]),
            "rtcAttachGeometry": (u32, [vp, vp]),
            "rtcReleaseGeometry": (None, [vp]),
        }
        for name, (restype, argtypes) in signatures.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        self.lib = lib
        self.intersect = ctypes.CFUNCTYPE(None, vp, vp, vp, vp)(
            ctypes.cast(getattr(lib, f"rtcIntersect{PACKET}"), vp).value)
        self.device = lib.rtcNewDevice(None)
        if not self.device:
            raise NativeEmbreeUnavailable("rtcNewDevice failed")

    def check(self, what: str) -> None:
        code = self.lib.rtcGetDeviceError(self.device)
        if code:
            raise RuntimeError(f"Embree error {code} in {what}")


_EMBREE: _Embree | None = None
_KERNEL = None


def embree() -> _Embree:
    global _EMBREE
    if _EMBREE is None:
        _EMBREE = _Embree(_find_library())
    return _EMBREE


def _make_kernel(intersect):
    """Compile the packet loop against this process's ``rtcIntersect8`` (not cacheable: an address).

    Each packet is intersected with the static scene (meshes placed at
    identity, attached directly) and then, with ``tfar`` already cut to the
    static hit, with the scene of moving instances. A hit in the second keeps
    ``instID[0]``; one from the first has only its ``geomID``.
    """
    W = PACKET

    @njit(nogil=True)
    def intersect_both(valid, lanes, static_scene, dynamic_scene):
        if static_scene:
            intersect(valid.ctypes.data, static_scene, lanes.ctypes.data, 0)
        if dynamic_scene:
            intersect(valid.ctypes.data, dynamic_scene, lanes.ctypes.data, 0)

    @njit(nogil=True)
    def hit_slot(ilanes, j, static_slot, dynamic_slot):
        geom = ilanes[18 * W + j]
        if geom == _INVALID:
            return -1
        inst = ilanes[19 * W + j]
        return dynamic_slot[inst] if inst != _INVALID else static_slot[geom]

    @njit(nogil=True)
    def cast_packets(static_scene, dynamic_scene, static_slot, dynamic_slot, normal_from_local, origins,
                     directions, order, rotation, tmax, see_through, part, parts,
                     range_m, prim, slot, u, v, normal):
        # see_through = (layers, per-triangle IR ids, first triangle per slot, class per IR id):
        # rays that hit a transparent surface go on behind it within the same packet
        layers, triangles, slot_offset, class_code = see_through
        raw = np.zeros(16 + W * _SOA_ARRAYS, np.float32)
        lanes = raw[(64 - raw.ctypes.data % 64) % 64 // 4:][: W * _SOA_ARRAYS]  # 64-byte aligned
        ilanes = lanes.view(np.int32)
        valid_raw = np.zeros(W + 16, np.int32)
        valid = valid_raw[(64 - valid_raw.ctypes.data % 64) % 64 // 4:][:W]
        n = directions.shape[0]
        single = origins.shape[0] == 1
        R = rotation
        first = part * W
        while first < n:
            count = min(W, n - first)
            for j in range(W):
                if j >= count:
                    valid[j] = 0
                    continue
                i = order[first + j]
                io = 0 if single else i
                dx, dy, dz = directions[i, 0], directions[i, 1], directions[i, 2]
                valid[j] = -1
                lanes[0 * W + j] = origins[io, 0]
                lanes[1 * W + j] = origins[io, 1]
                lanes[2 * W + j] = origins[io, 2]
                lanes[3 * W + j] = 0.0  # tnear
                lanes[4 * W + j] = R[0, 0] * dx + R[0, 1] * dy + R[0, 2] * dz
                lanes[5 * W + j] = R[1, 0] * dx + R[1, 1] * dy + R[1, 2] * dz
                lanes[6 * W + j] = R[2, 0] * dx + R[2, 1] * dy + R[2, 2] * dz
                lanes[7 * W + j] = 0.0  # time
                lanes[8 * W + j] = tmax  # tfar
                ilanes[9 * W + j] = -1  # mask
                ilanes[10 * W + j] = 0  # id
                ilanes[11 * W + j] = 0  # flags
                ilanes[17 * W + j] = _INVALID  # primID
                ilanes[18 * W + j] = _INVALID  # geomID
                ilanes[19 * W + j] = _INVALID  # instID[0]
            intersect_both(valid, lanes, static_scene, dynamic_scene)
            for _ in range(layers):
                again = False
                for j in range(count):
                    if valid[j] == 0:
                        continue
                    k = hit_slot(ilanes, j, static_slot, dynamic_slot)
                    if k < 0 or class_code[triangles[slot_offset[k] + ilanes[17 * W + j]]] != 1:
                        valid[j] = 0  # final: a miss or an opaque surface
                        continue
                    # start again just behind the pane (Embree measures tnear from the origin)
                    lanes[3 * W + j] = lanes[8 * W + j] + _TRANSPARENT_STEP_M
                    lanes[8 * W + j] = tmax
                    ilanes[17 * W + j] = _INVALID
                    ilanes[18 * W + j] = _INVALID
                    ilanes[19 * W + j] = _INVALID
                    again = True
                if not again:
                    break
                intersect_both(valid, lanes, static_scene, dynamic_scene)
            for j in range(count):
                i = order[first + j]
                k = hit_slot(ilanes, j, static_slot, dynamic_slot)
                if k < 0:
                    continue
                # Embree reports Ng in the instance's frame: back to the world by
                # the inverse transpose, unit length, turned to face the ray.
                N = normal_from_local[k]
                lx, ly, lz = lanes[12 * W + j], lanes[13 * W + j], lanes[14 * W + j]
                nx = N[0, 0] * lx + N[0, 1] * ly + N[0, 2] * lz
                ny = N[1, 0] * lx + N[1, 1] * ly + N[1, 2] * lz
                nz = N[2, 0] * lx + N[2, 1] * ly + N[2, 2] * lz
                norm = np.sqrt(nx * nx + ny * ny + nz * nz)
                if norm == 0.0:
                    continue  # degenerate triangle
                if nx * lanes[4 * W + j] + ny * lanes[5 * W + j] + nz * lanes[6 * W + j] > 0.0:
                    norm = -norm
                normal[i, 0] = nx / norm
                normal[i, 1] = ny / norm
                normal[i, 2] = nz / norm
                range_m[i] = lanes[8 * W + j]
                u[i] = lanes[15 * W + j]
                v[i] = lanes[16 * W + j]
                prim[i] = ilanes[17 * W + j]
                slot[i] = k
            first += parts * W

    @njit(parallel=True, nogil=True)
    def cast_parallel(static_scene, dynamic_scene, static_slot, dynamic_slot, normal_from_local, origins,
                      directions, order, rotation, tmax, see_through, parts, range_m, prim, slot, u, v, normal):
        # one share of interleaved packets per Numba worker thread
        for part in prange(parts):
            cast_packets(static_scene, dynamic_scene, static_slot, dynamic_slot, normal_from_local, origins,
                         directions, order, rotation, tmax, see_through, part, parts, range_m, prim, slot, u, v, normal)

    return cast_parallel


def kernel():
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = _make_kernel(embree().intersect)
    return _KERNEL


def _triangle_geometry(buffers):
    """A committed Embree triangle geometry over ``buffers`` (vertices padded, faces uint32)."""
    e = embree()
    vertices, faces = buffers
    geometry = e.lib.rtcNewGeometry(e.device, _RTC_GEOMETRY_TYPE_TRIANGLE)
    e.lib.rtcSetSharedGeometryBuffer(geometry, _RTC_BUFFER_TYPE_VERTEX, 0, _RTC_FORMAT_FLOAT3,
                                     vertices.ctypes.data, 0, 12, len(vertices) - 1)
    e.lib.rtcSetSharedGeometryBuffer(geometry, _RTC_BUFFER_TYPE_INDEX, 0, _RTC_FORMAT_UINT3,
                                     faces.ctypes.data, 0, 12, len(faces))
    e.lib.rtcCommitGeometry(geometry)
    return geometry


def _new_scene(flags: int):
    e = embree()
    scene = e.lib.rtcNewScene(e.device)
    e.lib.rtcSetSceneFlags(scene, flags)
    return scene


class _MeshData:
    """What Embree reads of one mesh (kept alive here) and, once needed, its own-frame scene."""

    def __init__(self, mesh):
        # Embree may read 16 bytes from the last vertex: pad one spare vertex.
        vertices = np.zeros((len(mesh.vertices) + 1, 3), np.float32)
        vertices[:-1] = mesh.vertices
        self.buffers = (vertices, np.ascontiguousarray(mesh.faces, dtype=np.uint32))
        self.name = mesh.name
        self._scene = None

    @property
    def scene(self):
        """The mesh alone in its own frame, for instancing (built on first use)."""
        if self._scene is None:
            e = embree()
            self._scene = _new_scene(_RTC_SCENE_FLAG_ROBUST)
            geometry = _triangle_geometry(self.buffers)
            e.lib.rtcAttachGeometry(self._scene, geometry)
            e.lib.rtcReleaseGeometry(geometry)
            e.lib.rtcCommitScene(self._scene)
            e.check(f"building mesh {self.name!r}")
        return self._scene

    def __del__(self):
        if _EMBREE is not None and getattr(self, "_scene", None):
            _EMBREE.lib.rtcReleaseScene(self._scene)


class NativeEmbreeBackend:
    """Embree 4 with native instancing and 8-ray packets over a :class:`~lidar_fmu.scene.Scene`.

    Instances at identity (the static world) are attached directly to a static
    scene built once; the others are Embree instances in a small dynamic
    scene whose transforms are rewritten each step.
    """

    name = "embree"

    def __init__(self, scene, threads: int | None = None):
        embree()
        kernel()
        self.scene = scene
        self.threads = max(1, threads or numba.get_num_threads())
        self._meshes: dict[int, _MeshData] = {}
        self._static = self._dynamic = None
        self._static_mask = None
        self._order_for = None
        self._revision = -1
        self._pose_revision = -1
        self.update()

    def _release(self):
        for handle in (self._static, self._dynamic):
            if handle:
                embree().lib.rtcReleaseScene(handle)
        self._static = self._dynamic = None

    def _rebuild(self, static_mask) -> None:
        """New static and dynamic top-level scenes for the current instance list."""
        e = embree()
        scene = self.scene
        self._release()
        for mesh in scene.meshes:
            if id(mesh) not in self._meshes:
                self._meshes[id(mesh)] = _MeshData(mesh)
        static_slots, dynamic_slots, self._instances = [], [], []
        if static_mask.any():
            self._static = _new_scene(_RTC_SCENE_FLAG_ROBUST)
        if (~static_mask).any():
            self._dynamic = _new_scene(_RTC_SCENE_FLAG_DYNAMIC | _RTC_SCENE_FLAG_ROBUST)
            e.lib.rtcSetSceneBuildQuality(self._dynamic, _RTC_BUILD_QUALITY_LOW)
        for slot, (mesh_index, static) in enumerate(zip(scene.instance_mesh_index, static_mask)):
            data = self._meshes[id(scene.meshes[mesh_index])]
            if static:
                geometry = _triangle_geometry(data.buffers)
                geom_id = e.lib.rtcAttachGeometry(self._static, geometry)
                e.lib.rtcReleaseGeometry(geometry)
                static_slots.append((geom_id, slot))
            else:
                instance = e.lib.rtcNewGeometry(e.device, _RTC_GEOMETRY_TYPE_INSTANCE)
                e.lib.rtcSetGeometryInstancedScene(instance, data.scene)
                geom_id = e.lib.rtcAttachGeometry(self._dynamic, instance)
                dynamic_slots.append((geom_id, slot))
                self._instances.append((instance, slot))
        if self._static:
            e.lib.rtcCommitScene(self._static)
            e.check("building the static scene")
        self._static_slot = self._slot_table(static_slots)
        self._dynamic_slot = self._slot_table(dynamic_slots)
        self._static_mask = static_mask

    @staticmethod
    def _slot_table(pairs):
        table = np.full(max((g for g, _ in pairs), default=-1) + 1, -1, np.int32)
        for geom_id, slot in pairs:
            table[geom_id] = slot
        return table

    def update(self) -> None:
        """Follow the scene: rebuild when instances come or go (or leave identity), else rewrite transforms."""
        scene = self.scene
        if scene.revision == self._revision and scene.pose_revision == self._pose_revision:
            return
        poses = np.asarray(scene.poses, dtype=np.float64)
        static_mask = np.all(poses == np.eye(4), axis=(1, 2)) if len(poses) else np.zeros(0, bool)
        if (scene.revision != self._revision or self._static_mask is None
                or not np.array_equal(static_mask, self._static_mask)):
            self._rebuild(static_mask)
            self._revision = scene.revision
        e = embree()
        transforms = np.ascontiguousarray(poses[:, :3, :4], dtype=np.float32)  # row-major 3×4
        for instance, slot in self._instances:
            e.lib.rtcSetGeometryTransform(instance, 0, _RTC_FORMAT_FLOAT3X4_ROW_MAJOR, transforms[slot].ctypes.data)
            e.lib.rtcCommitGeometry(instance)
        if self._dynamic:
            e.lib.rtcCommitScene(self._dynamic)
            e.check("committing instances")
        inverse = np.linalg.inv(poses) if len(poses) else np.zeros((0, 4, 4))
        self._normal_from_local = np.ascontiguousarray(np.transpose(inverse[:, :3, :3], (0, 2, 1)))
        self._instance_ids = np.asarray(scene.instance_ids).copy()
        self._pose_revision = scene.pose_revision

    def __del__(self):
        if _EMBREE is not None:
            self._release()

    def _packet_order(self, directions) -> np.ndarray:
        """Ray order that puts angular neighbours into the same packet.

        Packets run fastest when their rays travel together; a pattern's own
        order may interleave beams (the VLP-16 fires −15°, +1°, −13°, …), so
        rays are sorted by azimuth in 0.2° steps, then by elevation. Kept while
        the same pattern array is cast.
        """
        if self._order_for is not directions:
            azimuth_step = np.floor(np.degrees(np.arctan2(directions[:, 1], directions[:, 0])) / 0.2)
            self._order = np.lexsort((directions[:, 2], azimuth_step)).astype(np.int64)
            self._order_for = directions
        return self._order

    def _cast(self, origins, directions, rotation, max_range_m, cache_order=False, see_through=None) -> Hits:
        from .embree import MIN_RAYS_PER_THREAD

        self.update()
        n = len(directions)
        range_m = np.full(n, np.inf, np.float32)
        prim = np.full(n, -1, np.int32)
        slot = np.full(n, -1, np.int32)
        u = np.zeros(n, np.float32)
        v = np.zeros(n, np.float32)
        normal = np.zeros((n, 3), np.float32)
        origins2d = np.ascontiguousarray(origins.reshape(-1, 3), dtype=np.float32)
        rotation = np.ascontiguousarray(rotation, dtype=np.float32)
        tmax = np.float32(min(max_range_m, 3.0e38))
        args = (self._static or 0, self._dynamic or 0, self._static_slot, self._dynamic_slot,
                self._normal_from_local, origins2d, directions,
                self._packet_order(directions) if cache_order else np.arange(n, dtype=np.int64),
                rotation, tmax, see_through or _NO_SEE_THROUGH)
        outputs = (range_m, prim, slot, u, v, normal)
        parts = min(self.threads, max(1, n // MIN_RAYS_PER_THREAD))
        kernel()(*args, parts, *outputs)
        return Hits.from_slots(range_m, normal, slot, prim, u, v, self._instance_ids)

    def cast(self, origins, directions, max_range_m: float = np.inf) -> Hits:
        """Closest hits of rays ``origins + t·directions`` (world frame, m), t ≤ ``max_range_m``."""
        origins, directions = as_rays(origins, directions)
        return self._cast(origins, directions, np.eye(3), max_range_m)

    #: this backend continues rays through transparent surfaces inside its packets
    sees_through = True

    def cast_frame(self, world_from_sensor, directions, max_range_m: float = np.inf, see_through=None) -> Hits:
        """Cast unit ``directions`` given in a sensor frame from its origin; hits in the world frame.

        ``see_through``: ``(layers, triangle IR ids, first triangle per instance
        slot, class per IR id)`` — rays pass up to ``layers`` transparent
        surfaces (class 1) and report what lies behind.
        """
        pose = np.asarray(world_from_sensor, dtype=np.float64)
        return self._cast(pose[:3, 3], directions, pose[:3, :3], max_range_m, cache_order=True,
                          see_through=see_through)

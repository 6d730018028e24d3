"""The ``embree`` backend: Embree 4 through the library the ``embreex`` wheel ships, called from compiled loops.

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
  out interleaved, so every thread gets a fair share of sky and street);
* rays that go on through a surface or reflect off a mirror
  (:func:`lidar_fmu.physics.segment_after`) are intersected again inside their
  packet, from just behind it or from the mirror along the reflected direction.

Where this library cannot be loaded, :mod:`.embreex` casts the same rays
through embreex's Python API.

Struct layouts are Embree 4's public ``RTCRayHit`` / ``RTCRayHitN`` (SoA);
the library is located next to the embreex package.
"""
from __future__ import annotations

import ctypes
import glob
import os

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from ..codes import PASS, STOP
from ..parallel import threadsafe_layer
from ..physics import CONTINUATION_STEP_M, material_of_hit, reflect, segment_after, unfold_after
from ..transforms import transform_points
from .backend import MIN_RAYS_PER_THREAD, Backend
from .hits import Hits
from .rays import Continuation, RayBatch

PACKET = 8
#: in the dynamic scene's index table: this geometry is the static scene, instanced once at identity
_STATIC_INSTANCE = -2
#: cast one top-level scene (the static world as one instance beside the moving ones: one Embree call per
#: packet) rather than the static scene and then the instances (two calls)
ONE_TOP_LEVEL = True
# Numba's threads on a layer that several instances casting at once may share (OpenMP or TBB; its
# fallback, workqueue, would abort the process): chosen before anything here starts them
threadsafe_layer()
_IDENTITY_3X4 = np.ascontiguousarray(np.eye(4, dtype=np.float32)[:3, :4])
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


class EmbreeUnavailable(RuntimeError):
    """The Embree library cannot be loaded here (``make_backend`` then uses embreex)."""


def _find_library() -> str:
    try:
        import embreex
    except ImportError as exc:
        raise EmbreeUnavailable(f"embreex is not installed: {exc}") from None
    site = os.path.dirname(os.path.dirname(os.path.abspath(embreex.__file__)))
    for pattern in ("embreex.libs/libembree4*.so*", "embreex/.dylibs/libembree4*.dylib", "embreex.libs/embree4*.dll"):
        found = sorted(glob.glob(os.path.join(site, pattern)))
        if found:
            return found[0]
    raise EmbreeUnavailable("no Embree 4 library found next to embreex")


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
        #: address of rtcIntersect8, passed to the compiled loops as an argument (so they can be cached)
        self.intersect_address = ctypes.cast(getattr(lib, f"rtcIntersect{PACKET}"), vp).value
        #: addresses of rtcSetGeometryTransform and rtcCommitGeometry, for the compiled instance update
        self.set_transform_address = ctypes.cast(lib.rtcSetGeometryTransform, vp).value
        self.commit_geometry_address = ctypes.cast(lib.rtcCommitGeometry, vp).value
        self.device = lib.rtcNewDevice(None)
        if not self.device:
            raise EmbreeUnavailable("rtcNewDevice failed")

    def check(self, what: str) -> None:
        code = self.lib.rtcGetDeviceError(self.device)
        if code:
            raise RuntimeError(f"Embree error {code} in {what}")


_EMBREE: _Embree | None = None


def embree() -> _Embree:
    global _EMBREE
    if _EMBREE is None:
        _EMBREE = _Embree(_find_library())
    return _EMBREE


@intrinsic
def _call_intersect(typingctx, function, valid, scene, rayhit, arguments):
    """``function(valid, scene, rayhit, arguments)`` for an ``rtcIntersect8`` address given at run time.

    Numba cannot cache code that holds a ctypes function (its address is a
    constant of one process); an address argument keeps the loops cacheable.
    """
    sig = types.void(types.intp, types.intp, types.intp, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        pointer = ir.IntType(8).as_pointer()
        callee = builder.inttoptr(args[0], ir.FunctionType(ir.VoidType(), [pointer] * 4).as_pointer())
        builder.call(callee, [builder.inttoptr(a, pointer) for a in args[1:]])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _call_set_transform(typingctx, function, geometry, xfm):
    """``function(geometry, 0, RTC_FORMAT_FLOAT3X4_ROW_MAJOR, xfm)`` for an ``rtcSetGeometryTransform`` address."""
    sig = types.void(types.intp, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        pointer, u32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        callee = builder.inttoptr(args[0], ir.FunctionType(ir.VoidType(), [pointer, u32, u32, pointer]).as_pointer())
        builder.call(callee, [builder.inttoptr(args[1], pointer), u32(0), u32(_RTC_FORMAT_FLOAT3X4_ROW_MAJOR),
                              builder.inttoptr(args[2], pointer)])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _call_commit_geometry(typingctx, function, geometry):
    """``function(geometry)`` for an ``rtcCommitGeometry`` address."""
    sig = types.void(types.intp, types.intp)

    def codegen(context, builder, signature, args):
        pointer = ir.IntType(8).as_pointer()
        callee = builder.inttoptr(args[0], ir.FunctionType(ir.VoidType(), [pointer]).as_pointer())
        builder.call(callee, [builder.inttoptr(args[1], pointer)])
        return context.get_dummy_value()

    return sig, codegen


@njit(nogil=True, cache=True)
def _set_transforms(set_transform, commit_geometry, handles, instance_index, transforms):
    """Every moving instance's 3×4 row-major transform, compiled: 10,000 instances take ~1 ms, not the
    ~30 ms of a ctypes call pair each."""
    for k in range(handles.shape[0]):
        _call_set_transform(set_transform, handles[k], transforms[instance_index[k]].ctypes.data)
        _call_commit_geometry(commit_geometry, handles[k])


def normal_transforms(poses: np.ndarray) -> np.ndarray:
    """(K, 3, 3) inverse-transpose of each pose's linear part (normals from instance to world frame), as the
    cofactor matrix over the determinant: vectorised, ~10× faster than ``np.linalg.inv`` on (K, 4, 4)."""
    a = poses[:, :3, :3]
    cofactor = np.stack([np.cross(a[:, :, 1], a[:, :, 2]), np.cross(a[:, :, 2], a[:, :, 0]),
                         np.cross(a[:, :, 0], a[:, :, 1])], axis=2)  # columns: cofactors of A's columns
    det = np.einsum("ki,ki->k", a[:, :, 0], cofactor[:, :, 0])
    return np.ascontiguousarray(cofactor / det[:, None, None])


# The packet loop. Each packet is intersected with the static scene (meshes
# placed at identity, attached directly) and then, with ``tfar`` already cut to
# the static hit, with the scene of moving instances. A hit in the second keeps
# ``instID[0]``; one from the first has only its ``geomID``.
_W = PACKET


# RTCIntersectArguments (Embree 4, rtcore_scene.h): flags (int32), feature_mask (uint32), then the context,
# filter and intersect pointers (null: Embree's defaults), and a float only in RTC_MIN_WIDTH builds; 48 bytes
# hold it either way. RTC_RAY_QUERY_FLAG_COHERENT = 1 << 16: the packet's rays travel together (they are
# neighbours of one tile, _packet_order), which lets Embree traverse them as one (measured against Open3D in
# issue 15: without it no packet shape beats single rays). RTC_FEATURE_FLAG_ALL = 0xffffffff.
_ARGUMENT_WORDS = 12
_RAY_QUERY_FLAG_COHERENT = 1 << 16
_FEATURE_FLAG_ALL = -1  # 0xffffffff as an int32


@njit(nogil=True, cache=True)
def _coherent_arguments():
    """A zeroed RTCIntersectArguments asking for coherent traversal (one per thread, kept for its packets)."""
    arguments = np.zeros(_ARGUMENT_WORDS, np.int32)
    arguments[0] = _RAY_QUERY_FLAG_COHERENT
    arguments[1] = _FEATURE_FLAG_ALL
    return arguments


@njit(nogil=True, cache=True)
def _intersect_both(intersect, valid, lanes, static_scene, dynamic_scene, arguments):
    if static_scene:
        _call_intersect(intersect, valid.ctypes.data, static_scene, lanes.ctypes.data, arguments.ctypes.data)
    if dynamic_scene:
        _call_intersect(intersect, valid.ctypes.data, dynamic_scene, lanes.ctypes.data, arguments.ctypes.data)


@njit(nogil=True, cache=True)
def _instance_index_of(ilanes, j, static_index, dynamic_index):
    geom = ilanes[18 * _W + j]
    if geom == _INVALID:
        return -1
    inst = ilanes[19 * _W + j]
    if inst == _INVALID:
        return static_index[geom]  # the static scene, cast on its own
    k = dynamic_index[inst]
    return static_index[geom] if k == _STATIC_INSTANCE else k  # the static scene as one instance of the top level

@njit(nogil=True, cache=True)
def _lane_normal(lanes, j, N):
    """Unit world normal of lane ``j``'s hit (Embree's Ng, in the instance's frame, taken to the world by the
    inverse transpose ``N``), turned to face the ray; zero for a degenerate triangle."""
    lx, ly, lz = lanes[12 * _W + j], lanes[13 * _W + j], lanes[14 * _W + j]
    nx = N[0, 0] * lx + N[0, 1] * ly + N[0, 2] * lz
    ny = N[1, 0] * lx + N[1, 1] * ly + N[1, 2] * lz
    nz = N[2, 0] * lx + N[2, 1] * ly + N[2, 2] * lz
    norm = np.sqrt(nx * nx + ny * ny + nz * nz)
    if norm == 0.0:
        return nx, ny, nz
    if nx * lanes[4 * _W + j] + ny * lanes[5 * _W + j] + nz * lanes[6 * _W + j] > 0.0:
        norm = -norm
    return nx / norm, ny / norm, nz / norm


@njit(nogil=True, cache=True)
def _bounce(lanes, j, k, normal_from_local, unfold, path):
    """Lane ``j`` off the mirror it hit: its origin to the hit, its direction mirrored, ``unfold[j]`` and
    ``path[j]`` (the path length at the new origin) updated."""
    nx, ny, nz = _lane_normal(lanes, j, normal_from_local[k])
    t = lanes[8 * _W + j]
    dx, dy, dz = lanes[4 * _W + j], lanes[5 * _W + j], lanes[6 * _W + j]
    lanes[0 * _W + j] += t * dx
    lanes[1 * _W + j] += t * dy
    lanes[2 * _W + j] += t * dz
    path[j] += t
    lanes[4 * _W + j], lanes[5 * _W + j], lanes[6 * _W + j] = reflect(dx, dy, dz, nx, ny, nz)
    m = unfold[j]
    (m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8]) = unfold_after(
        m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8], nx, ny, nz)
    lanes[3 * _W + j] = CONTINUATION_STEP_M  # tnear: start the step off the mirror


@njit(nogil=True, cache=True)
def _cast_packets(intersect, static_scene, dynamic_scene, static_index, dynamic_index, normal_from_local, origins,
                 directions, order, rotation, tmax, max_surfaces, max_bounces, triangle_material, first_triangle,
                 class_code, specular, part, parts, range_m, prim, instance_index, u, v, normal, path_gain):
    raw = np.zeros(16 + _W * _SOA_ARRAYS, np.float32)
    lanes = raw[(64 - raw.ctypes.data % 64) % 64 // 4:][: _W * _SOA_ARRAYS]  # 64-byte aligned
    ilanes = lanes.view(np.int32)
    valid_raw = np.zeros(_W + 16, np.int32)
    valid = valid_raw[(64 - valid_raw.ctypes.data % 64) % 64 // 4:][:_W]
    arguments = _coherent_arguments()
    n = directions.shape[0]
    single = origins.shape[0] == 1
    R = rotation
    # per lane: surfaces passed, mirrors bounced off, path length at its origin, power kept, the mirrors'
    # reflection M (row-major) that takes the final normal back into the original ray's frame
    passed = np.zeros(_W, np.int32)
    bounced = np.zeros(_W, np.int32)
    path = np.zeros(_W, np.float32)
    gain = np.ones(_W, np.float32)
    unfold = np.zeros((_W, 9), np.float32)
    first = part * _W
    while first < n:
        count = min(_W, n - first)
        for j in range(_W):
            if j >= count:
                valid[j] = 0
                continue
            i = order[first + j]
            io = 0 if single else i
            dx, dy, dz = directions[i, 0], directions[i, 1], directions[i, 2]
            valid[j] = -1
            lanes[0 * _W + j] = origins[io, 0]
            lanes[1 * _W + j] = origins[io, 1]
            lanes[2 * _W + j] = origins[io, 2]
            lanes[3 * _W + j] = 0.0  # tnear
            lanes[4 * _W + j] = R[0, 0] * dx + R[0, 1] * dy + R[0, 2] * dz
            lanes[5 * _W + j] = R[1, 0] * dx + R[1, 1] * dy + R[1, 2] * dz
            lanes[6 * _W + j] = R[2, 0] * dx + R[2, 1] * dy + R[2, 2] * dz
            lanes[7 * _W + j] = 0.0  # time
            lanes[8 * _W + j] = tmax  # tfar
            ilanes[9 * _W + j] = -1  # mask
            ilanes[10 * _W + j] = 0  # id
            ilanes[11 * _W + j] = 0  # flags
            ilanes[17 * _W + j] = _INVALID  # primID
            ilanes[18 * _W + j] = _INVALID  # geomID
            ilanes[19 * _W + j] = _INVALID  # instID[0]
        _intersect_both(intersect, valid, lanes, static_scene, dynamic_scene, arguments)
        if max_surfaces + max_bounces > 0:
            for j in range(_W):
                passed[j] = 0
                bounced[j] = 0
                path[j] = 0.0
        if max_bounces > 0:  # a scene without mirrors skips this
            for j in range(_W):
                gain[j] = 1.0
                for e in range(9):
                    unfold[j, e] = 1.0 if e % 4 == 0 else 0.0
        for _ in range(max_surfaces + max_bounces):
            again = False
            for j in range(count):
                if valid[j] == 0:
                    continue
                k = _instance_index_of(ilanes, j, static_index, dynamic_index)
                action = segment_after(k, ilanes[17 * _W + j], passed[j], max_surfaces, bounced[j], max_bounces,
                                       triangle_material, first_triangle, class_code)
                if action == STOP:
                    valid[j] = 0  # final: a miss or a surface that ends the ray
                    continue
                if action == PASS:  # start again just behind the surface (Embree measures tnear from the origin)
                    lanes[3 * _W + j] = lanes[8 * _W + j] + CONTINUATION_STEP_M
                    passed[j] += 1
                else:  # off the mirror: new origin and direction, what it keeps of the power
                    s = specular[material_of_hit(k, ilanes[17 * _W + j], triangle_material, first_triangle)]
                    gain[j] *= s * s
                    _bounce(lanes, j, k, normal_from_local, unfold, path)
                    bounced[j] += 1
                lanes[8 * _W + j] = tmax - path[j]
                ilanes[17 * _W + j] = _INVALID
                ilanes[18 * _W + j] = _INVALID
                ilanes[19 * _W + j] = _INVALID
                again = True
            if not again:
                break
            _intersect_both(intersect, valid, lanes, static_scene, dynamic_scene, arguments)
        for j in range(count):
            i = order[first + j]
            k = _instance_index_of(ilanes, j, static_index, dynamic_index)
            if k < 0:
                continue
            nx, ny, nz = _lane_normal(lanes, j, normal_from_local[k])
            if nx == 0.0 and ny == 0.0 and nz == 0.0:
                continue  # degenerate triangle
            if max_bounces > 0:
                if bounced[j] > 0:  # a ghost: the surface's normal mirrored back into the original ray's frame
                    m = unfold[j]
                    nx, ny, nz = (m[0] * nx + m[1] * ny + m[2] * nz, m[3] * nx + m[4] * ny + m[5] * nz,
                                  m[6] * nx + m[7] * ny + m[8] * nz)
                path_gain[i] = gain[j]
            normal[i, 0] = nx
            normal[i, 1] = ny
            normal[i, 2] = nz
            range_m[i] = path[j] + lanes[8 * _W + j]
            u[i] = lanes[15 * _W + j]
            v[i] = lanes[16 * _W + j]
            prim[i] = ilanes[17 * _W + j]
            instance_index[i] = k
        first += parts * _W

@njit(parallel=True, nogil=True, cache=True)
def cast_parallel(intersect, static_scene, dynamic_scene, static_index, dynamic_index, normal_from_local, origins,
                  directions, order, rotation, tmax, max_surfaces, max_bounces, triangle_material, first_triangle,
                  class_code, specular, parts, range_m, prim, instance_index, u, v, normal, path_gain):
    # one share of interleaved packets per Numba worker thread
    for part in prange(parts):
        _cast_packets(intersect, static_scene, dynamic_scene, static_index, dynamic_index, normal_from_local, origins,
                     directions, order, rotation, tmax, max_surfaces, max_bounces, triangle_material, first_triangle,
                     class_code, specular, part, parts, range_m, prim, instance_index, u, v, normal, path_gain)


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
        self.mesh = mesh  # kept: the cache checks identity (a freed mesh's id may be reused)
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


def packet_tiles(directions: np.ndarray, bin_deg: float = 0.2) -> np.ndarray:
    """(N,) int64 order of ``directions`` in packets of 2 rows × 4 columns of the scan.

    Packets run fastest when their rays travel together (Embree's coherent
    traversal, :data:`_RAY_QUERY_FLAG_COHERENT`); a pattern's own order may
    interleave beams (the VLP-16 fires −15°, +1°, −13°, …). Rays are binned
    into columns by azimuth (``bin_deg`` steps), each column sorted by
    elevation, and dealt in tiles two rows high and four columns wide: the most
    compact 8-ray tile of a lidar's grid (measured in issue 15: 2 × 4 before
    1 × 8; 16-ray packets were slower on this CPU). Patterns without a grid get
    tiles of whatever neighbours the bins give.
    """
    n = len(directions)
    azimuth_bin = np.floor(np.degrees(np.arctan2(directions[:, 1], directions[:, 0])) / bin_deg).astype(np.int64)
    by_column = np.lexsort((directions[:, 2], azimuth_bin))  # column by column, each bottom to top
    column = np.unique(azimuth_bin[by_column], return_inverse=True)[1].reshape(-1)
    starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
    row = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    tiles = np.lexsort((row % 2, column % 4, row // 2, column // 4))
    return by_column[tiles].astype(np.int64)


#: packet orders kept (one per pattern array: a rig's lidars, a partial sweep's window)
_KEPT_ORDERS = 8  # ≤ ~20 MB for OS1-128 frames; partial sweeps bring a new array each step


class EmbreeBackend(Backend):
    """Embree 4 with native instancing and 8-ray packets over a :class:`~lidar_fmu.scene.Scene`.

    Instances at identity (the static world) are attached directly to a static
    scene built once; the others are Embree instances in a small dynamic
    scene whose transforms are rewritten each step.
    """

    name = "embree"

    def __init__(self, scene, threads: int | None = None):
        embree()
        super().__init__(scene)
        self.threads = max(1, threads or numba.get_num_threads())
        self._meshes: dict[int, _MeshData] = {}  # id(mesh) → its data, for the scene's current meshes only
        self._static = self._dynamic = None
        self._one_level = False  # the static scene is an instance inside the dynamic one (ONE_TOP_LEVEL)
        self._static_mask = None
        self._orders: dict[int, tuple] = {}  # id(directions) → (directions, packet order), see _packet_order
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
        # Only the scene's current meshes are kept (meshes no instance uses leave the scene); the old top-level
        # scenes are released above, so nothing instances a dropped mesh's scene any more.
        kept = {}
        for mesh in scene.meshes:
            data = self._meshes.get(id(mesh))
            kept[id(mesh)] = data if data is not None and data.mesh is mesh else _MeshData(mesh)
        self._meshes = kept
        static_index, dynamic_index, self._instances = [], [], []
        if static_mask.any():
            self._static = _new_scene(_RTC_SCENE_FLAG_ROBUST)
        if (~static_mask).any():
            self._dynamic = _new_scene(_RTC_SCENE_FLAG_DYNAMIC | _RTC_SCENE_FLAG_ROBUST)
            e.lib.rtcSetSceneBuildQuality(self._dynamic, _RTC_BUILD_QUALITY_LOW)
        for index, (mesh_index, static) in enumerate(zip(scene.instance_mesh_index, static_mask)):
            data = self._meshes[id(scene.meshes[mesh_index])]
            if static:
                geometry = _triangle_geometry(data.buffers)
                geom_id = e.lib.rtcAttachGeometry(self._static, geometry)
                e.lib.rtcReleaseGeometry(geometry)
                static_index.append((geom_id, index))
            else:
                instance = e.lib.rtcNewGeometry(e.device, _RTC_GEOMETRY_TYPE_INSTANCE)
                e.lib.rtcSetGeometryInstancedScene(instance, data.scene)
                geom_id = e.lib.rtcAttachGeometry(self._dynamic, instance)
                # the dynamic scene holds the geometry now: our reference goes, and the handle stays valid while
                # that scene lives (it and the handles are replaced together); kept, every rebuild leaked the
                # instances and, through them, the BVHs of meshes that had left the scene
                e.lib.rtcReleaseGeometry(instance)
                dynamic_index.append((geom_id, index))
                self._instances.append((instance, index))
        self._one_level = bool(ONE_TOP_LEVEL and self._static and self._dynamic)
        if self._one_level:  # the static world joins the top level as one more instance, at identity
            e.lib.rtcCommitScene(self._static)
            instance = e.lib.rtcNewGeometry(e.device, _RTC_GEOMETRY_TYPE_INSTANCE)
            e.lib.rtcSetGeometryInstancedScene(instance, self._static)
            e.lib.rtcSetGeometryTransform(instance, 0, _RTC_FORMAT_FLOAT3X4_ROW_MAJOR, _IDENTITY_3X4.ctypes.data)
            e.lib.rtcCommitGeometry(instance)
            dynamic_index.append((e.lib.rtcAttachGeometry(self._dynamic, instance), _STATIC_INSTANCE))
            e.lib.rtcReleaseGeometry(instance)
        self._instance_handles = np.array([handle for handle, _ in self._instances], np.intp)
        self._instance_index = np.array([index for _, index in self._instances], np.intp)
        if self._static and not self._one_level:
            e.lib.rtcCommitScene(self._static)
        if self._static:
            e.check("building the static scene")
        self._static_index = self._index_table(static_index)
        self._dynamic_index = self._index_table(dynamic_index)
        self._static_mask = static_mask

    @staticmethod
    def _index_table(pairs):
        """Embree geometry id → instance index."""
        table = np.full(max((g for g, _ in pairs), default=-1) + 1, -1, np.int32)
        for geom_id, index in pairs:
            table[geom_id] = index
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
        if self._instances:
            _set_transforms(e.set_transform_address, e.commit_geometry_address, self._instance_handles,
                            self._instance_index, transforms)
        if self._dynamic:
            e.lib.rtcCommitScene(self._dynamic)
            e.check("committing instances")
        self._normal_from_local = normal_transforms(poses)
        self._instance_ids = np.asarray(scene.instance_ids).copy()
        self._pose_revision = scene.pose_revision

    def __del__(self):
        if _EMBREE is not None:
            self._release()

    def _packet_order(self, directions) -> np.ndarray:
        """Ray order that puts angular neighbours into the same packet (:func:`packet_tiles`).

        Kept per pattern array (the last few: a rig's lidars share this
        backend), so a lidar casting the same pattern again sorts nothing.
        """
        entry = self._orders.get(id(directions))
        if entry is None or entry[0] is not directions:
            entry = (directions, packet_tiles(directions))
            if len(self._orders) >= _KEPT_ORDERS:
                self._orders.pop(next(iter(self._orders)))  # the oldest
            self._orders[id(directions)] = entry
        return entry[1]

    def cast_batch(self, rays: RayBatch, through: Continuation | None = None) -> Hits:
        self.update()
        through = through or Continuation.none()
        n = len(rays)
        range_m = np.full(n, np.inf, np.float32)
        prim = np.full(n, -1, np.int32)
        instance_index = np.full(n, -1, np.int32)
        u = np.zeros(n, np.float32)
        v = np.zeros(n, np.float32)
        normal = np.zeros((n, 3), np.float32)
        pose = rays.world_from_frame
        # origins to the world here (one point for a spinning lidar); directions in the kernel, so the
        # packet order of a pattern is computed once
        # (a compiled loop: numpy's BLAS took 42 ms for the 131k beam origins of an OS1-128 unit calibration)
        origins = transform_points(rays.origins, pose)
        parts = min(self.threads, max(1, n // MIN_RAYS_PER_THREAD))
        if rays.in_packet_order:
            order = np.arange(n, dtype=np.int64)
        else:
            order = self._packet_order(rays.directions if rays.coherence_key is None else rays.coherence_key)
        # only rays that may meet a mirror need their power kept (a scene without mirrors writes none)
        path_gain = np.ones(n if through.max_bounces else 1, np.float32)
        cast_parallel(embree().intersect_address, 0 if self._one_level else (self._static or 0), self._dynamic or 0,
                      self._static_index,
                      self._dynamic_index, self._normal_from_local, origins, rays.directions,
                      order, np.ascontiguousarray(pose[:3, :3], np.float32),
                      np.float32(min(rays.max_range_m, 3.0e38)), through.max_surfaces, through.max_bounces,
                      through.triangle_material, through.first_triangle, through.class_code, through.specular, parts,
                      range_m, prim, instance_index, u, v, normal, path_gain)
        return Hits.from_instance_index(range_m, normal, instance_index, prim, u, v, self._instance_ids,
                                        path_gain if through.max_bounces else None)

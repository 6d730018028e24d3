"""The ``embree`` backend: Embree 4 through the library the ``embreex`` wheel ships, called from compiled loops.

embreex's Python API has no instancing and no ray packets; its wheel carries the whole Embree 4 library, which
this backend calls directly (docs/backends.md):

* one top-level scene: the static world one instance of its own scene (built once per content), one Embree
  *instance* per moving scene instance (its mesh's own scene, built once), whose transform is rewritten when
  poses change;
* rays cast in coherent packets of :data:`PACKET` angular neighbours, tiles of
  the scan (:func:`packet_tiles`, ``rtcIntersect8``), by the calling thread and
  pool threads that claim runs of packets as they come (a late thread finds
  none left; :func:`lidar_fmu.parallel.helped`); every ray's slots of the
  :class:`Hits` are written, so buffers are reused;
* rays that go on through a surface or reflect off a mirror
  (:func:`lidar_fmu.physics.hit_rules.segment_after`) are intersected again inside their
  packet, from just behind it or from the mirror along the reflected direction.

Where this library cannot be loaded, :mod:`.embreex` casts the same rays
through embreex's Python API.
Struct layouts: Embree 4's public ``RTCRayHit`` / ``RTCRayHitN`` (SoA), from the library beside embreex.
"""
from __future__ import annotations

import ctypes
import glob
import os
from typing import NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ..parallel import helped, threadsafe_layer
from ..physics.hit_rules import (
    CONTINUATION_STEP_M,
    PASS,
    STOP,
    Continuation,
    material_of_hit,
    reflect,
    segment_after,
    unfold_after,
)
from .backend import MIN_RAYS_PER_THREAD, Backend, check_out, evict_oldest
from .hits import Hits
from .rays import RayBatch

PACKET = 8
#: packets a thread claims at a time (128 rays, ~20 µs of Embree's work on one core): a whole block of a VLP-16's
#: tiles (16 beams × 8 shots, packet_tiles), 32 beams × 4 shots of an OS1-128's, so that two threads seldom write
#: the same cache line of the hits, and a thread that comes late or is held up leaves at most one run to wait for
_RUN = 16
# Numba's threads (the physics' kernels after a cast) on a layer that several instances scanning at once may share
# (OpenMP or TBB; its fallback, workqueue, would abort the process): chosen before anything starts them
threadsafe_layer()
_RTC_GEOMETRY_TYPE_TRIANGLE = 0
_RTC_GEOMETRY_TYPE_INSTANCE = 121
_RTC_BUFFER_TYPE_INDEX, _RTC_BUFFER_TYPE_VERTEX = 0, 1
_RTC_FORMAT_UINT3, _RTC_FORMAT_FLOAT3 = 0x5003, 0x9003
_RTC_FORMAT_FLOAT3X4_ROW_MAJOR = 0x9134
#: the static world's instance transform (Embree copies it)
_IDENTITY_3X4 = np.ascontiguousarray(np.eye(4)[:3], np.float32)
_RTC_SCENE_FLAG_DYNAMIC = 1
#: watertight traversal: a closed mesh must not leak rays between its triangles
_RTC_SCENE_FLAG_ROBUST = 4
_RTC_BUILD_QUALITY_HIGH = 2
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
            "rtcEnableGeometry": (None, [vp]),
            "rtcDisableGeometry": (None, [vp]),
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
        #: addresses of rtcEnableGeometry and rtcDisableGeometry, for the compiled switch of instances in reach
        self.enable_geometry_address = ctypes.cast(lib.rtcEnableGeometry, vp).value
        self.disable_geometry_address = ctypes.cast(lib.rtcDisableGeometry, vp).value
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
def _claim(typingctx, counter):
    """``counter[0] += 1`` as one atomic step, → its value before: the next share of work for the thread that asks."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None
    sig = types.int64(counter)

    def codegen(context, builder, signature, args):
        first = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.atomic_rmw("add", first, ir.IntType(64)(1), "monotonic")

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
def _call_on_geometry(typingctx, function, geometry):
    """``function(geometry)`` for the address of an Embree call on one geometry (``rtcCommitGeometry``,
    ``rtcEnableGeometry``, ``rtcDisableGeometry``)."""
    sig = types.void(types.intp, types.intp)

    def codegen(context, builder, signature, args):
        pointer = ir.IntType(8).as_pointer()
        callee = builder.inttoptr(args[0], ir.FunctionType(ir.VoidType(), [pointer]).as_pointer())
        builder.call(callee, [builder.inttoptr(args[1], pointer)])
        return context.get_dummy_value()

    return sig, codegen


@njit(nogil=True, cache=True)
def _set_transforms(set_transform, commit_geometry, handles, instance_index, poses):
    """Each of ``handles``' transform: the 3×4 row-major float32 of its instance's pose (``poses`` (K, 4, 4) float64),
    compiled: 10,000 instances take ~1 ms, not the ~30 ms of a ctypes call pair each."""
    xfm = np.empty(12, np.float32)  # (Embree copies it)
    for k in range(handles.shape[0]):
        pose = poses[instance_index[k]]
        for e in range(12):
            xfm[e] = pose[e // 4, e % 4]
        _call_set_transform(set_transform, handles[k], xfm.ctypes.data)
        _call_on_geometry(commit_geometry, handles[k])


@njit(nogil=True, cache=True)
def _take_changed(poses, committed, changed):
    """``changed[k]``: does ``poses[k]`` differ from ``committed[k]`` ((K, 4, 4) each)? Those that do are copied into
    ``committed``; → how many. One pass, where numpy's comparisons and copies of a thousand poses took ~0.15 ms a
    motion slice."""
    count = 0
    for k in range(poses.shape[0]):
        same = True
        for r in range(4):
            for c in range(4):
                same = same and poses[k, r, c] == committed[k, r, c]
        changed[k] = not same
        if not same:
            committed[k] = poses[k]
            count += 1
    return count


@njit(nogil=True, cache=True)
def _switch_geometries(enable, disable, handles, enabled):
    """Each of ``handles`` enabled or disabled as ``enabled`` says (the top level leaves a disabled one out)."""
    for k in range(handles.shape[0]):
        _call_on_geometry(enable if enabled[k] else disable, handles[k])


@njit(nogil=True, cache=True)
def in_reach(poses, instance_index, radii_m, reach):
    """(K,) whether the bounding sphere of each instance ``instance_index[k]`` (centre: its pose's (``poses``
    (·, 4, 4)) origin; radius: ``radii_m[k]`` stretched by the pose's largest column length, as
    :func:`~lidar_fmu.geometry.transforms.largest_scale`) meets one of the balls ``reach`` (J, 4): centre and
    radius (m) of all that some rays can touch. Compiled: numpy took ~0.3 ms for a thousand instances, in each of
    a frame's ten motion slices."""
    enabled = np.zeros(instance_index.shape[0], np.bool_)
    for k in range(instance_index.shape[0]):
        pose = poses[instance_index[k]]
        stretch = 0.0
        for c in range(3):
            stretch = max(stretch, np.sqrt(pose[0, c] ** 2 + pose[1, c] ** 2 + pose[2, c] ** 2))
        for j in range(reach.shape[0]):
            gap = np.sqrt((pose[0, 3] - reach[j, 0]) ** 2 + (pose[1, 3] - reach[j, 1]) ** 2
                          + (pose[2, 3] - reach[j, 2]) ** 2) - reach[j, 3]
            if gap <= radii_m[k] * stretch:
                enabled[k] = True
                break
    return enabled


@njit(nogil=True, cache=True, error_model="numpy")  # a collapsed pose gives inf, as numpy's inverse did, not an error
def normal_transforms(poses: np.ndarray) -> np.ndarray:
    """(K, 3, 3) inverse-transpose of each pose's linear part (normals from instance to world frame), as the
    cofactor matrix over the determinant; compiled (numpy's crosses over a frame's ten motion slices took
    ~2 ms)."""
    out = np.empty((poses.shape[0], 3, 3))
    for k in range(poses.shape[0]):
        a = poses[k]
        for c in range(3):  # column c: the cross product of the other two columns of A
            p, q = (c + 1) % 3, (c + 2) % 3
            out[k, 0, c] = a[1, p] * a[2, q] - a[2, p] * a[1, q]
            out[k, 1, c] = a[2, p] * a[0, q] - a[0, p] * a[2, q]
            out[k, 2, c] = a[0, p] * a[1, q] - a[1, p] * a[0, q]
        det = a[0, 0] * out[k, 0, 0] + a[1, 0] * out[k, 1, 0] + a[2, 0] * out[k, 2, 0]
        for r in range(3):
            for c in range(3):
                out[k, r, c] /= det
    return out


# The packet loop. Each packet is intersected with the one top-level scene: a
# hit on a static triangle mesh has only its ``geomID``, one inside a moving
# instance also ``instID[0]`` (the instance's geometry id in that scene).
_W = PACKET


# What one cast hands the compiled packet loop, by name: Numba takes a NamedTuple of arrays and scalars (nested
# ones too) as one argument. Every array taken from a tuple is reference-counted, and Numba drops those counts
# only from code without calls: so the packet loop's steps (and _bounce within them) are inlined
# (inline="always"), and each reads the fields it uses into locals before its loops. Measured on the street's
# OS1-128 cast, one thread: as fast as the one long loop this replaced; as calls 5 %, fields read inside the
# loops 12 % slower.
class EmbreeTarget(NamedTuple):
    """What the rays are cast into: the committed top-level Embree scene and what a hit's ids lead to."""

    intersect: int  # address of rtcIntersect8 (an argument, so the compiled loops can be cached)
    top: int  # the top-level RTCScene
    index_of_geometry: np.ndarray  # (G,) int32: top-level geometry id → scene instance index
    normal_from_local: np.ndarray  # (K, 3, 3) float64 per instance: its frame's normals → the world's
    instance_ids: np.ndarray  # (K,) int64 scene instance id of each instance index


class PacketRays(NamedTuple):
    """The batch's rays in their frame, the pose that takes them to the world, and the packet order to cast them in."""

    origins: np.ndarray  # (N, 3) or (1, 3) shared, float32, m, the rays' frame
    directions: np.ndarray  # (N, 3) float32 unit, the rays' frame
    order: np.ndarray  # (N,) int64: rays in packet order (packet_tiles)
    world_from_frame: np.ndarray  # (4, 4) float64 (origins far from the world origin keep their millimetres)
    rotation: np.ndarray  # (3, 3) float32: its rotation, for the directions
    max_range_m: np.float32  # every ray's tfar


class SurfaceRules(NamedTuple):
    """The :class:`~lidar_fmu.physics.hit_rules.Continuation` tables: which surfaces rays pass or reflect off."""

    max_surfaces: int  # transparent surfaces a ray passes at most
    max_bounces: int  # mirrors a ray reflects off at most
    triangle_material: np.ndarray  # (T,) int16 IR material of every triangle of every mesh
    first_triangle: np.ndarray  # (K,) int64 per instance index: where its mesh's triangles start
    class_code: np.ndarray  # (M,) int8 per IR material: its class (hit_rules)
    specular: np.ndarray  # (M,) float32 per IR material: specular reflectance (0: not a mirror)


class HitSlots(NamedTuple):
    """The :class:`~.hits.Hits` arrays the loop writes, every ray's slots, hit or miss."""

    range_m: np.ndarray  # (N,) float32
    hit: np.ndarray  # (N,) bool
    instance_id: np.ndarray  # (N,) int64
    primitive_id: np.ndarray  # (N,) int32
    instance_index: np.ndarray  # (N,) int32
    u: np.ndarray  # (N,) float32
    v: np.ndarray  # (N,) float32
    normal: np.ndarray  # (N, 3) float32
    path_gain: np.ndarray  # (N,) float32, or one never-written slot when no ray meets a mirror


class PacketCast(NamedTuple):
    """One :meth:`EmbreeBackend.cast_batch`, as the packet loop takes it."""

    target: EmbreeTarget
    rays: PacketRays
    through: SurfaceRules
    hits: HitSlots


class _Packet(NamedTuple):
    """One thread's packet in flight: Embree's RTCRayHit8 (structure of arrays, 64-byte aligned), seen as float32 and
    as int32 lanes, which lanes to trace, the RTCIntersectArguments, and per lane what its path has met so far."""

    lanes: np.ndarray  # float32: ray (org, tnear, dir, time, tfar, …) then hit (Ng, u, v, primID, geomID, instID)
    ilanes: np.ndarray  # the same memory as int32 (mask, id, flags and the hit's ids)
    valid: np.ndarray  # (8,) int32: −1 trace this lane, 0 leave it
    arguments: np.ndarray  # RTCIntersectArguments (_coherent_arguments)
    passed: np.ndarray  # (8,) int32 transparent surfaces passed
    bounced: np.ndarray  # (8,) int32 mirrors bounced off
    path_m: np.ndarray  # (8,) float32 path length up to the lane's current origin
    gain: np.ndarray  # (8,) float32 power its mirrors kept
    unfold: np.ndarray  # (8, 9) float32 the mirrors' reflection (row-major): final normal → original ray's frame


# RTCIntersectArguments (Embree 4, rtcore_scene.h): flags (int32), feature_mask (uint32), then the context,
# filter and intersect pointers (null: Embree's defaults), and a float only in RTC_MIN_WIDTH builds; 48 bytes
# hold it either way. RTC_RAY_QUERY_FLAG_COHERENT = 1 << 16: the packet's rays travel together (they are
# neighbours of one tile, _packet_order), which lets Embree traverse them as one (measured against Open3D in
# the demo street: without it no packet shape beats single rays). RTC_FEATURE_FLAG_ALL = 0xffffffff.
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
def _instance_index_of(ilanes, j, index_of_geometry):
    """The scene instance lane ``j`` hit (−1: a miss): through the geometry id → instance index table, a moving
    instance's ``instID``, or, inside the static world's instance (whose entry is −2 − where the static world's
    own entries start in the table, :meth:`EmbreeBackend._rebuild`), that start plus the static mesh's ``geomID``."""
    geom = ilanes[18 * _W + j]
    if geom == _INVALID:
        return -1
    inst = ilanes[19 * _W + j]
    if inst == _INVALID:
        return index_of_geometry[geom]
    k = index_of_geometry[inst]
    return index_of_geometry[-2 - k + geom] if k < -1 else k

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


@njit(nogil=True, cache=True, inline="always")
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
    rx, ry, rz = reflect(dx, dy, dz, nx, ny, nz)
    lanes[4 * _W + j], lanes[5 * _W + j], lanes[6 * _W + j] = (_signed_for_embree(rx), _signed_for_embree(ry),
                                                               _signed_for_embree(rz))
    m = unfold[j]
    (m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8]) = unfold_after(
        m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8], nx, ny, nz)
    lanes[3 * _W + j] = CONTINUATION_STEP_M  # tnear: start the step off the mirror


# Embree takes a direction component below 1e-18 in magnitude as +1e-18 (``zero_fix`` before its reciprocal),
# dropping its sign, while its packet traversal sorts rays by octant from the component's own sign: a ray with
# such a negative component (a pose at yaw exactly 90° leaves ~1e-24 where cos 90° meets a pattern's own ~6e-17)
# then swaps near and far in the boxes it starts on the face of, and a 1 m ground at yaw 90° lost 58 of 131,072
# rays through the shared edges its cells' boxes meet at. Such a component moves a hit by < 1e-15 m in 1 km.
_MIN_RCP_INPUT = np.float32(1e-18)


@njit(nogil=True, cache=True, inline="always")
def _signed_for_embree(d):
    """Direction component ``d``, or +0 where Embree would take it for +1e-18 (:data:`_MIN_RCP_INPUT`)."""
    return np.float32(0.0) if abs(d) < _MIN_RCP_INPUT else d


@njit(nogil=True, cache=True)
def _placed(P, origins, i):
    """Ray ``i``'s origin in the world: float64 arithmetic, rounded to float32 once."""
    x, y, z = np.float64(origins[i, 0]), np.float64(origins[i, 1]), np.float64(origins[i, 2])
    return (np.float32(P[0, 0] * x + P[0, 1] * y + P[0, 2] * z + P[0, 3]),
            np.float32(P[1, 0] * x + P[1, 1] * y + P[1, 2] * z + P[1, 3]),
            np.float32(P[2, 0] * x + P[2, 1] * y + P[2, 2] * z + P[2, 3]))


@njit(nogil=True, cache=True)
def _new_packet():
    """A thread's packet, zeroed (the ray and valid arrays 64-byte aligned, as rtcIntersect8 wants them)."""
    raw = np.zeros(16 + _W * _SOA_ARRAYS, np.float32)
    lanes = raw[(64 - raw.ctypes.data % 64) % 64 // 4:][: _W * _SOA_ARRAYS]
    valid_raw = np.zeros(_W + 16, np.int32)
    valid = valid_raw[(64 - valid_raw.ctypes.data % 64) % 64 // 4:][:_W]
    return _Packet(lanes, lanes.view(np.int32), valid, _coherent_arguments(), np.zeros(_W, np.int32),
                   np.zeros(_W, np.int32), np.zeros(_W, np.float32), np.ones(_W, np.float32),
                   np.zeros((_W, 9), np.float32))


@njit(nogil=True, cache=True, inline="always")
def _intersect(target, packet):
    """The packet's valid lanes intersected with the scene: one ``rtcIntersect8``."""
    _call_intersect(target.intersect, packet.valid.ctypes.data, target.top, packet.lanes.ctypes.data,
                    packet.arguments.ctypes.data)


@njit(nogil=True, cache=True, inline="always")
def _load_packet(packet, rays, first, count, origin):
    """Rays ``order[first:first + count]`` into the packet's lanes, in the world, from ``origin`` when they all
    share it (else each from its own); the lanes past ``count`` left out."""
    lanes, ilanes, valid = packet.lanes, packet.ilanes, packet.valid
    origins, directions, order, P, R = rays.origins, rays.directions, rays.order, rays.world_from_frame, rays.rotation
    single = origins.shape[0] == 1
    ox, oy, oz = origin
    for j in range(_W):
        if j >= count:
            valid[j] = 0
            continue
        i = order[first + j]
        if not single:
            ox, oy, oz = _placed(P, origins, i)
        dx, dy, dz = directions[i, 0], directions[i, 1], directions[i, 2]
        valid[j] = -1
        lanes[0 * _W + j] = ox
        lanes[1 * _W + j] = oy
        lanes[2 * _W + j] = oz
        lanes[3 * _W + j] = 0.0  # tnear
        lanes[4 * _W + j] = _signed_for_embree(R[0, 0] * dx + R[0, 1] * dy + R[0, 2] * dz)
        lanes[5 * _W + j] = _signed_for_embree(R[1, 0] * dx + R[1, 1] * dy + R[1, 2] * dz)
        lanes[6 * _W + j] = _signed_for_embree(R[2, 0] * dx + R[2, 1] * dy + R[2, 2] * dz)
        lanes[7 * _W + j] = 0.0  # time
        lanes[8 * _W + j] = rays.max_range_m  # tfar
        ilanes[9 * _W + j] = -1  # mask
        ilanes[10 * _W + j] = 0  # id
        ilanes[11 * _W + j] = 0  # flags
        ilanes[17 * _W + j] = _INVALID  # primID
        ilanes[18 * _W + j] = _INVALID  # geomID
        ilanes[19 * _W + j] = _INVALID  # instID[0]


@njit(nogil=True, cache=True, inline="always")
def _go_on(cast, packet, count):
    """Lanes whose surface lets them go on intersected again, until each ends or has gone on ``max_surfaces +
    max_bounces`` times: through a transparent surface from just behind it, off a mirror along the reflection."""
    target, tmax = cast.target, cast.rays.max_range_m
    index_of_geometry, normal_from_local = target.index_of_geometry, target.normal_from_local
    max_surfaces, max_bounces, triangle_material, first_triangle, class_code, specular = cast.through
    lanes, ilanes, valid, path = packet.lanes, packet.ilanes, packet.valid, packet.path_m
    passed, bounced, gain, unfold = packet.passed, packet.bounced, packet.gain, packet.unfold
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
            k = _instance_index_of(ilanes, j, index_of_geometry)
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
        _intersect(target, packet)


@njit(nogil=True, cache=True, inline="always")
def _store_hits(cast, packet, first, count):
    """Each lane's final hit into its ray's slots, a miss too (the output buffers are reused)."""
    index_of_geometry, normal_from_local, instance_ids = (cast.target.index_of_geometry,
                                                          cast.target.normal_from_local, cast.target.instance_ids)
    range_m, hit, instance_id, primitive_id, instance_index, u, v, normal, path_gain = cast.hits
    order, max_bounces = cast.rays.order, cast.through.max_bounces
    lanes, ilanes, path, bounced, gain, unfold = (packet.lanes, packet.ilanes, packet.path_m, packet.bounced,
                                                  packet.gain, packet.unfold)
    for j in range(count):
        i = order[first + j]
        k = _instance_index_of(ilanes, j, index_of_geometry)
        nx = ny = nz = np.float32(0.0)
        if k >= 0:
            nx, ny, nz = _lane_normal(lanes, j, normal_from_local[k])
            if nx == 0.0 and ny == 0.0 and nz == 0.0:
                k = -1  # a degenerate triangle: no surface to return from
        if max_bounces > 0:
            if k >= 0 and bounced[j] > 0:  # a ghost: the surface's normal mirrored back into the original ray's frame
                m = unfold[j]
                nx, ny, nz = (m[0] * nx + m[1] * ny + m[2] * nz, m[3] * nx + m[4] * ny + m[5] * nz,
                              m[6] * nx + m[7] * ny + m[8] * nz)
            path_gain[i] = gain[j] if k >= 0 else np.float32(1.0)
        normal[i, 0] = nx
        normal[i, 1] = ny
        normal[i, 2] = nz
        instance_index[i] = k
        if k < 0:
            range_m[i] = np.inf
            u[i] = 0.0
            v[i] = 0.0
            primitive_id[i] = -1
            hit[i] = False
            instance_id[i] = -1
            continue
        range_m[i] = path[j] + lanes[8 * _W + j]
        u[i] = lanes[15 * _W + j]
        v[i] = lanes[16 * _W + j]
        primitive_id[i] = ilanes[17 * _W + j]
        hit[i] = True
        instance_id[i] = instance_ids[k]


@njit(nogil=True, cache=True)
def cast_packets(cast, next_run):
    """One thread's share of ``cast`` (a :class:`PacketCast`): runs of :data:`_RUN` packets of its rays in packet
    order, each claimed from ``next_run`` while any is left, each packet one Embree call, carried on through the
    surfaces that let rays go on, its hits stored."""
    packet = _new_packet()
    rays = cast.rays
    origin = _placed(rays.world_from_frame, rays.origins, 0)  # every ray's when they share one
    go_on = cast.through.max_surfaces + cast.through.max_bounces > 0  # a scene without glass or mirrors: never
    n = rays.directions.shape[0]
    while True:
        start = _claim(next_run) * (_RUN * _W)
        if start >= n:
            break
        for first in range(start, min(start + _RUN * _W, n), _W):
            count = min(_W, n - first)
            _load_packet(packet, rays, first, count, origin)
            _intersect(cast.target, packet)
            if go_on:
                _go_on(cast, packet, count)
            _store_hits(cast, packet, first, count)


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


def scan_steps_deg(directions: np.ndarray) -> tuple[float, float] | None:
    """(elevation step between adjacent beams, azimuth step between one beam's adjacent shots), degrees, of a
    spinning lidar's rays; ``None`` for rays without beams of a fixed elevation (a rosette, a camera)."""
    elevation = np.round(np.degrees(np.arcsin(np.clip(directions[:, 2], -1.0, 1.0))), 3)
    levels, beam_of, shots = np.unique(elevation, return_inverse=True, return_counts=True)
    if len(levels) < 2 or shots.max() < 2 * PACKET:
        return None
    azimuth = np.sort(np.degrees(np.arctan2(directions[:, 1], directions[:, 0]))[beam_of.ravel() == np.argmax(shots)])
    return float(np.median(np.diff(levels))), float(np.median(np.diff(azimuth)))


def packet_tiles(directions: np.ndarray) -> np.ndarray:
    """(N,) int64 order of ``directions`` in packets of 8 neighbours of the scan.

    Packets run fastest when their rays travel together (Embree's coherent
    traversal, :data:`_RAY_QUERY_FLAG_COHERENT`); a pattern's own order may
    interleave beams (the VLP-16 fires −15°, +1°, −13°, …). Rays are binned
    into columns by azimuth, one bin per shot of a beam, each column sorted by
    elevation, and dealt in tiles: 2 rows × 4 columns where beams lie about as
    close as shots (OS1-128: 0.35° and 0.35°), 1 row × 8 columns where beams lie
    more than twice as far apart (VLP-16: 2° and 0.4°). Measured (2026-11) on
    the demo street, same rays, one process: OS1-128 2 × 4 9.8 ms, 1 × 8 10.9 ms;
    VLP-16 2 × 4 1.64 ms, 1 × 8 1.46 ms (Open3D 12.4 and 1.58 ms); 16-ray
    packets were slower on this CPU. Rays without beams of a fixed elevation get
    2 × 4 tiles of 0.2° bins, whatever neighbours those give.
    """
    n = len(directions)
    steps = scan_steps_deg(directions)
    if steps is None:
        (rows, columns), bin_deg = (2, 4), 0.2
    else:
        row_step, column_step = steps
        rows, columns = (1, 8) if row_step > 2.0 * column_step else (2, 4)
        bin_deg = 0.98 * column_step  # just under a step: a beam's adjacent shots never share a bin
    azimuth_bin = np.floor(np.degrees(np.arctan2(directions[:, 1], directions[:, 0])) / bin_deg).astype(np.int64)
    by_column = np.lexsort((directions[:, 2], azimuth_bin))  # column by column, each bottom to top
    column = np.unique(azimuth_bin[by_column], return_inverse=True)[1].reshape(-1)
    starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
    row = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    tiles = np.lexsort((row % rows, column % columns, row // rows, column // columns))
    return by_column[tiles].astype(np.int64)


#: time-slice packet orders kept (cast_span): 16 lidars' 10 slices (8 OS1-128 at 10 slices, 80 spans, emptied a
#: cache of 64 every step and picked every order again: 8 lidars cost 10–13× one); each holds its span's ray
#: indices (8 B a ray: ≤ 17 MB for 16 OS1-128), the oldest dropped first
_KEPT_SPANS = 160
#: packet orders kept (one per pattern array: a rig's lidars, a partial sweep's window)
_KEPT_ORDERS = 8  # ≤ ~20 MB for OS1-128 frames; partial sweeps bring a new array each step


class EmbreeBackend(Backend):
    """Embree 4 with native instancing and 8-ray packets over a :class:`~lidar_fmu.geometry.scene.Scene`.

    One top-level Embree scene: the instances at identity (the static world)
    as one instance of a scene of their own, built again only when those
    meshes change, the others as Embree instances of their mesh's own scene,
    whose transforms are rewritten when they move. A step's commit rebuilds
    only the top level over its instances, and a step whose poses are those
    last committed commits nothing; a packet is one Embree call.
    """

    name = "embree"

    def __init__(self, scene, threads: int | None = None):
        embree()
        super().__init__(scene)
        self.threads = max(1, threads or numba.get_num_threads())
        self._meshes: dict[int, _MeshData] = {}  # id(mesh) → its data, for the scene's current meshes only
        self._top = None
        self._static_mask = None
        # the static world's scene, the meshes it was built of (their ids, and kept alive): _static_world
        self._static_scene = None
        self._static_key: tuple[int, ...] = ()
        self._static_data: list[_MeshData] = []
        self._orders: dict[int, tuple] = {}  # id(directions) → (directions, packet order), see _packet_order
        self._spans: dict[tuple, tuple] = {}  # (id(packet order), start, stop) → (that order, the span's), cast_span
        self._revision = -1
        self._pose_revision = -1
        self._committed_poses = np.zeros((0, 4, 4))
        #: the balls (J, 4: centre, radius m) the coming casts' rays stay within (None: anywhere), and the one the
        #: top level's instances were last enabled for: :meth:`focus`
        self._reach: np.ndarray | None = None
        self._reach_applied: np.ndarray | None = None
        self._enabled = np.zeros(0, bool)
        self._instance_radius_m = np.zeros(0)
        self.update()

    def _release(self):
        if self._top:
            embree().lib.rtcReleaseScene(self._top)
        self._top = None

    def _rebuild(self, static_mask) -> None:
        """A new top-level scene for the current instance list: the static world (built again only when its
        meshes change, :meth:`_static_world`) as one instance, and each moving instance."""
        e = embree()
        scene = self.scene
        self._release()
        # Only the scene's current meshes are kept (meshes no instance uses leave the scene); the old top-level
        # scene is released above, so nothing instances a dropped mesh's scene any more.
        kept = {}
        for mesh in scene.meshes:
            data = self._meshes.get(id(mesh))
            kept[id(mesh)] = data if data is not None and data.mesh is mesh else _MeshData(mesh)
        self._meshes = kept
        index_of_geometry, self._instances = [], []
        static_index = np.flatnonzero(static_mask)
        world = self._static_world([self._meshes[id(scene.meshes[scene.instance_mesh_index[k]])]
                                    for k in static_index])
        if len(static_mask):
            moving = bool((~static_mask).any())
            # a scene with moving instances is committed every step: a dynamic one (Embree then refits or
            # rebuilds its top level quickly); one without is built once, for the fastest traversal. Either at
            # Embree's default (medium) quality: it rebuilt the busy road's top level in 40 µs (55 instances in
            # reach) and 0.46 ms (all 1,102) where the low quality took 77 µs and 0.9 ms
            self._top = _new_scene((_RTC_SCENE_FLAG_DYNAMIC if moving else 0) | _RTC_SCENE_FLAG_ROBUST)
        static_entry = None
        if world is not None:
            geometry = e.lib.rtcNewGeometry(e.device, _RTC_GEOMETRY_TYPE_INSTANCE)
            e.lib.rtcSetGeometryInstancedScene(geometry, world)
            e.lib.rtcSetGeometryTransform(geometry, 0, _RTC_FORMAT_FLOAT3X4_ROW_MAJOR, _IDENTITY_3X4.ctypes.data)
            e.lib.rtcCommitGeometry(geometry)
            static_entry = e.lib.rtcAttachGeometry(self._top, geometry)
            e.lib.rtcReleaseGeometry(geometry)
        for index, (mesh_index, static) in enumerate(zip(scene.instance_mesh_index, static_mask)):
            if static:
                continue
            data = self._meshes[id(scene.meshes[mesh_index])]
            geometry = e.lib.rtcNewGeometry(e.device, _RTC_GEOMETRY_TYPE_INSTANCE)
            e.lib.rtcSetGeometryInstancedScene(geometry, data.scene)
            index_of_geometry.append((e.lib.rtcAttachGeometry(self._top, geometry), index))
            # the scene holds the geometry now: our reference goes, and the handle stays valid while that scene
            # lives (it and the handles are replaced together); kept, every rebuild leaked the instances and,
            # through them, the BVHs of meshes that had left the scene
            e.lib.rtcReleaseGeometry(geometry)
            self._instances.append((geometry, index))
        self._instance_handles = np.array([handle for handle, _ in self._instances], np.intp)
        self._instance_index = np.array([index for _, index in self._instances], np.intp)
        self._instance_radius_m = scene.instance_radii_m(self._instance_index)
        self._enabled = np.ones(len(self._instances), bool)  # (a new geometry is enabled)
        table = self._index_table(index_of_geometry + ([(static_entry, -1)] if static_entry is not None else []))
        if static_entry is not None:  # the static world's meshes, by their geometry id in its scene, after the rest
            table[static_entry] = -2 - len(table)
            table = np.concatenate([table, static_index.astype(np.int32)])
        self._index_of_geometry = table
        self._static_mask = static_mask

    def _static_world(self, meshes: list):
        """The static world's own Embree scene, ``meshes`` (at identity) each one geometry with its position in
        the list as its id: built again only when the list changes, so a step whose road users come and go
        rebuilds the top level over its instances, not over every triangle of the road and the street."""
        e = embree()
        key = tuple(id(data) for data in meshes)
        if key == self._static_key:
            return self._static_scene
        if self._static_scene:
            e.lib.rtcReleaseScene(self._static_scene)
        self._static_scene, self._static_key = None, key
        if not meshes:
            return None
        self._static_scene = _new_scene(_RTC_SCENE_FLAG_ROBUST)
        # built once per content and crossed by most rays: the slower build that traverses fastest
        e.lib.rtcSetSceneBuildQuality(self._static_scene, _RTC_BUILD_QUALITY_HIGH)
        for k, data in enumerate(meshes):
            geometry = _triangle_geometry(data.buffers)
            attached = e.lib.rtcAttachGeometry(self._static_scene, geometry)  # a new scene numbers them 0, 1, …
            e.lib.rtcReleaseGeometry(geometry)
            assert attached == k, "Embree numbered a new scene's geometries out of order"
        e.lib.rtcCommitScene(self._static_scene)
        e.check("building the static world")
        self._static_data = meshes  # their buffers stay alive while the scene reads them
        return self._static_scene

    @staticmethod
    def _index_table(pairs):
        """Embree geometry id → instance index."""
        table = np.full(max((g for g, _ in pairs), default=-1) + 1, -1, np.int32)
        for geom_id, index in pairs:
            table[geom_id] = index
        return table

    def update(self) -> None:
        """Follow the scene: rebuild when instances come or go (or leave identity), else rewrite transforms.

        An instance that has left identity stays a moving one until the
        instance list changes, even back at identity: a frame's motion slices
        may pose it there (at the view) and away (before it), and must not
        rebuild the scene for each.
        """
        scene = self.scene
        refocused = self._reach is not self._reach_applied
        if scene.revision == self._revision and scene.pose_revision == self._pose_revision and not refocused:
            return
        e = embree()
        poses = scene.poses
        same_list = scene.revision == self._revision and self._static_mask is not None
        if not same_list:  # nothing of a new instance list committed yet: NaN, which every pose differs from
            self._committed_poses = np.full(poses.shape, np.nan)
        changed = np.empty(len(poses), bool)  # the instances whose pose changed since the last commit (now kept)
        if not _take_changed(poses, self._committed_poses, changed) and same_list:
            # the poses set again as they were (a view whose objects did not move): the top level built at the
            # last commit stands, where committing it again would rebuild it over every instance for nothing
            self._pose_revision = scene.pose_revision
            if refocused and self._switch_to_reach() and self._top:
                e.lib.rtcCommitScene(self._top)
                e.check("committing the scene")
            return
        moved: np.ndarray | None = changed  # the transforms to set; None: all (a new top level)
        if not same_list:
            self._rebuild(np.all(poses == np.eye(4), axis=(1, 2)) if len(poses) else np.zeros(0, bool))
            self._revision = scene.revision
            moved = None
        elif np.any(self._static_mask & changed):  # an instance of the static world left identity: it moves now
            self._rebuild(self._static_mask & ~changed)
            moved = None
        if self._instances:
            handles, index = self._instance_handles, self._instance_index
            if moved is not None:  # an unchanged instance keeps its transform (and its place in the top level)
                handles, index = handles[moved[index]], index[moved[index]]
            _set_transforms(e.set_transform_address, e.commit_geometry_address, handles, index, self._committed_poses)
        self._switch_to_reach()
        if self._top:
            e.lib.rtcCommitScene(self._top)
            e.check("committing the scene")
        self._normal_from_local = normal_transforms(self._committed_poses)
        self._instance_ids = np.array(scene.instance_ids, np.int64)
        self._pose_revision = scene.pose_revision

    def focus(self, jobs) -> None:
        """:meth:`Backend.focus`: the top level keeps only the instances whose bounding sphere (their mesh's
        farthest vertex, stretched by the pose's largest scale) meets a ball that ``jobs``' rays stay within (the
        frame's origin, out to its rays' farthest origin plus their range): a busy road's thousand cars, most of
        them out of reach, are not built into the top level of each motion slice."""
        balls = [[*np.asarray(job.rays.world_from_frame, np.float64)[:3, 3], job.rays.reach_m()] for job in jobs or ()]
        self._reach = np.array(balls, np.float64).reshape(-1, 4) if jobs else None

    def _switch_to_reach(self) -> bool:
        """Enable the top level's instances in reach (:meth:`focus`; all without one) as last committed, disable
        the others; → whether any changed."""
        self._reach_applied = self._reach
        if not len(self._instances):
            return False
        enabled = np.ones(len(self._instances), bool)
        if self._reach is not None:
            enabled = in_reach(self._committed_poses, self._instance_index, self._instance_radius_m, self._reach)
        switch = enabled != self._enabled
        if not switch.any():
            return False
        e = embree()
        _switch_geometries(e.enable_geometry_address, e.disable_geometry_address, self._instance_handles[switch],
                           enabled[switch])
        self._enabled = enabled
        return True

    def __del__(self):
        if _EMBREE is not None:
            self._release()
            if getattr(self, "_static_scene", None):
                embree().lib.rtcReleaseScene(self._static_scene)
                self._static_scene = None

    def _packet_order(self, directions) -> np.ndarray:
        """Ray order that puts angular neighbours into the same packet (:func:`packet_tiles`).

        Kept per pattern array (the last few: a rig's lidars share this
        backend), so a lidar casting the same pattern again sorts nothing.
        """
        entry = self._orders.get(id(directions))
        if entry is None or entry[0] is not directions:
            entry = (directions, packet_tiles(directions))
            if len(self._orders) >= _KEPT_ORDERS:
                evict_oldest(self._orders)
            self._orders[id(directions)] = entry
        return entry[1]

    def _order_of(self, rays: RayBatch) -> np.ndarray:
        if rays.in_packet_order:
            return np.arange(len(rays), dtype=np.int64)
        return self._packet_order(rays.directions if rays.coherence_key is None else rays.coherence_key)

    def cast_span(self, rays: RayBatch, start: int, stop: int, through: Continuation, hits: Hits) -> None:
        """Rays ``start:stop`` in the batch's packet order (a time slice of a frame keeps its pattern's tiles: the
        firing order cast 15 % slower for an OS1-128, 2× for a VLP-16)."""
        if stop - start == len(rays) or rays.in_packet_order:
            return super().cast_span(rays, start, stop, through, hits)
        order = self._order_of(rays)
        key = (id(order), start, stop)  # a fixed step's slices repeat frame after frame: picked once
        entry = self._spans.get(key)
        if entry is None or entry[0] is not order:
            if len(self._spans) >= _KEPT_SPANS:
                evict_oldest(self._spans)
            entry = self._spans[key] = (order, _within(order, start, stop))
        order = entry[1]
        self.cast_batch(rays.span(start, stop), through, out=hits.span(start, stop), order=order)

    def cast_batch(self, rays: RayBatch, through: Continuation | None = None, out: Hits | None = None,
                   order: np.ndarray | None = None) -> Hits:
        """:meth:`Backend.cast_batch`; ``order``: the rays' packet order when the caller has it (:meth:`cast_span`)."""
        self.update()
        through = through or Continuation.none()
        n = len(rays)
        if out is not None:
            check_out(out, n, through)
        # the kernel writes every ray's slots, hit or miss; only rays that may meet a mirror keep their power
        hits = Hits.empty(n, bool(through.max_bounces)) if out is None else out
        if not self._top or n == 0:  # an empty scene, no rays
            return hits.assign(Hits.missed(n))
        # rays to the world in the kernel (so the packet order of a pattern is computed once, and a unit's 131k
        # beam origins are not moved in a pass of their own)
        pose = np.ascontiguousarray(rays.world_from_frame, np.float64)
        parts = min(self.threads, max(1, n // MIN_RAYS_PER_THREAD))
        order = self._order_of(rays) if order is None else order
        cast = PacketCast(
            EmbreeTarget(embree().intersect_address, self._top, self._index_of_geometry, self._normal_from_local,
                         self._instance_ids),
            PacketRays(rays.origins, rays.directions, order, pose, np.ascontiguousarray(pose[:3, :3], np.float32),
                       np.float32(min(rays.max_range_m, 3.0e38))),
            SurfaceRules(through.max_surfaces, through.max_bounces, through.triangle_material, through.first_triangle,
                         through.class_code, through.specular),
            HitSlots(hits.range_m, hits.hit, hits.instance_id, hits.primitive_id, hits.instance_index, hits.u, hits.v,
                     hits.normal, hits.path_gain if through.max_bounces else _NO_GAIN))
        helped(cast_packets, (cast, np.zeros(1, np.int64)), parts - 1)
        if hits.path_gain is not None and not through.max_bounces:
            hits.path_gain[...] = 1.0  # a reused buffer sized for mirrors: none on these rays
        return hits


@njit(nogil=True, cache=True)
def _within(order, start, stop):
    """The entries of ``order`` in ``start:stop``, in their order, counted from ``start``."""
    out = np.empty(stop - start, np.int64)
    k = 0
    for i in order:
        if start <= i < stop:
            out[k] = i - start
            k += 1
    return out


#: the path gain slot of a cast without mirrors (never written; writable, unlike physics._NO_MIRROR_GAIN, because
#: the kernel that would write it with mirrors is compiled for a writable array)
_NO_GAIN = np.ones(1, np.float32)

# ruff: noqa: FURB136  (builtin min/max on float32 do not compile for numba's CUDA target)
"""Binned-SAH bounding volume hierarchy of one mesh, flat arrays for GPU traversal.

Layout (one mesh, its own frame, metres):

* ``node_lo``, ``node_hi`` (N, 3) float32: node box corners;
* ``node_child_or_first`` (N,) int32 and ``node_count`` (N,) int32:
  ``count == 0`` → inner node, children ``child`` and ``child + 1`` (siblings
  are always stored next to each other); ``count > 0`` → leaf holding the
  ``count`` (≤ :data:`LEAF_SIZE`) triangles ``first … first + count - 1`` of the
  reordered triangle arrays. Node 0 is the root.
* ``tri_v0``, ``tri_v1``, ``tri_v2`` (F, 3) float32: the corners in leaf
  order (corners, not edges: docs/backends.md, "Traversal"), ``tri_index``
  (F,) int32 the original face index of each.

:func:`concatenate` joins several meshes' arrays (the CUDA backend), so a
traversal needs only a mesh's root node. The traversal bodies allocate nothing
and compile both with :func:`numba.njit` here and as CUDA device functions in
:mod:`.cuda`; every float constant is float32, so nothing becomes float64 on a GPU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from ..cache import cache_dir

__all__ = [
    "BINS",
    "BVH",
    "LEAF_SIZE",
    "STACK_SIZE",
    "build_bvh",
    "build_tlas",
    "bvh_cache_dir",
    "cached_bvh",
    "cast_bvh",
    "cast_instances",
    "cast_one_bvh",
    "closest_over_instances",
    "concatenate",
    "instance_table",
    "intersect_closest",
    "make_closest_over_instances",
]

BINS = 16
LEAF_SIZE = 4
#: traversal stack entries (one pending sibling per tree level)
STACK_SIZE = 64

_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_BIG = np.float32(1e30)  # stands in for 1/0 so 0·(1/d) stays 0, not NaN
#: widen the slab interval's far end by a few float32 ulp so rounding cannot drop a box the ray
#: touches (Ize 2013)
_SLAB_GROW = np.float32(1.0 + 2.0 * 2.0 ** -23 * 3)


@dataclass
class BVH:
    """Flattened BVH of one mesh (see module docstring for the layout)."""

    node_lo: np.ndarray  # (N, 3) float32, m
    node_hi: np.ndarray  # (N, 3) float32, m
    node_child_or_first: np.ndarray  # (N,) int32
    node_count: np.ndarray  # (N,) int32, 0 = inner node
    tri_v0: np.ndarray  # (F, 3) float32, m
    tri_v1: np.ndarray  # (F, 3) float32, m
    tri_v2: np.ndarray  # (F, 3) float32, m
    tri_index: np.ndarray  # (F,) int32 original face index
    depth: int = 0  # levels below the root

    @property
    def arrays(self):
        """The arrays :func:`intersect_closest` takes, in its argument order."""
        return (self.node_lo, self.node_hi, self.node_child_or_first, self.node_count,
                self.tri_v0, self.tri_v1, self.tri_v2)


# --------------------------------------------------------------------------- build
@njit(cache=True)
def _node_bounds(tri_lo, tri_hi, centroid, order, start, end, box, cbox):
    """Box of triangles ``order[start:end]`` into ``box`` (2,3) and of their centroids into ``cbox``."""
    for a in range(3):
        box[0, a] = np.inf
        box[1, a] = -np.inf
        cbox[0, a] = np.inf
        cbox[1, a] = -np.inf
    for i in range(start, end):
        t = order[i]
        for a in range(3):
            box[0, a] = min(box[0, a], tri_lo[t, a])
            box[1, a] = max(box[1, a], tri_hi[t, a])
            cbox[0, a] = min(cbox[0, a], centroid[t, a])
            cbox[1, a] = max(cbox[1, a], centroid[t, a])


@njit(cache=True)
def _bin_of(c, lo, scale):
    b = int((c - lo) * scale)
    return min(max(b, 0), BINS - 1)


@njit(cache=True)
def _half_area(lo0, lo1, lo2, hi0, hi1, hi2):
    dx, dy, dz = hi0 - lo0, hi1 - lo1, hi2 - lo2
    return dx * dy + dy * dz + dz * dx


@njit(cache=True)
def _best_split(tri_lo, tri_hi, centroid, order, start, end, cbox):
    """Cheapest SAH plane over 16 bins on each axis → (axis, bin: left = bins < it), or (-1, 0)."""
    count = np.zeros((3, BINS), np.int64)
    blo = np.full((3, BINS, 3), np.inf)
    bhi = np.full((3, BINS, 3), -np.inf)
    scale = np.zeros(3)
    for a in range(3):
        extent = cbox[1, a] - cbox[0, a]
        scale[a] = BINS * (1.0 - 1e-9) / extent if extent > 0 else 0.0
    for i in range(start, end):
        t = order[i]
        for a in range(3):
            if scale[a] == 0.0:
                continue
            b = _bin_of(centroid[t, a], cbox[0, a], scale[a])
            count[a, b] += 1
            for k in range(3):
                blo[a, b, k] = min(blo[a, b, k], tri_lo[t, k])
                bhi[a, b, k] = max(bhi[a, b, k], tri_hi[t, k])
    best_cost, best_axis, best_bin = np.inf, -1, 0
    right_cost = np.zeros(BINS)
    for a in range(3):
        if scale[a] == 0.0:
            continue
        # sweep from the right: cost of bins ≥ s
        lo = np.full(3, np.inf)
        hi = np.full(3, -np.inf)
        n = 0
        for s in range(BINS - 1, 0, -1):
            for k in range(3):
                lo[k] = min(lo[k], blo[a, s, k])
                hi[k] = max(hi[k], bhi[a, s, k])
            n += count[a, s]
            right_cost[s] = n * _half_area(lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]) if n else 0.0
        lo[:] = np.inf
        hi[:] = -np.inf
        n = 0
        for s in range(1, BINS):
            for k in range(3):
                lo[k] = min(lo[k], blo[a, s - 1, k])
                hi[k] = max(hi[k], bhi[a, s - 1, k])
            n += count[a, s - 1]
            if n == 0 or n == end - start:
                continue
            cost = n * _half_area(lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]) + right_cost[s]
            if cost < best_cost:
                best_cost, best_axis, best_bin = cost, a, s
    return best_axis, best_bin, scale[max(best_axis, 0)]


@njit(cache=True)
def _partition(centroid, order, start, end, axis, split_bin, lo, scale):
    """Reorder ``order[start:end]`` so triangles in bins < ``split_bin`` come first → split index."""
    i, j = start, end - 1
    while i <= j:
        if _bin_of(centroid[order[i], axis], lo, scale) < split_bin:
            i += 1
        else:
            order[i], order[j] = order[j], order[i]
            j -= 1
    return i


@njit(cache=True)
def _build(tri_lo, tri_hi, centroid):
    """Top-down binned-SAH build with an explicit work stack → (lo, hi, child, count, order, depth)."""
    F = tri_lo.shape[0]
    capacity = max(2 * F - 1, 1)
    node_lo = np.empty((capacity, 3), np.float32)
    node_hi = np.empty((capacity, 3), np.float32)
    node_child = np.zeros(capacity, np.int32)
    node_count = np.zeros(capacity, np.int32)
    order = np.arange(F).astype(np.int32)
    # work items: (node, start, end, depth); a DFS never holds more than F of them
    work = np.empty((F + 1, 4), np.int64)
    work[0, 0], work[0, 1], work[0, 2], work[0, 3] = 0, 0, F, 0
    top, nodes, max_depth = 1, 1, 0
    box = np.empty((2, 3))
    cbox = np.empty((2, 3))
    while top > 0:
        top -= 1
        node, start, end, depth = work[top, 0], work[top, 1], work[top, 2], work[top, 3]
        max_depth = max(max_depth, depth)
        _node_bounds(tri_lo, tri_hi, centroid, order, start, end, box, cbox)
        for a in range(3):
            node_lo[node, a] = box[0, a]
            node_hi[node, a] = box[1, a]
        n = end - start
        if n <= LEAF_SIZE:
            node_child[node] = start
            node_count[node] = n
            continue
        axis, split_bin, scale = _best_split(tri_lo, tri_hi, centroid, order, start, end, cbox)
        if axis < 0:
            mid = (start + end) // 2  # all centroids coincide: any halving is as good
        else:
            mid = _partition(centroid, order, start, end, axis, split_bin, cbox[0, axis], scale)
        left = nodes
        nodes += 2
        node_child[node] = left
        node_count[node] = 0
        work[top, 0], work[top, 1], work[top, 2], work[top, 3] = left + 1, mid, end, depth + 1
        work[top + 1, 0], work[top + 1, 1], work[top + 1, 2], work[top + 1, 3] = left, start, mid, depth + 1
        top += 2
    return node_lo[:nodes], node_hi[:nodes], node_child[:nodes], node_count[:nodes], order, max_depth


def build_bvh(vertices, faces) -> BVH:
    """Binned-SAH BVH (16 bins, leaves ≤ 4 triangles) of a mesh in its own frame (m)."""
    v = np.ascontiguousarray(vertices, dtype=np.float32)
    f = np.ascontiguousarray(faces, dtype=np.int64)
    if len(f) == 0:
        raise ValueError("a BVH needs at least one triangle")
    p0, p1, p2 = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    tri_lo = np.minimum(np.minimum(p0, p1), p2)
    tri_hi = np.maximum(np.maximum(p0, p1), p2)
    centroid = 0.5 * (tri_lo.astype(np.float64) + tri_hi)  # box centres: what SAH binning wants
    node_lo, node_hi, child, count, order, depth = _build(tri_lo, tri_hi, centroid)
    if depth >= STACK_SIZE:
        raise ValueError(f"BVH depth {depth} exceeds the traversal stack of {STACK_SIZE}")
    return BVH(node_lo.copy(), node_hi.copy(), child.copy(), count.copy(),
               np.ascontiguousarray(p0[order]), np.ascontiguousarray(p1[order]),
               np.ascontiguousarray(p2[order]), order.astype(np.int32), int(depth))


#: bump when the build or the layout changes, so old cache files are not read
_CACHE_FORMAT = 1


def bvh_cache_dir() -> str:
    """Where built BVHs are kept across runs: ``bvh/`` in :func:`lidar_fmu.cache.cache_dir`."""
    return str(cache_dir("bvh"))


def cached_bvh(vertices, faces, cache_dir: str | None = None) -> BVH:
    """:func:`build_bvh`, kept on disk under a hash of the float32 corners (per asset, across runs).

    Hashing 1 M triangles takes ~30 ms against seconds for the build; an
    unreadable or stale cache file is rebuilt and replaced.
    """
    import hashlib
    import os

    v = np.ascontiguousarray(vertices, dtype=np.float32)
    f = np.ascontiguousarray(faces, dtype=np.int64)
    digest = hashlib.blake2b(v.tobytes(), digest_size=20)
    digest.update(f.tobytes())
    digest.update(f"{_CACHE_FORMAT}/{BINS}/{LEAF_SIZE}/{v.shape}/{f.shape}".encode())
    folder = cache_dir or bvh_cache_dir()
    path = os.path.join(folder, digest.hexdigest() + ".npz")
    try:
        with np.load(path) as stored:
            return BVH(**{k: stored[k] for k in stored.files if k != "depth"}, depth=int(stored["depth"]))
    except (OSError, KeyError, ValueError, TypeError):
        pass  # not cached yet, or unreadable: build it
    bvh = build_bvh(v, f)
    try:
        os.makedirs(folder, exist_ok=True)
        partial = f"{path}.{os.getpid()}.tmp.npz"
        np.savez(partial, depth=bvh.depth, **{k: getattr(bvh, k) for k in (
            "node_lo", "node_hi", "node_child_or_first", "node_count", "tri_v0", "tri_v1", "tri_v2", "tri_index")})
        os.replace(partial, path)  # readers never see a half-written file
    except OSError:
        pass  # a read-only home: the cache is an optimisation only
    return bvh


def concatenate(bvhs: list[BVH]):
    """One set of arrays for many BVHs → (arrays as :attr:`BVH.arrays`, tri_index, root node per BVH).

    Child / first-triangle indices are rebased so every root is self-contained.
    """
    roots = np.zeros(len(bvhs), np.int32)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("lo", "hi", "child", "count", "v0", "v1", "v2", "index")}
    nodes = tris = 0
    for i, b in enumerate(bvhs):
        roots[i] = nodes
        parts["lo"].append(b.node_lo)
        parts["hi"].append(b.node_hi)
        parts["child"].append(b.node_child_or_first + np.where(b.node_count == 0, nodes, tris).astype(np.int32))
        parts["count"].append(b.node_count)
        parts["v0"].append(b.tri_v0)
        parts["v1"].append(b.tri_v1)
        parts["v2"].append(b.tri_v2)
        parts["index"].append(b.tri_index)
        nodes += len(b.node_count)
        tris += len(b.tri_index)
    cat = {k: np.ascontiguousarray(np.concatenate(v)) for k, v in parts.items()}
    arrays = (cat["lo"], cat["hi"], cat["child"], cat["count"], cat["v0"], cat["v1"], cat["v2"])
    return arrays, cat["index"], roots


def build_tlas(world_lo, world_hi):
    """Top-level BVH over instance world boxes (K, 3) → (lo, hi, child_or_first, count, instance).

    The same binned-SAH build as a mesh's, with instances in place of
    triangles; a leaf's entries ``first … first + count - 1`` index
    ``instance``, which holds instance indices. Rebuilt every step (only poses
    change): ~0.1 ms for a hundred instances.
    """
    lo = np.ascontiguousarray(world_lo, np.float32)
    hi = np.ascontiguousarray(world_hi, np.float32)
    centroid = 0.5 * (lo.astype(np.float64) + hi)
    node_lo, node_hi, child, count, order, depth = _build(lo, hi, centroid)
    if depth >= STACK_SIZE:
        raise ValueError(f"top-level BVH depth {depth} exceeds the traversal stack of {STACK_SIZE}")
    return node_lo, node_hi, child, count, order.astype(np.int32)


_BOX_CORNERS = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], np.float64)


def instance_table(bvhs, mesh_roots, mesh_index, poses):
    """Per-instance arrays the two-level traversal reads, float32 (m), and the top-level BVH.

    → (root node (K,) int32, local_from_world (K,3,4), normal_to_world (K,3,3)
    = inverse transpose of the rotation/scale, then :func:`build_tlas` of the
    instances' world boxes: tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance).
    """
    poses = np.asarray(poses, dtype=np.float64).reshape(-1, 4, 4)
    mesh_index = np.asarray(mesh_index, dtype=np.int64)
    inverse = np.linalg.inv(poses)
    mesh_lo = np.array([b.node_lo[0] for b in bvhs], np.float64)[mesh_index]  # (K, 3) root boxes
    mesh_hi = np.array([b.node_hi[0] for b in bvhs], np.float64)[mesh_index]
    corners = mesh_lo[:, None] + _BOX_CORNERS * (mesh_hi - mesh_lo)[:, None]  # (K, 8, 3)
    world = np.einsum("kij,kcj->kci", poses[:, :3, :3], corners) + poses[:, None, :3, 3]
    # one float32 step outward, so rounding to float32 cannot shrink a box
    lo = np.nextafter(world.min(axis=1).astype(np.float32), np.float32(-np.inf))
    hi = np.nextafter(world.max(axis=1).astype(np.float32), np.float32(np.inf))
    return (np.asarray(mesh_roots, np.int32)[mesh_index],
            np.ascontiguousarray(inverse[:, :3, :4], dtype=np.float32),
            np.ascontiguousarray(np.transpose(inverse[:, :3, :3], (0, 2, 1)), dtype=np.float32),
            *build_tlas(lo, hi))


# --------------------------------------------------------------------------- traversal
# The node steps both levels of the traversal take, one body each: registered (inlined) for the CPU here, and
# for the GPU by cuda.py, so the CPU's and the GPU's compiled traversals each call their own.
@register_jitable(inline="always")
def _box_hit(lo, hi, node, ox, oy, oz, ix, iy, iz, best_t):
    """Does the ray ``o + t·d`` (``ix, iy, iz``: 1/d, :data:`_BIG` for 1/0) meet box ``node`` of (``lo``, ``hi``)
    within [0, ``best_t``]? The slab test, the far side grown by :data:`_SLAB_GROW`."""
    # no min/max: builtin min on float32 does not compile for numba's CUDA target
    t0 = (lo[node, 0] - ox) * ix
    t1 = (hi[node, 0] - ox) * ix
    tnear = t0 if t0 < t1 else t1
    tfar = t1 if t0 < t1 else t0
    t0 = (lo[node, 1] - oy) * iy
    t1 = (hi[node, 1] - oy) * iy
    if t0 > t1:
        t0, t1 = t1, t0
    tnear = t0 if t0 > tnear else tnear
    tfar = t1 if t1 < tfar else tfar
    t0 = (lo[node, 2] - oz) * iz
    t1 = (hi[node, 2] - oz) * iz
    if t0 > t1:
        t0, t1 = t1, t0
    tnear = t0 if t0 > tnear else tnear
    tfar = t1 if t1 < tfar else tfar
    tfar = tfar * _SLAB_GROW
    return tnear <= tfar and tfar >= _ZERO and tnear <= best_t


@register_jitable(inline="always")
def _enter_nearer_child(lo, hi, first, dx, dy, dz, stack, sp):
    """An inner node's children are ``first`` and ``first + 1``: push the one whose box centre lies farther along
    ``d`` onto ``stack[sp]`` and return the nearer, visited first."""
    second_nearer = ((lo[first, 0] + hi[first, 0] - lo[first + 1, 0] - hi[first + 1, 0]) * dx
                     + (lo[first, 1] + hi[first, 1] - lo[first + 1, 1] - hi[first + 1, 1]) * dy
                     + (lo[first, 2] + hi[first, 2] - lo[first + 1, 2] - hi[first + 1, 2]) * dz) > _ZERO
    if second_nearer:
        stack[sp] = first
        return first + 1
    stack[sp] = first + 1
    return first


@register_jitable(inline="always")
def _reciprocal(dx, dy, dz):
    """1/d per axis, a zero component mapped to :data:`_BIG` (avoids 0·inf = NaN in the slabs)."""
    return (_ONE / dx if dx != _ZERO else _BIG, _ONE / dy if dy != _ZERO else _BIG,
            _ONE / dz if dz != _ZERO else _BIG)


# One loop over 80 lines on purpose: its triangle test runs per triangle, the innermost work of every cast on the
# CPU and the GPU, and shares the ray's set-up (the shear) that a call would have to be handed each time.
def _intersect_closest_py(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, root,
                          ox, oy, oz, dx, dy, dz, tmax, stack):
    """Closest triangle along ``o + t·d`` with 0 < t < ``tmax`` → (t, tri, u, v); tri = -1 on a miss.

    Watertight (Woop, Benthin & Wald 2013, in float32 without their float64
    fallback for exact zeros): a ray through a shared edge hits at least one
    of its two triangles.

    ``tri`` indexes the (reordered) triangle arrays; ``u``, ``v`` are the
    barycentrics of the hit (hit = (1-u-v)·v0 + u·v1 + v·v2). ``d`` need not be
    unit: ``t`` is measured in units of ``d``. ``stack`` is an int32 array of
    :data:`STACK_SIZE`. No allocation: compiles on CPU and GPU alike.
    """
    best_t = tmax
    best_tri = -1
    best_u = _ZERO
    best_v = _ZERO
    ix, iy, iz = _reciprocal(dx, dy, dz)
    # watertight test set-up: kz = dominant axis of d, shear so the ray runs along +z
    adx = dx if dx >= _ZERO else -dx
    ady = dy if dy >= _ZERO else -dy
    adz = dz if dz >= _ZERO else -dz
    kz = 0 if adx >= ady and adx >= adz else (1 if ady >= adz else 2)
    kx = kz + 1 if kz < 2 else 0
    ky = kx + 1 if kx < 2 else 0
    dkz = dx if kz == 0 else (dy if kz == 1 else dz)
    if dkz < _ZERO:
        kx, ky = ky, kx  # keep the winding
    dkx = dx if kx == 0 else (dy if kx == 1 else dz)
    dky = dx if ky == 0 else (dy if ky == 1 else dz)
    okx = ox if kx == 0 else (oy if kx == 1 else oz)
    oky = ox if ky == 0 else (oy if ky == 1 else oz)
    okz = ox if kz == 0 else (oy if kz == 1 else oz)
    shx = dkx / dkz
    shy = dky / dkz
    shz = _ONE / dkz
    sp = 0
    node = root
    while True:
        if _box_hit(node_lo, node_hi, node, ox, oy, oz, ix, iy, iz, best_t):
            count = node_count[node]
            first = node_child[node]
            if count == 0:
                node = _enter_nearer_child(node_lo, node_hi, first, dx, dy, dz, stack, sp)
                sp += 1
                continue
            for k in range(first, first + count):
                # watertight ray/triangle test: corners relative to the origin, sheared
                az = tri_v0[k, kz] - okz
                bz = tri_v1[k, kz] - okz
                cz = tri_v2[k, kz] - okz
                ax = tri_v0[k, kx] - okx - shx * az
                ay = tri_v0[k, ky] - oky - shy * az
                bx = tri_v1[k, kx] - okx - shx * bz
                by = tri_v1[k, ky] - oky - shy * bz
                cx = tri_v2[k, kx] - okx - shx * cz
                cy = tri_v2[k, ky] - oky - shy * cz
                # scaled barycentrics (weights of v0, v1, v2): all one sign ⇔ inside
                bu = cx * by - cy * bx
                bv = ax * cy - ay * cx
                bw = bx * ay - by * ax
                if (bu < _ZERO or bv < _ZERO or bw < _ZERO) and (bu > _ZERO or bv > _ZERO or bw > _ZERO):
                    continue
                det = bu + bv + bw
                if det == _ZERO:
                    continue  # ray in the triangle's plane, or a degenerate triangle
                t = shz * (bu * az + bv * bz + bw * cz) / det
                if t > _ZERO and t < best_t:
                    best_t = t
                    best_tri = k
                    best_u = bv / det
                    best_v = bw / det
        if sp == 0:
            break
        sp -= 1
        node = stack[sp]
    return best_t, best_tri, best_u, best_v


intersect_closest = njit(cache=True, error_model="numpy")(_intersect_closest_py)


# Over 80 lines because it holds closest_over_instances: a closure is how one body calls the CPU's or the GPU's
# own compiled traversal and helpers.
def make_closest_over_instances(jit, traverse):
    """Two-level closest hit compiled by ``jit`` around the bottom-level ``traverse`` (same jit kind).

    Built in a factory so the CPU and the GPU version each call their own
    compiled traversal (a global name could refer to only one of them).
    """
    into_instance = jit(_ray_into_instance_py)
    world_normal = jit(_world_normal_py)

    def closest_over_instances(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2,
                               roots, local_from_world, normal_to_world,
                               tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
                               ox, oy, oz, dx, dy, dz, tmax, stack, top_stack):
        """Closest hit over all instances → (t, instance_index, tri, u, v, nx, ny, nz); -1 on a miss.

        Walks the top-level BVH over the instances' world boxes (nearer child
        first, boxes beyond the closest hit so far skipped); at a leaf the ray
        moves into each instance's frame by ``local_from_world`` (K, 3, 4)
        without renormalising, so ``t`` stays the world range, and walks that
        mesh's BVH. The normal is the triangle's ``e1 × e2`` taken to the world
        by ``normal_to_world`` (K, 3, 3, inverse transpose), unit length,
        facing the ray. ``stack`` and ``top_stack``: int32 arrays of
        :data:`STACK_SIZE` for the two levels.
        """
        best_t = tmax
        best_index = -1
        best_tri = -1
        best_u = _ZERO
        best_v = _ZERO
        ix, iy, iz = _reciprocal(dx, dy, dz)
        sp = 0
        node = 0
        while True:
            if _box_hit(tlas_lo, tlas_hi, node, ox, oy, oz, ix, iy, iz, best_t):
                count = tlas_count[node]
                first = tlas_child[node]
                if count == 0:
                    node = _enter_nearer_child(tlas_lo, tlas_hi, first, dx, dy, dz, top_stack, sp)
                    sp += 1
                    continue
                for e in range(first, first + count):
                    k = tlas_instance[e]
                    lox, loy, loz, ldx, ldy, ldz = into_instance(local_from_world, k, ox, oy, oz, dx, dy, dz)
                    t, tri, u, v = traverse(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2,
                                            roots[k], lox, loy, loz, ldx, ldy, ldz, best_t, stack)
                    if tri >= 0:
                        best_t = t
                        best_index = k
                        best_tri = tri
                        best_u = u
                        best_v = v
            if sp == 0:
                break
            sp -= 1
            node = top_stack[sp]
        nx = _ZERO
        ny = _ZERO
        nz = _ZERO
        if best_index >= 0:
            nx, ny, nz = world_normal(tri_v0, tri_v1, tri_v2, normal_to_world, best_index, best_tri, dx, dy, dz)
        return best_t, best_index, best_tri, best_u, best_v, nx, ny, nz

    return jit(closest_over_instances)


def _ray_into_instance_py(local_from_world, k, ox, oy, oz, dx, dy, dz):
    """The ray ``o + t·d`` in instance ``k``'s frame → (o', d'), by ``local_from_world[k]`` (3 × 4) and not
    renormalised, so that ``t`` stays the world range."""
    M = local_from_world
    return (M[k, 0, 0] * ox + M[k, 0, 1] * oy + M[k, 0, 2] * oz + M[k, 0, 3],
            M[k, 1, 0] * ox + M[k, 1, 1] * oy + M[k, 1, 2] * oz + M[k, 1, 3],
            M[k, 2, 0] * ox + M[k, 2, 1] * oy + M[k, 2, 2] * oz + M[k, 2, 3],
            M[k, 0, 0] * dx + M[k, 0, 1] * dy + M[k, 0, 2] * dz,
            M[k, 1, 0] * dx + M[k, 1, 1] * dy + M[k, 1, 2] * dz,
            M[k, 2, 0] * dx + M[k, 2, 1] * dy + M[k, 2, 2] * dz)


def _world_normal_py(tri_v0, tri_v1, tri_v2, normal_to_world, k, tri, dx, dy, dz):
    """Unit world normal of triangle ``tri`` of instance ``k``: its ``e1 × e2`` taken to the world by
    ``normal_to_world[k]`` (the inverse transpose), turned to face the ray ``d``; zero for a degenerate triangle."""
    e1x = tri_v1[tri, 0] - tri_v0[tri, 0]
    e1y = tri_v1[tri, 1] - tri_v0[tri, 1]
    e1z = tri_v1[tri, 2] - tri_v0[tri, 2]
    e2x = tri_v2[tri, 0] - tri_v0[tri, 0]
    e2y = tri_v2[tri, 1] - tri_v0[tri, 1]
    e2z = tri_v2[tri, 2] - tri_v0[tri, 2]
    lx = e1y * e2z - e1z * e2y
    ly = e1z * e2x - e1x * e2z
    lz = e1x * e2y - e1y * e2x
    N = normal_to_world
    nx = N[k, 0, 0] * lx + N[k, 0, 1] * ly + N[k, 0, 2] * lz
    ny = N[k, 1, 0] * lx + N[k, 1, 1] * ly + N[k, 1, 2] * lz
    nz = N[k, 2, 0] * lx + N[k, 2, 1] * ly + N[k, 2, 2] * lz
    norm = math.sqrt(nx * nx + ny * ny + nz * nz)
    if nx * dx + ny * dy + nz * dz > _ZERO:
        norm = -norm  # turn it to face the ray
    if norm != _ZERO:
        nx = nx / norm
        ny = ny / norm
        nz = nz / norm
    return nx, ny, nz


closest_over_instances = make_closest_over_instances(njit(error_model="numpy"), intersect_closest)


# --------------------------------------------------------------------------- CPU batch casts
@njit(parallel=True, cache=True, error_model="numpy")
def cast_bvh(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, origins, directions, tmax,
             out_t, out_tri, out_u, out_v):
    """Reference cast of many rays against one BVH (root 0) on the CPU cores; writes the outputs."""
    last_origin = origins.shape[0] - 1  # 0: one origin shared by all rays
    for i in prange(directions.shape[0]):
        stack = np.empty(STACK_SIZE, np.int32)
        io = min(np.int64(i), last_origin)
        t, tri, u, v = intersect_closest(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, 0,
                                         origins[io, 0], origins[io, 1], origins[io, 2],
                                         directions[i, 0], directions[i, 1], directions[i, 2], tmax, stack)
        out_t[i] = t
        out_tri[i] = tri
        out_u[i] = u
        out_v[i] = v


def cast_one_bvh(bvh: BVH, origins, directions, tmax=np.inf):
    """Rays (world = mesh frame) against ``bvh`` → (t (inf on miss), original face index (-1), u, v)."""
    o = np.ascontiguousarray(np.asarray(origins, np.float32).reshape(-1, 3))
    d = np.ascontiguousarray(directions, dtype=np.float32)
    n = len(d)
    t = np.empty(n, np.float32)
    tri = np.empty(n, np.int32)
    u = np.empty(n, np.float32)
    v = np.empty(n, np.float32)
    cast_bvh(*bvh.arrays, o, d, np.float32(min(tmax, 3.0e38)), t, tri, u, v)  # type: ignore[call-arg]  # a kernel
    hit = tri >= 0
    return np.where(hit, t, np.inf).astype(np.float32), np.where(hit, bvh.tri_index[np.maximum(tri, 0)], -1), u, v


@njit(parallel=True, cache=True, error_model="numpy")
def cast_instances(node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, roots, local_from_world,
                   normal_to_world, tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance, origins, directions, tmax,
                   out_t, out_instance_index, out_tri, out_u, out_v, out_normal):
    """CPU twin of the CUDA kernel: two-level closest hits of world rays; writes the outputs (instance index -1: miss)."""
    last_origin = origins.shape[0] - 1  # 0: one origin shared by all rays
    for i in prange(directions.shape[0]):
        stack = np.empty(STACK_SIZE, np.int32)
        top_stack = np.empty(STACK_SIZE, np.int32)
        io = min(np.int64(i), last_origin)
        t, index, tri, u, v, nx, ny, nz = closest_over_instances(
            node_lo, node_hi, node_child, node_count, tri_v0, tri_v1, tri_v2, roots, local_from_world,
            normal_to_world, tlas_lo, tlas_hi, tlas_child, tlas_count, tlas_instance,
            origins[io, 0], origins[io, 1], origins[io, 2],
            directions[i, 0], directions[i, 1], directions[i, 2], tmax, stack, top_stack)
        out_t[i] = t
        out_instance_index[i] = index
        out_tri[i] = tri
        out_u[i] = u
        out_v[i] = v
        out_normal[i, 0] = nx
        out_normal[i, 1] = ny
        out_normal[i, 2] = nz

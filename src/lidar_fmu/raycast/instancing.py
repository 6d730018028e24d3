"""Two-level ray casting on the CPU: which rays may hit which instance.

Backends whose ray caster knows only one mesh in its own frame (embreex) place
instances by moving rays instead: each candidate ray is transformed into the
instance's frame and cast against the shared mesh. This module finds the
candidates without testing every ray against every instance:

* When all rays share one origin (a lidar frame), rays are bucketed once per
  cast into angular cells (a trig-free azimuth proxy × the z component of the
  direction); each instance's bounding sphere subtends a cone from the origin,
  and only rays in the cells that cone covers are tested against the
  instance's box. Work grows with the rays that really point at an instance,
  not with instances × rays.
* With one origin per ray (batched poses) each instance tests every ray.

All kernels are compiled, release the GIL and write into preallocated arrays.
"""
from __future__ import annotations

import numpy as np
from numba import njit

N_AZIMUTH_CELLS = 512
N_Z_CELLS = 128
_TWO_PI = 2.0 * np.pi


@njit(cache=True, nogil=True, inline="always")
def _diamond(x, y):
    """Monotone, trig-free proxy of atan2(y, x) mapped from [0, 2π) to [0, 4)."""
    ax = abs(x)
    ay = abs(y)
    s = ax + ay
    if s == 0.0:
        return 0.0
    if y >= 0.0:
        return y / s if x >= 0.0 else 1.0 + ax / s
    return 2.0 + ay / s if x < 0.0 else 3.0 + x / s


@njit(cache=True, nogil=True)
def bin_directions(directions, n_az, n_z):
    """Bucket unit directions into angular cells → (cell_start (n_cells+1,), ray order (N,))."""
    n = directions.shape[0]
    n_cells = n_az * n_z
    cell = np.empty(n, np.int32)
    start = np.zeros(n_cells + 1, np.int64)
    for i in range(n):
        ia = min(int(_diamond(directions[i, 0], directions[i, 1]) * (n_az / 4.0)), n_az - 1)
        iz = min(max(int((directions[i, 2] + 1.0) * 0.5 * n_z), 0), n_z - 1)
        c = iz * n_az + ia
        cell[i] = c
        start[c + 1] += 1
    for c in range(n_cells):
        start[c + 1] += start[c]
    cursor = start[:-1].copy()
    order = np.empty(n, np.int32)
    for i in range(n):
        c = cell[i]
        order[cursor[c]] = i
        cursor[c] += 1
    return start, order


@njit(cache=True, nogil=True, inline="always")
def _azimuth_cell(angle_rad, n_az):
    a = angle_rad % _TWO_PI
    return min(int(_diamond(np.cos(a), np.sin(a)) * (n_az / 4.0)), n_az - 1)


@njit(cache=True, nogil=True)
def _cone_cells(center, radius, origin, n_az, n_z, out):
    """Cell ranges an instance's bounding sphere covers as seen from ``origin``.

    Writes rows (z0, z1, a0, a1) inclusive into ``out`` and returns how many
    (0 = not visible, -1 = origin inside the sphere: every ray is a candidate).
    """
    cx = center[0] - origin[0]
    cy = center[1] - origin[1]
    cz = center[2] - origin[2]
    dist = np.sqrt(cx * cx + cy * cy + cz * cz)
    if dist <= radius * 1.001 + 1e-6:
        return -1
    alpha = np.arcsin(min(radius / dist, 1.0)) * 1.001 + 1e-5
    elev = np.arcsin(cz / dist)
    lo = max(elev - alpha, -0.5 * np.pi)
    hi = min(elev + alpha, 0.5 * np.pi)
    z0 = max(int((np.sin(lo) + 1.0) * 0.5 * n_z) - 1, 0)
    z1 = min(int((np.sin(hi) + 1.0) * 0.5 * n_z) + 1, n_z - 1)
    if abs(elev) + alpha >= 0.5 * np.pi - 1e-6:
        out[0, 0], out[0, 1], out[0, 2], out[0, 3] = z0, z1, 0, n_az - 1
        return 1
    half = np.arcsin(min(np.sin(alpha) / np.cos(elev), 1.0))
    azim = np.arctan2(cy, cx)
    a0 = _azimuth_cell(azim - half, n_az) - 1
    a1 = _azimuth_cell(azim + half, n_az) + 1
    if half >= 0.5 * np.pi - 1e-6 or a1 - a0 >= n_az - 1:
        out[0, 0], out[0, 1], out[0, 2], out[0, 3] = z0, z1, 0, n_az - 1
        return 1
    if a0 <= a1 and a0 >= 0 and a1 <= n_az - 1:
        out[0, 0], out[0, 1], out[0, 2], out[0, 3] = z0, z1, a0, a1
        return 1
    # the azimuth interval wraps around +x
    out[0, 0], out[0, 1], out[0, 2], out[0, 3] = z0, z1, (a0 % n_az), n_az - 1
    out[1, 0], out[1, 1], out[1, 2], out[1, 3] = z0, z1, 0, (a1 % n_az)
    return 2


@njit(cache=True, nogil=True, inline="always")
def _slab(ox, oy, oz, dx, dy, dz, lo, hi, tmax):
    """Does the segment o + t·d, t ∈ [0, tmax], touch the box [lo, hi]?"""
    t0 = 0.0
    t1 = tmax
    for a in range(3):
        o = ox if a == 0 else (oy if a == 1 else oz)
        d = dx if a == 0 else (dy if a == 1 else dz)
        if abs(d) < 1e-20:
            if o < lo[a] or o > hi[a]:
                return False
        else:
            inv = 1.0 / d
            ta = (lo[a] - o) * inv
            tb = (hi[a] - o) * inv
            if ta > tb:
                ta, tb = tb, ta
            if ta > t0:
                t0 = ta
            if tb < t1:
                t1 = tb
            if t0 > t1:
                return False
    return True


@njit(cache=True, nogil=True)
def gather_candidates(
    origins, directions, t_best, single_origin, cell_start, order, n_az, n_z,
    instance_indices, local_from_frame, box_lo, box_hi, center, radius, part, parts,
):
    """Rays that may hit instances ``instance_indices`` → rays in each instance's frame.

    Only rays with ``index % parts == part`` are considered, so threads can
    split a cast without sharing output. Returns (ray index, instance index,
    local origin, local direction, t_far).
    Local directions are not renormalised, so the ray parameter — and
    ``t_far`` — means the same in both frames, scale included.
    """
    n = directions.shape[0]
    cells = np.empty((2, 4), np.int64)
    # upper bound of candidates, so the output is allocated once
    capacity = 0
    for s in range(instance_indices.shape[0]):
        k = instance_indices[s]
        if not single_origin:
            capacity += n
            continue
        m = _cone_cells(center[k], radius[k], origins[0], n_az, n_z, cells)
        if m < 0:
            capacity += n
        for r in range(max(m, 0)):
            for iz in range(cells[r, 0], cells[r, 1] + 1):
                row = iz * n_az
                capacity += cell_start[row + cells[r, 3] + 1] - cell_start[row + cells[r, 2]]
    ray = np.empty(capacity, np.int32)
    inst = np.empty(capacity, np.int32)
    lo_out = np.empty((capacity, 3), np.float32)
    ld_out = np.empty((capacity, 3), np.float32)
    tfar = np.empty(capacity, np.float32)
    count = 0
    for s in range(instance_indices.shape[0]):
        k = instance_indices[s]
        m = -1
        if single_origin:
            m = _cone_cells(center[k], radius[k], origins[0], n_az, n_z, cells)
        M = local_from_frame[k]
        for r in range(1 if m < 0 else m):
            if m < 0:
                first, last, z0, z1 = 0, n, 0, 0
            else:
                z0, z1 = cells[r, 0], cells[r, 1]
            for iz in range(z0, z1 + 1):
                if m >= 0:
                    row = iz * n_az
                    first = cell_start[row + cells[r, 2]]
                    last = cell_start[row + cells[r, 3] + 1]
                for j in range(first, last):
                    i = order[j] if m >= 0 else j
                    if i % parts != part:
                        continue
                    io = 0 if single_origin else i
                    wx, wy, wz = origins[io, 0], origins[io, 1], origins[io, 2]
                    vx, vy, vz = directions[i, 0], directions[i, 1], directions[i, 2]
                    ox = M[0, 0] * wx + M[0, 1] * wy + M[0, 2] * wz + M[0, 3]
                    oy = M[1, 0] * wx + M[1, 1] * wy + M[1, 2] * wz + M[1, 3]
                    oz = M[2, 0] * wx + M[2, 1] * wy + M[2, 2] * wz + M[2, 3]
                    dx = M[0, 0] * vx + M[0, 1] * vy + M[0, 2] * vz
                    dy = M[1, 0] * vx + M[1, 1] * vy + M[1, 2] * vz
                    dz = M[2, 0] * vx + M[2, 1] * vy + M[2, 2] * vz
                    if _slab(ox, oy, oz, dx, dy, dz, box_lo[k], box_hi[k], t_best[i]):
                        ray[count] = i
                        inst[count] = k
                        lo_out[count, 0], lo_out[count, 1], lo_out[count, 2] = ox, oy, oz
                        ld_out[count, 0], ld_out[count, 1], ld_out[count, 2] = dx, dy, dz
                        tfar[count] = t_best[i]
                        count += 1
    return ray[:count], inst[:count], lo_out[:count], ld_out[:count], tfar[:count]


@njit(cache=True, nogil=True)
def merge_hits(
    ray, inst, t, prim, geom, u, v, ng_local, normal_from_local, directions,
    best_t, best_prim, best_inst, best_u, best_v, best_normal,
):
    """Keep each ray's closest hit; turn the local geometric normal into a
    world unit normal facing the ray (normals transform by the inverse
    transpose, held in ``normal_from_local``)."""
    for j in range(ray.shape[0]):
        if geom[j] < 0:
            continue
        i = ray[j]
        if not t[j] < best_t[i]:
            continue
        k = inst[j]
        N = normal_from_local[k]
        nx = N[0, 0] * ng_local[j, 0] + N[0, 1] * ng_local[j, 1] + N[0, 2] * ng_local[j, 2]
        ny = N[1, 0] * ng_local[j, 0] + N[1, 1] * ng_local[j, 1] + N[1, 2] * ng_local[j, 2]
        nz = N[2, 0] * ng_local[j, 0] + N[2, 1] * ng_local[j, 1] + N[2, 2] * ng_local[j, 2]
        norm = np.sqrt(nx * nx + ny * ny + nz * nz)
        if norm == 0.0:
            continue  # degenerate triangle
        if nx * directions[i, 0] + ny * directions[i, 1] + nz * directions[i, 2] > 0.0:
            norm = -norm
        best_t[i] = t[j]
        best_prim[i] = prim[j]
        best_inst[i] = k
        best_u[i] = u[j]
        best_v[i] = v[j]
        best_normal[i, 0] = nx / norm
        best_normal[i, 1] = ny / norm
        best_normal[i, 2] = nz / norm


class InstanceTable:
    """Per-instance arrays the kernels read, in some ray frame.

    ``local_from_frame`` (K,3,4) moves rays into each instance's frame,
    ``normal_from_local`` (K,3,3) turns local normals back into the ray frame
    (inverse transpose), ``box_lo``/``box_hi`` (K,3) are the mesh's local
    bounds, ``center`` (K,3) / ``radius`` (K,) a bounding sphere in the ray
    frame. :meth:`refresh` fills it in the world frame; :meth:`seen_from`
    re-expresses it in another frame (a sensor's), so rays never need to be
    rotated into the world first.
    """

    def __init__(self, mesh_bounds: list[np.ndarray]):
        self.mesh_bounds = mesh_bounds  # per scene mesh (2,3) local AABB

    def refresh(self, scene) -> None:
        poses = np.asarray(scene.poses, dtype=np.float64)
        mesh_index = np.asarray(scene.instance_mesh_index)
        k = len(poses)
        bounds = np.stack([self.mesh_bounds[m] for m in mesh_index]) if k else np.zeros((0, 2, 3))
        # pad boxes so grazing rays are not culled by round-off
        pad = 1e-4 * (bounds[:, 1] - bounds[:, 0]).max(axis=1, initial=0.0)[:, None] + 1e-5
        self.box_lo = np.ascontiguousarray(bounds[:, 0] - pad)
        self.box_hi = np.ascontiguousarray(bounds[:, 1] + pad)
        inverse = np.linalg.inv(poses) if k else np.zeros((0, 4, 4))
        self.local_from_frame = np.ascontiguousarray(inverse[:, :3, :4])
        self.normal_from_local = np.ascontiguousarray(np.transpose(inverse[:, :3, :3], (0, 2, 1)))
        local_center = 0.5 * (self.box_lo + self.box_hi)
        self.center = np.einsum("kij,kj->ki", poses[:, :3, :3], local_center) + poses[:, :3, 3]
        half_diagonal = 0.5 * np.linalg.norm(self.box_hi - self.box_lo, axis=1)
        scale = np.linalg.norm(poses[:, :3, :3], ord=2, axis=(1, 2)) if k else np.zeros(0)
        self.radius = half_diagonal * scale

    def seen_from(self, world_from_frame: np.ndarray) -> InstanceTable:
        """The same instances with rays given in another frame (rigid ``world_from_frame``)."""
        view = InstanceTable.__new__(InstanceTable)
        view.mesh_bounds, view.box_lo, view.box_hi, view.radius = self.mesh_bounds, self.box_lo, self.box_hi, self.radius
        rotation, origin = world_from_frame[:3, :3], world_from_frame[:3, 3]
        local = self.local_from_frame
        view.local_from_frame = np.empty_like(local)
        view.local_from_frame[:, :, :3] = local[:, :, :3] @ rotation
        view.local_from_frame[:, :, 3] = local[:, :, :3] @ origin + local[:, :, 3]
        view.normal_from_local = rotation.T @ self.normal_from_local
        view.center = (self.center - origin) @ rotation
        return view

    def contains(self, index: int, point) -> bool:
        """Is ``point`` (ray frame) inside instance ``index``'s bounding sphere?"""
        return bool(np.linalg.norm(self.center[index] - point) <= self.radius[index])

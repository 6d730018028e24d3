# ruff: noqa: FURB136  (builtin min/max on floats are avoided: this body also compiles for numba's CUDA target)
"""Hits → returns: infrared materials, incidence angle, range–reflectivity limits.

What makes the model more than a depth renderer. For every hit the triangle's
IR material (resolved once per mesh from its visual material) decides:

* ``general``: reflectivity ρ(θ) from the material (Lambertian ρ0·cos θ or its
  angle table), θ the angle between the ray and the surface normal;
* ``transparent``: no return here — the ray is cast on behind the surface (up
  to ``max_transparent_layers`` surfaces) and the return comes from what lies
  behind;
* ``absorbent``: no return;
* ``retroreflective``: a strong return with ``saturated`` set and the
  reflectivity reported at full scale, 1.0 (real sensors report these apart:
  Velodyne encodes them as 101–255); the range limit uses the material's
  Lambertian-equivalent ρ, far above 1;
* ``mirror``: reserved, handled as general.

A return is kept only if ``min_range_m ≤ range ≤ r_L(reflectivity)`` with the
sensor's range–reflectivity limit (:mod:`lidar_fmu.range_limit`).

OSI ``intensity`` (percent) follows the lidar equation for an extended
Lambertian target: the received power ∝ ρ(θ) / r², normalised so that a
perfect Lambertian reflector (ρ = 1) facing the sensor at
:data:`INTENSITY_REFERENCE_RANGE_M` gives 100 %, clipped to 0–100 %:
``intensity = 100 · min(1, ρ(θ) · (r_ref / max(r, r_ref))²)``;
saturated (retroreflective) returns report 100 %.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from .materials import (
    MATERIAL_CLASSES,
    MaterialDatabase,
    load_database,
    load_material_map,
    resolve_mesh_materials,
)
from .materials.mapping import check_map
from .pointcloud import ENVIRONMENT_ID_BASE, NO_OBJECT_ID, POINT_DTYPE, PointCloud
from .range_limit import FITS, range_limit_m

INTENSITY_REFERENCE_RANGE_M = 10.0
#: how far beyond a transparent surface its continuation ray starts (m)
TRANSPARENT_STEP_M = 1e-3
GENERAL, TRANSPARENT, ABSORBENT, RETROREFLECTIVE, MIRROR = (MATERIAL_CLASSES.index(c) for c in (
    "general", "transparent", "absorbent", "retroreflective", "mirror"))


class Materials:
    """IR material of every triangle of every mesh of a scene, for one sensor wavelength.

    ``material_map``: a map file/dict (visual → IR names) or ``None`` for the
    default map. Meshes are resolved once, when first seen.
    """

    def __init__(self, wavelength_nm: float, material_map=None, database: MaterialDatabase | None = None, warn=None):
        self.database = database or load_database(wavelength_nm)
        self.map = load_material_map(material_map) if material_map is not None else None
        if self.map is not None:
            check_map(self.map, self.database)  # a wrong IR name fails now, not at the first mesh
        self.warn = warn
        self.class_code, self.reflectance_table = self.database.arrays()
        # Lambertian materials get the exact ρ0·cos θ; NaN marks an angle table
        self.lambertian_rho0 = np.array(
            [m.reflectance if m.angle_table is None and m.reflectance is not None else np.nan
             for m in self.database.materials], dtype=np.float64)
        self._mesh_ids: dict[int, np.ndarray] = {}
        self._revision = None

    def _triangle_ids(self, mesh) -> np.ndarray:
        ids = self._mesh_ids.get(id(mesh))
        if ids is None:
            from .materials import DEFAULT_MAP

            ids = resolve_mesh_materials(mesh, self.map or DEFAULT_MAP, self.database, self.warn).astype(np.int16)
            self._mesh_ids[id(mesh)] = ids
        return ids

    def per_instance(self, scene):
        """(triangle IR ids of all meshes concatenated, first-triangle offset per instance slot)."""
        if self._revision != scene.revision:
            per_mesh = [self._triangle_ids(mesh) for mesh in scene.meshes]
            offsets = np.cumsum([0] + [len(ids) for ids in per_mesh])[:-1].astype(np.int64)
            self._triangles = np.concatenate(per_mesh) if per_mesh else np.zeros(0, np.int16)
            self._slot_offset = offsets[np.asarray(scene.instance_mesh_index)] if len(scene) else np.zeros(0, np.int64)
            self._revision = scene.revision
        return self._triangles, self._slot_offset


@njit(cache=True, nogil=True)
def classify_hits(hit_slot, primitive_id, triangles, slot_offset, class_code):
    """(N,) int8 material class of each hit (-1 for a miss)."""
    out = np.full(hit_slot.shape[0], -1, np.int8)
    for i in range(hit_slot.shape[0]):
        k = hit_slot[i]
        if k >= 0:
            out[i] = class_code[triangles[slot_offset[k] + primitive_id[i]]]
    return out


_DEG_PER_RAD = 180.0 / np.pi


def make_return_of_hit(jit, range_limit):
    """Per-hit physics compiled by ``jit`` around ``range_limit`` (a :func:`range_limit_m` of the same jit kind).

    The CUDA kernel's form (:mod:`lidar_fmu.raycast.cuda`) of the loop body
    of :func:`_fill_returns`. The CPU pass keeps its own loop: called as a
    function (even IR-inlined) it measured 3× slower (8–11 ms against 2.7 ms
    for 131k rays). ``tests/test_cuda_sim.py`` holds the two equal: same
    returning rays, object ids and flags, values within float tolerance.
    """

    def return_of_hit(r, material, wx, wy, wz, dx, dy, dz, R, min_range_m, limit_code, limit_a, limit_b, limit_c,
                      limit_max, limit_floor_m, class_code, reflectance_table, lambertian_rho0, reference_range_m):
        """Hit at range ``r`` (m) on IR ``material``, world normal ``w``, sensor-frame unit ray ``d``.

        ``R``: sensor_from_world (3, 3) float64. → (kept, normal in the sensor
        frame x, y, z, reflectivity, intensity %, saturated).
        """
        sx = R[0, 0] * wx + R[0, 1] * wy + R[0, 2] * wz
        sy = R[1, 0] * wx + R[1, 1] * wy + R[1, 2] * wz
        sz = R[2, 0] * wx + R[2, 1] * wy + R[2, 2] * wz
        kind = class_code[material]
        kept = False
        rho = 0.0
        intensity = 0.0
        saturated = kind == 3
        # transparent left after the last layer, and absorbent surfaces give nothing
        if r >= min_range_m and r < np.inf and kind != 1 and kind != 2:
            cos_incidence = -(sx * dx + sy * dy + sz * dz)
            cos_incidence = 0.0 if cos_incidence < 0.0 else (1.0 if cos_incidence > 1.0 else cos_incidence)
            rho0 = lambertian_rho0[material]
            if rho0 == rho0:  # Lambertian: exact
                rho = rho0 * cos_incidence
            else:  # linear in the 10° table (index 9 = 90°, where every table is 0)
                angle_deg = math.acos(cos_incidence) * _DEG_PER_RAD
                b = int(angle_deg / 10.0)
                b = 8 if b > 8 else b
                f = angle_deg / 10.0 - b
                rho = (1.0 - f) * reflectance_table[material, b] + f * reflectance_table[material, b + 1]
            # r_L is monotonic in ρ: limit_floor_m[q] = r_L(q / Q) bounds it from
            # below on each bin, so most returns pass without evaluating r_L
            q = int(rho * (limit_floor_m.shape[0] - 1))
            kept = (saturated or (0 <= q < limit_floor_m.shape[0] and r <= limit_floor_m[q])
                    or r <= range_limit(limit_code, limit_a, limit_b, limit_c, limit_max, rho))
            if saturated:  # a saturated receiver reports full scale, not the retroreflector's ρ ≫ 1
                rho = rho if rho < 1.0 else 1.0
                intensity = 100.0
            else:
                scale = reference_range_m / (r if r > reference_range_m else reference_range_m)
                intensity = 100.0 * (rho * scale * scale)
                intensity = intensity if intensity < 100.0 else 100.0
        return kept, sx, sy, sz, rho, intensity, saturated

    return jit(return_of_hit)


@njit(cache=True, nogil=True)
def _fill_returns(  # the GPU twin: make_return_of_hit, held equal by tests/test_cuda_sim.py
    range_m, normal_world, instance_id, hit_slot, primitive_id, directions, beam_id, sensor_from_world,
    min_range_m, limit_code, limit_a, limit_b, limit_c, limit_max, limit_floor_m, triangles, slot_offset, class_code, reflectance_table,
    lambertian_rho0, env_base, no_object, reference_range_m,
    x, y, z, rng, refl, nx, ny, nz, beam, obj, saturated, ray_index, intensity,
):
    R = sensor_from_world
    count = 0
    for i in range(range_m.shape[0]):
        r = range_m[i]
        k = hit_slot[i]
        if k < 0 or not (r >= min_range_m and r < np.inf):
            continue
        material = triangles[slot_offset[k] + primitive_id[i]]
        kind = class_code[material]
        if kind == 1 or kind == 2:  # transparent left over after the last layer, absorbent
            continue
        dx, dy, dz = directions[i, 0], directions[i, 1], directions[i, 2]
        wx, wy, wz = normal_world[i, 0], normal_world[i, 1], normal_world[i, 2]
        sx = R[0, 0] * wx + R[0, 1] * wy + R[0, 2] * wz
        sy = R[1, 0] * wx + R[1, 1] * wy + R[1, 2] * wz
        sz = R[2, 0] * wx + R[2, 1] * wy + R[2, 2] * wz
        cos_incidence = min(max(-(sx * dx + sy * dy + sz * dz), 0.0), 1.0)
        rho0 = lambertian_rho0[material]
        if rho0 == rho0:  # Lambertian: exact
            rho = rho0 * cos_incidence
        else:  # linear in the 10° table (index 9 = 90°, where every table is 0)
            angle_deg = np.degrees(np.arccos(cos_incidence))
            b = min(int(angle_deg / 10.0), 8)
            f = angle_deg / 10.0 - b
            rho = (1.0 - f) * reflectance_table[material, b] + f * reflectance_table[material, b + 1]
        is_saturated = kind == 3
        # r_L is monotonic in ρ: limit_floor_m[q] = r_L(q / Q) bounds it from
        # below on each bin, so most returns pass without evaluating r_L
        q = int(rho * (limit_floor_m.shape[0] - 1))
        if not is_saturated and not (0 <= q < limit_floor_m.shape[0] and r <= limit_floor_m[q]):
            if r > range_limit_m(limit_code, limit_a, limit_b, limit_c, limit_max, rho):
                continue
        x[count] = r * dx
        y[count] = r * dy
        z[count] = r * dz
        rng[count] = r
        # a saturated receiver reports full scale, not the retroreflector's ρ ≫ 1
        refl[count] = min(rho, 1.0) if is_saturated else rho
        nx[count] = sx
        ny[count] = sy
        nz[count] = sz
        beam[count] = beam_id[i]
        iid = instance_id[i]
        obj[count] = no_object if iid >= env_base else np.uint64(iid)
        saturated[count] = 1 if is_saturated else 0
        ray_index[count] = i
        scale = reference_range_m / max(r, reference_range_m)
        intensity[count] = 100.0 if is_saturated else 100.0 * min(1.0, rho * scale * scale)
        count += 1
    return count


def continue_through_transparent(backend, hits, origin, world_directions, classes, max_layers: int,
                                 max_range_m: float):
    """Re-cast rays that hit transparent surfaces from just behind them, in place on ``hits``.

    Rays go on straight, so a continuation starts at ``origin + (r + step)·d``
    and its range adds to ``r``. ``classes(hits) → (N,) int8`` classifies the
    current hits. After ``max_layers`` surfaces a still-transparent hit stays
    (and gives no return).
    """
    for _ in range(max_layers):
        through = np.flatnonzero(classes(hits) == TRANSPARENT)
        if len(through) == 0:
            break
        d = world_directions[through]
        travelled = (hits.range_m[through] + TRANSPARENT_STEP_M).astype(np.float32)
        starts = np.asarray(origin, np.float32) + d * travelled[:, None]
        behind = backend.cast(starts, d, max(max_range_m - float(travelled.min()), 0.0))
        total = behind.range_m + travelled
        hits.replace(through, behind, np.where(total <= max_range_m, total, np.inf))
    return hits


@dataclass(frozen=True)
class ReturnModel:
    """What decides the returns besides the hits: one sensor's limits and one scene's materials, as arrays.

    The CPU pass and the CUDA kernel both read it (see :func:`return_model`).
    """

    min_range_m: float
    max_range_m: float
    limit_params: tuple  # (fit code, a, b, c, max range m) for range_limit_m
    limit_floor_m: np.ndarray  # (Q+1,) float64, r_L at reflectivity q/Q, just below
    triangles: np.ndarray  # (T,) int16 IR material of every triangle of every mesh
    slot_offset: np.ndarray  # (K,) int64 first triangle of each instance slot's mesh in ``triangles``
    class_code: np.ndarray  # (M,) int8
    reflectance_table: np.ndarray  # (M, 10) float32
    lambertian_rho0: np.ndarray  # (M,) float64, NaN for angle tables
    max_transparent_layers: int

    def kernel_args(self) -> tuple:
        """The arguments :func:`return_of_hit` takes after the sensor rotation, in order (scalars typed)."""
        code, a, b, c, limit_max = self.limit_params
        return (np.float32(self.min_range_m), np.int64(code), np.float64(a), np.float64(b), np.float64(c),
                np.float64(limit_max), self.limit_floor_m)


def return_model(sensor, materials: Materials, scene) -> ReturnModel:
    triangles, slot_offset = materials.per_instance(scene)
    limit = sensor.range_limit
    params = (limit.kernel_params() if limit is not None
              else (FITS.index("constant"), 0.0, 0.0, 0.0, sensor.max_range_m))
    return ReturnModel(float(sensor.min_range_m), float(sensor.max_range_m), params,
                       _limit_floor(limit, sensor.max_range_m), triangles, slot_offset, materials.class_code,
                       materials.reflectance_table, materials.lambertian_rho0, int(sensor.max_transparent_layers))


def hits_to_returns(hits, pattern, sensor_pose, model: ReturnModel, **meta) -> PointCloud:
    """Hits (with materials and range limit applied) → :class:`PointCloud` of the returns."""
    sensor_from_world = np.ascontiguousarray(np.asarray(sensor_pose, np.float64)[:3, :3].T)
    n = len(hits.range_m)
    # one pass into arrays sized for every ray; the cloud keeps the filled front
    points = np.empty(n, POINT_DTYPE)
    ray_index = np.empty(n, np.int32)
    intensity = np.empty(n, np.float32)
    m = _fill_returns(
        hits.range_m, hits.normal, hits.instance_id, hits.instance_index, hits.primitive_id, pattern.directions,
        pattern.beam_id, sensor_from_world, *model.kernel_args(), model.triangles, model.slot_offset,
        model.class_code, model.reflectance_table, model.lambertian_rho0, np.int64(ENVIRONMENT_ID_BASE),
        NO_OBJECT_ID, np.float64(INTENSITY_REFERENCE_RANGE_M),
        *(points[name] for name in POINT_DTYPE.names), ray_index, intensity,
    )
    return returns_cloud(points[:m], ray_index[:m], intensity[:m], pattern, sensor_pose, **meta)


def returns_cloud(points, ray_index, intensity_percent, pattern, sensor_pose, **meta) -> PointCloud:
    """The :class:`PointCloud` of returns already decided (by the CPU pass or a GPU kernel)."""
    cloud = PointCloud(points, ray_index, pattern.rows, pattern.columns, sensor_pose=np.asarray(sensor_pose), **meta)
    cloud.intensity_percent = intensity_percent
    return cloud


_FLOOR_BINS = 256


def _limit_floor(limit, max_range_m) -> np.ndarray:
    """r_L at reflectivities 0, 1/256, …, 1 (a per-bin lower bound, r_L being monotonic); cached per limit."""
    key = (limit, max_range_m)
    floor = _FLOOR_CACHE.get(key)
    if floor is None:
        grid = np.arange(_FLOOR_BINS + 1) / _FLOOR_BINS
        floor = (np.full(len(grid), max_range_m) if limit is None else limit.max_range_m_for(grid)).astype(np.float64)
        floor = np.nextafter(floor, -np.inf)  # strictly below, so the exact test decides ties
        _FLOOR_CACHE[key] = floor
    return floor


_FLOOR_CACHE: dict = {}

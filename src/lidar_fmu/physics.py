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
* ``mirror``: the ray reflects specularly, ``d' = d − 2(d·n)n``, up to the
  sensor's ``max_bounces`` mirrors, and goes on; the return comes from the
  surface it finally meets and is reported **along the original ray at the
  total path length** — the ghost of BlenSor (Gschwandtner et al., ISVC 2011,
  §3.1 and Fig. 2c: "totally reflecting surfaces which cause points to appear
  farther away"): a time-of-flight unit measures the path, not where the
  light turned, and places the echo on the beam it fired. The ghost's normal is
  the surface's mirror image (the virtual surface the ghost lies on), so its
  incidence angle is the real one, and its reflectivity is ρ(θ)·Π R², R the
  material's specular ``reflectance`` for each mirror (out and back). A
  mirror after the budget ends the ray without a return (a mirror scatters
  next to nothing back diffusely). Not modelled: a mirror seen at normal
  incidence sends the beam straight back into the receiver, which a real unit
  sees as a saturated return at the mirror.

A return is kept only if ``min_range_m ≤ range ≤ r_L(reflectivity)`` with the
sensor's range–reflectivity limit (:mod:`lidar_fmu.range_limit`).

OSI ``intensity`` (percent) follows the lidar equation for an extended
Lambertian target: the received power ∝ ρ(θ) / r², normalised so that a
perfect Lambertian reflector (ρ = 1) facing the sensor at
:data:`~lidar_fmu.range_limit.INTENSITY_REFERENCE_RANGE_M` gives 100 %, clipped to 0–100 %:
``intensity = 100 · min(1, ρ(θ) · (r_ref / max(r, r_ref))²)``;
saturated (retroreflective) returns report 100 %.

Written once: the per-hit rules (:func:`material_of_hit`, :func:`segment_after`, :func:`reflect`,
:func:`return_of_hit`) are single Numba bodies that the CPU pass inlines, the
native Embree packet loop inlines, and the CUDA kernels compile as device
functions; :mod:`lidar_fmu.codes` gives them the class and fit codes.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
from numba import njit
from numba.extending import register_jitable

from .codes import ABSORBENT, MATERIAL_CLASSES, MIRROR, PASS, REFLECT, RETROREFLECTIVE, STOP, TRANSPARENT
from .materials import (
    MaterialDatabase,
    load_database,
    load_material_map,
    resolve_mesh_materials,
)
from .materials.mapping import check_map
from .parallel import side_by_side
from .pointcloud import CAST_FIELDS, ENVIRONMENT_ID_BASE, NO_OBJECT_ID, POINT_DTYPE, PointCloud
from .range_limit import intensity_percent, limit_params, range_limit_m
from .raycast.rays import Continuation

#: how far behind a surface a ray that goes on through it starts again (m). Assumed, not measured: well
#: above float32 resolution at 300 m (~30 µm), so the ray cannot hit the same surface again, and well
#: below any glazing's thickness that matters to a return.
CONTINUATION_STEP_M = 1e-3
_DEG_PER_RAD = 180.0 / math.pi
_TWO = np.float32(2.0)  # float32: the CUDA kernels compile these rules and must not promote to float64


class Materials:
    """IR material of every triangle of every mesh of a scene, for one sensor wavelength.

    ``material_map``: a map file/dict (visual → IR names) or ``None`` for the
    default map. Meshes are resolved once, when first seen.
    """

    #: meshes kept resolved after they left the scene
    KEEP_LEFT_MESHES = 8

    def __init__(self, wavelength_nm: float, material_map=None, database: MaterialDatabase | None = None, warn=None):
        self.database = database or load_database(wavelength_nm)
        self.map = load_material_map(material_map) if material_map is not None else None
        if self.map is not None:
            check_map(self.map, self.database)  # a wrong IR name fails now, not at the first mesh
        # a library caller who gave a map and no callback hears of unmapped names the Python way
        self.warn = warn if warn is not None else (lambda message: warnings.warn(message, stacklevel=4))
        self.class_code, self.reflectance_table = self.database.arrays()
        # Lambertian materials get the exact ρ0·cos θ; NaN marks an angle table
        self.lambertian_rho0 = np.array(
            [m.reflectance if m.angle_table is None and m.reflectance is not None else np.nan
             for m in self.database.materials], dtype=np.float64)
        # id(mesh) → (mesh, its triangles' IR ids): the mesh is kept to check identity (Python reuses the id
        # of a freed mesh); only the scene's current meshes and the last few that left are kept (per_instance)
        self._mesh_ids: dict[int, tuple] = {}
        self._revision = None
        self._classes_present = np.zeros(len(MATERIAL_CLASSES), bool)

    def _triangle_ids(self, mesh) -> np.ndarray:
        entry = self._mesh_ids.get(id(mesh))
        if entry is None or entry[0] is not mesh:
            from .materials import DEFAULT_MAP

            ids = resolve_mesh_materials(mesh, self.map or DEFAULT_MAP, self.database, self.warn).astype(np.int16)
            entry = (mesh, ids)
            self._mesh_ids[id(mesh)] = entry
        return entry[1]

    def per_instance(self, scene):
        """(IR material of every triangle of every mesh, concatenated; per instance index, its mesh's first triangle)."""
        if self._revision != scene.revision:
            # meshes that left the scene are forgotten but the few that left last (an object that comes back
            # is not resolved again): the cache stays about as small as the scene's mesh list
            current = [id(m) for m in scene.meshes]
            in_scene = set(current)
            left = [key for key in self._mesh_ids if key not in in_scene][-self.KEEP_LEFT_MESHES:]
            self._mesh_ids = {key: self._mesh_ids[key] for key in left + current if key in self._mesh_ids}
            per_mesh = [self._triangle_ids(mesh) for mesh in scene.meshes]
            offsets = np.cumsum([0] + [len(ids) for ids in per_mesh])[:-1].astype(np.int64)
            self._triangle_material = np.concatenate(per_mesh) if per_mesh else np.zeros(0, np.int16)
            self._first_triangle = offsets[np.asarray(scene.instance_mesh_index)] if len(scene) else np.zeros(0, np.int64)
            # which classes the scene's triangles have, found once per scene revision (a frame without mirrors
            # then skips the bounce work entirely)
            self._classes_present = np.bincount(self.class_code[self._triangle_material],
                                                minlength=len(MATERIAL_CLASSES)) > 0
            self._revision = scene.revision
        return self._triangle_material, self._first_triangle

    def scene_has(self, class_code: int) -> bool:
        """Does a triangle of the scene last passed to :meth:`per_instance` have a material of this class?"""
        return bool(self._classes_present[class_code])


# ----------------------------------------------------------------------------- per-hit rules
# Each is one Python body, made callable from compiled code by register_jitable:
# the CPU loops below and the casters' loops (raycast.embree's packets) inline
# it, raycast.cuda registers the same functions with numba-cuda, which compiles
# them into its kernels, and Numba's CUDA simulator runs them as Python.
# Integers from lidar_fmu.codes are compile-time constants on both targets.


def per_hit(fn):
    """Mark ``fn`` a per-hit rule: plain Python, inlined into the compiled code that calls it."""
    # a fresh decorator each time: register_jitable pops `inline` from its options when it first wraps
    return register_jitable(inline="always")(fn)



@per_hit
def material_of_hit(instance_index, primitive_id, triangle_material, first_triangle):
    """IR material of triangle ``primitive_id`` of the instance at ``instance_index`` (≥ 0)."""
    return triangle_material[first_triangle[instance_index] + primitive_id]


@per_hit
def segment_after(instance_index, primitive_id, surfaces_passed, max_surfaces, bounces, max_bounces,
                  triangle_material, first_triangle, class_code):
    """What a ray that hit this triangle does next (:data:`~lidar_fmu.codes.STOP`, ``PASS``, ``REFLECT``).

    It goes on behind a transparent surface while fewer than ``max_surfaces``
    were passed, reflects off a mirror while fewer than ``max_bounces`` were
    bounced off; a miss (``instance_index < 0``) or any other surface ends it.
    """
    if instance_index < 0 or (surfaces_passed >= max_surfaces and bounces >= max_bounces):
        return STOP  # (budgets spent: the material is not even looked up; Continuation.none() has no table)
    kind = class_code[material_of_hit(instance_index, primitive_id, triangle_material, first_triangle)]
    if kind == TRANSPARENT and surfaces_passed < max_surfaces:
        return PASS
    if kind == MIRROR and bounces < max_bounces:
        return REFLECT
    return STOP


@per_hit
def reflect(dx, dy, dz, nx, ny, nz):
    """The direction ``d`` mirrored at the unit normal ``n``: ``d − 2(d·n)n``."""
    k = _TWO * (dx * nx + dy * ny + dz * nz)
    return dx - k * nx, dy - k * ny, dz - k * nz


@per_hit
def unfold_after(m00, m01, m02, m10, m11, m12, m20, m21, m22, nx, ny, nz):
    """``M·H`` for the reflection ``H = I − 2nnᵀ`` at one more mirror (``M``: the mirrors so far, row-major).

    ``M`` maps the current segment's frame back to the original ray's: the
    final surface's normal ``M·n`` is its mirror image, the normal of the
    virtual surface a ghost lies on, with ``(M·n)·d = n·d'`` (same incidence).
    """
    a = _TWO * (m00 * nx + m01 * ny + m02 * nz)
    b = _TWO * (m10 * nx + m11 * ny + m12 * nz)
    c = _TWO * (m20 * nx + m21 * ny + m22 * nz)
    return (m00 - a * nx, m01 - a * ny, m02 - a * nz, m10 - b * nx, m11 - b * ny, m12 - b * nz,
            m20 - c * nx, m21 - c * ny, m22 - c * nz)


@per_hit
def object_id_of(instance_id):
    """OSI object id of a scene instance id (environment geometry has none)."""
    return NO_OBJECT_ID if instance_id >= ENVIRONMENT_ID_BASE else np.uint64(instance_id)


@per_hit
def return_of_hit(r, material, wx, wy, wz, ox, oy, oz, dx, dy, dz, R, min_range_m, limit_code, limit_a, limit_b,
                  limit_c, limit_tail_refl, limit_tail_m, limit_max, limit_floor_m, class_code, reflectance_table,
                  lambertian_rho0, path_gain):
    """The return of one hit, if the sensor sees one: materials, incidence angle, range limit, intensity.

    ``r``: range (m) along the unit ray ``d`` from ``o`` (both in the sensor
    frame, float32); ``material``: IR material hit; ``w``: world unit normal
    facing the ray; ``R``: (3, 3) float64 sensor_from_world; the rest: a
    :class:`ReturnModel`'s :meth:`~ReturnModel.limit_args` and material
    arrays; ``path_gain``: the share of power the ray's mirrors kept, out and
    back (1 without mirrors). → (kept, point x, y, z (float32, sensor frame),
    normal x, y, z (sensor frame), reflectivity, intensity %, saturated).
    """
    kind = class_code[material]
    # transparent left after the last surface, a mirror after the last bounce and absorbent surfaces give nothing
    if not (r >= min_range_m and r < np.inf) or kind == TRANSPARENT or kind == ABSORBENT or kind == MIRROR:
        return False, ox, oy, oz, 0.0, 0.0, 0.0, 0.0, 0.0, False
    sx = R[0, 0] * wx + R[0, 1] * wy + R[0, 2] * wz
    sy = R[1, 0] * wx + R[1, 1] * wy + R[1, 2] * wz
    sz = R[2, 0] * wx + R[2, 1] * wy + R[2, 2] * wz
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
    rho = rho * path_gain  # what the receiver gets back through mirrors: the unit reads it as a dimmer target
    saturated = kind == RETROREFLECTIVE
    # r_L is monotonic in ρ: limit_floor_m[q] = r_L(q / Q) bounds it from
    # below on each bin, so most returns pass without evaluating r_L
    q = int(rho * (limit_floor_m.shape[0] - 1))
    kept = (saturated or (0 <= q < limit_floor_m.shape[0] and r <= limit_floor_m[q])
            or r <= range_limit_m(limit_code, limit_a, limit_b, limit_c, limit_tail_refl, limit_tail_m, limit_max,
                                  rho))
    if saturated:  # a saturated receiver reports full scale, not the retroreflector's ρ ≫ 1
        rho = rho if rho < 1.0 else 1.0
        intensity = 100.0
    else:
        intensity = intensity_percent(rho, r)
    return kept, ox + r * dx, oy + r * dy, oz + r * dz, sx, sy, sz, rho, intensity, saturated


# _nrt=False: the loop allocates nothing, and without Numba's reference counting the arrays passed
# into the inlined return_of_hit cost no atomic incref/decref per hit (measured: with them the loop
# took 1.2–1.6× as long; as a call that is not inlined, 8×). See "One physics path" in README.
@njit(cache=True, nogil=True, _nrt=False)
def _fill_returns(range_m, normal_world, instance_id, instance_index, origins, directions, beam_id, R,
                  min_range_m, limit_code, limit_a, limit_b, limit_c, limit_tail_refl, limit_tail_m, limit_max,
                  limit_floor_m, triangle_material, first_triangle, primitive_id, class_code, reflectance_table, lambertian_rho0,
                  path_gain, x, y, z, rng, refl, nx, ny, nz, beam, obj, saturated, ray_index, intensity, keep_material,
                  material_id):
    shared_origin = origins.shape[0] == 1
    one_gain = path_gain.shape[0] == 1  # no mirror in the scene: every ray keeps all its power
    count = 0
    for i in range(range_m.shape[0]):
        k = instance_index[i]
        if k < 0:
            continue
        o = 0 if shared_origin else i
        material = material_of_hit(k, primitive_id[i], triangle_material, first_triangle)
        kept, px, py, pz, sx, sy, sz, rho, percent, is_saturated = return_of_hit(
            range_m[i], material,
            normal_world[i, 0], normal_world[i, 1], normal_world[i, 2], origins[o, 0], origins[o, 1], origins[o, 2],
            directions[i, 0], directions[i, 1], directions[i, 2], R, min_range_m, limit_code, limit_a, limit_b,
            limit_c, limit_tail_refl, limit_tail_m, limit_max, limit_floor_m, class_code, reflectance_table,
            lambertian_rho0, path_gain[0 if one_gain else i])
        if not kept:
            continue
        x[count] = px
        y[count] = py
        z[count] = pz
        rng[count] = range_m[i]
        refl[count] = rho
        nx[count] = sx
        ny[count] = sy
        nz[count] = sz
        beam[count] = beam_id[i]
        obj[count] = object_id_of(instance_id[i])
        saturated[count] = 1 if is_saturated else 0
        ray_index[count] = i
        intensity[count] = percent
        if keep_material:  # (only for ground truth: a frame without it stores nothing more than before)
            material_id[count] = material
        count += 1
    return count


@njit(cache=True, nogil=True)
def segments_after(instance_index, primitive_id, surfaces_passed, max_surfaces, bounces, max_bounces,
                   triangle_material, first_triangle, class_code):
    """(N,) int8: :func:`segment_after` for every ray of a batch of hits (per-ray counts passed and bounced)."""
    out = np.zeros(instance_index.shape[0], np.int8)
    for i in range(instance_index.shape[0]):
        out[i] = segment_after(instance_index[i], primitive_id[i], surfaces_passed[i], max_surfaces, bounces[i],
                               max_bounces, triangle_material, first_triangle, class_code)
    return out


class Returns(NamedTuple):
    """The returns of a batch of rays, in ray order: what a backend's ``returns`` gives."""

    points: np.ndarray  # (M,) POINT_DTYPE, sensor frame
    ray_index: np.ndarray  # (M,) int32 ray of the batch
    intensity_percent: np.ndarray  # (M,) float32
    #: (M,) int16 IR material hit (for ground truth); None where a stage did not keep it
    material_id: np.ndarray | None = None


@dataclass(frozen=True)
class ReturnModel:
    """What decides the returns besides the hits: one sensor's limits and one scene's materials, as arrays.

    Every backend's ``returns`` reads it (see :func:`return_model`).
    """

    min_range_m: float
    max_range_m: float
    limit_params: tuple  # (fit code, a, b, c, tail R_lo, tail r_lo m, max range m) for range_limit_m
    limit_floor_m: np.ndarray  # (Q+1,) float64, r_L at reflectivity q/Q, just below
    triangle_material: np.ndarray  # (T,) int16 IR material of every triangle of every mesh
    first_triangle: np.ndarray  # (K,) int64 per instance index, its mesh's first triangle in triangle_material
    class_code: np.ndarray  # (M,) int8
    reflectance_table: np.ndarray  # (M, 10) float32
    lambertian_rho0: np.ndarray  # (M,) float64, NaN for angle tables
    max_transparent_layers: int
    #: mirrors a ray reflects off at most (0 when the scene has no mirror: casts skip the bounce work)
    max_bounces: int = 0
    #: the returns keep the IR material each hit (``Returns.material_id``, for ground truth)
    keep_material: bool = False

    def limit_args(self) -> tuple:
        """``min_range_m`` and the range limit as :func:`return_of_hit` takes them (scalars typed)."""
        code, a, b, c, tail_refl, tail_m, limit_max = self.limit_params
        return (np.float32(self.min_range_m), np.int64(code), np.float64(a), np.float64(b), np.float64(c),
                np.float64(tail_refl), np.float64(tail_m), np.float64(limit_max), self.limit_floor_m)

    def material_args(self) -> tuple:
        """The material arrays :func:`return_of_hit` takes, in order."""
        return self.class_code, self.reflectance_table, self.lambertian_rho0

    def unlimited(self) -> ReturnModel:
        """This model keeping every return up to ``max_range_m``, whatever its reflectivity: what sub-rays are cast
        with, the range limit then deciding on whole echoes (:mod:`lidar_fmu.echoes`)."""
        return replace(self, limit_params=limit_params(None, self.max_range_m),
                       limit_floor_m=_limit_floor(None, self.max_range_m))

    def continuation(self) -> Continuation:
        """Which surfaces rays go on through (transparent ones) or reflect off (mirrors), up to the sensor's budgets."""
        # budgets 0 unless the scene has a transparent or mirror triangle (return_model): the casters then skip
        # the per-hit material lookup; the tables still go along (the CUDA returns kernel reads materials there)
        layers = self.max_transparent_layers
        # a mirror's specular reflectance: its ρ at 0° (module doc)
        specular = np.where(self.class_code == MIRROR, self.reflectance_table[:, 0], 0.0).astype(np.float32)
        return Continuation(layers, self.triangle_material, self.first_triangle, self.class_code,
                            self.max_bounces, specular)


def return_model(sensor, materials: Materials, scene) -> ReturnModel:
    triangle_material, first_triangle = materials.per_instance(scene)
    limit = sensor.physics_range_limit
    # no continuation work (a material lookup on every hit) in scenes without glass or mirrors
    bounces = int(sensor.max_bounces) if materials.scene_has(MIRROR) else 0
    layers = int(sensor.max_transparent_layers) if materials.scene_has(TRANSPARENT) else 0
    return ReturnModel(float(sensor.min_range_m), float(sensor.max_range_m), limit_params(limit, sensor.max_range_m),
                       _limit_floor(limit, sensor.max_range_m), triangle_material, first_triangle,
                       materials.class_code, materials.reflectance_table, materials.lambertian_rho0, layers, bounces)


def returns_of_hits(hits, rays, model: ReturnModel) -> Returns:
    """Hits of a :class:`~lidar_fmu.raycast.RayBatch` → its :class:`Returns` (in the batch's frame), on the CPU."""
    sensor_from_world = np.ascontiguousarray(np.asarray(rays.world_from_frame, np.float64)[:3, :3].T)
    n = len(hits.range_m)
    # one pass into arrays sized for every ray; each run of rays fills the front of its own part, side by side
    # on the cores, and the parts then close up
    points = np.empty(n, POINT_DTYPE)
    ray_index = np.empty(n, np.int32)
    intensity = np.empty(n, np.float32)
    material_id = np.empty(n if model.keep_material else 0, np.int16)
    gain = _NO_MIRROR_GAIN if hits.path_gain is None else hits.path_gain
    runs = [(a, min(a + _FILL_RAYS, n)) for a in range(0, n, _FILL_RAYS)]

    def fill(a, b):
        per_ray = slice(a, b)
        return _fill_returns(
            hits.range_m[per_ray], hits.normal[per_ray], hits.instance_id[per_ray], hits.instance_index[per_ray],
            rays.origins if rays.origins.shape[0] == 1 else rays.origins[per_ray], rays.directions[per_ray],
            rays.beam_id[per_ray], sensor_from_world, *model.limit_args(), model.triangle_material,
            model.first_triangle, hits.primitive_id[per_ray], *model.material_args(),
            gain if gain.shape[0] == 1 else gain[per_ray], *(points[name][per_ray] for name in CAST_FIELDS),
            ray_index[per_ray], intensity[per_ray], model.keep_material, material_id[per_ray] if model.keep_material
            else material_id)

    m = 0
    record = points.view(np.dtype((np.void, POINT_DTYPE.itemsize)))  # records moved as opaque bytes
    for (a, _), count in zip(runs, side_by_side(fill, runs)):
        if a != m:  # close up: the part's returns follow the previous parts' (numpy copies overlapping runs safely)
            record[m:m + count] = record[a:a + count]
            intensity[m:m + count] = intensity[a:a + count]
            if model.keep_material:
                material_id[m:m + count] = material_id[a:a + count]
        ray_index[m:m + count] = ray_index[a:a + count] + a
        m += count
    points = points[:m]
    points["echo"] = 0  # one return per ray: echo formation (lidar_fmu.echoes) numbers several
    return Returns(points, ray_index[:m], intensity[:m], material_id[:m] if model.keep_material else None)


#: rays per part of the physics pass (~1 ms of work each)
_FILL_RAYS = 32_768


def concatenate_returns(parts) -> Returns:
    """One :class:`Returns` of consecutive batches' (``ray_index`` already counted in the whole)."""
    # records moved as opaque bytes: numpy copies a structured dtype field by field, 15× slower
    record = np.dtype((np.void, POINT_DTYPE.itemsize))
    points = np.concatenate([p.points.view(record) for p in parts] or [np.zeros(0, record)]).view(POINT_DTYPE)
    ray_index = np.concatenate([p.ray_index for p in parts] or [np.zeros(0, np.int32)])
    intensity = np.concatenate([p.intensity_percent for p in parts] or [np.zeros(0, np.float32)])
    kept = parts and all(p.material_id is not None for p in parts)
    return Returns(points, ray_index, intensity, np.concatenate([p.material_id for p in parts]) if kept else None)


def returns_cloud(returns: Returns, pattern, sensor_pose, **meta) -> PointCloud:
    """The :class:`PointCloud` of a pattern's returns (decided by the CPU pass or a GPU kernel).

    Each return's ``time`` is its ray's firing time in the pattern.
    """
    returns.points["time"] = pattern.time_offset_s[returns.ray_index]
    cloud = PointCloud(returns.points, returns.ray_index, pattern.rows, pattern.columns,
                       sensor_pose=np.asarray(sensor_pose), pattern=pattern, **meta)
    cloud.intensity_percent = returns.intensity_percent
    return cloud


#: the path gain of every ray of a cast without mirrors (one value for all)
_NO_MIRROR_GAIN = np.ones(1, np.float32)
_NO_MIRROR_GAIN.setflags(write=False)

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

# ruff: noqa: FURB136  (builtin min/max on floats are avoided: this body also compiles for numba's CUDA target)
"""The per-hit rules every caster compiles in, and the integer codes they test.

One Python body each (:func:`material_of_hit`, :func:`face_reflectance_of_hit`, :func:`segment_after`,
:func:`reflect`, :func:`unfold_after`, :func:`object_id_of`, :func:`object_id_of_hit`, :func:`semantic_of_hit`,
:func:`return_of_hit`),
made callable from compiled code by ``register_jitable``: the CPU physics pass (:mod:`.returns`) and the Embree packet loop inline them, and
the CUDA kernels compile them as device functions. :class:`Continuation` carries the tables these rules read while
a ray goes on through glass or off mirrors; a :class:`~.returns.ReturnModel` makes it, a backend takes it.

Numba (CPU and CUDA) treats module-level integers as compile-time constants, so ``kind == TRANSPARENT`` costs
what ``kind == 1`` costs while saying what it means. The tuples fix the order; the names are what specs and data
files use. This is the one part of :mod:`lidar_fmu.physics` that :mod:`lidar_fmu.raycast` imports.

What a hit's IR material class does (docs/physics.md has the physics and its sources): ``general`` returns
ρ(θ), Lambertian ρ0·cos θ or the material's angle table; ``transparent`` sends the ray on behind the surface;
``absorbent`` gives nothing; ``retroreflective`` gives a saturated return at full scale; ``mirror`` reflects
the ray, and the return it finally makes lies along the original ray at the whole path length (a ghost). A
return is kept within ``min_range_m ≤ r ≤ r_L(ρ)`` (:mod:`.range_limit`); its intensity is
``100 · min(1, ρ(θ) · (r_ref / max(r, r_ref))²)`` %, 100 % when saturated.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit
from numba.extending import register_jitable

from ..geometry.semantic import UNLABELLED
from ..pointcloud import ENVIRONMENT_ID_BASE, NO_OBJECT_ID
from .range_limit import intensity_percent, range_limit_m

#: infrared material classes (``class:`` in the material database), in code order
MATERIAL_CLASSES = ("general", "transparent", "absorbent", "retroreflective", "mirror")
GENERAL, TRANSPARENT, ABSORBENT, RETROREFLECTIVE, MIRROR = range(len(MATERIAL_CLASSES))

#: what a ray does after a surface (:func:`lidar_fmu.physics.hit_rules.segment_after`): ends there, goes on straight
#: behind it (transparent), or reflects off it (mirror)
STOP, PASS, REFLECT = range(3)

#: how far behind a surface a ray that goes on through it starts again (m). Assumed, not measured: well
#: above float32 resolution at 300 m (~30 µm), so the ray cannot hit the same surface again, and well
#: below any glazing's thickness that matters to a return.
CONTINUATION_STEP_M = 1e-3
_DEG_PER_RAD = 180.0 / math.pi
_TWO = np.float32(2.0)  # float32: the CUDA kernels compile these rules and must not promote to float64


# ----------------------------------------------------------------------------- per-hit rules
# Each is one Python body, made callable from compiled code by register_jitable:
# the CPU pass (physics.returns) and the casters' loops (raycast.embree4's packets) inline
# it, raycast.cuda registers the same functions with numba-cuda, which compiles
# them into its kernels, and Numba's CUDA simulator runs them as Python.
# The integer codes above are compile-time constants on both targets.


def per_hit(fn):
    """Mark ``fn`` a per-hit rule: plain Python, inlined into the compiled code that calls it."""
    # a fresh decorator each time: register_jitable pops `inline` from its options when it first wraps
    return register_jitable(inline="always")(fn)



@per_hit
def material_of_hit(instance_index, primitive_id, triangle_material, first_triangle):
    """IR material of triangle ``primitive_id`` of the instance at ``instance_index`` (≥ 0)."""
    return triangle_material[first_triangle[instance_index] + primitive_id]


@per_hit
def face_reflectance_of_hit(instance_index, primitive_id, triangle_reflectance, first_triangle):
    """The Lambertian ρ0 the mesh gives triangle ``primitive_id`` of the instance at ``instance_index`` (≥ 0), NaN
    where it gives none (the IR material's then). ``triangle_reflectance``: (T,) per triangle of every mesh,
    concatenated as ``triangle_material`` is, or (1,) NaN for a scene where no mesh gives one."""
    if triangle_reflectance.shape[0] == 1:
        return triangle_reflectance[0]
    return triangle_reflectance[first_triangle[instance_index] + primitive_id]


@per_hit
def segment_after(instance_index, primitive_id, surfaces_passed, max_surfaces, bounces, max_bounces,
                  triangle_material, first_triangle, class_code):
    """What a ray that hit this triangle does next (:data:`~lidar_fmu.physics.hit_rules.STOP`, ``PASS``, ``REFLECT``).

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
def object_id_of_hit(instance_index, primitive_id, instance_id, triangle_object_id, first_triangle):
    """OSI id a return on triangle ``primitive_id`` of the instance at ``instance_index`` (≥ 0, scene id
    ``instance_id``) reports: the triangle's own (a lane, marking or sign of a road built from ground truth), else
    the instance's (:func:`object_id_of`). ``triangle_object_id``: (T,) uint64 per triangle of every mesh,
    concatenated as ``triangle_material`` is, NO_OBJECT_ID where a triangle has none; (1,) for a scene where no
    mesh gives one."""
    if triangle_object_id.shape[0] > 1:
        own = triangle_object_id[first_triangle[instance_index] + primitive_id]
        if own != NO_OBJECT_ID:
            return own
    return object_id_of(instance_id)


@per_hit
def semantic_of_hit(instance_index, primitive_id, triangle_semantic, first_triangle, instance_semantic):
    """Semantic class (:mod:`lidar_fmu.geometry.semantic`) of a return on triangle ``primitive_id`` of the instance at
    ``instance_index`` (≥ 0): the triangle's own (a lane's road, its paint's lane marking), else the instance's
    (``instance_semantic``: (K,) uint8 per instance index, a road user's class). ``triangle_semantic``: (T,) uint8
    per triangle of every mesh, concatenated as ``triangle_material`` is, UNLABELLED where a triangle has none; (1,)
    for a scene where no mesh gives one."""
    if triangle_semantic.shape[0] > 1:
        own = triangle_semantic[first_triangle[instance_index] + primitive_id]
        if own != UNLABELLED:
            return own
    return instance_semantic[instance_index]


@per_hit
def return_of_hit(r, material, face_rho0, wx, wy, wz, ox, oy, oz, dx, dy, dz, R, min_range_m, limit_code, limit_a,
                  limit_b, limit_c, limit_tail_refl, limit_tail_m, limit_max, limit_floor_m, class_code,
                  reflectance_table, lambertian_rho0, path_gain):
    """The return of one hit, if the sensor sees one: materials, incidence angle, range limit, intensity.

    ``r``: range (m) along the unit ray ``d`` from ``o`` (both in the sensor
    frame, float32); ``material``: IR material hit; ``face_rho0``: the
    triangle's own Lambertian ρ0 (:func:`face_reflectance_of_hit`), NaN for
    the material's; ``w``: world unit normal
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
    # a triangle's own reflectance (its material is then the general face_reflectivity) before its material's
    rho0 = face_rho0 if face_rho0 == face_rho0 else lambertian_rho0[material]
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


@njit(cache=True, nogil=True)
def segments_after(instance_index, primitive_id, surfaces_passed, max_surfaces, bounces, max_bounces,
                   triangle_material, first_triangle, class_code):
    """(N,) int8: :func:`segment_after` for every ray of a batch of hits (per-ray counts passed and bounced)."""
    out = np.zeros(instance_index.shape[0], np.int8)
    for i in range(instance_index.shape[0]):
        out[i] = segment_after(instance_index[i], primitive_id[i], surfaces_passed[i], max_surfaces, bounces[i],
                               max_bounces, triangle_material, first_triangle, class_code)
    return out


_NO_MIRRORS = np.zeros(1, np.float32)
_NO_MIRRORS.setflags(write=False)


@dataclass(frozen=True, eq=False)
class Continuation:
    """Surfaces rays go on through or reflect off: per-triangle material classes and how many such surfaces at most.

    ``triangle_material``: IR material of every triangle of every mesh,
    concatenated; ``first_triangle``: per instance index, where its mesh
    starts there; ``class_code``: per IR material, its class
    (:mod:`lidar_fmu.physics.hit_rules`). A ray passes at most ``max_surfaces``
    transparent surfaces, going on :data:`~lidar_fmu.physics.hit_rules.CONTINUATION_STEP_M`
    behind each; a transparent surface after that ends it (and gives no return).
    A ray reflects off at most ``max_bounces`` mirrors (``d' = d − 2(d·n)n``,
    starting again the same step off the mirror), keeping ``specular[m]²`` of
    its power at each (out and back); its hit is then the surface it finally
    meets, at the whole path length, its normal mirrored back into the
    original ray's frame (:class:`~.hits.Hits`).
    """

    max_surfaces: int
    triangle_material: np.ndarray  # (T,) int16
    first_triangle: np.ndarray  # (K,) int64
    class_code: np.ndarray  # (M,) int8
    max_bounces: int = 0
    #: (M,) float32 specular reflectance of each mirror material (0: not a mirror)
    specular: np.ndarray = field(default_factory=lambda: _NO_MIRRORS)

    @classmethod
    def none(cls) -> Continuation:
        """Every ray stops at the first surface."""
        return _NONE


_NONE = Continuation(0, np.zeros(1, np.int16), np.zeros(1, np.int64), np.zeros(1, np.int8))

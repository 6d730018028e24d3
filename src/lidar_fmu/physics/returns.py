# ruff: noqa: FURB136  (builtin min/max on floats are avoided: this body also compiles for numba's CUDA target)
"""Hits → returns on the CPU: one compiled pass applies the per-hit rules (:mod:`.hit_rules`) to a batch.

:class:`Materials` resolves every triangle's IR material once per mesh; :class:`ReturnModel` holds one sensor's
limits and one scene's materials as arrays (:func:`return_model`), what every backend's ``returns`` reads and
what brings a caster its :class:`~.hit_rules.Continuation`; :func:`returns_of_hits` is the CPU pass, in parts
of 32k rays side by side on the cores; :func:`returns_cloud` makes the :class:`~lidar_fmu.pointcloud.PointCloud`.
What a material class does to a ray, the range–reflectivity limit and the intensity law: :mod:`.hit_rules` and
docs/physics.md.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numba import njit
from numpy.typing import ArrayLike

from ..geometry.semantic import SEMANTIC_DTYPE, UNLABELLED
from ..parallel import side_by_side
from ..pointcloud import NO_OBJECT_ID, POINT_DTYPE, PointCloud, Returns
from .hit_rules import (
    MATERIAL_CLASSES,
    MIRROR,
    TRANSPARENT,
    Continuation,
    face_reflectance_of_hit,
    material_of_hit,
    object_id_of_hit,
    return_of_hit,
    semantic_of_hit,
)
from .materials import (
    DEFAULT_MAP,
    FACE_REFLECTIVITY,
    MaterialDatabase,
    load_database,
    load_material_map,
    resolve_mesh_materials,
    surface_material,
    with_face_reflectivity,
)
from .materials.database import MaterialDatabaseSource
from .materials.mapping import MaterialMapSource, check_map
from .range_limit import RangeReflectivityLimit, limit_params

if TYPE_CHECKING:
    from ..geometry.openmaterial import SurfaceProperties
    from ..geometry.pattern import RayPattern
    from ..geometry.scene import Mesh, Scene

#: the per-triangle reflectances of a scene where no mesh gives one (one NaN for all: the materials' own)
NO_FACE_REFLECTANCE = np.full(1, np.nan, np.float32)
NO_FACE_REFLECTANCE.setflags(write=False)
#: the per-triangle OSI ids of a scene where no mesh gives one (every return takes its instance's id)
NO_FACE_OBJECT_ID = np.full(1, NO_OBJECT_ID, np.uint64)
NO_FACE_OBJECT_ID.setflags(write=False)
#: the per-triangle semantic classes of a scene where no mesh gives one (every return takes its instance's class)
NO_FACE_SEMANTIC = np.full(1, UNLABELLED, SEMANTIC_DTYPE)
NO_FACE_SEMANTIC.setflags(write=False)


# What this stage reads of a cast and of a sensor, as protocols: the casters (lidar_fmu.raycast) and sensors
# stand above it and are never imported here.
class CastHits(Protocol):
    """The hits the CPU pass reads: :class:`lidar_fmu.raycast.Hits`."""

    @property
    def range_m(self) -> np.ndarray: ...
    @property
    def normal(self) -> np.ndarray: ...
    @property
    def instance_id(self) -> np.ndarray: ...
    @property
    def instance_index(self) -> np.ndarray: ...
    @property
    def primitive_id(self) -> np.ndarray: ...
    @property
    def path_gain(self) -> np.ndarray | None: ...


class CastRays(Protocol):
    """The rays the CPU pass reads: :class:`lidar_fmu.raycast.RayBatch`."""

    @property
    def origins(self) -> np.ndarray: ...
    @property
    def directions(self) -> np.ndarray: ...
    @property
    def world_from_frame(self) -> np.ndarray: ...
    @property
    def beam_id(self) -> np.ndarray: ...


class SensorLimits(Protocol):
    """What :func:`return_model` reads of a sensor: :class:`lidar_fmu.sensors.Sensor`."""

    @property
    def min_range_m(self) -> float: ...
    @property
    def max_range_m(self) -> float: ...
    @property
    def max_transparent_layers(self) -> int: ...
    @property
    def max_bounces(self) -> int: ...
    @property
    def physics_range_limit(self) -> RangeReflectivityLimit | None: ...


class Materials:
    """IR material of every triangle of every mesh of a scene, for one sensor wavelength.

    ``material_map``: a map file/dict (visual → IR names) or ``None`` for the
    default map. ``database``: the IR materials the map names — a user's
    material file (YAML/JSON, or an angle-table CSV; :mod:`.materials.database`
    gives the format) or a list of them, read at ``wavelength_nm`` and laid
    over the built-in ones (same-named entries replaced); a
    :class:`~.materials.MaterialDatabase`; ``None`` for the built-in ones.
    Meshes are resolved once, when first seen; a triangle its mesh gives its
    own reflectance (:attr:`~lidar_fmu.geometry.scene.Mesh.face_reflectance`)
    is the material ``face_reflectivity`` with that ρ0 instead.
    """

    #: meshes kept resolved after they left the scene
    KEEP_LEFT_MESHES = 8

    def __init__(self, wavelength_nm: float, material_map: MaterialMapSource | None = None,
                 database: MaterialDatabaseSource | None = None,
                 warn: Callable[[str], object] | None = None) -> None:
        given = database if isinstance(database, MaterialDatabase) else None
        self.database = with_face_reflectivity(given or load_database(wavelength_nm, database or ()))
        self._shared_database = self.database is given
        self.face_material = self.database.index(FACE_REFLECTIVITY)
        self.map = load_material_map(material_map) if material_map is not None else None
        if self.map is not None:
            check_map(self.map, self.database)  # a wrong IR name fails now, not at the first mesh
        # a library caller who gave a map and no callback hears of unmapped names the Python way
        self.warn = warn if warn is not None else (lambda message: warnings.warn(message, stacklevel=4))
        self._tables_of_database()
        # id(mesh) → (mesh, its triangles' IR ids): the mesh is kept to check identity (Python reuses the id
        # of a freed mesh); only the scene's current meshes and the last few that left are kept (per_instance)
        self._mesh_ids: dict[int, tuple] = {}
        self._revision: int | None = None
        self._classes_present = np.zeros(len(MATERIAL_CLASSES), bool)
        self._triangle_reflectance = NO_FACE_REFLECTANCE
        self._triangle_object_id = NO_FACE_OBJECT_ID
        self._triangle_semantic = NO_FACE_SEMANTIC
        self._instance_semantic = np.zeros(0, SEMANTIC_DTYPE)

    def _triangle_ids(self, mesh: Mesh) -> np.ndarray:
        entry = self._mesh_ids.get(id(mesh))
        if entry is None or entry[0] is not mesh:
            ids = resolve_mesh_materials(mesh, self.map or DEFAULT_MAP, self.database, self.warn).astype(np.int16)
            for visual, properties in (mesh.material_properties or {}).items():
                if visual in mesh.material_names:  # the asset's own surface, where it says what a lidar sees
                    material = self._surface_material(properties)
                    if material is not None:
                        ids[np.asarray(mesh.material_names)[mesh.face_material] == visual] = material
            if mesh.face_reflectance is not None:  # the mesh's own reflectances override the map's materials
                ids[~np.isnan(mesh.face_reflectance)] = self.face_material
            entry = (mesh, ids)
            self._mesh_ids[id(mesh)] = entry
        return entry[1]

    def _surface_material(self, properties: SurfaceProperties) -> int | None:
        """The id of the IR material an asset's own surface properties make (added to the database once)."""
        retroreflector = self.database["retroreflector"] if "retroreflector" in self.database else None
        material = surface_material(properties, self.database.wavelength_nm, retroreflector)
        if material is None:
            return None
        if material.name not in self.database:
            if self._shared_database:  # a database the caller gave: ours gets a copy before it grows
                self.database = MaterialDatabase(self.database, self.database.wavelength_nm)
                self._shared_database = False
            self.database.add(material)
            self._tables_of_database()
        return self.database.index(material.name)

    def _tables_of_database(self) -> None:
        """The per-material arrays the kernels read, of the database as it is now."""
        self.class_code, self.reflectance_table = self.database.arrays()
        # Lambertian materials get the exact ρ0·cos θ; NaN marks an angle table
        self.lambertian_rho0 = np.array(
            [m.reflectance if m.angle_table is None and m.reflectance is not None else np.nan
             for m in self.database.materials], dtype=np.float64)

    @property
    def triangle_reflectance(self) -> np.ndarray:
        """(T,) float32 the Lambertian ρ0 each triangle's mesh gives it (NaN: its material's), concatenated as
        :meth:`per_instance`'s materials; (1,) NaN when no mesh of the scene gives one."""
        return self._triangle_reflectance

    @property
    def triangle_object_id(self) -> np.ndarray:
        """(T,) uint64 the OSI id each triangle's mesh gives it (NO_OBJECT_ID: its instance's), concatenated as
        :meth:`per_instance`'s materials; (1,) when no mesh of the scene gives one."""
        return self._triangle_object_id

    @property
    def triangle_semantic(self) -> np.ndarray:
        """(T,) uint8 the semantic class each triangle's mesh gives it (UNLABELLED: its instance's), concatenated as
        :meth:`per_instance`'s materials; (1,) when no mesh of the scene gives one."""
        return self._triangle_semantic

    @property
    def instance_semantic(self) -> np.ndarray:
        """(K,) uint8 the semantic class of each instance, by instance index (at least one entry)."""
        return self._instance_semantic

    def per_instance(self, scene: Scene) -> tuple[np.ndarray, np.ndarray]:
        """(IR material of every triangle of every mesh, concatenated; per instance index, its mesh's first triangle).

        :attr:`triangle_reflectance`, :attr:`triangle_object_id`, :attr:`triangle_semantic` and
        :attr:`instance_semantic` follow the same scene revision."""
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
            given = [m.face_reflectance for m in scene.meshes]
            self._triangle_reflectance = NO_FACE_REFLECTANCE if all(g is None for g in given) else np.concatenate(
                [np.full(m.triangle_count, np.nan, np.float32) if g is None else g for m, g in zip(scene.meshes, given)])
            ids = [m.face_object_id for m in scene.meshes]
            # (one NO_OBJECT_ID more at the end: a scene of one labelled triangle must not read as "none")
            self._triangle_object_id = NO_FACE_OBJECT_ID if all(i is None for i in ids) else np.concatenate(
                [np.full(m.triangle_count, NO_OBJECT_ID, np.uint64) if i is None else i
                 for m, i in zip(scene.meshes, ids)] + [NO_FACE_OBJECT_ID])
            codes = [m.face_semantic for m in scene.meshes]
            # (one UNLABELLED more at the end, as the ids: one labelled triangle must not read as "none")
            self._triangle_semantic = NO_FACE_SEMANTIC if all(c is None for c in codes) else np.concatenate(
                [np.full(m.triangle_count, UNLABELLED, SEMANTIC_DTYPE) if c is None else c
                 for m, c in zip(scene.meshes, codes)] + [NO_FACE_SEMANTIC])
            # (never empty: the CUDA kernels take it as an array even for an empty scene)
            self._instance_semantic = np.concatenate([scene.instance_semantic, NO_FACE_SEMANTIC])
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


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view of ``array`` (the array itself stays as it was)."""
    view = array.view()
    view.flags.writeable = False
    return view


# _nrt=False: the loop allocates nothing, and without Numba's reference counting the arrays passed
# into the inlined return_of_hit cost no atomic incref/decref per hit (measured: with them the loop
# took 1.2–1.6× as long; as a call that is not inlined, 8×). See docs/architecture.md, "The casting contract".
# Each return is written into its record field by field (x, y, z … at fixed offsets): eleven strided field views
# as arguments instead took 1.25× as long (2.23 against 1.78 ms for an OS1-128 frame on one core).
@njit(cache=True, nogil=True, _nrt=False)  # type: ignore[call-overload]  # numba's types know no _nrt
def _fill_returns(range_m, normal_world, instance_id, instance_index, origins, directions, beam_id, R,  # type: ignore[no-untyped-def]
                  min_range_m, limit_code, limit_a, limit_b, limit_c, limit_tail_refl, limit_tail_m, limit_max,
                  limit_floor_m, triangle_material, first_triangle, primitive_id, class_code, reflectance_table, lambertian_rho0,
                  triangle_reflectance, triangle_object_id, triangle_semantic, instance_semantic, path_gain, points,
                  ray_index, intensity, keep_material, material_id, semantic):
    shared_origin = origins.shape[0] == 1
    one_gain = path_gain.shape[0] == 1  # no mirror in the scene: every ray keeps all its power
    count = 0
    for i in range(range_m.shape[0]):
        k = instance_index[i]
        if k < 0:
            continue
        o = 0 if shared_origin else i
        material = material_of_hit(k, primitive_id[i], triangle_material, first_triangle)
        face_rho0 = face_reflectance_of_hit(k, primitive_id[i], triangle_reflectance, first_triangle)
        kept, px, py, pz, sx, sy, sz, rho, percent, is_saturated = return_of_hit(
            range_m[i], material, face_rho0,
            normal_world[i, 0], normal_world[i, 1], normal_world[i, 2], origins[o, 0], origins[o, 1], origins[o, 2],
            directions[i, 0], directions[i, 1], directions[i, 2], R, min_range_m, limit_code, limit_a, limit_b,
            limit_c, limit_tail_refl, limit_tail_m, limit_max, limit_floor_m, class_code, reflectance_table,
            lambertian_rho0, path_gain[0 if one_gain else i])
        if not kept:
            continue
        point = points[count]
        point.x = px
        point.y = py
        point.z = pz
        point.range = range_m[i]
        point.reflectivity = rho
        point.normal_x = sx
        point.normal_y = sy
        point.normal_z = sz
        point.beam_id = beam_id[i]
        point.object_id = object_id_of_hit(k, primitive_id[i], instance_id[i], triangle_object_id, first_triangle)
        point.saturated = 1 if is_saturated else 0
        point.echo = 0  # one return per ray: echo formation (lidar_fmu.physics.echoes) numbers several
        semantic[count] = semantic_of_hit(k, primitive_id[i], triangle_semantic, first_triangle, instance_semantic)
        ray_index[count] = i
        intensity[count] = percent
        if keep_material:  # (only for ground truth: a frame without it stores nothing more than before)
            material_id[count] = material
        count += 1
    return count


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
    #: (T,) float32 ρ0 each triangle's mesh gives it, NaN: its material's; (1,) NaN: none does
    #: (:attr:`Materials.triangle_reflectance`)
    triangle_reflectance: np.ndarray = field(default_factory=lambda: NO_FACE_REFLECTANCE)
    #: (T,) uint64 OSI id each triangle's mesh gives it, NO_OBJECT_ID: its instance's; (1,): none does
    #: (:attr:`Materials.triangle_object_id`)
    triangle_object_id: np.ndarray = field(default_factory=lambda: NO_FACE_OBJECT_ID)
    #: (T,) uint8 semantic class each triangle's mesh gives it, UNLABELLED: its instance's; (1,): none does
    #: (:attr:`Materials.triangle_semantic`)
    triangle_semantic: np.ndarray = field(default_factory=lambda: NO_FACE_SEMANTIC)
    #: (K,) uint8 semantic class of each instance, by instance index (:attr:`Materials.instance_semantic`)
    instance_semantic: np.ndarray = field(default_factory=lambda: NO_FACE_SEMANTIC)

    def limit_args(self) -> tuple:
        """``min_range_m`` and the range limit as :func:`return_of_hit` takes them (scalars typed)."""
        code, a, b, c, tail_refl, tail_m, limit_max = self.limit_params
        return (np.float32(self.min_range_m), np.int64(code), np.float64(a), np.float64(b), np.float64(c),
                np.float64(tail_refl), np.float64(tail_m), np.float64(limit_max), self.limit_floor_m)

    def material_args(self) -> tuple:
        """The material arrays :func:`return_of_hit` takes, in order, and the per-triangle reflectances
        :func:`~.hit_rules.face_reflectance_of_hit` reads."""
        return self.class_code, self.reflectance_table, self.lambertian_rho0, self.triangle_reflectance

    def unlimited(self) -> ReturnModel:
        """This model keeping every return up to ``max_range_m``, whatever its reflectivity: what sub-rays are cast
        with, the range limit then deciding on whole echoes (:mod:`lidar_fmu.physics.echoes`)."""
        return replace(self, limit_params=limit_params(None, self.max_range_m),
                       limit_floor_m=_limit_floor(None, self.max_range_m))

    def returns_of(self, hits: CastHits, rays: CastRays) -> Returns:
        """:func:`returns_of_hits` under this model: what a backend calls after its cast."""
        return returns_of_hits(hits, rays, self)

    def continuation(self) -> Continuation:
        """Which surfaces rays go on through (transparent ones) or reflect off (mirrors), up to the sensor's budgets."""
        # budgets 0 unless the scene has a transparent or mirror triangle (return_model): the casters then skip
        # the per-hit material lookup; the tables still go along (the CUDA returns kernel reads materials there)
        layers = self.max_transparent_layers
        # a mirror's specular reflectance: its ρ at 0° (docs/physics.md#mirrors)
        specular = np.where(self.class_code == MIRROR, self.reflectance_table[:, 0], 0.0).astype(np.float32)
        return Continuation(layers, self.triangle_material, self.first_triangle, self.class_code,
                            self.max_bounces, specular)


def return_model(sensor: SensorLimits, materials: Materials, scene: Scene) -> ReturnModel:
    triangle_material, first_triangle = materials.per_instance(scene)
    limit = sensor.physics_range_limit
    # no continuation work (a material lookup on every hit) in scenes without glass or mirrors
    bounces = int(sensor.max_bounces) if materials.scene_has(MIRROR) else 0
    layers = int(sensor.max_transparent_layers) if materials.scene_has(TRANSPARENT) else 0
    return ReturnModel(float(sensor.min_range_m), float(sensor.max_range_m), limit_params(limit, sensor.max_range_m),
                       _limit_floor(limit, sensor.max_range_m), triangle_material, first_triangle,
                       materials.class_code, materials.reflectance_table, materials.lambertian_rho0, layers, bounces,
                       triangle_reflectance=materials.triangle_reflectance,
                       triangle_object_id=materials.triangle_object_id,
                       triangle_semantic=materials.triangle_semantic, instance_semantic=materials.instance_semantic)


def returns_of_hits(hits: CastHits, rays: CastRays, model: ReturnModel) -> Returns:
    """Hits of a :class:`~lidar_fmu.raycast.RayBatch` → its :class:`Returns` (in the batch's frame), on the CPU."""
    sensor_from_world = np.ascontiguousarray(np.asarray(rays.world_from_frame, np.float64)[:3, :3].T)
    n = len(hits.range_m)
    # one pass into arrays sized for every ray; each run of rays fills the front of its own part, side by side
    # on the cores, and the parts then close up
    points = np.empty(n, POINT_DTYPE)
    ray_index = np.empty(n, np.int32)
    intensity = np.empty(n, np.float32)
    material_id = np.empty(n if model.keep_material else 0, np.int16)
    semantic = np.empty(n, SEMANTIC_DTYPE)
    gain = _NO_MIRROR_GAIN if hits.path_gain is None else hits.path_gain
    runs = [(a, min(a + _FILL_RAYS, n)) for a in range(0, n, _FILL_RAYS)]

    # The inputs the loop only reads go in read-only, every one of them: Numba types a read-only array apart from
    # a writable one, so inputs that come cached (read-only) in one scene and fresh in another would otherwise
    # compile one more signature per combination — in a co-simulation's first steps, after its warm-up.
    origins, directions = _read_only(rays.origins), _read_only(rays.directions)
    scene_args = tuple(map(_read_only, (model.triangle_material, model.first_triangle, *model.material_args(),
                                        model.triangle_object_id, model.triangle_semantic, model.instance_semantic)))
    gain, sensor_from_world = _read_only(gain), _read_only(sensor_from_world)
    limit_args = tuple(_read_only(a) if isinstance(a, np.ndarray) else a for a in model.limit_args())

    def fill(a: int, b: int) -> int:
        per_ray = slice(a, b)
        return _fill_returns(
            hits.range_m[per_ray], hits.normal[per_ray], hits.instance_id[per_ray], hits.instance_index[per_ray],
            origins if origins.shape[0] == 1 else origins[per_ray], directions[per_ray],
            rays.beam_id[per_ray], sensor_from_world, *limit_args, *scene_args[:2],
            hits.primitive_id[per_ray], *scene_args[2:],
            gain if gain.shape[0] == 1 else gain[per_ray], points[per_ray],
            ray_index[per_ray], intensity[per_ray], model.keep_material, material_id[per_ray] if model.keep_material
            else material_id, semantic[per_ray])

    m = 0
    record = points.view(np.dtype((np.void, POINT_DTYPE.itemsize)))  # records moved as opaque bytes
    for (a, _), count in zip(runs, side_by_side(fill, runs)):
        if a != m:  # close up: the part's returns follow the previous parts' (numpy copies overlapping runs safely)
            record[m:m + count] = record[a:a + count]
            intensity[m:m + count] = intensity[a:a + count]
            semantic[m:m + count] = semantic[a:a + count]
            if model.keep_material:
                material_id[m:m + count] = material_id[a:a + count]
        ray_index[m:m + count] = ray_index[a:a + count] + a
        m += count
    points = points[:m]
    return Returns(points, ray_index[:m], intensity[:m], material_id[:m] if model.keep_material else None,
                   semantic[:m])


#: rays per part of the physics pass (~1 ms of work each)
_FILL_RAYS = 32_768


def returns_cloud(returns: Returns, pattern: RayPattern, sensor_pose: ArrayLike, **meta: Any) -> PointCloud:
    """The :class:`PointCloud` of a pattern's returns (decided by the CPU pass or a GPU kernel).

    Each return's ``time`` is its ray's firing time in the pattern, its ``range`` the distance along its ray in the
    unit's own convention (``pattern.range_offset_m`` added last: every stage before places points from the
    distance along the ray; docs/sensors.md, "Range convention").
    """
    _stamp(returns.points, returns.ray_index, pattern.time_offset_s, np.float32(pattern.range_offset_m))
    cloud = PointCloud(returns.points, returns.ray_index, pattern.rows, pattern.columns,
                       sensor_pose=np.asarray(sensor_pose), pattern=pattern, **meta)
    cloud.intensity_percent = returns.intensity_percent
    cloud.semantic = returns.semantic
    return cloud


@njit(cache=True, nogil=True)
def _stamp(points: np.ndarray, ray_index: np.ndarray, time_offset_s: np.ndarray, range_offset_m: np.float32) -> None:
    """Each return's ``time`` (its ray's firing time) and, where ``range_offset_m`` (float32) is not 0, its range
    plus it, in float32: one pass over the records (a gather and a float32 add over field views took 4×)."""
    offset = range_offset_m != 0
    for k in range(points.shape[0]):
        point = points[k]
        point.time = time_offset_s[ray_index[k]]
        if offset:
            point.range = point.range + range_offset_m


#: the path gain of every ray of a cast without mirrors (one value for all)
_NO_MIRROR_GAIN = np.ones(1, np.float32)
_NO_MIRROR_GAIN.setflags(write=False)

_FLOOR_BINS = 256


def _limit_floor(limit: RangeReflectivityLimit | None, max_range_m: float) -> np.ndarray:
    """r_L at reflectivities 0, 1/256, …, 1 (a per-bin lower bound, r_L being monotonic); cached per limit."""
    key = (limit, max_range_m)
    floor = _FLOOR_CACHE.get(key)
    if floor is None:
        grid = np.arange(_FLOOR_BINS + 1) / _FLOOR_BINS
        floor = (np.full(len(grid), max_range_m) if limit is None else limit.max_range_m_for(grid)).astype(np.float64)
        floor = np.nextafter(floor, -np.inf)  # strictly below, so the exact test decides ties
        _FLOOR_CACHE[key] = floor
    return floor


_FLOOR_CACHE: dict[tuple[RangeReflectivityLimit | None, float], np.ndarray] = {}

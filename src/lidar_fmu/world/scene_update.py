"""Keep a :class:`~lidar_fmu.geometry.scene.Scene` in step with OSI ground truth (docs/world.md, "Objects step by
step").

Each step adds, moves and removes instances by OSI object id. An object's mesh is its ``model_reference``'s (a
mesh file in the assets folder), else its OSI class's shared mesh (:mod:`lidar_fmu.world`), else the one unit box;
its instance pose (world pose · diag(length, width, height)) fits either into its ``base.dimension``. Meshes are
loaded once and shared; the ones no object uses are forgotten but a few, so memory stays flat.

The environment is a mesh (a parameter, or the ground truth's own ``model_reference``), else the road the ground
truth describes (built once per content), else, without lanes, a ground plane under the host. An object that
cannot be placed is left out with one warning naming its id (once per id and reason); the rest of the frame goes
on.
"""
from __future__ import annotations

import difflib
import math
import os

import numpy as np

from ..errors import LidarFmuError
from ..geometry.assets import AssetError, resolve_inside
from ..geometry.scene import Mesh, MeshError, Scene, box_mesh, find_ids, load_mesh, stood_up
from ..geometry.semantic import (
    ANIMAL,
    BARRIER,
    BICYCLE,
    BUILDING,
    BUS,
    CAR,
    KERB,
    MOTORCYCLE,
    OTHER,
    PEDESTRIAN,
    POLE,
    ROAD,
    TRUCK,
    VEGETATION,
)
from ..geometry.transforms import PoseError, pose_matrices, pose_matrix, up_axis_of
from ..osi.decode import MAX_POSITION_M, ObjectState, SensorViewFrame, decode_sensor_view, in_world, position_in_world
from ..osi.ground_truth import decode_road, decode_stationary
from ..pointcloud import ENVIRONMENT_ID_BASE
from . import build_road_world, ground_plane_mesh
from .bounds import REBUILD_AFTER_M
from .road_users import PAINT_SHARES, RIDER_HEIGHT_M, ROAD_USER_CLASSES, paint_indices, paint_of, road_user_mesh
from .roadside import stationary_mesh
from .street import STREET_STYLES, box_corners, street_seed

#: Box sides (m) an object without a model may have. Below 5e-5 m a box is thinner than the spacing of
#: float32 coordinates a few hundred metres out (6.1e-5 m at 512 m): its faces collapse onto each other in
#: the casters' float32 traversal, a degenerate box. Above 1e4 m nothing on or near a road is that big: such
#: a size is a unit or encoding error, and the box would swallow the whole scene, sensor included.
MIN_BOX_SIDE_M = 5e-5
MAX_BOX_SIDE_M = 1e4
#: loaded model meshes kept while no object uses them (objects that leave and come back are not reloaded)
UNUSED_MESHES_KEPT = 8
#: (object id, reason) pairs remembered as warned; beyond this the oldest are forgotten (and may warn again)
WARNED_KEPT = 1024
#: how far the world is built around the sensor (m) when nothing says: the terrain's reach where no lidar is named
#: (assumed: past the 120–200 m ranges of the longest-reaching spinning units in the presets)
DEFAULT_REACH_M = 200.0


def _pose_problem(obj) -> str:
    """Why ``obj``'s pose cannot be used ('' if it can): not finite, or farther than any world reaches."""
    position = [float(v) for v in obj.position_m]
    if not position_in_world(position):
        if not all(map(math.isfinite, position)):
            return "position is not finite"
        return f"position lies beyond ±{MAX_POSITION_M:g} m"
    if not all(math.isfinite(float(v)) for v in obj.orientation_rad):
        return "orientation is not finite"
    return ""


def _box_problem(dimension_m) -> str:
    """Why a box of ``dimension_m`` (length, width, height) cannot be used ('' if it can)."""
    dimension = [float(v) for v in dimension_m]
    if not all(map(math.isfinite, dimension)):
        return "dimension is not finite"
    if not min(dimension) > 0:
        return "no positive dimension"
    if min(dimension) < MIN_BOX_SIDE_M:
        return f"a dimension is below {MIN_BOX_SIDE_M:g} m"
    if max(dimension) > MAX_BOX_SIDE_M:
        return f"a dimension is above {MAX_BOX_SIDE_M:g} m"
    return ""


#: the semantic class of an object of each OSI class (:mod:`lidar_fmu.osi.decode`'s names), whatever its mesh: a
#: model file's, its class's or its box. Personal mobility (wheelchairs, scooters) counts as pedestrians, as in
#: nuScenes (``human.pedestrian.wheelchair``, ``.personal_mobility``); an OSI class not named here (a tram, a train,
#: a bridge, a sign gantry) and an object whose class OSI does not say are OTHER. docs/world.md#labels
SEMANTIC_OF_CLASS = {
    **dict.fromkeys(("car", "small_car", "compact_car", "luxury_car", "van", "vehicle", "land_vehicle"), CAR),
    **dict.fromkeys(("heavy_truck", "semitrailer", "trailer", "semitractor", "work_machine"), TRUCK),
    "bus": BUS, "motorcycle": MOTORCYCLE, "bicycle": BICYCLE, "animal": ANIMAL,
    **dict.fromkeys(("pedestrian", "wheelchair", "standup_scooter", "micromobility_device"), PEDESTRIAN),
    "building": BUILDING, "tree": VEGETATION, "vegetation": VEGETATION, "curbstone": KERB, "speed_bump": ROAD,
    **dict.fromkeys(("pole", "pylon", "delineator", "emitting_structure"), POLE),
    **dict.fromkeys(("barrier", "wall", "construction_site_element"), BARRIER),
}


def semantic_of_class(object_class: str) -> int:
    """The semantic class (:mod:`lidar_fmu.geometry.semantic`) of an OSI object of class ``object_class``."""
    return SEMANTIC_OF_CLASS.get(object_class, OTHER)


#: the ``environment`` setting that builds the static world from the ground truth (the default; "" means it too)
AUTO = "auto"
#: the ``environment`` setting for no environment at all: only what the objects give
NO_ENVIRONMENT = "none"
#: ``objects`` settings: "auto" (an object without a model of its own gets its OSI class's mesh) or "boxes" (its
#: bounding box, as OSI gives it)
OBJECT_MODES = ("auto", "boxes")
#: instance id of the ground plane of a trace without lanes (the environment's own id is ENVIRONMENT_ID_BASE)
GROUND_PLANE_ID = ENVIRONMENT_ID_BASE + 1
#: instance id of the street around the road (``environment: urban | suburban | rural | highway``)
STREET_ID = ENVIRONMENT_ID_BASE + 2


class SceneUpdater:
    """Keeps a scene in step with OSI ground truth: the environment, the stationary objects and the moving ones.

    ``environment``: a mesh file (relative ones in the assets folder), ``"auto"`` (default, also ``""``): the mesh
    the ground truth's ``model_reference`` names where it loads, else the road built from the ground truth's lanes,
    markings, signs and lights (:mod:`lidar_fmu.world`), else, for a trace without lanes, a ground plane under the
    host; ``"none"``: only what objects give; ``"urban"``, ``"suburban"``, ``"rural"`` or ``"highway"``: as
    ``"auto"``, and the street of that style around the road (:mod:`lidar_fmu.world.street`). ``objects``:
    ``"auto"`` (default) gives an object without a usable model its OSI class's mesh, ``"boxes"`` its bounding
    box. ``reach_m``: how far the terrain past the road goes (the sensors' range).

    The static part (road, stationary objects) is rebuilt only when its content changes (compared by its bytes,
    not by ids); a message without any keeps the last one's (esmini sends the road once, in its first message).
    Where the environment comes from a mesh, the static ground truth without models of its own is taken to be in
    that mesh (the road and stationary objects are not built again over it).
    """

    def __init__(self, scene: Scene, assets_dir: str = "", environment: str = "",
                 disable_self_hits: bool = True, warn=None, up_axis: str = "", objects: str = "auto",
                 reach_m: float = DEFAULT_REACH_M):
        self.scene = scene
        self.assets_dir = assets_dir or ""
        #: "y" or "z": the up axis of every mesh loaded; "" (default): by format, glTF/GLB Y-up, others Z-up
        self.up_axis = check_up_axis(up_axis)
        self.objects = check_objects(objects)
        self.reach_m = float(reach_m)
        self.disable_self_hits = disable_self_hits
        self.warn = warn or (lambda message: None)
        # model_reference → mesh (None: unusable), least recently used first (see _forget_unused_references)
        self._meshes: dict[str, Mesh | None] = {}
        self._object_mesh: dict[int, Mesh] = {}
        #: the moving objects placed by the last step: (their ids, their meshes' id()s, those meshes)
        self._placed: tuple[np.ndarray, np.ndarray, list[Mesh]] = (np.zeros(0, np.uint64), np.zeros(0, np.uint64), [])
        #: the one mesh of every object without a model: a 1 m cube, centred, stretched by the instance pose
        self.unit_box = box_mesh(1.0, 1.0, 1.0, material="osi_bounding_box", name="osi bounding box")
        self._warned: dict[tuple, None] = {}  # (object id, reason) already warned, oldest first
        self._environment_ref: str | None = None
        mode = (environment or AUTO).strip()
        #: the street's style ('' none), built around the road as "auto" builds it
        self.street = mode.lower() if mode.lower() in STREET_STYLES else ""
        self._fixed_environment = mode.lower() not in (AUTO, NO_ENVIRONMENT, *STREET_STYLES)
        self._no_environment = mode.lower() == NO_ENVIRONMENT
        self._environment_mesh: Mesh | None = None  # the environment that came from a mesh file
        self._road_part: bytes | None = None  # the road's bytes the road was built from
        self._road_mesh: Mesh | None = None
        #: where the road was built around (the host's x, y), and whether lines were cut there (then it is built
        #: again once the host has moved REBUILD_AFTER_M)
        self._road_centre: tuple[float, float] = (0.0, 0.0)
        self._road_cut = False
        self._stationary_part: bytes | None = None
        # id → (mesh, pose, semantic class) of the stationary objects
        self._stationary: dict[int, tuple[Mesh, np.ndarray, int]] = {}
        self._stationary_references: set[str] = set()  # their model references (their meshes stay loaded)
        self._ground_plane: Mesh | None = None
        if self._fixed_environment:
            # A configured environment (a parameter, not a SensorView string) may lie anywhere; a relative
            # one is taken in the assets folder. What it pulls in (MTL, buffers) stays in its own folder.
            path = mode
            if not os.path.isabs(path) and self.assets_dir:
                path = os.path.join(self.assets_dir, path)
            check_environment_word(mode, path)
            mesh = self._load(path)  # MeshError naming the file and why
            self._set_environment(mode, mesh)

    def resolve(self, reference: str) -> str:
        """The real path of a SensorView's model_reference inside the assets folder (else AssetError). An absolute
        path (a file on the machine that wrote the trace) is looked for by its last parts in the assets folder:
        "/home/me/assets/cars/car.glb" finds "cars/car.glb", else "car.glb" there (said once)."""
        try:
            return resolve_inside(self.assets_dir, reference)
        except AssetError:
            unix = reference.replace("\\", "/")
            if not (self.assets_dir and (unix.startswith("/") or os.path.splitdrive(reference)[0])):
                raise
            parts = [p for p in unix.split("/") if p and p not in (".", "..") and not p.endswith(":")]
            for k in range(1, len(parts)):
                try:
                    found = resolve_inside(self.assets_dir, "/".join(parts[k:]))
                except AssetError:
                    continue
                self.warn(f"model_reference {reference!r} is another machine's path; using "
                          f"{'/'.join(parts[k:])!r} of the assets folder")
                return found
            raise

    def mesh_for_reference(self, reference: str, fallback: str = "the bounding box") -> Mesh | None:
        """The mesh a model_reference names, loaded once; ``None`` (warned once, naming ``fallback``) if
        unusable."""
        if reference not in self._meshes:
            try:
                self._meshes[reference] = self._load(self.resolve(reference))
            except (AssetError, MeshError) as exc:
                self.warn(f"model_reference {reference!r}: {exc}; using {fallback} instead")
                self._meshes[reference] = None
        return self._meshes[reference]

    def _load(self, path: str) -> Mesh:
        """A mesh file, stood up in our Z-up frame by :attr:`up_axis` (or its format's)."""
        return stood_up(load_mesh(path), up_axis_of(path, self.up_axis))

    def _warn_once(self, object_id: int, reason: str, message: str) -> None:
        """``message``, the first time ``object_id`` has this ``reason`` (the last WARNED_KEPT pairs are known)."""
        key = (object_id, reason)
        if key in self._warned:
            return
        self._warned[key] = None
        if len(self._warned) > WARNED_KEPT:
            del self._warned[next(iter(self._warned))]
        self.warn(message)

    def _forget_unused_references(self, used: set) -> None:
        """Keep the meshes of the references in use and the UNUSED_MESHES_KEPT most recently used others."""
        cache = self._meshes
        in_use = 0
        for reference in used:
            if reference in cache:
                cache[reference] = cache.pop(reference)  # to the end: most recently used
                in_use += 1
        while len(cache) > in_use + UNUSED_MESHES_KEPT:
            del cache[next(iter(cache))]  # the least recently used reference no object uses

    def _set_environment(self, reference: str, mesh: Mesh) -> None:
        self.scene.add_instance(ENVIRONMENT_ID_BASE, mesh)
        self._environment_ref = reference
        self._environment_mesh = mesh

    # -- the environment and the static ground truth -----------------------------------------------------------
    def _update_environment(self, frame: SensorViewFrame) -> None:
        """The environment mesh the ground truth names (in auto mode), else the road built from its ground truth."""
        if self._fixed_environment or self._no_environment:
            return
        ref = frame.environment_reference
        if ref and ref != self._environment_ref:
            mesh = self.mesh_for_reference(ref, "the road built from the ground truth")
            self._environment_ref = ref
            if mesh is not None:
                self._set_environment(ref, mesh)
                self._drop_built_environment()
            elif self._environment_mesh is not None:  # the mesh in use is no longer named: the road comes back
                self._environment_mesh = None
                self.scene.remove_instance(ENVIRONMENT_ID_BASE)
                self._stationary_part = None
        if self._environment_mesh is None:
            self._update_road(frame)

    def _drop_built_environment(self) -> None:
        """The road and the ground plane built from ground truth give way to an environment mesh."""
        self._road_mesh = None
        self._road_part = None
        if STREET_ID in self.scene:
            self.scene.remove_instance(STREET_ID)
        if GROUND_PLANE_ID in self.scene:
            self.scene.remove_instance(GROUND_PLANE_ID)
        self._ground_plane = None
        self._place_stationary({})

    def _update_road(self, frame: SensorViewFrame) -> None:
        part = frame.road_part
        centre = self._host_xy(frame)
        moved = self._road_cut and math.dist(centre, self._road_centre) > REBUILD_AFTER_M
        if part and (part != self._road_part or moved):
            try:
                road = decode_road(part, frame.country_code)  # (bytes that do not parse: rejected again next time)
                built = build_road_world(road, self.reach_m, self._host_ground_z(frame), self.street,
                                         self._object_boxes(frame) if self.street else None, street_seed(part),
                                         centre)
            except MemoryError:  # the step is not published without its road; the next one builds it again
                raise RoadBuildError("the road from the ground truth could not be built: out of memory; the next "
                                     "step tries again") from None
            self._road_part, self._road_centre, self._road_cut = part, centre, built.cut_lines > 0
            if built.street is not None:
                self.scene.add_instance(STREET_ID, built.street)
            elif STREET_ID in self.scene:
                self.scene.remove_instance(STREET_ID)
            for problem in built.problems:
                self._warn_once(-1, problem, f"ground truth: {problem}")
            self._road_mesh = built.mesh
            if built.mesh is not None:
                self.scene.add_instance(ENVIRONMENT_ID_BASE, built.mesh)
                if GROUND_PLANE_ID in self.scene:
                    self.scene.remove_instance(GROUND_PLANE_ID)
            elif ENVIRONMENT_ID_BASE in self.scene:
                self.scene.remove_instance(ENVIRONMENT_ID_BASE)
        if self._road_mesh is None:
            self._place_ground_plane(frame)

    def _host_xy(self, frame: SensorViewFrame) -> tuple[float, float]:
        """Where the host stands (x, y m), the road's lines are built around; the origin without a usable host."""
        host = frame.host()
        if host is None or not position_in_world([float(v) for v in host.position_m]):
            return 0.0, 0.0
        return float(host.position_m[0]), float(host.position_m[1])

    def _object_boxes(self, frame: SensorViewFrame):
        """(K, 4, 2) horizontal corners of the boxes of ``frame``'s objects, moving and stationary, the street
        keeps out of (those whose pose and size are usable)."""
        objects = list(frame.objects)
        if frame.stationary_part:
            objects += decode_stationary(frame.stationary_part)[0]
        usable = [o for o in objects if not _pose_problem(o) and not _box_problem(o.dimension_m)]
        return box_corners(np.array([o.position_m for o in usable], float).reshape(-1, 3),
                           np.array([o.orientation_rad[2] for o in usable], float),
                           np.array([o.dimension_m for o in usable], float).reshape(-1, 3))

    def _host_ground_z(self, frame: SensorViewFrame) -> float | None:
        """The height of the host's wheels on the ground (the bottom of its box); None without a host."""
        host = frame.host()
        if host is None or not all(math.isfinite(float(v)) for v in host.position_m + host.dimension_m):
            return None
        return float(host.position_m[2]) - 0.5 * float(host.dimension_m[2])

    def _place_ground_plane(self, frame: SensorViewFrame) -> None:
        """A trace without lanes: a ground plane under the host, at its wheels' height (none without a host)."""
        ground = self._host_ground_z(frame)
        if ground is None or not in_world(ground):
            return
        host = frame.host()
        assert host is not None  # (there is one: it gave the ground height)
        if self._ground_plane is None:
            self._ground_plane = ground_plane_mesh(self.reach_m)
            self.scene.add_instance(GROUND_PLANE_ID, self._ground_plane)
        pose = pose_matrix((host.position_m[0], host.position_m[1], ground))
        self.scene.set_pose(GROUND_PLANE_ID, pose)

    def _update_stationary(self, frame: SensorViewFrame) -> None:
        """The stationary objects, placed again when their content changed (kept when a message sends none)."""
        part = frame.stationary_part
        if not part or part == self._stationary_part:
            return
        objects, problems = decode_stationary(part)  # (bytes that do not parse: rejected again next time)
        self._stationary_part = part
        self._stationary_references = {o.model_reference for o in objects if o.model_reference}
        for problem in problems:
            self._warn_once(-1, problem, f"ground truth: {problem}")
        placed: dict[int, tuple[Mesh, np.ndarray, int]] = {}
        for obj in objects:
            if obj.id in placed:
                self._warn_once(obj.id, "duplicate", f"stationary_object {obj.id} appears more than once; the first "
                                "one is used")
                continue
            entry = self._stationary_entry(obj)
            if entry is not None:
                placed[obj.id] = entry
        self._place_stationary(placed)

    def _stationary_entry(self, obj: ObjectState) -> tuple[Mesh, np.ndarray, int] | None:
        """(mesh, instance pose, semantic class) of a stationary object, or None (warned) when it is left out."""
        if obj.id >= ENVIRONMENT_ID_BASE:
            self._warn_once(obj.id, "id", f"object id {obj.id} is beyond the supported range; ignored")
            return None
        mesh = None
        if obj.model_reference:
            mesh = self.mesh_for_reference(obj.model_reference, self._fallback_name(obj))
        if mesh is not None:
            return mesh, obj.pose, semantic_of_class(obj.object_class)
        if self._environment_mesh is not None:  # an environment mesh holds what stands in it
            return None
        problem = _box_problem(obj.dimension_m)
        if problem:
            self._warn_once(obj.id, problem, f"stationary_object {obj.id} has no usable model and {problem} "
                            f"(dimension {list(obj.dimension_m)} m); ignored")
            return None
        pose = obj.pose
        if self.objects == "boxes" or not obj.object_class:
            mesh, scaled = self.unit_box, True
        else:
            problems: list[str] = []
            mesh, scaled = stationary_mesh(obj, problems)
            for problem in problems:
                self._warn_once(obj.id, problem, f"ground truth: {problem}")
        if scaled:
            pose[:3, :3] *= np.asarray(obj.dimension_m, float)[None, :]
        return mesh, pose, semantic_of_class(obj.object_class)

    def _place_stationary(self, placed: dict[int, tuple[Mesh, np.ndarray, int]]) -> None:
        for gone in set(self._stationary) - set(placed):
            if gone in self.scene and gone not in self._object_mesh:
                self.scene.remove_instance(gone)
        for object_id, (mesh, pose, semantic) in placed.items():
            if object_id in self._object_mesh:  # a moving object holds that id: it keeps it
                self._warn_once(object_id, "shared id", f"stationary_object {object_id} shares its id with a moving "
                                "object; the moving object is placed")
                continue
            self.scene.add_instance(object_id, mesh, pose, semantic)
        self._stationary = placed

    # -- moving objects ---------------------------------------------------------------------------------------
    def _fallback_name(self, obj: ObjectState) -> str:
        if self.objects == "auto" and obj.object_class:
            return f"the mesh of its class ({obj.object_class})"
        return "the bounding box"

    def _class_mesh(self, object_class: str, paint: str, height_m: float) -> Mesh | None:
        """The shared mesh of a moving object's OSI class in ``paint`` (None: it has none, or objects are boxes)."""
        if self.objects != "auto" or not object_class:
            return None
        if object_class not in ROAD_USER_CLASSES:
            return None
        return road_user_mesh(object_class, paint, height_m >= RIDER_HEIGHT_M)

    def _placeable(self, frame: SensorViewFrame) -> tuple[np.ndarray, np.ndarray, list[Mesh], np.ndarray]:
        """(the indices into ``frame.moving`` of the objects placed, in the view's order; each one's mesh as an index
        into the list of meshes that follows; their scales (K, 3)). The common object (the first of its id, in range,
        not the host, a usable pose and box, no model of its own) is checked for all at once, and its class mesh
        found once per class, paint and rider; only the others go through :meth:`_placed_one`, one by one, in order,
        each with its warning."""
        moving = frame.moving
        ids, dimensions = moving.ids, moving.dimension_m
        first = moving.first_of_id()
        common = (first & (ids < ENVIRONMENT_ID_BASE) & in_world(moving.position_m, axis=1)
                  & np.isfinite(moving.orientation_rad).all(axis=1)
                  & np.isfinite(dimensions).all(axis=1) & (dimensions.min(axis=1) >= MIN_BOX_SIDE_M)
                  & (dimensions.max(axis=1) <= MAX_BOX_SIDE_M) & ~moving.referenced)
        if self.disable_self_hits and frame.host_vehicle_id is not None:
            common &= ids != np.uint64(frame.host_vehicle_id)
        # the common objects' (class, paint, rider) as one number each, and a mesh per number met
        paint = paint_indices(ids[common]) if self.objects == "auto" else 0
        tall = dimensions[common, 2] >= RIDER_HEIGHT_M
        keys, inverse = np.unique((moving.class_index[common] * len(PAINT_SHARES) + paint) * 2 + tall,
                                  return_inverse=True)
        meshes = [self._class_mesh(moving.class_names[key // (2 * len(PAINT_SHARES))],
                                   PAINT_SHARES[key // 2 % len(PAINT_SHARES)][0] if self.objects == "auto" else "",
                                   RIDER_HEIGHT_M if key % 2 else 0.0) or self.unit_box for key in keys.tolist()]
        mesh_index = np.zeros(len(ids), np.int64)
        mesh_index[common] = inverse.reshape(-1)
        scales = dimensions.copy()
        placed = common.copy()
        for k in np.flatnonzero(~common).tolist():  # (the uncommon few, each with its warning)
            entry = self._placed_one(moving.state(k), bool(first[k]), frame.host_vehicle_id)
            if entry is None:
                continue
            placed[k] = True
            meshes.append(entry[0])
            mesh_index[k], scales[k] = len(meshes) - 1, entry[1]
        kept = np.flatnonzero(placed)
        return kept, mesh_index[kept], meshes, scales[kept]

    def _placed_one(self, obj: ObjectState, first: bool, host_id: int | None) -> tuple[Mesh, tuple] | None:
        """(mesh, scale) of an object that is not the common case, or None (warned once) when it is left out."""
        if obj.id >= ENVIRONMENT_ID_BASE:
            self._warn_once(obj.id, "id", f"object id {obj.id} is beyond the supported range; ignored")
            return None
        if not first:  # the first of an id is taken, even when it is unusable
            self._warn_once(obj.id, "duplicate",
                            f"object id {obj.id} appears more than once in one SensorView; the first one is used")
            return None
        if self.disable_self_hits and obj.id == host_id:
            return None
        problem = _pose_problem(obj)
        if problem:
            self._warn_once(obj.id, problem, f"object {obj.id}: {problem} (position {list(obj.position_m)} m, "
                            f"orientation {list(obj.orientation_rad)} rad); ignored")
            return None
        mesh = self.mesh_for_reference(obj.model_reference, self._fallback_name(obj)) if obj.model_reference else None
        if mesh is not None:
            return mesh, (1.0, 1.0, 1.0)
        problem = _box_problem(obj.dimension_m)
        if problem:
            self._warn_once(obj.id, problem, f"object {obj.id} has no usable model and {problem} "
                            f"(dimension {list(obj.dimension_m)} m); ignored")
            return None
        return (self._class_mesh(obj.object_class, paint_of(obj.id), float(obj.dimension_m[2])) or self.unit_box,
                obj.dimension_m)

    def apply(self, frame: SensorViewFrame) -> None:
        """Bring the scene to ``frame``'s objects (poses in world, m/rad).

        An object that cannot be placed — an id beyond the supported range, a
        pose that is not finite or lies beyond ±MAX_POSITION_M, or, without a
        usable model, a box side that is not finite or outside
        [MIN_BOX_SIDE_M, MAX_BOX_SIDE_M] — is left out of the scene with one
        warning naming its id (once per id and reason, not every step); the
        other objects go on. Of objects that share an id, the first is used,
        its mesh and its pose.
        """
        scene = self.scene
        for object_id, why in frame.left_out:  # the decoder's: only that object is lost
            self._warn_once(object_id, why, why)
        self._update_environment(frame)
        self._update_stationary(frame)
        placed, mesh_index, meshes, scales = self._placeable(frame)
        moving = frame.moving
        ids = moving.ids[placed]
        poses = pose_matrices(moving.position_m[placed], moving.orientation_rad[placed])
        poses[:, :3, :3] *= scales[:, None, :]  # pose · diag(length, width, height, 1)
        # which objects keep their mesh, all at once: each mesh named by its id(), the last step's meshes held
        # alive (:attr:`_placed`) so that no new mesh takes one of their ids
        mesh_keys = np.array([id(mesh) for mesh in meshes], np.uint64)[mesh_index]
        before_ids, before_keys, _ = self._placed
        index, found = find_ids(before_ids, ids)
        same = found.copy()
        same[found] = before_keys[index[found]] == mesh_keys[found]
        for k in np.flatnonzero(~same).tolist():  # new objects, and those whose mesh changed
            object_id, mesh = int(ids[k]), meshes[mesh_index[k]]
            scene.add_instance(object_id, mesh, poses[k], semantic_of_class(moving.object_class(placed[k])))
            self._object_mesh[object_id] = mesh
        if same.any():
            scene.set_poses(ids[same], poses[same])
        self._placed = (ids, mesh_keys, meshes)
        if len(self._object_mesh) > len(ids):  # (every object placed is in it: some are gone)
            for gone in set(self._object_mesh) - set(ids.tolist()):
                del self._object_mesh[gone]
                if gone in self._stationary:  # a stationary object of that id comes back
                    scene.add_instance(gone, *self._stationary[gone])
                else:
                    scene.remove_instance(gone)
        referenced = placed[moving.referenced[placed]]
        self._forget_unused_references({moving.references[k] for k in referenced.tolist()}
                                       | self._stationary_references | {self._environment_ref})


class RoadBuildError(LidarFmuError):
    """The road from the ground truth could not be built this step (the step is not published; the next tries)."""


class SceneSettingError(LidarFmuError, ValueError):
    """A scene setting (``objects``) the model does not know."""


def check_objects(objects) -> str:
    """``objects`` as "auto" or "boxes"; :class:`SceneSettingError` for anything else."""
    value = (objects or "auto").strip().lower()
    if value not in OBJECT_MODES:
        raise SceneSettingError(f"objects must be 'auto' (an object without a model gets its OSI class's mesh) or "
                                f"'boxes' (its bounding box), got {objects!r}")
    return value


#: the ``environment`` words (a mesh file otherwise)
ENVIRONMENT_WORDS = (AUTO, NO_ENVIRONMENT, *STREET_STYLES)


def check_environment_word(environment: str, path: str) -> None:
    """:class:`SceneSettingError` in one line for an ``environment`` that is neither a word of
    :data:`ENVIRONMENT_WORDS` nor a file (``path``) but looks like a misspelt word (no extension, no folder)."""
    word = environment.strip()
    if os.path.exists(path) or os.path.splitext(word)[1] or "/" in word or "\\" in word:
        return
    close = difflib.get_close_matches(word.lower(), ENVIRONMENT_WORDS, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise SceneSettingError(f"environment: unknown value {word!r}{hint}; known: {', '.join(ENVIRONMENT_WORDS)} "
                            "or a mesh file")


def check_up_axis(up_axis) -> str:
    """``up_axis`` as "y", "z" or "" (by format); :class:`~lidar_fmu.geometry.transforms.PoseError` for anything else."""
    value = (up_axis or "").strip().lower()
    if value not in ("", "y", "z"):
        raise PoseError(f"up_axis must be 'y', 'z' or empty (by format: glTF/GLB Y-up, others Z-up), got {up_axis!r}")
    return value


def mounting_of_parameters(parameters: dict) -> np.ndarray:
    """The default mounting (4×4 vehicle_from_sensor) the FMU's ``mounting_position_*`` (m) and
    ``mounting_orientation_*`` (roll, pitch, yaw, rad) parameters give; absent ones are 0."""
    return pose_matrix(
        tuple(float(parameters.get(f"mounting_position_{a}", 0.0)) for a in "xyz"),
        tuple(float(parameters.get(f"mounting_orientation_{a}", 0.0)) for a in ("roll", "pitch", "yaw")))


class SensorViewScene:
    """The scene and the sensor's world pose per SensorView, rebuilt the way the FMU does — for logging a replay.

    The FMU keeps its scene to itself; a host (``lidar-fmu replay --rerun``) rebuilds one from the same
    SensorView bytes with the same :class:`SceneUpdater`
    and parameters (those of :func:`lidar_fmu.tools.replay.fmu_parameters`).
    """

    def __init__(self, parameters: dict, reach_m: float | None = None):
        if reach_m is None:  # as far as the model's terrain reaches: its farthest-reaching lidar
            reach_m = DEFAULT_REACH_M
            if parameters.get("sensor"):
                from ..sensors.rig import load_rig

                reach_m = max(float(member.sensor.max_range_m) for member in load_rig(parameters["sensor"]))
        self.scene = Scene()
        # warnings (unusable model references, …) are the FMU's to report: this copy stays silent
        self.updater = SceneUpdater(self.scene, assets_dir=parameters.get("assets", "") or "",
                                    environment=parameters.get("environment", "") or "",
                                    disable_self_hits=bool(parameters.get("disable_self_hits", True)),
                                    up_axis=parameters.get("up_axis", "") or "",
                                    objects=parameters.get("objects", "") or "auto", reach_m=reach_m)
        self.default_mounting = mounting_of_parameters(parameters)

    def update(self, sensor_view: bytes, decoded=None) -> np.ndarray:
        """Apply one SensorView to :attr:`scene`; its world_from_sensor pose (identity if it has none).
        ``decoded``: the view already decoded (:func:`~lidar_fmu.osi.decode.decode_sensor_view`), not decoded
        again."""
        if not sensor_view:
            return np.eye(4)
        frame = decode_sensor_view(sensor_view) if decoded is None else decoded
        self.updater.apply(frame)
        return sensor_pose_in(frame, self.default_mounting)


def sensor_pose_in(frame, default_mounting: np.ndarray) -> np.ndarray:
    """The world_from_sensor pose of a decoded SensorView's lidar: the host vehicle's pose (identity without one)
    times the view's mounting, else ``default_mounting`` (:func:`mounting_of_parameters`)."""
    mounting = frame.mounting_pose if frame.mounting_pose is not None else default_mounting
    vehicle = frame.host_pose()
    return (np.eye(4) if vehicle is None else vehicle) @ mounting

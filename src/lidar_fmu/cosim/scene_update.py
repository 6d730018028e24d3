"""Keep a :class:`~lidar_fmu.geometry.scene.Scene` in step with OSI ground truth.

Each step adds, moves and removes instances by OSI object id. An object's
mesh comes from its ``model_reference`` (a mesh file resolved against the
assets directory, authored with its origin at the bounding-box centre, x
forward, y left, z up), else it is the one unit box every such object shares,
stretched to its ``base.dimension`` by its instance pose (world pose ·
diag(length, width, height, 1)): sizes that change every step (tracked
objects) only change poses, never add meshes. Meshes are loaded once and
shared by every object that uses them; a loaded mesh no object has used for a
while is forgotten (a few stay, for objects that come back), so memory stays
flat however many objects and files a run goes through.

An object that cannot be placed is left out with one warning naming its id
(once per id and reason); the rest of the frame goes on.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..geometry.assets import AssetError, resolve_inside
from ..geometry.scene import Mesh, MeshError, Scene, box_mesh, load_mesh, stood_up
from ..geometry.transforms import PoseError, pose_matrices, pose_matrix, up_axis_of
from ..osi.decode import MAX_POSITION_M, SensorViewFrame, decode_sensor_view
from ..pointcloud import ENVIRONMENT_ID_BASE

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


def _pose_problem(obj) -> str:
    """Why ``obj``'s pose cannot be used ('' if it can): not finite, or farther than any world reaches."""
    # plain floats, not numpy: this runs for every object of every step
    position = [float(v) for v in obj.position_m]
    if not all(map(math.isfinite, position)):
        return "position is not finite"
    if max(map(abs, position)) > MAX_POSITION_M:
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


class SceneUpdater:
    def __init__(self, scene: Scene, assets_dir: str = "", environment: str = "",
                 disable_self_hits: bool = True, warn=None, up_axis: str = ""):
        self.scene = scene
        self.assets_dir = assets_dir or ""
        #: "y" or "z": the up axis of every mesh loaded; "" (default): by format, glTF/GLB Y-up, others Z-up
        self.up_axis = check_up_axis(up_axis)
        self.disable_self_hits = disable_self_hits
        self.warn = warn or (lambda message: None)
        # model_reference → mesh (None: unusable), least recently used first (see _forget_unused_references)
        self._meshes: dict[str, Mesh | None] = {}
        self._object_mesh: dict[int, Mesh] = {}
        #: the one mesh of every object without a model: a 1 m cube, centred, stretched by the instance pose
        self.unit_box = box_mesh(1.0, 1.0, 1.0, material="osi_bounding_box", name="osi bounding box")
        self._warned: dict[tuple, None] = {}  # (object id, reason) already warned, oldest first
        self._environment_ref: str | None = None
        self._fixed_environment = bool(environment)
        if environment:
            # A configured environment (a parameter, not a SensorView string) may lie anywhere; a relative
            # one is taken in the assets folder. What it pulls in (MTL, buffers) stays in its own folder.
            path = environment
            if not os.path.isabs(path) and self.assets_dir:
                path = os.path.join(self.assets_dir, path)
            mesh = self._load(path)  # MeshError naming the file and why
            self._set_environment(environment, mesh)

    def resolve(self, reference: str) -> str:
        """The real path of a SensorView's model_reference, strictly inside the assets folder (else AssetError)."""
        return resolve_inside(self.assets_dir, reference)

    def mesh_for_reference(self, reference: str) -> Mesh | None:
        """The mesh a model_reference names, loaded once; ``None`` (warned once) if unusable."""
        if reference not in self._meshes:
            try:
                self._meshes[reference] = self._load(self.resolve(reference))
            except (AssetError, MeshError) as exc:
                self.warn(f"model_reference {reference!r}: {exc}; using the bounding box instead")
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
        ref = frame.environment_reference
        if not self._fixed_environment and ref and ref != self._environment_ref:
            mesh = self.mesh_for_reference(ref)
            if mesh is not None:
                self._set_environment(ref, mesh)
            self._environment_ref = ref
        claimed = set()
        placed, meshes, scales = [], [], []
        for obj in frame.objects:
            if obj.id >= ENVIRONMENT_ID_BASE:
                self._warn_once(obj.id, "id", f"object id {obj.id} is beyond the supported range; ignored")
                continue
            if obj.id in claimed:
                self._warn_once(obj.id, "duplicate",
                                f"object id {obj.id} appears more than once in one SensorView; the first one is used")
                continue
            claimed.add(obj.id)  # even when it is unusable: a later object of that id is never taken instead
            if self.disable_self_hits and obj.id == frame.host_vehicle_id:
                continue
            problem = _pose_problem(obj)
            if problem:
                self._warn_once(obj.id, problem, f"object {obj.id}: {problem} (position {list(obj.position_m)} m, "
                                f"orientation {list(obj.orientation_rad)} rad); ignored")
                continue
            mesh = self.mesh_for_reference(obj.model_reference) if obj.model_reference else None
            scale = (1.0, 1.0, 1.0)
            if mesh is None:
                problem = _box_problem(obj.dimension_m)
                if problem:
                    self._warn_once(obj.id, problem, f"object {obj.id} has no usable model and {problem} "
                                    f"(dimension {list(obj.dimension_m)} m); ignored")
                    continue
                mesh, scale = self.unit_box, obj.dimension_m
            placed.append(obj)
            meshes.append(mesh)
            scales.append(scale)
        poses = np.zeros((0, 4, 4))
        if placed:
            poses = pose_matrices([o.position_m for o in placed], [o.orientation_rad for o in placed])
            poses[:, :3, :3] *= np.asarray(scales, float)[:, None, :]  # pose · diag(length, width, height, 1)
        moved_ids, moved_poses = [], []
        for obj, mesh, pose in zip(placed, meshes, poses):
            if self._object_mesh.get(obj.id) is mesh:
                moved_ids.append(obj.id)
                moved_poses.append(pose)
            else:
                scene.add_instance(obj.id, mesh, pose)
                self._object_mesh[obj.id] = mesh
        if moved_ids:
            scene.set_poses(moved_ids, moved_poses)
        for gone in set(self._object_mesh) - {o.id for o in placed}:
            scene.remove_instance(gone)
            del self._object_mesh[gone]
        self._forget_unused_references({o.model_reference for o in placed if o.model_reference}
                                       | {self._environment_ref})


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

    def __init__(self, parameters: dict):
        self.scene = Scene()
        # warnings (unusable model references, …) are the FMU's to report: this copy stays silent
        self.updater = SceneUpdater(self.scene, assets_dir=parameters.get("assets", "") or "",
                                    environment=parameters.get("environment", "") or "",
                                    disable_self_hits=bool(parameters.get("disable_self_hits", True)),
                                    up_axis=parameters.get("up_axis", "") or "")
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

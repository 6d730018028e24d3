"""Keep a :class:`~lidar_fmu.scene.Scene` in step with OSI ground truth.

Each step adds, moves and removes instances by OSI object id. An object's
mesh comes from its ``model_reference`` (a mesh file resolved against the
assets directory, authored with its origin at the bounding-box centre, x
forward, y left, z up), else from a box of its ``base.dimension``. Meshes are
loaded once and shared by every object that uses them.
"""
from __future__ import annotations

import os

import numpy as np

from .assets import AssetError, resolve_inside
from .osi.decode import SensorViewFrame
from .pointcloud import ENVIRONMENT_ID_BASE
from .scene import Mesh, MeshError, Scene, box_mesh, load_mesh
from .transforms import pose_matrices


class SceneUpdater:
    def __init__(self, scene: Scene, assets_dir: str = "", environment: str = "",
                 disable_self_hits: bool = True, warn=None):
        self.scene = scene
        self.assets_dir = assets_dir or ""
        self.disable_self_hits = disable_self_hits
        self.warn = warn or (lambda message: None)
        self._meshes: dict[object, Mesh | None] = {}  # model_reference or box key → mesh (None: unusable)
        self._object_mesh: dict[int, Mesh] = {}
        self._environment_ref = None
        self._fixed_environment = bool(environment)
        if environment:
            # A configured environment (a parameter, not a SensorView string) may lie anywhere; a relative
            # one is taken in the assets folder. What it pulls in (MTL, buffers) stays in its own folder.
            path = environment
            if not os.path.isabs(path) and self.assets_dir:
                path = os.path.join(self.assets_dir, path)
            mesh = load_mesh(path)  # MeshError naming the file and why
            self._set_environment(environment, mesh)

    def resolve(self, reference: str) -> str:
        """The real path of a SensorView's model_reference, strictly inside the assets folder (else AssetError)."""
        return resolve_inside(self.assets_dir, reference)

    def mesh_for_reference(self, reference: str) -> Mesh | None:
        """The mesh a model_reference names, loaded once; ``None`` (warned once) if unusable."""
        if reference not in self._meshes:
            try:
                self._meshes[reference] = load_mesh(self.resolve(reference))
            except (AssetError, MeshError) as exc:
                self.warn(f"model_reference {reference!r}: {exc}; using the bounding box instead")
                self._meshes[reference] = None
        return self._meshes[reference]

    def box_for(self, dimension_m) -> Mesh:
        key = ("box",) + tuple(np.round(np.asarray(dimension_m, float), 4))
        mesh = self._meshes.get(key)
        if mesh is None:
            mesh = box_mesh(*key[1:], material="osi_bounding_box", name=f"box {key[1:]}")
            self._meshes[key] = mesh
        return mesh

    def _set_environment(self, reference: str, mesh: Mesh) -> None:
        self.scene.add_instance(ENVIRONMENT_ID_BASE, mesh)
        self._environment_ref = reference

    def apply(self, frame: SensorViewFrame) -> None:
        """Bring the scene to ``frame``'s objects (poses in world, m/rad)."""
        scene = self.scene
        ref = frame.environment_reference
        if not self._fixed_environment and ref and ref != self._environment_ref:
            mesh = self.mesh_for_reference(ref)
            if mesh is not None:
                self._set_environment(ref, mesh)
            self._environment_ref = ref
        seen = set()
        placed = [o for o in frame.objects if o.id < ENVIRONMENT_ID_BASE]
        poses = pose_matrices([o.position_m for o in placed], [o.orientation_rad for o in placed]) if placed else []
        pose_of = dict(zip((o.id for o in placed), poses))
        moved_ids, moved_poses = [], []
        for obj in frame.objects:
            if obj.id >= ENVIRONMENT_ID_BASE:
                self.warn(f"object id {obj.id} is beyond the supported range; ignored")
                continue
            if obj.id in seen:
                self.warn(f"object id {obj.id} appears twice in one SensorView; the first one is used")
                continue
            if self.disable_self_hits and obj.id == frame.host_vehicle_id:
                continue
            mesh = self.mesh_for_reference(obj.model_reference) if obj.model_reference else None
            if mesh is None:
                if not min(obj.dimension_m) > 0:
                    self.warn(f"object {obj.id} has no usable model and no positive dimension; ignored")
                    continue
                mesh = self.box_for(obj.dimension_m)
            seen.add(obj.id)
            if self._object_mesh.get(obj.id) is mesh:
                moved_ids.append(obj.id)
                moved_poses.append(pose_of[obj.id])
            else:
                scene.add_instance(obj.id, mesh, pose_of[obj.id])
                self._object_mesh[obj.id] = mesh
        if moved_ids:
            scene.set_poses(moved_ids, moved_poses)
        for gone in set(self._object_mesh) - seen:
            scene.remove_instance(gone)
            del self._object_mesh[gone]

"""Scene graph of triangle meshes and their instances.

A :class:`Mesh` is plain data (vertices, faces, per-triangle visual material) in
its own frame. A :class:`Scene` places meshes as instances: ``instance_id →
(mesh, 4×4 pose)``. One mesh may be placed many times without copies; moving an
instance only writes its pose, so backends keep their per-mesh acceleration
structures and only re-read the instance table. A mesh no instance uses any
more leaves the scene, so a long run that goes through many meshes holds only
those in use (backends drop what they built for it when ``revision`` changes).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from ..errors import LidarFmuError
from .assets import AssetError, folder_resolver, max_mesh_bytes, ply_face_reflectance, read_mesh_file
from .openmaterial import OpenMaterialError, SurfaceProperties, mapped_materials, placed_vertices, read_asset
from .semantic import SEMANTIC_CLASSES, UNLABELLED
from .transforms import check_pose, up_axis_pose

#: Material name given to triangles whose file names none (PLY, STL, bare OBJ).
DEFAULT_MATERIAL = "default"
#: :attr:`Mesh.face_object_id` of a triangle that carries no OSI id of its own: a return there takes its
#: instance's id (the value is OSI's "no object", 2**64 − 1, which no OSI id may take)
INSTANCE_ID = np.uint64(2**64 - 1)


class MeshError(LidarFmuError, ValueError):
    """A mesh file could not be read or holds no usable triangles."""


@dataclass(frozen=True, eq=False)
class Mesh:
    """Triangle mesh in its own frame (metres).

    ``face_material[i]`` indexes ``material_names`` and names the *visual*
    material of triangle ``i`` as written in the source file (e.g. an MTL
    ``newmtl`` or a glTF material name). ``face_reflectance[i]``, where the
    file gives one (a PLY face property ``reflectivity``), is triangle ``i``'s
    own Lambertian reflectance ρ0 (0–1) at the sensor's wavelength, which
    overrides its material's; NaN for triangles without one, ``None`` when no
    triangle has one. ``face_object_id[i]``, where given, is the OSI id a
    return on triangle ``i`` reports (one mesh of a whole road labels each
    lane, marking and sign with its own id); :data:`INSTANCE_ID` for
    triangles that take their instance's id, ``None`` when no triangle has one. ``face_semantic[i]``, where
    given, is triangle ``i``'s semantic class (:mod:`lidar_fmu.geometry.semantic`: a lane is road, its paint lane
    marking); ``UNLABELLED`` for triangles that take their instance's class, ``None`` when no triangle has one.
    """

    vertices: np.ndarray  # (V, 3) float32, m
    faces: np.ndarray  # (F, 3) int32 vertex indices
    face_material: np.ndarray  # (F,) int32 index into material_names
    material_names: tuple[str, ...]
    name: str = "mesh"
    face_reflectance: np.ndarray | None = None  # (F,) float32 ρ0 0–1, NaN: the material's; None: none given
    face_object_id: np.ndarray | None = None  # (F,) uint64 OSI id, INSTANCE_ID: the instance's; None: none given
    #: visual material name → what the asset's own material files say of it (None: nothing)
    material_properties: dict[str, SurfaceProperties] | None = None
    face_semantic: np.ndarray | None = None  # (F,) uint8 class, UNLABELLED: the instance's; None: none given

    def __post_init__(self) -> None:
        v = np.ascontiguousarray(self.vertices, dtype=np.float32)
        f = np.ascontiguousarray(self.faces, dtype=np.int32)
        m = np.ascontiguousarray(self.face_material, dtype=np.int32)
        if v.ndim != 2 or v.shape[1] != 3 or f.ndim != 2 or f.shape[1] != 3:
            raise MeshError(f"mesh {self.name!r}: vertices must be (V,3) and faces (F,3)")
        if len(f) == 0:
            raise MeshError(f"mesh {self.name!r} has no triangles")
        if f.min() < 0 or f.max() >= len(v):
            raise MeshError(f"mesh {self.name!r} has face indices outside its {len(v)} vertices")
        if not np.all(np.isfinite(v)):
            raise MeshError(f"mesh {self.name!r} has NaN or infinite vertices")
        if m.shape != (len(f),) or (len(m) and (m.min() < 0 or m.max() >= len(self.material_names))):
            raise MeshError(f"mesh {self.name!r}: face_material must index material_names for every face")
        if self.face_reflectance is not None:
            rho = np.ascontiguousarray(self.face_reflectance, dtype=np.float32)
            given = rho[~np.isnan(rho)] if rho.shape == (len(f),) else None
            if given is None or given.min(initial=0.0) < 0 or given.max(initial=0.0) > 1:
                raise MeshError(f"mesh {self.name!r}: face_reflectance must give every face a value in 0–1 or NaN")
            object.__setattr__(self, "face_reflectance", rho)
        if self.face_object_id is not None:
            ids = np.ascontiguousarray(self.face_object_id, dtype=np.uint64)
            if ids.shape != (len(f),):
                raise MeshError(f"mesh {self.name!r}: face_object_id must give every face an id")
            object.__setattr__(self, "face_object_id", ids)
        if self.face_semantic is not None:
            codes = np.ascontiguousarray(self.face_semantic, dtype=np.uint8)
            if codes.shape != (len(f),) or (len(codes) and codes.max() >= len(SEMANTIC_CLASSES)):
                raise MeshError(f"mesh {self.name!r}: face_semantic must give every face a semantic class code")
            object.__setattr__(self, "face_semantic", codes)
        object.__setattr__(self, "vertices", v)
        object.__setattr__(self, "faces", f)
        object.__setattr__(self, "face_material", m)
        object.__setattr__(self, "material_names", tuple(self.material_names))

    @property
    def triangle_count(self) -> int:
        return len(self.faces)

    @cached_property
    def bounds(self) -> np.ndarray:
        """(2, 3) axis-aligned bounds [min, max] of the vertices that faces use."""
        used = self.vertices[self.faces.ravel()]
        return np.stack([used.min(axis=0), used.max(axis=0)])

    @cached_property
    def radius_m(self) -> float:
        """The distance from the mesh's origin to its farthest vertex that faces use (0 without faces): the
        bounding sphere of its instances, about their origins."""
        used = self.vertices[self.faces.ravel()].astype(np.float64)
        return float(np.sqrt((used**2).sum(axis=1)).max(initial=0.0))

    def triangles(self) -> np.ndarray:
        """(F, 3, 3) float32 triangle corners."""
        return self.vertices[self.faces]


def merge(shapes: Sequence[tuple[ArrayLike, ArrayLike]]) -> tuple[np.ndarray, np.ndarray]:
    """Shapes ``(vertices (V, 3) m, faces (F, 3))`` joined into one, each one's face indices offset past the
    vertices before it."""
    vertices = [np.asarray(v, float) for v, _ in shapes]
    offsets = np.cumsum([0] + [len(v) for v in vertices[:-1]])
    faces = [np.asarray(f, np.int64) + o for (_, f), o in zip(shapes, offsets)]
    return np.concatenate(vertices), np.concatenate(faces)


def concatenate(meshes: list[Mesh], name: str = "mesh") -> Mesh:
    """Merge meshes into one, unifying material names (and keeping per-face reflectances where given)."""
    names: dict[str, int] = {}
    mats = []
    for mesh in meshes:
        remap = np.array([names.setdefault(n, len(names)) for n in mesh.material_names], dtype=np.int32)
        mats.append(remap[mesh.face_material])
    reflectance = None
    if any(mesh.face_reflectance is not None for mesh in meshes):
        reflectance = np.concatenate([np.full(mesh.triangle_count, np.nan, np.float32) if mesh.face_reflectance is None
                                      else mesh.face_reflectance for mesh in meshes])
    object_id = None
    if any(mesh.face_object_id is not None for mesh in meshes):
        object_id = np.concatenate([np.full(mesh.triangle_count, INSTANCE_ID) if mesh.face_object_id is None
                                    else mesh.face_object_id for mesh in meshes])
    semantic = None
    if any(mesh.face_semantic is not None for mesh in meshes):
        semantic = np.concatenate([np.full(mesh.triangle_count, UNLABELLED, np.uint8) if mesh.face_semantic is None
                                   else mesh.face_semantic for mesh in meshes])
    properties = {k: v for mesh in meshes for k, v in (mesh.material_properties or {}).items()} or None
    vertices, faces = merge([(mesh.vertices, mesh.faces) for mesh in meshes])
    return Mesh(vertices, faces, np.concatenate(mats), tuple(names), name, reflectance, object_id, properties,
                semantic)


def stood_up(mesh: Mesh, up: str) -> Mesh:
    """``mesh`` authored with ``up`` ∈ {"y", "z"} as up, turned into our Z-up frame (itself when Z-up).

    Meshes placed by OSI poses are turned once, in their vertices, so an
    instance pose stays the object's OSI pose (see :func:`~lidar_fmu.geometry.transforms.up_axis_pose`).
    """
    turn = up_axis_pose(up)
    if np.array_equal(turn, np.eye(4)):
        return mesh
    vertices = mesh.vertices.astype(np.float64) @ turn[:3, :3].T
    return Mesh(vertices, mesh.faces, mesh.face_material, mesh.material_names, mesh.name, mesh.face_reflectance,
                mesh.face_object_id, mesh.material_properties, mesh.face_semantic)


def box_mesh(length_m: float, width_m: float, height_m: float, material: str = "box", name: str = "box") -> Mesh:
    """Closed box centred at the origin: x = length, y = width, z = height (OSI ``base.dimension``)."""
    if not all(np.isfinite([length_m, width_m, height_m])) or min(length_m, width_m, height_m) <= 0:
        raise MeshError(f"box dimensions must be positive and finite, got {length_m}, {width_m}, {height_m}")
    return Mesh(*box_shape((length_m, width_m, height_m)), np.zeros(12, np.int32), (material,), name)


def box_shape(size_m: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """A box of ``size_m`` (length, width, height) centred at the origin: (8 corners (8, 3) m, 12 outward
    triangles (12, 3))."""
    half = 0.5 * np.asarray(size_m, np.float64)
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64) * half
    # corner index = 4·(x > 0) + 2·(y > 0) + (z > 0); each side two triangles, counter-clockwise seen from outside
    faces = np.array(
        [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5],  # -x, +x
         [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],  # -y, +y
         [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]],  # -z, +z
        np.int64,
    )
    return corners, faces


def _material_name(geometry: object) -> str:
    material = getattr(getattr(geometry, "visual", None), "material", None)
    name = getattr(material, "name", None)
    return str(name) if name else DEFAULT_MATERIAL


def load_mesh(path: str | os.PathLike, max_bytes: int | None = None) -> Mesh:
    """Load OBJ(+MTL), glTF/GLB, PLY or STL into one :class:`Mesh` in the file's frame (:func:`load_mesh_and_uv`),
    or an ASAM OpenMATERIAL 3D asset (``.xoma``: its model, in the OSI object frame, with its own materials;
    :mod:`lidar_fmu.geometry.openmaterial`)."""
    if os.fspath(path).lower().endswith(".xoma"):
        return _openmaterial_mesh(os.fspath(path), max_bytes)
    return load_mesh_and_uv(path, max_bytes)[0]


def _openmaterial_mesh(path: str, max_bytes: int | None) -> Mesh:
    """An OpenMATERIAL 3D asset's model in the OSI object frame, its triangles named by the material they map to
    and carrying what the asset's material files say of them."""
    try:
        asset, model = read_asset(path)
        mesh, face_uv = load_mesh_and_uv(model, max_bytes)
        vertices = placed_vertices(asset, mesh.vertices)
        names, properties = mapped_materials(path, asset, mesh.material_names, mesh.face_material, face_uv)
    except OpenMaterialError as exc:
        raise MeshError(str(exc)) from None
    unique, per_face = np.unique(np.array(names, dtype=object), return_inverse=True)
    return Mesh(vertices, mesh.faces, per_face.astype(np.int32), tuple(str(n) for n in unique),
                os.path.basename(path), mesh.face_reflectance, None, properties or None)


def load_mesh_and_uv(path: str | os.PathLike, max_bytes: int | None = None) -> tuple[Mesh, np.ndarray]:
    """Load OBJ(+MTL), glTF/GLB, PLY or STL into one :class:`Mesh` in the file's frame, and each triangle's texture
    coordinates at its centroid ((F, 2), NaN where the file gives none: what an assignment texture is read at).

    Scene-graph files are flattened with their node transforms applied; every
    triangle keeps the name of the visual material it had in the file. A PLY
    whose faces carry a property ``reflectivity`` gives its triangles their own
    reflectance (:attr:`Mesh.face_reflectance`;
    :func:`lidar_fmu.geometry.assets.ply_face_reflectance` says what it takes).
    Only these formats, uncompressed, are read, at most ``max_bytes`` (default
    :func:`lidar_fmu.geometry.assets.max_mesh_bytes`: ``$LIDAR_FMU_MAX_MESH_MB``, else
    256 MB) for the file and what it pulls in (MTL, glTF buffers, textures),
    which must lie in the file's folder (:mod:`lidar_fmu.geometry.assets`).
    Raises :class:`MeshError` naming the file when it cannot be used, and why.
    """
    import io

    import trimesh

    path = os.fspath(path)
    name = os.path.basename(path)
    if not os.path.exists(path):
        raise MeshError(f"mesh file not found: {path}")
    try:
        limit = max_mesh_bytes() if max_bytes is None else int(max_bytes)
        data, file_type = read_mesh_file(path, limit)
        resolver = folder_resolver(os.path.realpath(path), limit - len(data))
    except (AssetError, OSError) as exc:
        raise MeshError(f"cannot read mesh {path}: {exc}") from None
    try:
        # The bytes and the file type go in explicitly: trimesh never picks a loader (an archive's) by itself.
        # process=False keeps the file's vertices and face order (fast and faithful);
        # group_material keeps one geometry per OBJ material so names survive.
        loaded = cast("trimesh.Scene", trimesh.load(io.BytesIO(data), file_type=file_type, resolver=resolver,
                                                    force="scene", process=False, group_material=True))
    except Exception as exc:  # trimesh raises many types for bad files
        raise MeshError(f"cannot read mesh {path}: {exc}") from None
    parts, uvs = [], []
    try:
        for node in loaded.graph.nodes_geometry:
            transform, geometry_name = loaded.graph[node]
            geometry = loaded.geometry[geometry_name]
            faces = getattr(geometry, "faces", None)
            if faces is None or len(faces) == 0:
                continue  # point clouds, paths: nothing a ray can hit
            vertices, reflectance = np.asarray(geometry.vertices), None
            # a PLY's per-face reflectivity: trimesh drops it from the mesh (and may reorder mixed polygons), so
            # the triangles are made again from the raw faces, each keeping its polygon's value
            per_face = ply_face_reflectance(getattr(geometry, "metadata", {}).get("_ply_raw"))
            if per_face is not None:
                vertices, faces, reflectance = per_face
            vertices = trimesh.transformations.transform_points(vertices, transform)
            parts.append(Mesh(vertices, np.asarray(faces), np.zeros(len(faces), np.int32),
                              (_material_name(geometry),), name, reflectance))
            uv = getattr(getattr(geometry, "visual", None), "uv", None)
            uvs.append(np.asarray(uv, np.float64)[np.asarray(faces)].mean(axis=1)
                       if uv is not None and per_face is None and len(uv) == len(geometry.vertices)
                       else np.full((len(faces), 2), np.nan))
    except (MeshError, AssetError) as exc:
        raise MeshError(f"cannot use mesh {path}: {exc}") from None
    if not parts:
        raise MeshError(f"mesh {path} contains no triangles")
    return concatenate(parts, name=name), np.concatenate(uvs)


def check_instance_pose(pose: ArrayLike, what: str = "pose") -> np.ndarray:
    """:func:`~lidar_fmu.geometry.transforms.check_pose` for an instance pose, which may scale its mesh.

    The singularity test is made scale-free: each axis of the 3×3 part is
    measured on its own (it must not be zero) and the test runs on the unit
    axes, so a small object (a 5 cm box: determinant 1.25e-4) or a unit box
    stretched to an OSI object's size is accepted, and only collapsed or
    parallel axes are refused.
    """
    pose = np.asarray(pose, dtype=np.float64)
    if pose.shape == (4, 4) and np.all(np.isfinite(pose)):
        scale = np.linalg.norm(pose[:3, :3], axis=0)
        if np.all(scale > 0):
            unit = pose.copy()
            unit[:3, :3] /= scale
            check_pose(unit, what)
            return pose
    return check_pose(pose, what)  # raises, naming what is wrong


def find_ids(ids: np.ndarray, wanted: np.ndarray, order: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(index into ``ids`` of each of ``wanted``, whether it is there): one sorted search, no loop over ids.

    ``order``: ``np.argsort(ids)`` when the caller keeps it; an index where ``found`` is False is meaningless.
    """
    if len(ids) == 0:
        return np.zeros(len(wanted), np.int64), np.zeros(len(wanted), bool)
    order = np.argsort(ids, kind="stable") if order is None else order
    index = order[np.minimum(np.searchsorted(ids, wanted, sorter=order), len(ids) - 1)]
    return index, ids[index] == wanted


class Scene:
    """Instances of meshes: ``instance_id → (mesh, pose)``.

    ``instance_id`` is a non-negative integer below 2**63 (OSI ids fit). Poses
    are 4×4 world-from-mesh matrices (float64, m), rigid or scaling (a shared
    unit mesh stretched per instance). ``revision`` changes when the set of
    meshes or instances changes, ``pose_revision`` when any pose does;
    backends use them to refresh only what changed. :attr:`meshes` holds the
    meshes instances use: when a mesh's last instance goes (removed, or given
    another mesh) the mesh leaves the list and the last mesh takes its index.
    Each instance has a semantic class (:mod:`lidar_fmu.geometry.semantic`), which
    its mesh's unlabelled triangles take (default ``UNLABELLED``).
    """

    def __init__(self) -> None:
        self.meshes: list[Mesh] = []
        self._mesh_users: list[int] = []  # per mesh: how many instances use it
        self._mesh_position: dict[int, int] = {}
        self._index_of: dict[int, int] = {}
        self._ids = np.empty(0, np.int64)
        self._mesh_index = np.empty(0, np.int32)
        self._semantic = np.empty(0, np.uint8)
        self._poses = np.empty((0, 4, 4))
        self._count = 0
        self._order = np.empty(0, np.int64)  # the order that sorts the ids, for indices_of
        self._sorted_for = -1  # the revision they were sorted at
        self.revision = 0
        self.pose_revision = 0

    # -- meshes -------------------------------------------------------------
    def mesh_index(self, mesh: Mesh) -> int:
        """Index of ``mesh`` in :attr:`meshes`, adding it on first use."""
        key = id(mesh)
        index = self._mesh_position.get(key)
        if index is None or self.meshes[index] is not mesh:
            index = len(self.meshes)
            self.meshes.append(mesh)
            self._mesh_users.append(0)
            self._mesh_position[key] = index
            self.revision += 1
        return index

    def _release_mesh(self, index: int) -> None:
        """One instance less uses mesh ``index``; the last one gone, the mesh leaves :attr:`meshes`.

        The last mesh moves into the hole (instances that use it follow), so
        mesh indices stay dense, and ``revision`` changes: backends and
        :class:`~lidar_fmu.physics.returns.Materials` re-read the mesh list.
        """
        self._mesh_users[index] -= 1
        if self._mesh_users[index] > 0:
            return
        gone = self.meshes[index]
        last = len(self.meshes) - 1
        if index != last:
            moved = self.meshes[last]
            self.meshes[index] = moved
            self._mesh_users[index] = self._mesh_users[last]
            self._mesh_position[id(moved)] = index
            used = self._mesh_index[: self._count]
            used[used == last] = index
        self.meshes.pop()
        self._mesh_users.pop()
        del self._mesh_position[id(gone)]  # still alive here: no other mesh can hold its id
        self.revision += 1

    # -- instances ----------------------------------------------------------
    def __len__(self) -> int:
        return self._count

    def __contains__(self, instance_id: int | np.integer) -> bool:
        return int(instance_id) in self._index_of

    @property
    def instance_ids(self) -> np.ndarray:
        """(K,) int64 ids in instance-index order (read-only view)."""
        view = self._ids[: self._count]
        view.flags.writeable = False
        return view

    @property
    def instance_mesh_index(self) -> np.ndarray:
        view = self._mesh_index[: self._count]
        view.flags.writeable = False
        return view

    def instance_radii_m(self, index: np.ndarray) -> np.ndarray:
        """(·,) float64 the bounding-sphere radius (:attr:`Mesh.radius_m`, before its pose's scale) of the
        instances at ``index``."""
        radii = np.array([mesh.radius_m for mesh in self.meshes], np.float64)
        return radii[self.instance_mesh_index[index]] if len(radii) else np.zeros(len(index))

    @property
    def instance_semantic(self) -> np.ndarray:
        """(K,) uint8 semantic class of each instance, in instance-index order (read-only view)."""
        view = self._semantic[: self._count]
        view.flags.writeable = False
        return view

    @property
    def poses(self) -> np.ndarray:
        """(K, 4, 4) world-from-mesh poses in instance-index order (read-only view)."""
        view = self._poses[: self._count]
        view.flags.writeable = False
        return view

    def mesh_of(self, instance_id: int | np.integer) -> Mesh:
        return self.meshes[self._mesh_index[self._index_of[int(instance_id)]]]

    def pose_of(self, instance_id: int | np.integer) -> np.ndarray:
        return self._poses[self._index_of[int(instance_id)]].copy()

    def add_instance(self, instance_id: int | np.integer, mesh: Mesh, pose: ArrayLike | None = None,
                     semantic: int = UNLABELLED) -> None:
        """Place ``mesh`` as ``instance_id`` (replacing any instance of that id), of class ``semantic`` (a code of
        :mod:`lidar_fmu.geometry.semantic`, which the mesh's unlabelled triangles take)."""
        instance_id = int(instance_id)
        if not 0 <= instance_id < 2**63:
            raise ValueError(f"instance id {instance_id} must be in [0, 2**63)")
        if not 0 <= int(semantic) < len(SEMANTIC_CLASSES):
            raise ValueError(f"semantic class {semantic} of instance {instance_id} is not one of the "
                             f"{len(SEMANTIC_CLASSES)} codes")
        pose = np.eye(4) if pose is None else check_instance_pose(pose, f"pose of instance {instance_id}")
        mesh_position = self.mesh_index(mesh)
        index = self._index_of.get(instance_id)
        previous = None if index is None else int(self._mesh_index[index])
        if index is None:
            if self._count == len(self._ids):
                grow = max(8, 2 * self._count)
                self._ids = np.resize(self._ids, grow)
                self._mesh_index = np.resize(self._mesh_index, grow)
                self._semantic = np.resize(self._semantic, grow)
                self._poses = np.resize(self._poses, (grow, 4, 4))
            index = self._count
            self._count += 1
            self._index_of[instance_id] = index
            self._ids[index] = instance_id
        self._mesh_index[index] = mesh_position
        self._semantic[index] = semantic
        self._poses[index] = pose
        self._mesh_users[mesh_position] += 1
        if previous is not None:
            self._release_mesh(previous)  # after the new mesh counts this instance: it cannot be dropped
        self.revision += 1
        self.pose_revision += 1

    def set_pose(self, instance_id: int | np.integer, pose: ArrayLike) -> None:
        """Move an existing instance; no geometry is touched."""
        index = self._index_of.get(int(instance_id))
        if index is None:
            raise KeyError(f"no instance with id {instance_id}")
        self._poses[index] = check_instance_pose(pose, f"pose of instance {instance_id}")
        self.pose_revision += 1

    def set_poses(self, instance_ids: ArrayLike, poses: ArrayLike) -> None:
        """Move many existing instances at once ((K,) ids, (K, 4, 4) rigid or affine poses)."""
        poses = np.asarray(poses, dtype=np.float64)
        indices = self.indices_of(instance_ids)
        if poses.shape != (len(indices), 4, 4) or not np.isfinite(poses).all():
            raise ValueError("poses must be finite (K, 4, 4) matrices, one per id")
        self._poses[indices] = poses
        self.pose_revision += 1

    def indices_of(self, instance_ids: ArrayLike) -> np.ndarray:
        """(K,) instance indices of ``instance_ids`` (KeyError naming the first unknown id), vectorised: a
        search in the ids sorted once per :attr:`revision`, not a dict lookup per id."""
        if self._sorted_for != self.revision:
            self._order = np.argsort(self._ids[: self._count], kind="stable")
            self._sorted_for = self.revision
        wanted = np.asarray(instance_ids).astype(np.int64, copy=False).ravel()
        index, found = find_ids(self._ids[: self._count], wanted, self._order)
        if not found.all():
            raise KeyError(f"no instance with id {int(wanted[np.argmin(found)])}")
        return index

    def remove_instance(self, instance_id: int | np.integer) -> None:
        index = self._index_of.pop(int(instance_id))
        mesh_position = int(self._mesh_index[index])
        last = self._count - 1
        if index != last:  # keep indices dense: move the last instance into the hole
            self._ids[index] = self._ids[last]
            self._mesh_index[index] = self._mesh_index[last]
            self._semantic[index] = self._semantic[last]
            self._poses[index] = self._poses[last]
            self._index_of[int(self._ids[index])] = index
        self._count = last
        self._release_mesh(mesh_position)
        self.revision += 1
        self.pose_revision += 1

    @property
    def triangle_count(self) -> int:
        """Triangles placed in the world (instances × their mesh size)."""
        sizes = np.array([m.triangle_count for m in self.meshes], dtype=np.int64)
        return int(sizes[self.instance_mesh_index].sum()) if self._count else 0

    @classmethod
    def from_meshes(cls, meshes: list[Mesh]) -> Scene:
        """A scene placing each mesh once at identity, instance ids 0, 1, …"""
        scene = cls()
        for i, mesh in enumerate(meshes):
            scene.add_instance(i, mesh)
        return scene

"""ASAM OpenMATERIAL 3D assets: an asset file (``.xoma``) beside its 3D model, with its own material files.

As the standard (ASAM OpenMATERIAL 3D 1.0, asam-ev/OpenMATERIAL, chapters "Geometry" and "Material") describes them:

* the asset file (JSON) and its 3D model share a base name in one folder (``car.xoma`` and ``car.gltf`` or
  ``car.glb``; FBX and USD models are named, not read);
* the model is glTF, Y up; the standard's own frame is x forward, z up, and "a coordinate transformation shall be
  applied" on export — which Blender, the examples' tool, makes by turning z up into Y up only (the front stays
  along +X), while the glTF specification puts the front along +Z. Of the two, the one whose extents match the
  asset file's ``boundingBox`` is taken (Blender's where the asset gives none). Its reference frame is the
  centre of its bounding box projected to the box's bottom, so for an OSI object (whose origin is its box's
  centre) it is lowered by half the height of that box; an ``environment`` asset keeps its frame (it shares
  the world's, and an OpenDRIVE map's);
* ``materialMappingUri`` names a material mapping file (``.xomm``) whose rows link a material name of the model
  — or, through ``materialTextureAssignment``, a colour ``rgb:R;G;B`` of an assignment texture read at each
  triangle's texture coordinates — to a material property file (``.xomp``); of that, the lidar BRDF look-up
  tables (``brdfUris`` whose ``typicalSensorTechnology`` names lidar) and a coefficient of retroreflection are
  what a lidar sees (:class:`~lidar_fmu.geometry.scene.SurfaceProperties`; the IR materials are made of them at
  the sensor's wavelength by :class:`lidar_fmu.physics.returns.Materials`).

Every file is read within the asset's folder and the size limit of any mesh (:mod:`.assets`); a file that cannot
be used raises :class:`~lidar_fmu.geometry.scene.MeshError` naming it and why.
"""
from __future__ import annotations

import os

import numpy as np

from ..documents import read_document
from .assets import AssetError, resolve_inside
from .scene import Mesh, MeshError, SurfaceProperties, load_mesh_and_uv

#: the model formats the standard allows, in the order they are looked for beside the asset file
MODEL_EXTENSIONS = (".glb", ".gltf")
UNREAD_MODEL_EXTENSIONS = (".fbx", ".usd", ".usda", ".usdc", ".usdz")


def load_openmaterial_asset(path: str | os.PathLike, max_bytes: int | None = None) -> Mesh:
    """The mesh of an OpenMATERIAL 3D asset file, in the OSI object frame (module doc), its triangles named by the
    material they map to and carrying what the asset's material files say of them."""
    path = os.fspath(path)
    asset = _json(path, "OpenMATERIAL asset")
    metadata = asset.get("metadata") if isinstance(asset, dict) else None
    if not isinstance(metadata, dict):
        raise MeshError(f"cannot use OpenMATERIAL asset {path}: it has no 'metadata' object")
    stem = os.path.splitext(path)[0]
    model = next((stem + ext for ext in MODEL_EXTENSIONS if os.path.isfile(stem + ext)), None)
    if model is None:
        other = next((stem + ext for ext in UNREAD_MODEL_EXTENSIONS if os.path.isfile(stem + ext)), None)
        why = (f"its model {os.path.basename(other)} is not glTF (lidar-fmu reads glTF and GLB models)" if other
               else f"no glTF model {os.path.basename(stem)}.glb/.gltf beside it (the standard names the model "
                    "by the asset's base name)")
        raise MeshError(f"cannot use OpenMATERIAL asset {path}: {why}")
    mesh, face_uv = load_mesh_and_uv(model, max_bytes)
    vertices = _turned(mesh.vertices.astype(np.float64), metadata.get("boundingBox"))
    if metadata.get("objectClass") != "environment":
        top = _box_top(metadata.get("boundingBox"), vertices)
        vertices[:, 2] -= 0.5 * top  # the reference frame's origin is the box's bottom centre; OSI's its centre
    names, properties = _mapped_materials(path, asset, mesh, face_uv)
    unique, per_face = np.unique(np.array(names, dtype=object), return_inverse=True)
    return Mesh(vertices, mesh.faces, per_face.astype(np.int32), tuple(str(n) for n in unique),
                os.path.basename(path), mesh.face_reflectance, None, properties or None)


#: glTF (X, Y, Z) → the standard's (x forward, y left, z up): as Blender exports (X forward, Y up, −Z left), and as
#: the glTF specification has it (+Z forward, +X left, +Y up); rows: our x, y, z
BLENDER_GLTF = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
SPEC_GLTF = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


def _turned(vertices: np.ndarray, box) -> np.ndarray:
    """The model's vertices in the standard's frame: turned the way that matches the asset's ``boundingBox``."""
    candidates = [vertices @ turn.T for turn in (BLENDER_GLTF, SPEC_GLTF)]
    try:
        want = np.array([[float(box[axis][0]) for axis in "xyz"], [float(box[axis][1]) for axis in "xyz"]])
    except (KeyError, IndexError, TypeError, ValueError):
        return candidates[0]
    if not np.all(np.isfinite(want)):
        return candidates[0]
    misfit = [np.abs(np.stack([v.min(axis=0), v.max(axis=0)]) - want).sum() for v in candidates]
    return candidates[int(np.argmin(misfit))]


def _json(path: str, what: str):
    return read_document(path, what, MeshError, syntax="json")


def _box_top(box, vertices: np.ndarray) -> float:
    """The asset's height above its reference frame: its ``boundingBox`` z maximum, else its vertices'."""
    try:
        top = float(box["z"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        top = float(vertices[:, 2].max())
    if not np.isfinite(top) or top < 0:
        top = float(vertices[:, 2].max())
    return top


def _sibling(asset_path: str, reference: str, what: str) -> str:
    """A file an asset or mapping file names, relative to its folder and inside it."""
    if not isinstance(reference, str) or not reference:
        raise MeshError(f"cannot use OpenMATERIAL {what} of {asset_path}: no file named ({reference!r})")
    folder = os.path.dirname(os.path.abspath(asset_path))
    try:
        return resolve_inside(folder, reference.removeprefix("./"), "the asset's folder")
    except AssetError as exc:
        raise MeshError(f"cannot use OpenMATERIAL {what} {reference!r} of {asset_path}: {exc}") from None


def _mapped_materials(path: str, asset: dict, mesh: Mesh, face_uv: np.ndarray):
    """Per face, the visual name it takes (its model material's, or its mapped property file's) and the surface
    properties of the mapped ones."""
    names = np.array(mesh.material_names, dtype=object)[mesh.face_material]
    mapping_file = asset.get("materialMappingUri")
    if not mapping_file:
        return names, {}
    mapping_path = _sibling(path, mapping_file, "material mapping")
    rows = _json(mapping_path, "OpenMATERIAL material mapping").get("materialMapping")
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) >= 2 for r in rows):
        raise MeshError(f"cannot use OpenMATERIAL material mapping {mapping_path}: 'materialMapping' must be a list "
                        "of [name or rgb code, material file, description] rows")
    by_key = {str(r[0]).strip(): str(r[1]) for r in rows}
    keys = names.copy()
    for assignment in asset.get("materialTextureAssignment") or []:
        if not (isinstance(assignment, list) and len(assignment) == 2):
            raise MeshError(f"cannot use OpenMATERIAL asset {path}: materialTextureAssignment rows are "
                            "[material name, assignment texture]")
        material, texture = assignment
        faces = np.array([n == material for n in mesh.material_names], bool)[mesh.face_material]
        if faces.any():
            keys[faces] = _texture_colours(_sibling(path, texture, "assignment texture"), face_uv[faces])
    # each distinct key once, in the order the faces first name it (so the properties, and a file that cannot be
    # read, come in face order)
    unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    mapped_names = np.empty(len(unique), dtype=object)
    mapped = np.zeros(len(unique), bool)
    properties: dict[str, SurfaceProperties] = {}
    for u in np.argsort(first, kind="stable"):
        material_file = by_key.get(unique[u])
        if material_file is None:  # unmapped: the model's own material name (a map may name it)
            continue
        name = f"openmaterial:{os.path.splitext(os.path.basename(material_file))[0]}"
        if name not in properties:
            properties[name] = _surface(_sibling(mapping_path, material_file, "material"), name)
        mapped_names[u], mapped[u] = name, True
    inverse = inverse.reshape(-1)
    return np.where(mapped[inverse], mapped_names[inverse], names), properties


def _texture_colours(texture: str, uv: np.ndarray) -> np.ndarray:
    """``rgb:R;G;B`` (object array) of an assignment texture at each texture coordinate (nearest texel; glTF's v
    runs down)."""
    from PIL import Image

    try:
        with Image.open(texture) as image:
            pixels = np.asarray(image.convert("RGB"))
    except Exception as exc:  # PIL raises many types for files that are no images
        raise MeshError(f"cannot read OpenMATERIAL assignment texture {texture}: {exc}") from None
    height, width = pixels.shape[:2]
    good = np.all(np.isfinite(uv), axis=1)
    u = np.clip(np.where(good, uv[:, 0], 0.0) % 1.0 * width, 0, width - 1).astype(np.int64)
    v = np.clip(np.where(good, uv[:, 1], 0.0) % 1.0 * height, 0, height - 1).astype(np.int64)
    rgb = pixels[v, u].astype(np.int64)
    # each colour written once: a texture has few colours, a model many triangles
    codes, inverse = np.unique(np.where(good, (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2], -1),
                               return_inverse=True)
    text = [f"rgb:{c >> 16};{(c >> 8) & 255};{c & 255}" if c >= 0 else "" for c in codes.tolist()]
    return np.array(text, dtype=object)[inverse.reshape(-1)]


def _surface(material_path: str, name: str) -> SurfaceProperties:
    """A material property file's lidar BRDF tables and coefficient of retroreflection."""
    document = _json(material_path, "OpenMATERIAL material")
    props = document.get("materialProperties") if isinstance(document, dict) else None
    if not isinstance(props, dict):
        raise MeshError(f"cannot use OpenMATERIAL material {material_path}: it has no 'materialProperties' object")
    tables, sources = [], [os.path.basename(material_path)]
    folder = os.path.dirname(os.path.abspath(material_path))
    for uri in props.get("brdfUris") or []:
        if isinstance(uri, str) and "lidar" not in uri.lower() and not os.path.isfile(os.path.join(folder, uri)):
            continue  # a camera's or radar's table, left out of a copy: not a lidar's business
        table_path = _sibling(material_path, uri, "BRDF table")
        table = _json(table_path, "OpenMATERIAL BRDF table")
        technology = str((table.get("metadata") or {}).get("typicalSensorTechnology", "")).lower()
        if "lidar" not in technology and "lidar" not in os.path.basename(table_path).lower():
            continue  # a camera's or radar's table
        rows = np.asarray((table.get("brdf") or {}).get("lookupTable", []), dtype=object)
        try:
            rows = np.asarray(rows, np.float64).reshape(-1, 5)
        except (TypeError, ValueError):
            raise MeshError(f"cannot use OpenMATERIAL BRDF table {table_path}: lookupTable rows must be 5 numbers "
                            "(wavelength, incident zenith, exit zenith, exit azimuth, BRDF)") from None
        rows = rows[np.all(np.isfinite(rows), axis=1) & (rows[:, 4] >= 0)]
        if len(rows):
            tables.append(rows)
            sources.append(os.path.basename(table_path))
    retro = (props.get("retroreflectivityData") or {}).get("coefficientOfRetroreflection")
    retro_value = float(retro) if isinstance(retro, (int, float)) and np.isfinite(retro) and retro > 0 else None
    return SurfaceProperties(name, np.concatenate(tables) if tables else None, retro_value, ", ".join(sources))

"""ASAM OpenMATERIAL 3D assets (``.xoma``), read as plain data for :func:`lidar_fmu.geometry.scene.load_mesh`.

An asset file names its glTF model (the same base name beside it) and its material files; this module finds the
model, says how its vertices turn and sit in the OSI object frame, and which material (and which
:class:`SurfaceProperties`: lidar BRDF tables, a coefficient of retroreflection) each triangle takes. How the
standard's frames and files are read: docs/world.md, "ASAM OpenMATERIAL 3D assets". Every file is read within the
asset's folder (:mod:`.assets`); a file that cannot be used raises :class:`OpenMaterialError` naming it and why.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np

from ..documents import read_document
from ..errors import LidarFmuError
from .assets import AssetError, resolve_inside

#: the model formats the standard allows, in the order they are looked for beside the asset file
MODEL_EXTENSIONS = (".glb", ".gltf")
UNREAD_MODEL_EXTENSIONS = (".fbx", ".usd", ".usda", ".usdc", ".usdz")
#: an assignment texture of more pixels is refused before it is decoded: 4096² (16.8 Mpx, 50 MB as RGB; assumed: the
#: standard's examples use 1–2k textures, and an assignment texture holds a few flat colours, so more pixels add
#: nothing a lidar's footprint could tell apart); PIL's own bomb check starts at 89 Mpx
MAX_TEXTURE_PIXELS = 4096 * 4096


class OpenMaterialError(LidarFmuError, ValueError):
    """An OpenMATERIAL asset, or a file it names, cannot be used."""


@dataclass(frozen=True, eq=False)
class SurfaceProperties:
    """What an asset's own material files say of a visual material's surface at lidar wavelengths (an ASAM
    OpenMATERIAL 3D material), as plain data; the IR materials are made of it at the sensor's wavelength
    (:class:`lidar_fmu.physics.returns.Materials`).

    ``brdf``: (N, 5) rows of (wavelength m, incident zenith rad, exit zenith rad, exit azimuth rad, BRDF 1/sr), or
    None; ``retroreflection_cd_lx_m2``: a coefficient of retroreflection R_A, or None; ``source``: the file(s).
    """

    name: str
    brdf: np.ndarray | None = None
    retroreflection_cd_lx_m2: float | None = None
    source: str = ""


def read_asset(path: str) -> tuple[dict, str]:
    """An asset file's document and the path of its glTF model (the asset's base name beside it)."""
    asset = _json(path, "OpenMATERIAL asset")
    metadata = asset.get("metadata")
    if not isinstance(metadata, dict):
        raise OpenMaterialError(f"cannot use OpenMATERIAL asset {path}: it has no 'metadata' object")
    stem = os.path.splitext(path)[0]
    model = next((stem + ext for ext in MODEL_EXTENSIONS if os.path.isfile(stem + ext)), None)
    if model is not None:  # inside the asset's folder, as every file it names (a link out of it is refused)
        model = _sibling(path, os.path.basename(model), "glTF model")
    if model is None:
        other = next((stem + ext for ext in UNREAD_MODEL_EXTENSIONS if os.path.isfile(stem + ext)), None)
        why = (f"its model {os.path.basename(other)} is not glTF (lidar-fmu reads glTF and GLB models)" if other
               else f"no glTF model {os.path.basename(stem)}.glb/.gltf beside it (the standard names the model "
                    "by the asset's base name)")
        raise OpenMaterialError(f"cannot use OpenMATERIAL asset {path}: {why}")
    return asset, model


def placed_vertices(asset: dict, model_vertices: np.ndarray) -> np.ndarray:
    """The model's vertices (glTF, Y up) in the OSI object frame: turned into the standard's frame, and lowered
    from the box's bottom centre (the standard's origin) to its centre (OSI's) unless the asset is an
    ``environment``, which shares the world's frame."""
    metadata = asset["metadata"]
    vertices = _turned(model_vertices.astype(np.float64), metadata.get("boundingBox"))
    if metadata.get("objectClass") != "environment":
        top = _box_top(metadata.get("boundingBox"), vertices)
        vertices[:, 2] -= 0.5 * top  # the reference frame's origin is the box's bottom centre; OSI's its centre
    return vertices


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


def _json(path: str, what: str) -> dict:
    """A JSON file that must hold an object; :class:`OpenMaterialError` naming the file when it does not."""
    document = read_document(path, what, OpenMaterialError, syntax="json")
    if not isinstance(document, dict):
        raise OpenMaterialError(f"cannot use {what} {path}: it holds a JSON {type(document).__name__}, not an object")
    return document


def _member(document: dict, key: str, path: str, what: str) -> dict:
    """``document[key]``, an object ({} where it is absent or null); :class:`OpenMaterialError` naming the file and
    the key when it is something else."""
    value = document.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise OpenMaterialError(f"cannot use {what} {path}: {key!r} is a JSON {type(value).__name__}, not an object")
    return value


def _list(document: dict, key: str, path: str, what: str) -> list:
    """``document[key]``, a list ([] where it is absent or null); :class:`OpenMaterialError` naming the file and the
    key when it is something else."""
    value = document.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise OpenMaterialError(f"cannot use {what} {path}: {key!r} is a JSON {type(value).__name__}, not a list")
    return value


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
        raise OpenMaterialError(f"cannot use OpenMATERIAL {what} of {asset_path}: no file named ({reference!r})")
    folder = os.path.dirname(os.path.abspath(asset_path))
    try:
        return resolve_inside(folder, reference.removeprefix("./"), "the asset's folder")
    except AssetError as exc:
        raise OpenMaterialError(f"cannot use OpenMATERIAL {what} {reference!r} of {asset_path}: {exc}") from None


def mapped_materials(path: str, asset: dict, material_names: tuple[str, ...], face_material: np.ndarray,
                     face_uv: np.ndarray) -> tuple[np.ndarray, dict[str, SurfaceProperties]]:
    """Per face of the model (its material names, each face's index into them, its texture coordinates), the
    visual name it takes (its model material's, or its mapped property file's) and the surface properties of the
    mapped ones."""
    names = np.array(material_names, dtype=object)[face_material]
    mapping_file = asset.get("materialMappingUri")
    if not mapping_file:
        return names, {}
    mapping_path = _sibling(path, mapping_file, "material mapping")
    rows = _json(mapping_path, "OpenMATERIAL material mapping").get("materialMapping")
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) >= 2 for r in rows):
        raise OpenMaterialError(f"cannot use OpenMATERIAL material mapping {mapping_path}: 'materialMapping' must be a list "
                        "of [name or rgb code, material file, description] rows")
    by_key = {str(r[0]).strip(): str(r[1]) for r in rows}
    keys = names.copy()
    for assignment in _list(asset, "materialTextureAssignment", path, "OpenMATERIAL asset"):
        if not (isinstance(assignment, list) and len(assignment) == 2):
            raise OpenMaterialError(f"cannot use OpenMATERIAL asset {path}: materialTextureAssignment rows are "
                            "[material name, assignment texture]")
        material, texture = assignment
        faces = np.array([n == material for n in material_names], bool)[face_material]
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

    too_many = (f"cannot read OpenMATERIAL assignment texture {texture}: more than {MAX_TEXTURE_PIXELS:,} pixels "
                f"(the bound an assignment texture may have)")
    try:
        # PIL's decompression-bomb warning becomes this one line, not a warning on stderr (the filter is the
        # process's for this moment: a texture is read while a mesh loads, under the model's lock)
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(texture) as image:
                width, height = image.size  # from the header: nothing is decoded yet
                if width * height > MAX_TEXTURE_PIXELS:
                    raise OpenMaterialError(f"{too_many}: {width}×{height}")
                pixels = np.asarray(image.convert("RGB"))
    except OpenMaterialError:
        raise
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise OpenMaterialError(too_many) from None
    except Exception as exc:  # PIL raises many types for files that are no images
        raise OpenMaterialError(f"cannot read OpenMATERIAL assignment texture {texture}: {exc}") from None
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
    props = document.get("materialProperties")
    if not isinstance(props, dict):
        raise OpenMaterialError(f"cannot use OpenMATERIAL material {material_path}: it has no 'materialProperties' object")
    tables, sources = [], [os.path.basename(material_path)]
    folder = os.path.dirname(os.path.abspath(material_path))
    for uri in _list(props, "brdfUris", material_path, "OpenMATERIAL material"):
        if isinstance(uri, str) and "lidar" not in uri.lower() and not os.path.isfile(os.path.join(folder, uri)):
            continue  # a camera's or radar's table, left out of a copy: not a lidar's business
        table_path = _sibling(material_path, uri, "BRDF table")
        table = _json(table_path, "OpenMATERIAL BRDF table")
        metadata = _member(table, "metadata", table_path, "OpenMATERIAL BRDF table")
        technology = str(metadata.get("typicalSensorTechnology", "")).lower()
        if "lidar" not in technology and "lidar" not in os.path.basename(table_path).lower():
            continue  # a camera's or radar's table
        rows = np.asarray(_member(table, "brdf", table_path, "OpenMATERIAL BRDF table").get("lookupTable", []),
                          dtype=object)
        try:
            rows = np.asarray(rows, np.float64).reshape(-1, 5)
        except (TypeError, ValueError):
            raise OpenMaterialError(f"cannot use OpenMATERIAL BRDF table {table_path}: lookupTable rows must be 5 numbers "
                            "(wavelength, incident zenith, exit zenith, exit azimuth, BRDF)") from None
        rows = rows[np.all(np.isfinite(rows), axis=1) & (rows[:, 4] >= 0)]
        if len(rows):
            tables.append(rows)
            sources.append(os.path.basename(table_path))
    retro = _member(props, "retroreflectivityData", material_path, "OpenMATERIAL material").get(
        "coefficientOfRetroreflection")
    retro_value = float(retro) if isinstance(retro, (int, float)) and np.isfinite(retro) and retro > 0 else None
    return SurfaceProperties(name, np.concatenate(tables) if tables else None, retro_value, ", ".join(sources))

"""Which files the model may read for meshes, and how much of them.

A SensorView comes from another party of the co-simulation, so the strings
it carries never choose a file freely:

* :func:`resolve_inside` resolves a ``model_reference`` strictly inside a root
  folder (the assets folder): absolute paths, ``..`` and links whose real path
  leaves the root are refused with one message that does not tell whether such
  a file exists; only regular files are accepted (no devices, FIFOs, folders),
  checked without opening them.
* :func:`read_mesh_file` reads a mesh file of a documented format (OBJ, glTF,
  GLB, PLY, STL), uncompressed and at most :func:`max_mesh_bytes` long; archives
  and compressed files are refused by name and by their first bytes.
* :class:`FolderResolver` hands trimesh the files a mesh pulls in (OBJ's MTL
  and textures, glTF buffers and images) from the mesh's own folder only, and
  counts them against the same size limit.

And what a mesh file says beyond its triangles: :func:`ply_face_reflectance` reads a PLY's per-face
``reflectivity`` (trimesh keeps it only in the raw elements it parsed).
"""
from __future__ import annotations

import json
import os
import stat
import struct
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import LidarFmuError

#: Mesh formats the loader reads (extension → trimesh file type). OBJ pulls in its MTL.
MESH_FORMATS = {".obj": "obj", ".gltf": "gltf", ".glb": "glb", ".ply": "ply", ".stl": "stl"}
#: Archive and compressed-file extensions, refused with their own message.
ARCHIVE_EXTENSIONS = (".zip", ".bz2", ".gz", ".tgz", ".xz", ".txz", ".lzma", ".zst", ".tar", ".7z", ".rar", ".z")
#: Default limit on a mesh file plus everything it pulls in, in MB (10⁶ bytes).
DEFAULT_MAX_MESH_MB = 256
#: Environment variable that changes the limit (a positive number of MB).
MAX_MESH_MB_VARIABLE = "LIDAR_FMU_MAX_MESH_MB"

# (magic bytes, offset, name) of archive and compression formats.
_MAGIC = (
    (b"PK\x03\x04", 0, "zip"), (b"PK\x05\x06", 0, "zip"), (b"PK\x07\x08", 0, "zip"),
    (b"\x1f\x8b", 0, "gzip"), (b"BZh", 0, "bzip2"), (b"\xfd7zXZ\x00", 0, "xz"),
    (b"\x28\xb5\x2f\xfd", 0, "zstd"), (b"7z\xbc\xaf\x27\x1c", 0, "7z"), (b"Rar!\x1a\x07", 0, "rar"),
    (b"\x1f\x9d", 0, "compress (.Z)"), (b"ustar", 257, "tar"),
)
# glTF accessor component sizes (bytes) and element widths, to bound what an accessor asks for; looked up with
# whatever JSON value the file gives (one that cannot be hashed, a list or an object, raises TypeError there)
_GLTF_COMPONENT_BYTES: dict[Any, int] = {5120: 1, 5121: 1, 5122: 2, 5123: 2, 5125: 4, 5126: 4}
_GLTF_TYPE_WIDTH: dict[Any, int] = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT2": 4, "MAT3": 9, "MAT4": 16}


#: the PLY face property that gives a triangle its own Lambertian reflectance at the sensor's wavelength
PLY_REFLECTIVITY = "reflectivity"
#: the names PLY writers give a face's vertex list
_PLY_INDEX_NAMES = ("vertex_indices", "vertex_index")


class AssetError(LidarFmuError, ValueError):
    """A file was refused: outside its folder, not a regular file, not a documented mesh format or too big."""


def max_mesh_bytes() -> int:
    """The size limit for a mesh and the files it pulls in: ``$LIDAR_FMU_MAX_MESH_MB`` MB, else 256 MB."""
    text = os.environ.get(MAX_MESH_MB_VARIABLE, "").strip()
    if not text:
        return DEFAULT_MAX_MESH_MB * 1_000_000
    try:
        mb = float(text)
    except ValueError:
        mb = float("nan")
    if not 0 < mb < float("inf"):
        raise AssetError(f"{MAX_MESH_MB_VARIABLE} must be a positive number of MB, got {text!r}")
    return max(1, int(mb * 1_000_000))


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.3g} MB"


def resolve_inside(root: str | os.PathLike, reference: str, folder: str = "the assets folder") -> str:
    """The real path of the regular file ``reference`` names inside ``root``.

    Raises :class:`AssetError` (its message leaves out ``reference``: the
    caller names it): one message for an absolute path, a ``..`` part or a link
    whose real path leaves ``root``, whether or not the target exists; else
    "not found" or "not a regular file" for what lies inside. Nothing is opened.
    """
    outside = AssetError(f"refused: it must name a file inside {folder} (no absolute path, '..' or link out of it)")
    if not root:
        raise AssetError("refused: no assets folder is configured to resolve it in")
    if not reference or "\x00" in reference:
        raise outside
    parts = reference.replace("\\", "/").split("/")
    if os.path.isabs(reference) or os.path.splitdrive(reference)[0] or reference.startswith(("/", "\\", "~")) \
            or ".." in parts:
        raise outside
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(os.path.join(real_root, reference)))
    if real == real_root or not real.is_relative_to(real_root):
        raise outside
    try:
        info = os.stat(real)
    except OSError:
        raise AssetError(f"not found in {folder}") from None
    if not stat.S_ISREG(info.st_mode):
        raise AssetError(f"not a regular file in {folder}")
    return str(real)


def _read_regular(path: str | os.PathLike, limit: int, what: str) -> bytes:
    """The bytes of the regular file ``path`` if it holds at most ``limit`` bytes (FIFOs and devices never opened)."""
    info = os.stat(path)  # OSError: not found, no permission
    if not stat.S_ISREG(info.st_mode):
        raise AssetError(f"{what} is not a regular file")
    if info.st_size > limit:
        raise AssetError(f"{what} is {_megabytes(info.st_size)}, over the limit of {_megabytes(limit)} "
                         f"(set {MAX_MESH_MB_VARIABLE} to change it)")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between the stat and the open
            raise AssetError(f"{what} is not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise AssetError(f"{what} is over the limit of {_megabytes(limit)} (set {MAX_MESH_MB_VARIABLE} to change it)")
    return data


def archive_kind(head: bytes) -> str | None:
    """The archive or compression format ``head`` (a file's first 512 bytes) starts with, else ``None``."""
    for magic, offset, kind in _MAGIC:
        if head[offset:offset + len(magic)] == magic:
            return kind
    return None


def mesh_file_type(path: str | os.PathLike) -> str:
    """trimesh's file type for a documented mesh format; :class:`AssetError` for archives and the rest."""
    lower = os.fspath(path).lower()
    if lower.endswith(ARCHIVE_EXTENSIONS):
        raise AssetError("compressed files and archives are not loaded (unpack the mesh first)")
    file_type = MESH_FORMATS.get(os.path.splitext(lower)[1])
    if file_type is None:
        raise AssetError(f"not a supported mesh format (use {', '.join(MESH_FORMATS)})")
    return file_type


def _check_gltf_accessors(data: bytes, file_type: str, limit: int) -> None:
    """Refuse glTF accessors that ask for more than ``limit`` bytes (trimesh allocates bufferless ones as zeros)."""
    try:
        if file_type == "glb":
            if data[:4] != b"glTF" or len(data) < 20:
                return
            length, kind = struct.unpack_from("<II", data, 12)
            if kind != 0x4E4F534A:  # JSON
                return
            header = json.loads(data[20:20 + length])
        else:
            header = json.loads(data)
        accessors = header.get("accessors", []) if isinstance(header, dict) else []
    except (ValueError, struct.error):
        return  # not glTF JSON at all: the loader says so
    if not isinstance(accessors, list):
        return
    for index, accessor in enumerate(accessors):
        if not isinstance(accessor, dict):
            continue
        count = accessor.get("count", 0)
        size = _GLTF_COMPONENT_BYTES.get(accessor.get("componentType"), 8) * _GLTF_TYPE_WIDTH.get(
            accessor.get("type"), 16)
        if not isinstance(count, int) or count < 0 or count * size > limit:
            raise AssetError(f"glTF accessor {index} asks for {count!r} elements, over the limit of "
                             f"{_megabytes(limit)} (set {MAX_MESH_MB_VARIABLE} to change it)")


def read_mesh_file(path: str | os.PathLike, limit: int | None = None) -> tuple[bytes, str]:
    """(bytes, trimesh file type) of a mesh file that passes the format, kind and size rules.

    Raises :class:`AssetError` saying why a file is refused, ``OSError`` when it cannot be read.
    """
    limit = max_mesh_bytes() if limit is None else int(limit)
    file_type = mesh_file_type(path)
    data = _read_regular(path, limit, "the file")
    kind = archive_kind(data[:512])
    if kind is not None:
        raise AssetError(f"it is a {kind} archive or compressed file, not a .{file_type} mesh "
                         "(compressed meshes are not loaded; unpack it first)")
    if file_type in ("gltf", "glb"):
        _check_gltf_accessors(data, file_type, limit)
    return data, file_type


def folder_resolver(mesh_path: str | os.PathLike, budget: int):
    """A trimesh resolver for the files a mesh pulls in: its own folder only, ``budget`` bytes in all."""
    from trimesh.resolvers import FilePathResolver

    class FolderResolver(FilePathResolver):
        """trimesh's file resolver, kept to the mesh's folder here whatever trimesh's version: names that leave
        it (``..``, absolute, links out) are refused alike; only regular files are read, ``budget`` bytes in all."""

        def __init__(self, source, left):
            super().__init__(source)
            self.left = left  # [bytes left], shared with namespaced resolvers

        def namespaced(self, namespace):
            return FolderResolver(os.path.join(self.parent, namespace), self.left)

        def absolute(self, name: str) -> Path:
            parent = Path(os.path.realpath(self.parent))
            path = Path(os.path.realpath(parent / name.strip()))
            if not path.is_relative_to(parent):
                raise ValueError(f"{name!r} lies outside the mesh's folder")
            return path

        def get(self, name):
            name = str(name)
            for candidate in (name.strip(), name.strip().lstrip("/"), os.path.split(name)[-1]):
                try:
                    path = self.absolute(candidate)
                except ValueError:
                    continue
                if path.exists():  # real path: no links left in it
                    data = _read_regular(path, self.left[0], f"{candidate!r}")
                    self.left[0] -= len(data)
                    return data
            try:
                self.absolute(name)
            except ValueError as exc:
                raise AssetError(str(exc)) from None
            raise FileNotFoundError(name)

        def write(self, name, data):
            raise AssetError("meshes are only read here")

    return FolderResolver(os.fspath(mesh_path), [budget])


def ply_face_reflectance(elements: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(vertices (V, 3), triangles (T, 3), ρ0 (T,) float32) of a PLY whose faces carry :data:`PLY_REFLECTIVITY`;
    ``None`` when they do not.

    ``elements``: trimesh's raw PLY elements (``metadata["_ply_raw"]`` of what it loaded). Each polygon is fanned
    into triangles (a quad ``0 1 2 3`` gives ``0 1 2`` and ``0 2 3``) that keep its value. The property may be a
    float (0–1 as it is) or a uchar (0–255, divided by 255); any other type, a value outside 0–1 or NaN is refused
    (:class:`AssetError` naming the property and the first bad face; the caller names the file).
    """
    faces = elements.get("face") if isinstance(elements, dict) else None
    data = faces.get("data") if isinstance(faces, dict) else None
    names = data.dtype.names if isinstance(data, np.ndarray) else (tuple(data) if isinstance(data, dict) else None)
    if not names or PLY_REFLECTIVITY not in names:
        return None
    assert data is not None  # (names came from it)
    where = f"PLY face property {PLY_REFLECTIVITY!r}"
    index_name = next((name for name in _PLY_INDEX_NAMES if name in names), None)
    vertex = elements.get("vertex", {}).get("data")
    if index_name is None or vertex is None:
        raise AssetError(f"{where}: the faces have no vertex_indices list, or the file no vertices")
    polygons = data[index_name]
    if isinstance(polygons, np.ndarray) and polygons.dtype.names:  # binary: (count, indices) records
        polygons = polygons[polygons.dtype.names[-1]]
    values = np.asarray(data[PLY_REFLECTIVITY])
    if values.dtype.names or values.size != len(polygons):
        raise AssetError(f"{where} must be one number per face")
    values = values.reshape(-1)
    if values.dtype.kind == "f":
        rho = values.astype(np.float64)
    elif values.dtype == np.uint8:
        rho = values / 255.0
    else:
        raise AssetError(f"{where} is {values.dtype.name}: give it as float (0–1) or uchar (0–255, read as n/255)")
    bad = ~((rho >= 0.0) & (rho <= 1.0))  # NaN too
    if bad.any():
        face = int(np.argmax(bad))
        raise AssetError(f"{where} must lie in 0–1: face {face} has {values[face].item()!r}")
    if isinstance(polygons, np.ndarray) and polygons.dtype != object and polygons.ndim == 2:
        lengths, flat = np.full(len(polygons), polygons.shape[1]), polygons.reshape(-1)
    else:  # polygons of several sizes: one array each
        lengths = np.array([len(p) for p in polygons], dtype=np.int64)
        flat = np.concatenate([np.asarray(p).reshape(-1) for p in polygons]) if len(polygons) else np.zeros(0)
    flat = np.asarray(flat, dtype=np.int64)
    start = np.cumsum(lengths) - lengths
    count = np.maximum(lengths - 2, 0)  # a fan of k - 2 triangles per polygon of k corners
    polygon = np.repeat(np.arange(len(lengths)), count)
    corner = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count) + 1
    first = start[polygon]
    triangles = np.stack([flat[first], flat[first + corner], flat[first + corner + 1]], axis=1)
    vertices = np.column_stack([np.asarray(vertex[axis], dtype=np.float64).reshape(-1) for axis in "xyz"])
    return vertices, triangles, rho[polygon].astype(np.float32)

"""Visual → IR material maps: which infrared material a mesh's visual material stands for.

A map file (YAML or JSON) or dict::

    default: default_grey            # IR material for names nothing else matches
    materials:
      asphalt: asphalt               # exact visual name → IR name
      car_paint_*: metal_painted     # keys with * ? [ are fnmatch globs, tried in file order

Lookup order: exact name, then the first matching glob, then a name ``ir:<IR name>`` (which names its IR material
itself), then ``default``.
Matching is case-sensitive (mesh files keep their material names verbatim).
"""
from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from ...documents import refuse_unknown_keys
from .database import FACE_REFLECTIVITY, MaterialDatabase, MaterialError, _load_document

if TYPE_CHECKING:
    from ...geometry.scene import Mesh

__all__ = ["MaterialMap", "load_material_map", "resolve_mesh_materials", "DEFAULT_MAP", "street_material_map",
           "PACKAGED_MAPS", "packaged_map_path", "IR_NAME_PREFIX"]

_GLOB_CHARS = set("*?[")
_MAP_KEYS = {"default", "materials", "description"}
#: IR material of the default map (a neutral grey, see ``data/ir_materials.yaml``).
DEFAULT_IR_MATERIAL = "default_grey"
#: Map names that ``load_material_map`` accepts instead of a path → packaged file.
PACKAGED_MAPS = {"street": "street_map.yaml", "openmaterial": "openmaterial_map.yaml"}

#: Visual names lidar-fmu itself gives triangles (OSI bounding boxes, files without materials): they take the
#: map's default without a warning — a user's map cannot be expected to name them.
BUILTIN_VISUAL_NAMES = frozenset({"osi_bounding_box", "default"})
#: A visual name ``ir:<IR name>`` names its IR material itself (what lidar-fmu's geometry from OSI ground truth
#: carries: ``ir:asphalt``): it takes that material unless a map names the visual name exactly or by a glob.
IR_NAME_PREFIX = "ir:"
# Visual names already reported as falling to a map's default: once per process, however many meshes
# (and Lidar instances) use them; bounded, so hostile input naming endless materials cannot grow it.
_reported_unmapped: set[str] = set()
_MAX_REPORTED = 10_000


#: what :func:`load_material_map` takes: a map file path, a dict, a packaged map name or a :class:`MaterialMap`
MaterialMapSource: TypeAlias = "MaterialMap | str | os.PathLike[str] | dict[str, Any]"


@dataclass(frozen=True)
class MaterialMap:
    """Visual name → IR name: ``exact`` first, then the first matching glob, then ``default``."""

    default: str = DEFAULT_IR_MATERIAL
    exact: dict[str, str] = field(default_factory=dict)
    globs: tuple[tuple[str, str], ...] = ()  # (fnmatch pattern, IR name) in file order
    origin: str = "<dict>"  # file the map came from, for messages

    def __hash__(self):  # the dict field would make the generated hash fail
        return hash((self.default, tuple(sorted(self.exact.items())), self.globs, self.origin))

    def match(self, visual_name: str) -> tuple[str, str | None]:
        """(IR name, map key that matched: the exact name or glob; None for the default)."""
        ir = self.exact.get(visual_name)
        if ir is not None:
            return ir, visual_name
        for pattern, ir in self.globs:
            if fnmatch.fnmatchcase(visual_name, pattern):
                return ir, pattern
        return self.default, None

    def ir_name(self, visual_name: str) -> tuple[str, bool]:
        """(IR name, mapped explicitly?) for a visual material name."""
        ir, key = self.match(visual_name)
        return ir, key is not None

    def entries(self):
        """(label, IR name) of every entry, the default included (for validation messages)."""
        yield "default", self.default
        for key, ir in self.exact.items():
            yield repr(key), ir
        for key, ir in self.globs:
            yield repr(key), ir


DEFAULT_MAP = MaterialMap(DEFAULT_IR_MATERIAL, {}, (), "<default map>")


_DATABASE_GIVEN_AS_MAP = ("a list, as in an IR material database; a database goes to --ir-database (scenario "
                          "'ir_database:', FMU 'ir_database'), a map holds 'materials: {visual name: IR name}'")


def _map_from_dict(data, origin: str) -> MaterialMap:
    if isinstance(data, list):
        raise MaterialError(f"material map {origin} is {_DATABASE_GIVEN_AS_MAP}")
    if not isinstance(data, dict):
        raise MaterialError(f"material map {origin}: expected a mapping with 'default' and 'materials', "
                            f"got {type(data).__name__}")
    refuse_unknown_keys(data, _MAP_KEYS, f"material map {origin}", MaterialError)
    default = data.get("default", DEFAULT_IR_MATERIAL)
    entries = data.get("materials") or {}
    if not isinstance(default, str) or not default:
        raise MaterialError(f"material map {origin}: 'default' must be an IR material name, got {default!r}")
    if isinstance(entries, list):
        raise MaterialError(f"material map {origin}: 'materials' is {_DATABASE_GIVEN_AS_MAP}")
    if not isinstance(entries, dict):
        raise MaterialError(f"material map {origin}: 'materials' must map visual names to IR names, "
                            f"got {type(entries).__name__}")
    exact, globs = {}, []
    for key, ir in entries.items():
        if not isinstance(key, str) or not isinstance(ir, str) or not key or not ir:
            raise MaterialError(f"material map {origin}: entry {key!r}: {ir!r} must map a name to an IR name")
        if _GLOB_CHARS & set(key):
            globs.append((key, ir))
        else:
            exact[key] = ir
    return MaterialMap(default, exact, tuple(globs), origin)


def packaged_map_path(name: str) -> str:
    """The file of a packaged map (a :data:`PACKAGED_MAPS` name, e.g. ``"street"``)."""
    return _packaged_path(PACKAGED_MAPS[name])


def _packaged_path(file_name: str) -> str:
    return str(resources.files(__package__).joinpath("data").joinpath(file_name))  # one name a call: Python 3.10's API


def load_material_map(source: MaterialMapSource) -> MaterialMap:
    """A :class:`MaterialMap` from a map file path (YAML/JSON), a dict, a packaged map name
    (``"street"``) or a MaterialMap (returned as is).

    Raises :class:`MaterialError` (a ValueError) naming the file on unreadable or malformed input.
    """
    if isinstance(source, MaterialMap):
        return source
    if isinstance(source, dict):
        return _map_from_dict(source, "<dict>")
    if not isinstance(source, (str, os.PathLike)):
        raise MaterialError(f"material map must be a file path, dict or MaterialMap, got {type(source).__name__}")
    path = os.fspath(source)
    if not os.path.exists(path) and path in PACKAGED_MAPS:
        path = packaged_map_path(path)
    if not os.path.isfile(path):
        raise MaterialError(f"material map file not found: {path}")
    return _map_from_dict(_load_document(path), path)


def street_material_map() -> MaterialMap:
    """The packaged map for the demo street and car models (``data/street_map.yaml``)."""
    return load_material_map(packaged_map_path("street"))


def check_map(material_map: MaterialMap, database: MaterialDatabase) -> None:
    """Raise :class:`MaterialError` naming the first map entry whose IR material is not in ``database`` (or is the
    reserved :data:`~.database.FACE_REFLECTIVITY`)."""
    for label, ir in material_map.entries():
        if ir == FACE_REFLECTIVITY:
            raise MaterialError(f"material map {material_map.origin}, entry {label}: {FACE_REFLECTIVITY!r} is "
                                "reserved for triangles whose mesh gives their own reflectance (a PLY face property "
                                "'reflectivity'); map to a material with a reflectance")
        if ir not in database:
            close = database.close_names(ir)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise MaterialError(f"material map {material_map.origin}, entry {label}: "
                                f"unknown IR material {ir!r}{hint}")


def _named_ir(visual: str, database: MaterialDatabase) -> str:
    """The IR material an ``ir:<name>`` visual name names (:class:`MaterialError` if the database has none)."""
    ir = visual[len(IR_NAME_PREFIX):]
    if ir not in database or ir == FACE_REFLECTIVITY:
        close = database.close_names(ir)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise MaterialError(f"visual material {visual!r} names unknown IR material {ir!r}{hint}")
    return ir


def resolve_mesh_materials(mesh: Mesh, material_map: MaterialMapSource, database: MaterialDatabase,
                           warn: Callable[[str], object] | None = None) -> np.ndarray:
    """(F,) int16 IR material id of every triangle of ``mesh``.

    Each distinct visual name is looked up once and the ids are spread over
    the faces through ``mesh.face_material``. Every map entry must name an IR
    material of ``database`` (:class:`MaterialError` naming the entry). With a
    map given (not :data:`DEFAULT_MAP`, where every name takes the default by
    design), the used visual names that fall to its default are reported in
    one line per mesh through ``warn(message)``, each name once per process
    (nothing when ``warn`` is None).
    """
    material_map = load_material_map(material_map)
    check_map(material_map, database)
    names = mesh.material_names
    lut = np.empty(len(names), dtype=np.int16)
    # Only names some face uses are worth a warning.
    used = np.bincount(mesh.face_material, minlength=len(names)) > 0
    unmapped = []
    for i, visual in enumerate(names):
        ir, explicit = material_map.ir_name(visual)
        if not explicit and visual.startswith(IR_NAME_PREFIX):
            ir = _named_ir(visual, database)
            explicit = True
        lut[i] = database.index(ir)
        own = mesh.material_properties is not None and visual in mesh.material_properties  # (its asset's own)
        if not explicit and used[i] and not own and visual not in BUILTIN_VISUAL_NAMES \
                and visual not in _reported_unmapped:
            unmapped.append(visual)
    if unmapped and warn is not None and material_map is not DEFAULT_MAP:
        if len(_reported_unmapped) + len(unmapped) > _MAX_REPORTED:
            _reported_unmapped.clear()
        _reported_unmapped.update(unmapped)
        shown = ", ".join(map(repr, unmapped[:8])) + (f" and {len(unmapped) - 8} more" if len(unmapped) > 8 else "")
        warn(f"mesh {mesh.name!r}: {len(unmapped)} visual material(s) not in material map {material_map.origin} "
             f"take its default {material_map.default!r}: {shown}")
    return lut[mesh.face_material]

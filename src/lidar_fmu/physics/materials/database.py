"""Infrared (lidar-wavelength) materials: what a surface returns, by class and reflectance.

An :class:`IRMaterial` has a *class* (:data:`MATERIAL_CLASSES`) that decides what a ray does there, and a
reflectance that decides how strong the return is: a Lambertian ``reflectance`` ρ0 with ρ(θ) = ρ0·cos θ, or an
``angle_table`` of ρ at :data:`ANGLES_DEG`, or a ``spectrum`` evaluated at the sensor's wavelength; fixed values
are near-infrared (≈ 850–950 nm) and ``wavelength_factors`` scales them elsewhere (:func:`wavelength_factor`).
Retroreflective values are Lambertian-equivalent, so they may be far above 1.

:class:`MaterialDatabase` holds the built-in ``data/ir_materials.yaml`` with the user's material files laid over it
(:func:`read_material_file`: ``materials: [entry, …]``, later files replacing same-named entries).
:data:`FACE_REFLECTIVITY` is reserved: it marks the triangles whose mesh gives their own reflectance, and no user
file or map may name it. The file format, the built-in materials and their sources: docs/physics.md, "Infrared
materials".
"""
from __future__ import annotations

import difflib
import functools
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeAlias

import numpy as np

from ...documents import read_document, refuse_unknown_keys, shown, syntax_of
from ..hit_rules import MATERIAL_CLASSES
from .spectra import ANGLES_DEG, MaterialError, read_angle_table_csv, spectrum_reflectance

__all__ = [
    "MATERIAL_CLASSES", "ANGLES_DEG", "MaterialError", "IRMaterial", "MaterialDatabase", "load_database",
    "read_material_file", "BUILTIN_MATERIALS_FILE", "FACE_REFLECTIVITY", "with_face_reflectivity",
    "MaterialDatabaseSource", "surface_material", "wavelength_factor",
]

#: Material classes; the class code of a material is its position here.
#: general: return with ρ(θ); transparent: the ray passes on; absorbent: the ray
#: ends without a return; retroreflective: a very strong (saturating) return;
#: mirror: the ray reflects specularly and the return comes from what it meets (``reflectance`` is the
#: specular reflectance each bounce keeps; :mod:`lidar_fmu.physics.returns`).
# (the tuple lives in lidar_fmu.physics.hit_rules, where the kernels read the codes from)

#: Table columns of :meth:`MaterialDatabase.arrays`: 0, 10, …, 90° (ρ(90°) = 0).
TABLE_ANGLES_DEG = ANGLES_DEG + (90,)

#: The built-in material file inside the package.
BUILTIN_MATERIALS_FILE = "ir_materials.yaml"

_ENTRY_KEYS = {"name", "class", "reflectance", "spectrum", "angle_table", "source", "assumed", "notes",
               "wavelength_factors"}
_FILE_KEYS = {"materials", "description"}
#: the IR material of a triangle whose mesh gives its own Lambertian reflectance (a PLY face property
#: ``reflectivity``): class general, ρ0 the triangle's; built in, reserved (no user file or map names it)
FACE_REFLECTIVITY = "face_reflectivity"
_MAX_MATERIALS = np.iinfo(np.int16).max  # per-triangle ids are int16


@dataclass(frozen=True, eq=False)
class IRMaterial:
    """One infrared material: class plus Lambertian ρ0 *or* an angle table (ρ 0–1, retroreflectors above)."""

    name: str
    material_class: str
    reflectance: float | None  # Lambertian ρ(0) at the evaluated wavelength, or None with an angle table
    angle_table: np.ndarray | None  # (9,) ρ at ANGLES_DEG, or None
    source: str
    assumed: bool = False

    def __post_init__(self):
        where = f"IR material {self.name!r}"
        if not isinstance(self.name, str) or not self.name.strip():
            raise MaterialError(f"IR material name must be a non-empty string, got {self.name!r}")
        if self.material_class not in MATERIAL_CLASSES:
            raise MaterialError(f"{where}: class {self.material_class!r} is not one of {MATERIAL_CLASSES}")
        if (self.reflectance is None) == (self.angle_table is None):
            raise MaterialError(f"{where}: give exactly one of reflectance and angle_table")
        if self.reflectance is not None:
            rho = float(self.reflectance)
            # Above 1 only for retroreflectors (Lambertian-equivalent values).
            upper = np.inf if self.material_class == "retroreflective" else 1.0
            if not (0.0 <= rho <= upper):
                raise MaterialError(f"{where}: reflectance {rho:g} outside 0–{upper:g}")
            object.__setattr__(self, "reflectance", rho)
        else:
            table = np.array(self.angle_table, dtype=np.float64).reshape(-1)
            if table.shape != (len(ANGLES_DEG),) or not np.all(np.isfinite(table)) or table.min() < 0:
                raise MaterialError(
                    f"{where}: angle_table must be {len(ANGLES_DEG)} finite values ≥ 0 at {ANGLES_DEG}°, "
                    f"got {np.asarray(self.angle_table).tolist()}"
                )
            # Tables measured against Lambertian references may exceed 1 near specular
            # (glossy paints), so only negative values are rejected.
            table.flags.writeable = False
            object.__setattr__(self, "angle_table", table)
        object.__setattr__(self, "assumed", bool(self.assumed))
        object.__setattr__(self, "source", str(self.source))

    # Value semantics despite the array field.
    def _key(self):
        table = None if self.angle_table is None else tuple(self.angle_table.tolist())
        return (self.name, self.material_class, self.reflectance, table, self.source, self.assumed)

    def __eq__(self, other):
        return isinstance(other, IRMaterial) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    @property
    def class_code(self) -> int:
        return MATERIAL_CLASSES.index(self.material_class)

    def table_row(self) -> np.ndarray:
        """(10,) ρ at 0, 10, …, 90° (last 0): the table itself or ρ0·cos θ sampled."""
        if self.angle_table is not None:
            return np.append(self.angle_table, 0.0)
        row = self.reflectance * np.cos(np.radians(TABLE_ANGLES_DEG))
        row[-1] = 0.0  # cos 90° is 6e-17, not 0
        return row

    def reflectance_at(self, incidence_rad) -> np.ndarray:
        """ρ(θ) for incidence angles θ (rad, from the surface normal; sign ignored), same shape.

        Lambertian: ρ0·cos θ. Tables: linear over ANGLES_DEG, then linear to 0
        at 90°. 0 beyond 90° (the back of the surface).
        """
        theta = np.abs(np.asarray(incidence_rad, dtype=np.float64))
        if self.angle_table is None:
            return np.where(theta <= np.pi / 2, self.reflectance * np.cos(theta), 0.0)
        degrees = np.degrees(theta)
        # np.interp holds the last value (0 at 90°) beyond the grid.
        return np.interp(degrees, TABLE_ANGLES_DEG, self.table_row())


class MaterialDatabase:
    """IR materials by id (list position) and name, evaluated at one wavelength (nm)."""

    def __init__(self, materials=(), wavelength_nm: float = 905.0):
        self.wavelength_nm = float(wavelength_nm)
        self.materials: list[IRMaterial] = []
        self._ids: dict[str, int] = {}
        for material in materials:
            self.add(material)

    def __len__(self) -> int:
        return len(self.materials)

    def __iter__(self):
        return iter(self.materials)

    def __contains__(self, name) -> bool:
        return name in self._ids

    def __repr__(self) -> str:
        return f"MaterialDatabase({len(self)} materials at {self.wavelength_nm:g} nm)"

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.materials]

    def close_names(self, name: str, n: int = 3) -> list[str]:
        """Known names resembling ``name`` (for 'did you mean' messages)."""
        return difflib.get_close_matches(str(name), self.names, n=n, cutoff=0.5)

    def index(self, name: str) -> int:
        """IR material id of ``name``; KeyError with close-name suggestions if unknown."""
        try:
            return self._ids[name]
        except (KeyError, TypeError):
            close = self.close_names(name)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise KeyError(f"unknown IR material {name!r}{hint}") from None

    def __getitem__(self, name_or_index) -> IRMaterial:
        if isinstance(name_or_index, (int, np.integer)):
            return self.materials[int(name_or_index)]
        return self.materials[self.index(name_or_index)]

    def add(self, material: IRMaterial) -> int:
        """Add ``material``, replacing (same id) an entry of the same name; return its id."""
        if not isinstance(material, IRMaterial):
            raise TypeError(f"expected an IRMaterial, got {type(material).__name__}")
        existing = self._ids.get(material.name)
        if existing is not None:
            self.materials[existing] = material
            return existing
        if len(self.materials) >= _MAX_MATERIALS:
            raise MaterialError(f"at most {_MAX_MATERIALS} IR materials (per-triangle ids are int16)")
        self._ids[material.name] = len(self.materials)
        self.materials.append(material)
        return self._ids[material.name]

    def merge(self, other) -> MaterialDatabase:
        """Add every material of ``other`` (a database or iterable), same-named ones replaced; returns self."""
        for material in other:
            self.add(material)
        return self

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(class_code (M,) int8, reflectance_table (M, 10) float32 of ρ at 0, 10, …, 90°).

        For compiled hit processing: one linear interpolation in the row serves
        tables and Lambertian materials alike (the latter tabulated as
        ρ0·cos θ, within 0.4 % of the exact cosine). The last column (90°) is 0.
        """
        codes = np.array([m.class_code for m in self.materials], dtype=np.int8)
        table = np.zeros((len(self.materials), len(TABLE_ANGLES_DEG)), dtype=np.float32)
        for i, material in enumerate(self.materials):
            table[i] = material.table_row()
        return codes, table


# ---------------------------------------------------------------------------
# material files
# ---------------------------------------------------------------------------
def _load_document(path: str):
    """Parsed YAML/JSON document (JSON by extension, YAML otherwise)."""
    return read_document(path, "material file", MaterialError, syntax=syntax_of(path))  # bounded: size, depth, aliases


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _entry_material(entry, where: str, base_dir: str, wavelength_nm: float) -> IRMaterial:
    """One file entry → IRMaterial (spectrum evaluated at ``wavelength_nm``); a bad value is refused naming its key."""
    if not isinstance(entry, dict):
        raise MaterialError(f"{where}: each entry must be a mapping, got {shown(entry)}")
    refuse_unknown_keys(entry, _ENTRY_KEYS, where, MaterialError)
    name: Any = entry.get("name")  # anything: IRMaterial says if it is no name
    where = f"{where} ({shown(name)})"
    given = [k for k in ("reflectance", "spectrum", "angle_table") if entry.get(k) is not None]
    if len(given) != 1:
        raise MaterialError(f"{where}: give exactly one of reflectance, spectrum, angle_table (got {given})")
    source = str(entry.get("source") or "").strip()
    reflectance, table = entry.get("reflectance"), entry.get("angle_table")
    if reflectance is not None and not _is_number(reflectance):
        raise MaterialError(f"{where}: reflectance must be a number (0–1), got {shown(reflectance)}")
    if table is not None and not (isinstance(table, list) and len(table) == len(ANGLES_DEG)
                                  and all(_is_number(v) for v in table)):
        raise MaterialError(f"{where}: angle_table must be {len(ANGLES_DEG)} numbers (ρ at {ANGLES_DEG}°), "
                            f"got {shown(table)}")
    if not isinstance(entry.get("class", "general"), str):
        raise MaterialError(f"{where}: class must be one of {MATERIAL_CLASSES}, got {shown(entry['class'])}")
    if not isinstance(entry.get("assumed", False), bool):
        raise MaterialError(f"{where}: assumed must be true or false, got {shown(entry['assumed'])}")
    if "wavelength_factors" in entry:
        if given[0] == "spectrum":
            raise MaterialError(f"{where}: wavelength_factors scales a reflectance or angle_table; a spectrum "
                                "already gives every wavelength")
        factor = wavelength_factor(entry["wavelength_factors"], wavelength_nm, where)
        if reflectance is not None:
            reflectance = float(reflectance) * factor
        elif table is not None:
            table = [float(v) * factor for v in table]
        if factor != 1.0:
            source = f"{source}; × {factor:.3g} at {wavelength_nm:g} nm (wavelength_factors)"
    if given[0] == "spectrum":
        if not isinstance(entry["spectrum"], str):
            raise MaterialError(f"{where}: spectrum must be a file name, got {shown(entry['spectrum'])}")
        spectrum = os.path.join(base_dir, entry["spectrum"])
        reflectance = spectrum_reflectance(spectrum, wavelength_nm)
        source = f"{source}; interpolated at {wavelength_nm:g} nm from {os.path.basename(spectrum)}".lstrip("; ")
    try:
        return IRMaterial(
            name=name,
            material_class=str(entry.get("class", "general")),
            reflectance=None if reflectance is None else float(reflectance),
            angle_table=None if table is None else np.asarray(table, dtype=np.float64),
            source=source or "no source given",
            assumed=bool(entry.get("assumed", False)),
        )
    except (TypeError, ValueError) as exc:
        raise MaterialError(f"{where}: {exc}") from None


def wavelength_factor(pairs, wavelength_nm: float, where: str = "material") -> float:
    """The factor of ``pairs`` (``[[wavelength_nm, factor], …]``, wavelengths ascending, factors ≥ 0) at
    ``wavelength_nm``: linear between pairs, the first and last factor beyond them."""
    try:
        if isinstance(pairs, (str, bytes)):
            raise TypeError
        array = np.asarray(pairs, dtype=np.float64)
    except (TypeError, ValueError):
        array = np.empty((0, 0))
    if (array.ndim != 2 or array.shape[1] != 2 or not len(array) or not np.all(np.isfinite(array))
            or np.any(array[:, 0] <= 0) or np.any(np.diff(array[:, 0]) <= 0) or np.any(array[:, 1] < 0)):
        raise MaterialError(f"{where}: wavelength_factors must be [[wavelength_nm, factor], …] with wavelengths "
                            f"ascending and factors ≥ 0, got {shown(pairs)}")
    return float(np.interp(wavelength_nm, array[:, 0], array[:, 1]))


def read_material_file(path, wavelength_nm: float = 905.0) -> list[IRMaterial]:
    """IR materials of a YAML/JSON material file (docs/physics.md, "Infrared materials") or an angle-table CSV.

    CSV materials are class ``general`` with the file as their source.
    """
    path = os.fspath(path)
    if path.lower().endswith(".csv"):
        return [IRMaterial(name, "general", None, table, f"angle table {os.path.basename(path)}")
                for name, table in read_angle_table_csv(path).items()]
    document = _load_document(path)
    if isinstance(document, dict):
        entries = document.get("materials")
        if isinstance(entries, dict):
            raise MaterialError(f"material file {path}: 'materials' maps names to names, as a visual → IR material "
                                "map does; a map goes to --materials (scenario 'materials:', FMU 'materials'), an IR "
                                "material database holds 'materials: [entry, …]'")
        refuse_unknown_keys(document, _FILE_KEYS, f"material file {path}", MaterialError)
    else:
        entries = document
    if not isinstance(entries, list):
        raise MaterialError(f"material file {path}: expected a list of materials or 'materials: [...]'")
    base_dir = os.path.dirname(os.path.abspath(path))
    materials = [_entry_material(e, f"material file {path}, entry {i}", base_dir, wavelength_nm)
                 for i, e in enumerate(entries)]
    names = [m.name for m in materials]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise MaterialError(f"material file {path}: repeated names {repeated}")
    return materials


def _builtin_path() -> str:
    return str(resources.files(__package__).joinpath("data").joinpath(BUILTIN_MATERIALS_FILE))  # one name a call: Python 3.10's API


@functools.lru_cache(maxsize=8)
def _builtin_materials(wavelength_nm: float) -> tuple[IRMaterial, ...]:
    # IRMaterial is immutable, so one parse per wavelength serves every database.
    return tuple(read_material_file(_builtin_path(), wavelength_nm))


#: what :class:`lidar_fmu.physics.returns.Materials` takes as its database: a material file, several, or a database
MaterialDatabaseSource: TypeAlias = "MaterialDatabase | str | os.PathLike[str] | Sequence[str | os.PathLike[str]]"


def load_database(wavelength_nm: float = 905.0, files=()) -> MaterialDatabase:
    """Built-in materials at ``wavelength_nm`` plus user ``files`` (YAML/JSON material files or angle-table CSVs).

    Spectrum-based entries are interpolated from their ASTER file at the
    sensor wavelength (an error if the spectrum does not cover it). User
    materials replace built-in ones of the same name (keeping their id); a user
    file may not define :data:`FACE_REFLECTIVITY`. Raises
    :class:`MaterialError` naming the file (and the entry and key) on a
    missing, unreadable or malformed file.
    """
    wavelength_nm = float(wavelength_nm)
    if not (np.isfinite(wavelength_nm) and wavelength_nm > 0):
        raise MaterialError(f"wavelength must be positive and finite, got {wavelength_nm} nm")
    if isinstance(files, (str, os.PathLike)):
        files = (files,)
    database = MaterialDatabase(_builtin_materials(wavelength_nm), wavelength_nm)
    for path in files:
        if not isinstance(path, (str, os.PathLike)):
            raise MaterialError(f"IR material database must be a file path, got {shown(path)}")
        if not os.path.isfile(path):
            raise MaterialError(f"IR material database file not found: {os.fspath(path)}")
        materials = read_material_file(path, wavelength_nm)
        if any(m.name == FACE_REFLECTIVITY for m in materials):
            raise MaterialError(f"material file {os.fspath(path)}: {FACE_REFLECTIVITY!r} is reserved (the triangles "
                                "whose mesh gives their own reflectance); give your material another name")
        database.merge(materials)
    return database


def with_face_reflectivity(database: MaterialDatabase) -> MaterialDatabase:
    """``database`` with the built-in :data:`FACE_REFLECTIVITY` material (itself when it has it, else a copy)."""
    if FACE_REFLECTIVITY in database:
        return database
    copy = MaterialDatabase(database, database.wavelength_nm)
    copy.add(next(m for m in _builtin_materials(database.wavelength_nm) if m.name == FACE_REFLECTIVITY))
    return copy


# ---------------------------------------------------------------------------
# an asset's own surfaces (ASAM OpenMATERIAL 3D)
# ---------------------------------------------------------------------------
#: R_A (cd·lx⁻¹·m⁻²) at 0° of the built-in ``retroreflector`` sheeting, whose angle table an asset's own coefficient
#: of retroreflection scales (the falloff over angle is the sheeting's: an asset gives one value)
RETROREFLECTOR_R_A = 70.0


def surface_material(properties, wavelength_nm: float, retroreflector: IRMaterial | None = None) -> IRMaterial | None:
    """The IR material of an asset's own surface (:class:`lidar_fmu.geometry.openmaterial.SurfaceProperties`) at the
    sensor's wavelength; None where it says nothing a lidar sees.

    A lidar BRDF table f_r(λ, θ_i, θ_r, φ_r) becomes the Lambertian-equivalent ρ(θ) = π·f_r(θ, θ)·cos θ of the
    backscatter direction (exit zenith = incident zenith, in the plane of incidence: a monostatic lidar), at the
    table's wavelength nearest the sensor's and, per 10° step, its nearest angle (a Lambertian f_r = ρ0/π gives
    ρ0·cos θ). A coefficient of retroreflection R_A makes it retroreflective: the built-in sheeting's angle
    table scaled to ρ(0) = π·R_A (R_A measured in visible light, used as it is: bead and prism optics are
    achromatic).
    """
    # one name per asset material (two assets may name different materials alike): a checksum of where it came from
    name = f"{properties.name} [{zlib.crc32(properties.source.encode()):08x}]"
    source = f"ASAM OpenMATERIAL 3D material {properties.source}"
    if properties.retroreflection_cd_lx_m2 is not None and retroreflector is not None \
            and retroreflector.angle_table is not None:
        table = retroreflector.angle_table * (properties.retroreflection_cd_lx_m2 / RETROREFLECTOR_R_A)
        return IRMaterial(name, "retroreflective", None, table, f"{source}: R_A {properties.retroreflection_cd_lx_m2:g}")
    rows = properties.brdf
    if rows is None or not len(rows):
        return None
    wavelengths = rows[:, 0] * 1e9
    nearest = wavelengths[np.argmin(np.abs(wavelengths - wavelength_nm))]
    rows = rows[wavelengths == nearest]
    same_side = (np.sign(rows[:, 1]) == np.sign(rows[:, 2])) | (rows[:, 1] == 0)
    in_plane = np.abs(np.sin(rows[:, 3])) < 1e-6
    back = rows[same_side & in_plane] if (same_side & in_plane).any() else rows
    incidence, mismatch = np.abs(back[:, 1]), np.abs(np.abs(back[:, 1]) - np.abs(back[:, 2]))
    table = []
    for angle in np.radians(ANGLES_DEG):
        row = back[np.argmin(np.abs(incidence - angle) + mismatch)]
        table.append(np.pi * row[4] * np.cos(angle))
    return IRMaterial(name, "general", None, np.array(table),
                      f"{source}: lidar BRDF at {nearest:g} nm (sensor {wavelength_nm:g} nm), backscatter direction")

"""Readers for measured reflectance data: ASTER spectra and angle-table CSVs.

* ASTER spectral library text (JPL): header lines, then
  ``wavelength<TAB>reflectance`` rows, wavelength in µm and reflectance in
  percent unless the ``X Units:`` / ``Y Units:`` header says otherwise.
* Angle tables: CSV rows ``material, angle_deg, reflectance`` as in the
  Ritter et al. angle-dependent 945 nm dataset (Zenodo 7467552), regridded
  onto :data:`~lidar_fmu.physics.materials.database.ANGLES_DEG`.
"""
from __future__ import annotations

import csv
import os
from typing import cast

import numpy as np

from ...documents import read_text
from ...errors import LidarFmuError

#: Angle-table bins (deg of incidence from the surface normal); a table holds ρ at each.
ANGLES_DEG = (0, 10, 20, 30, 40, 50, 60, 70, 80)


#: a spectrum file is read only up to this size (the bundled ASTER files are 7–36 kB; a user's database names
#: its own files, and a wrong name must not read a disk image into memory)
MAX_SPECTRUM_BYTES = 16 * 2**20


class MaterialError(LidarFmuError, ValueError):
    """A material, spectrum, angle table or material map is unknown, unreadable or inconsistent."""


def _floats(tokens) -> tuple[float, float] | None:
    try:
        return float(tokens[0]), float(tokens[1])
    except (IndexError, ValueError):
        return None


def _header_units(header: list[str]) -> tuple[float, float]:
    """(nm per file wavelength unit, reflectance scale to 0–1) from ``X Units:``/``Y Units:`` lines.

    Without those lines the ASTER defaults hold: µm and percent.
    """
    nm_per_unit, scale = 1000.0, 0.01
    for line in header:
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip().lower()
        if key == "x units" and "nanomet" in value:
            nm_per_unit = 1.0
        elif key == "y units" and value and "percent" not in value and "%" not in value:
            scale = 1.0  # a fraction (0–1) rather than percent
    return nm_per_unit, scale


def read_aster_spectrum(path) -> tuple[np.ndarray, np.ndarray]:
    """(wavelength_nm ascending (N,), reflectance 0–1 (N,)) of an ASTER spectral-library text file.

    Lines before the first ``number number`` line are the header; after it,
    blank lines are skipped and anything else is an error. Rows are sorted by
    wavelength (repeated wavelengths are averaged) because spliced ASTER
    segments need not be ordered. Raises :class:`MaterialError` naming the file.
    """
    path = os.fspath(path)
    try:
        if os.stat(path).st_size > MAX_SPECTRUM_BYTES:
            raise MaterialError(f"spectrum {path} is over {MAX_SPECTRUM_BYTES >> 20} MiB: not a spectrum")
        with open(path, encoding="latin-1") as fh:  # ASTER headers are not always UTF-8
            lines = fh.read(MAX_SPECTRUM_BYTES + 1).splitlines()
    except OSError as exc:
        raise MaterialError(f"cannot read spectrum {path}: {exc.strerror or exc}") from None
    header: list[str] = []
    rows: list[tuple[float, float]] = []
    for number, line in enumerate(lines, 1):
        values = _floats(line.split())
        if values is None:
            if rows and line.strip():
                raise MaterialError(f"spectrum {path}, line {number}: expected 'wavelength reflectance', got {line!r}")
            if not rows:
                header.append(line)
            continue
        rows.append(values)
    if len(rows) < 2:
        raise MaterialError(f"spectrum {path} holds no 'wavelength reflectance' rows (need at least 2)")
    data = np.asarray(rows, dtype=np.float64)
    if not np.all(np.isfinite(data)):
        raise MaterialError(f"spectrum {path} has non-finite values")
    nm_per_unit, scale = _header_units(header)
    wavelength_nm, index = np.unique(data[:, 0] * nm_per_unit, return_inverse=True)
    reflectance = np.bincount(index, data[:, 1] * scale) / np.bincount(index)
    if wavelength_nm[0] <= 0 or reflectance.min() < 0:
        raise MaterialError(f"spectrum {path} has non-positive wavelengths or negative reflectance")
    return wavelength_nm, reflectance


def spectrum_reflectance(path, wavelength_nm: float) -> float:
    """Reflectance (0–1) of the ASTER spectrum in ``path`` at ``wavelength_nm``, linearly interpolated.

    Raises :class:`MaterialError` (a ValueError) naming the file if it is
    malformed or ``wavelength_nm`` lies outside the spectrum's range.
    """
    wl, rho = read_aster_spectrum(path)
    wavelength_nm = float(wavelength_nm)
    if not (wl[0] <= wavelength_nm <= wl[-1]):
        raise MaterialError(
            f"wavelength {wavelength_nm:g} nm is outside the spectrum {os.fspath(path)} "
            f"({wl[0]:g}–{wl[-1]:g} nm)"
        )
    return float(np.interp(wavelength_nm, wl, rho))


# ---------------------------------------------------------------------------
# angle tables
# ---------------------------------------------------------------------------
_NAME_COLUMNS = {"material", "name", "material_name"}
_ANGLE_COLUMNS = {"angle_deg", "angle", "incidence_deg", "incidence_angle_deg", "theta_deg", "theta"}
_REFLECTANCE_COLUMNS = {"reflectance", "rho", "reflectivity", "reflectance_percent"}


def _column_order(header: list[str], path: str) -> tuple[int, int, int]:
    """(name, angle, reflectance) column indices from a header row."""
    keys = [h.strip().lower().replace(" ", "_") for h in header]
    order = []
    for wanted, label in ((_NAME_COLUMNS, "material"), (_ANGLE_COLUMNS, "angle_deg"),
                          (_REFLECTANCE_COLUMNS, "reflectance")):
        found = [i for i, k in enumerate(keys) if k in wanted]
        if not found:
            raise MaterialError(f"angle table {path}: header {header} has no {label!r} column")
        order.append(found[0])
    return cast("tuple[int, int, int]", tuple(order))  # one per wanted column


def _read_rows(path: str) -> list[tuple[int, list[str]]]:
    """(line number, cells) of the non-blank, non-comment rows; delimiter , ; or tab."""
    lines = read_text(path, "angle table", MaterialError).splitlines()
    first = next((ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), "")
    delimiter = max(",;\t", key=first.count) if first else ","
    rows = []
    for number, cells in enumerate(csv.reader(lines, delimiter=delimiter), 1):
        if cells and "".join(cells).strip() and not cells[0].lstrip().startswith("#"):
            rows.append((number, [c.strip() for c in cells]))
    return rows


def _regrid(angles_deg: np.ndarray, values: np.ndarray, path: str, name: str) -> np.ndarray:
    """(9,) table on ANGLES_DEG from measurements at arbitrary angles (repeats averaged)."""
    if angles_deg.min() < 0 or angles_deg.max() > 90:
        raise MaterialError(f"angle table {path}, material {name!r}: angles must lie in 0–90°")
    grid, index = np.unique(angles_deg, return_inverse=True)
    mean = np.bincount(index, values) / np.bincount(index)
    # 0.5° slack: measurement rigs report e.g. 79.8° for the 80° position.
    if grid[0] > 0.5 or grid[-1] < ANGLES_DEG[-1] - 0.5:
        raise MaterialError(
            f"angle table {path}, material {name!r}: angles {grid[0]:g}–{grid[-1]:g}° do not cover "
            f"{ANGLES_DEG[0]}–{ANGLES_DEG[-1]}°"
        )
    return np.interp(np.asarray(ANGLES_DEG, float), grid, mean)


def read_angle_table_csv(path) -> dict[str, np.ndarray]:
    """Material name → (9,) reflectance on ANGLES_DEG from a CSV of ``material, angle_deg, reflectance`` rows.

    The header row is optional (when present its column names pick the
    columns, e.g. ``material``/``angle_deg``/``reflectance``). Reflectance is a
    fraction (0–1) unless any value in the file exceeds 1, in which case the
    whole file is read as percent. Angles between bins are interpolated
    linearly; every material must cover 0–80°. Raises :class:`MaterialError`
    naming the file (and material) otherwise.
    """
    path = os.fspath(path)
    rows = _read_rows(path)
    if not rows:
        raise MaterialError(f"angle table {path} is empty")
    columns = (0, 1, 2)
    if _floats(rows[0][1][1:3]) is None:  # first row is not numeric: a header
        columns = _column_order(rows[0][1], path)
        rows = rows[1:]
    per_material: dict[str, list[tuple[float, float]]] = {}
    for number, cells in rows:
        try:
            name = cells[columns[0]]
            angle, value = float(cells[columns[1]]), float(cells[columns[2]])
        except (IndexError, ValueError):
            raise MaterialError(f"angle table {path}, line {number}: expected 'material, angle_deg, "
                                f"reflectance', got {','.join(cells)!r}") from None
        if not name or not (np.isfinite(angle) and np.isfinite(value)) or value < 0:
            raise MaterialError(f"angle table {path}, line {number}: empty name, non-finite or negative value")
        per_material.setdefault(name, []).append((angle, value))
    if not per_material:
        raise MaterialError(f"angle table {path} holds no data rows")
    percent = max(v for pairs in per_material.values() for _, v in pairs) > 1.0
    tables = {}
    for name, pairs in per_material.items():
        data = np.asarray(pairs, dtype=np.float64)
        tables[name] = _regrid(data[:, 0], data[:, 1] / (100.0 if percent else 1.0), path, name)
    return tables

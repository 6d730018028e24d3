"""An Ouster unit's own metadata JSON (as the sensor or ouster-sdk writes it) as the rays it fires.

:func:`read_ouster_metadata` reads either layout (current or legacy) into an :class:`OusterCalibration`, each
key checked (:class:`OusterMetadataError` in one line otherwise); :func:`unit_spec` makes it a sensor spec whose
rays leave the beam origins on the mirror's circle and whose ``range`` is the unit's RANGE
(:func:`range_offset_m`; the firmware user manual's XYZ lookup table, ouster-sdk ``make_xyz_lut``).
:func:`unit_figures` resolves the unit's product line and hardware revision (``prod_line``, ``prod_pn``,
``build_rev``) to its datasheet figures (:data:`DATASHEETS`) or the figures fitted on our recordings
(:data:`FITTED`). Geometry, which unit, the figures and their sources:
docs/sensors.md#an-ouster-units-own-calibration, docs/sensors.md#range-convention.
"""
from __future__ import annotations

import copy
import os
import re
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..documents import parse_document, read_document, shown
from ..errors import LidarFmuError
from ..physics.echoes import OUSTER_RETURN_ORDERS


class OusterMetadataError(LidarFmuError, ValueError):
    """Ouster metadata that cannot be read as a unit's calibration."""


#: ``lidar_mode`` values (columns per turn × turns per second) a unit runs in: the firmware user manual's
#: ``lidar_mode`` setting and ouster-sdk's ``LidarMode`` (MODE_512x10 … MODE_4096x5)
LIDAR_MODES = ("512x10", "512x20", "1024x10", "1024x20", "2048x10", "4096x5")
#: beams of a unit: Ouster sells 16 to 128 (a bound against typos, not a datasheet figure)
MAX_BEAMS = 1024
#: lengths inside the unit (beam origin, lidar → sensor frame): the OS1's are 15.8–36.2 mm (firmware user manual,
#: "lidar_origin_to_beam_origin_mm", "lidar_to_sensor_transform"); a unit is ~10 cm across, 1 m is a typo
MAX_OFFSET_MM = 1000.0


@dataclass(frozen=True)
class OusterCalibration:
    """What of a unit's metadata decides its rays (angles in degrees, lengths in mm as the JSON has them)."""

    altitude_deg: np.ndarray  # (B,) beam_altitude_angles
    azimuth_deg: np.ndarray  # (B,) beam_azimuth_angles
    beam_origin_mm: float  # n: lidar axis → beam origin, radially
    beam_origin_z_mm: float  # z0: beam origin height in the lidar frame (0 before fw 2.4 metadata)
    lidar_to_sensor_mm: np.ndarray  # (4, 4)
    columns: int  # W, measurement columns per turn
    frame_rate_hz: float
    column_window: tuple[int, int]  # first and last column the unit sends (inclusive)
    name: str = "ouster"
    prod_line: str | None = None  # sensor_info.prod_line, e.g. "OS-1-128"; None: the metadata names none
    prod_pn: str = ""  # sensor_info.prod_pn, e.g. "840-103575-06" (the revision is its suffix)
    build_rev: str = ""  # firmware, e.g. "v2.3.0"
    #: config_params.min_range_threshold_cm (firmware ≥ 3): the unit's own minimum range setting; None: not given
    min_range_threshold_cm: float | None = None
    #: config_params.return_order (ouster-sdk sensor_config.h ReturnOrder), e.g. "STRONGEST_TO_WEAKEST"; None: not given
    return_order: str | None = None
    #: config_params.udp_profile_lidar is a dual-return profile (e.g. "RNG19_RFL8_SIG16_NIR16_DUAL")
    dual: bool = False

    @property
    def beams(self) -> int:
        return len(self.altitude_deg)


@dataclass(frozen=True)
class Datasheet:
    """One product line's figures from one datasheet (lengths in m, reflectivity 0–1)."""

    source: str  # the datasheet the figures are from
    min_range_m: float
    #: the 80 % Lambertian range at > 50 % detection probability where the datasheet gives it, else at > 90 %
    max_range_m: float
    #: (reflectivity, range) at > 90 % detection probability, 100 klx sunlight (what ``detection: probabilistic``
    #: takes r_L as, :mod:`lidar_fmu.physics.effects`)
    pairs: tuple[tuple[float, float], ...]
    range_accuracy_m: float  # Lambertian targets
    wavelength_nm: float
    assumed: str = ""  # which figure is not the datasheet's own, and why


# The datasheets' OPTICAL PERFORMANCE tables. Where each figure was read (the PDFs themselves are not in reach here):
# [A] Ouster Rev 06 datasheet (datasheet-rev06-v2p4), its OS0 and OS1 rows quoted verbatim in NVIDIA Isaac Sim's
#     Ouster lidar-config generators (isaacsim.sensors.rtx, "OPTICAL PERFORMANCE - Range 45 m @ >90% detection
#     probability, 100 klx sunlight 55 m @ >50% …", "Minimum Range 0.3 m for point cloud data", "Range Accuracy
#     ±3 cm for lambertian targets, ±10 cm for retroreflectors", "Laser Wavelength 865 nm");
# [B] Ouster Rev 7 datasheets (datasheet-rev7-v3p0-os1, -v3p1-os0, -v3p1-osdome, -v2p5-os2), quoted by projects that
#     use them: OS1 "90 m at over 90 % detection probability on a 10 % Lambertian target", minimum range 0.5 m
#     (min_range_threshold_cm 50), 170 m range; OSDome minimum 0.5 m default, 45 m @ 80 %, ~20 m @ 10 %;
# [C] a third-party simulator's table of Ouster product figures (ouster_sim_core product_profile, Apache-2.0), the
#     only place found for the OS2 Rev 06 row, the Rev 7 OS0/OS2 rows and the Rev 7 accuracy (±2.5 cm Lambertian,
#     ±5 cm retroreflectors): taken as the datasheets', not checked against them (assumed).
# All ranges at > 90 % detection probability, 100 klx sunlight, 1024 × 10 Hz (OS2: 2048 × 10 Hz).
_REV06 = "Ouster Rev 06 datasheet (datasheet-rev06-v2p4)"
_REV7 = "Ouster Rev 7 datasheet (datasheet-rev7-v3p0/v3p1; OS2 v2p5)"
_REV7_MAX = "max_range_m is the 80 % range at > 90 % detection (no Rev 7 figure at > 50 % found)"
_TABLE = "figures from a simulator's table of the datasheet, not the PDF (assumed)"
#: figures per (line, generation); generation "gen1" (first OS1, firmware 1.x), "rev6" (Rev C, D, 05, 06),
#: "rev7" (Rev 7, 7.1)
DATASHEETS: dict[tuple[str, str], Datasheet] = {
    # OS1 gen 1 datasheet: "0.8 m – 120 m @ 80 % … 0.8 m – 40 m @ 10 % reflective lambertian target, 100 klx
    # sunlight, false positive rate of 1/10,000", 850 nm; range repeatability ±3 cm (1σ) at SNR 100
    ("OS1", "gen1"): Datasheet("Ouster OS1 datasheet (gen 1)", 0.8, 120.0, ((0.10, 40.0), (0.80, 120.0)), 0.03,
                               850.0),
    # [A] OS0: minimum 0.3 m; 80 %: 45 m @ > 90 %, 50 m @ > 50 %; 10 %: 15 m @ > 90 %, 20 m @ > 50 %; ±3 cm
    ("OS0", "rev6"): Datasheet(_REV06 + ", OS0", 0.3, 50.0, ((0.10, 15.0), (0.80, 45.0)), 0.03, 865.0),
    # [A] OS1: minimum 0.3 m; 80 %: 100 m @ > 90 %, 120 m @ > 50 %; 10 %: 45 m @ > 90 %, 55 m @ > 50 %; ±3 cm
    ("OS1", "rev6"): Datasheet(_REV06 + ", OS1", 0.3, 120.0, ((0.10, 45.0), (0.80, 100.0)), 0.03, 865.0),
    # [C] OS2: minimum 1.0 m; 80 %: 210 m @ > 90 %, 240 m @ > 50 %; 10 %: 80 m @ > 90 %, 100 m @ > 50 %; ±3 cm
    ("OS2", "rev6"): Datasheet(_REV06 + ", OS2", 1.0, 240.0, ((0.10, 80.0), (0.80, 210.0)), 0.03, 865.0, _TABLE),
    # [B] OS1: minimum 0.5 m, 90 m @ 10 %, 170 m @ 80 %; [C] ±2.5 cm
    ("OS1", "rev7"): Datasheet(_REV7 + ", OS1", 0.5, 170.0, ((0.10, 90.0), (0.80, 170.0)), 0.025, 865.0,
                               _REV7_MAX + "; range_accuracy_m: " + _TABLE),
    # [B] OSDome: minimum 0.5 m, 20 m @ 10 %, 45 m @ 80 %; [C] ±2.5 cm
    ("OSDome", "rev7"): Datasheet(_REV7 + ", OSDome", 0.5, 45.0, ((0.10, 20.0), (0.80, 45.0)), 0.025, 865.0,
                                  _REV7_MAX + "; range_accuracy_m: " + _TABLE),
    # [C] OS0: minimum 0.5 m, 35 m @ 10 %, 75 m @ 80 %, ±2.5 cm; OS2: minimum 0.8 m, 200 m @ 10 %, 350 m @ 80 %
    ("OS0", "rev7"): Datasheet(_REV7 + ", OS0", 0.5, 75.0, ((0.10, 35.0), (0.80, 75.0)), 0.025, 865.0,
                               _REV7_MAX + "; " + _TABLE),
    ("OS2", "rev7"): Datasheet(_REV7 + ", OS2", 0.8, 350.0, ((0.10, 200.0), (0.80, 350.0)), 0.025, 865.0,
                               _REV7_MAX + "; " + _TABLE),
}
#: what ``lidar-fmu calibrate`` fitted on the shared recordings (docs/validation.md), by (line, generation): they
#: replace the datasheet's figures where a unit's returns show them (r_L of dark surfaces, nearest and farthest
#: returns) and add what no datasheet gives (noise σ(r, ρ), the detection edge, the intensity law). OS1 Rev 06
#: (also Rev C and D, which take the Rev 06 datasheet): r_L, edge, noise and max range fitted on the OS-1-128
#: recording OS-1-128_v2.3.0_1024x10_lb_n3 (ouster-sdk test data, 3 frames), min range on the dual-return OS-1-128
#: recording OS-1-128_767798045_1024x10_20230712_120049 (returns from 0.04 m), the intensity law on the SIGNAL of
#: OS-1-32-G_v2.1.1_1024x10 (the one shared recording with SIGNAL).
FITTED: dict[tuple[str, str], dict[str, Any]] = {
    ("OS1", "rev6"): {
        "min_range_m": 0.039,
        "max_range_m": 249.4,
        "range_reflectivity": {"pairs": [[0.005, 18.947], [1.0, 110.805]], "fit": "root3"},
        "detection": "logistic",
        "detection_width": 0.0491,
        "range_noise": {"range_sigma_m": 0.00992, "shot_sigma_m": 0.001024},
        "intensity_law": {"reference_range_m": 12.0, "near_exponent": 0.5, "far_exponent": 2.0},
    },
}
_FITTED_ON = ("r_L, detection edge, noise and max range fitted by lidar-fmu calibrate on the OS-1-128 recording "
              "OS-1-128_v2.3.0_1024x10_lb_n3, min range on OS-1-128_767798045_1024x10_20230712_120049, intensity law on "
              "the SIGNAL of OS-1-32-G_v2.1.1_1024x10")

#: the product lines of ``prod_line`` (``OS-1-128``, ``OS-DOME-64``, ``OS-0-32-G``, …) → our line names
LINES = {"0": "OS0", "1": "OS1", "2": "OS2", "DOME": "OSDome"}
#: the beam-spacing suffix may carry a digit (``OS-0-32-U1``, ``OS-2-32-U0``, as ouster-sdk's own test units name
#: themselves)
_PROD_LINE = re.compile(r"OS-?(0|1|2|DOME)-(\d+)(?:-[A-Z]+\d*)?", re.IGNORECASE)
#: part numbers: current ones carry the revision as their middle group (840-…-070-…), older ones end in it
_REV7_PN = re.compile(r"-07[01]-|-07(\.\d+)?$")
_REV6_PN = re.compile(r"-(06|06\.2|062|05|C|D)$")
_REV8_PN = re.compile(r"-08\d-|-08$")


@dataclass(frozen=True)
class OusterUnit:
    """Which unit a metadata JSON describes, and the datasheet figures that go with it."""

    line: str  # OS0, OS1, OS2, OSDome
    channels: int
    generation: str  # gen1, rev6, rev7
    datasheet: Datasheet
    why: str  # how the generation was told (part number, firmware, or the fallback)


def unit_figures(cal: OusterCalibration) -> OusterUnit:
    """The unit's product line (``prod_line``) and revision (``prod_pn``, firmware) → its datasheet figures.

    A ``prod_line`` that names no line of :data:`LINES` (or none at all) raises :class:`OusterMetadataError` in one
    line: another unit's range figures would be silently wrong, and the rays alone can still be simulated with a
    spec of one's own (``ouster_metadata: FILE`` with ``min_range_m``, ``max_range_m``, ``range_reflectivity``).
    A revision the part number does not tell takes the Rev 06 figures (the older, shorter ranges) with a warning.
    """
    known = "OS-0-*, OS-1-*, OS-2-*, OS-DOME-* (e.g. OS-1-128, OS-0-32-G, OS-2-32-U0)"
    way_out = ("; to simulate it anyway, give a sensor spec with ouster_metadata: FILE and the unit's min_range_m, "
               "max_range_m and range_reflectivity")
    prod_line, inferred = cal.prod_line, ""
    if prod_line is None:  # legacy firmware leaves it empty: the beam table's vertical span tells the line
        line = line_of_span(float(np.ptp(cal.altitude_deg)))
        if line is None:
            raise OusterMetadataError(f"Ouster metadata {cal.name}: no prod_line (sensor_info), and its beams' "
                                      f"{np.ptp(cal.altitude_deg):.1f}° span is no line's, so no datasheet to take "
                                      f"its range figures from; known lines: {known}{way_out}")
        prod_line = f"OS-{line.removeprefix('OS').upper()}-{cal.beams}"
        inferred = (f"; prod_line empty, taken as {prod_line} from its beams' span "
                    f"({cal.altitude_deg.max():+.1f}…{cal.altitude_deg.min():+.1f}°)")
        warnings.warn(f"Ouster metadata {cal.name}{inferred}: the {line} datasheet's figures", stacklevel=2)
    match = _PROD_LINE.fullmatch(prod_line)
    if match is None:
        raise OusterMetadataError(f"Ouster metadata {cal.name}: prod_line {shown(cal.prod_line)} is not "
                                  f"a line we have datasheet figures for; known lines: {known}{way_out}")
    line, channels = LINES[match.group(1).upper()], int(match.group(2))
    pn = cal.prod_pn.upper()
    firmware = re.match(r"v?(\d+)\.", cal.build_rev)
    if _REV7_PN.search(pn):
        generation, why = "rev7", f"Rev 7 by prod_pn {cal.prod_pn}"
    elif _REV8_PN.search(pn):
        generation, why = "rev7", f"Rev 8 by prod_pn {cal.prod_pn} (no Rev 8 datasheet found: the Rev 7 figures, assumed)"
    elif _REV6_PN.search(pn):
        revision = pn.rsplit("-", 1)[1]
        generation, why = "rev6", f"Rev {revision} by prod_pn {cal.prod_pn}"
        if not revision.startswith("06"):
            why += " (no Rev C, D or 05 datasheet found: the Rev 06 figures, assumed)"
    elif line == "OS1" and firmware is not None and firmware.group(1) == "1":
        generation, why = "gen1", f"first generation by firmware {cal.build_rev}"
    elif line == "OSDome":
        generation, why = "rev7", "Rev 7, the OSDome's only revision"
    else:
        generation, why = "rev6", f"Rev 06 assumed: prod_pn {shown(cal.prod_pn)} names no revision we know"
        warnings.warn(f"Ouster metadata {cal.name}: {why} (the shorter ranges; Rev 7 units reach further)",
                      stacklevel=2)
    if (line, generation) not in DATASHEETS:  # a revision the line never had: its nearest datasheet
        generation = "rev7" if line == "OSDome" else "rev6"
    return OusterUnit(line, channels, generation, DATASHEETS[line, generation], why + inferred)


#: each line's vertical field of view (°) by Ouster's datasheets (OS0 90°, OS1 45° (gen 1: 33.2°), OS2 22.5°,
#: OSDome 180°) → the widest beam span (°) taken as that line: halfway between neighbours, so a unit's calibrated
#: span (a degree or two short of the nominal) falls in its own line
_SPAN_LINES = ((27.8, "OS2"), (67.5, "OS1"), (135.0, "OS0"), (180.0, "OSDome"))


def line_of_span(span_deg: float) -> str | None:
    """The product line whose field of view a beam table spanning ``span_deg`` (top beam to bottom) fits."""
    return next((line for widest, line in _SPAN_LINES if span_deg <= widest), None) if span_deg > 5.0 else None


#: Ouster OS1 (gen 1) datasheet: beam divergence 0.13° FWHM (16 and 64 channels), 0.18° FWHM (128 channels), one
#: figure for both axes; "beam diameter exiting sensor 10 mm" (taken as the 1/e² diameter, assumed). A unit's
#: metadata keeps them for every OS1 (no later OS1 datasheet found gives them).
OS1_16_64_DIVERGENCE_MRAD = [round(float(np.radians(0.13)) * 1e3, 3)] * 2
OS1_128_DIVERGENCE_MRAD = [round(float(np.radians(0.18)) * 1e3, 3)] * 2
OS1_BEAM_DIAMETER_M = 0.010
#: The other lines' divergence, assumed (no datasheet of theirs giving it was in reach): the OS1's for the same
#: channel count scaled by the line's vertical field of view over the OS1's 45° (OS0 90°, OS2 22.5°, OSDome 180°,
#: Ouster datasheets), as for one emitter array behind lenses of other focal lengths; the 10 mm exit beam kept.
#: Without a footprint a dual-return unit of these lines could not be simulated at all.
FIELD_OF_VIEW_OVER_OS1 = {"OS1": 1.0, "OS0": 2.0, "OS2": 0.5, "OSDome": 4.0}


def intensity_law(unit: OusterUnit) -> dict[str, float]:
    """The ``intensity_law`` of a unit of a line without its own fit: the OS1's (:data:`FITTED`, r₀ 12 m, a 0.5,
    b 2 on the OS-1-32's SIGNAL) with r₀ scaled by the line's 10 % range over the OS1's in the same generation's
    datasheet (OS0 4 m, OS2 21.3 m at Rev 06). Assumed: the range where the received signal stops rising with
    range follows the optics' reach; checked on units nothing was fitted on (docs/validation.md: an OS-2-128 and
    an OS-0-32 rank SIGNAL at 0.78 and 0.96 under it, 0.47 and 0.90 under the flat-then-1/r² default)."""
    os1 = DATASHEETS.get(("OS1", unit.generation), DATASHEETS["OS1", "rev6"])
    fitted = FITTED["OS1", "rev6"]["intensity_law"]
    scale = unit.datasheet.pairs[0][1] / os1.pairs[0][1]  # both pairs start at 10 %
    return fitted | {"reference_range_m": round(fitted["reference_range_m"] * scale, 2)}


def beam_footprint(line: str, channels: int) -> dict[str, Any]:
    """The footprint keys (``beam_divergence_mrad``, ``beam_diameter_m``) of a unit of ``line`` with ``channels``
    beams: the OS1 datasheet's, and for the other lines the assumption of :data:`FIELD_OF_VIEW_OVER_OS1`."""
    divergence = OS1_128_DIVERGENCE_MRAD if channels == 128 else OS1_16_64_DIVERGENCE_MRAD
    scale = FIELD_OF_VIEW_OVER_OS1[line]
    return {"beam_divergence_mrad": [round(value * scale, 3) for value in divergence],
            "beam_diameter_m": OS1_BEAM_DIAMETER_M}


def unit_spec(cal: OusterCalibration, source: str) -> dict:
    """A sensor spec (the keys a spec file uses) for the unit of ``cal``, read from ``source``: its rays from the
    metadata, its range figures from its line's datasheet (:func:`unit_figures`), and where we have them the
    figures fitted on real recordings of its line (:data:`FITTED`)."""
    unit = unit_figures(cal)
    sheet = unit.datasheet
    spec: dict[str, Any] = {
        "ouster_metadata": source,
        "description": f"Ouster {cal.prod_line or unit.line}, {unit.why}; {sheet.source}"
                       + (f"; {sheet.assumed}" if sheet.assumed else ""),
        "frame_rate_hz": cal.frame_rate_hz,
        "min_range_m": sheet.min_range_m,
        "max_range_m": sheet.max_range_m,
        "wavelength_nm": sheet.wavelength_nm,
        "range_accuracy_m": sheet.range_accuracy_m,
        "range_reflectivity": {"pairs": [list(pair) for pair in sheet.pairs], "fit": "log"},
    }
    fitted = FITTED.get((unit.line, unit.generation))
    if fitted is not None:
        spec |= copy.deepcopy(fitted)
        spec["description"] += f"; {_FITTED_ON}"
    if cal.min_range_threshold_cm is not None:
        # the unit's own setting wins over the datasheet's and the fitted minimum (ouster-sdk sensor_config: "the
        # minimum detection range of the lidar in cm")
        spec["min_range_m"] = cal.min_range_threshold_cm / 100.0
    if "intensity_law" not in spec:
        spec["intensity_law"] = intensity_law(unit)
    spec |= beam_footprint(unit.line, unit.channels)
    if unit.line != "OS1":
        spec["description"] += (f"; beam divergence {spec['beam_divergence_mrad'][0]} mrad: the OS1's scaled by the "
                                "field of view (assumed)")
    # the unit's dual-return profile and order as set (the order's default is the unit's: STRONGEST_TO_WEAKEST)
    spec["return_order"] = OUSTER_RETURN_ORDERS[cal.return_order or "STRONGEST_TO_WEAKEST"]
    if cal.dual:
        spec["returns"] = "dual"
    return spec


def _numbers(value, key: str, name: str, shape=None) -> np.ndarray:
    """``value`` as finite float64 numbers (of ``shape``), else one line naming ``key``."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        array = None
    if array is None or isinstance(value, (str, bytes, dict)) or (shape is not None and array.shape != shape):
        want = "a list of numbers" if shape is None else "a number" if shape == () else f"{shape[0]} numbers"
        raise OusterMetadataError(f"Ouster metadata {name}: {key} must be {want}, got {shown(value)}")
    if not np.all(np.isfinite(array)):
        raise OusterMetadataError(f"Ouster metadata {name}: {key} holds a value that is not finite "
                                  f"(NaN or infinite), got {shown(value)}")
    return array


def _matrix(value, key: str, name: str) -> np.ndarray:
    """A 4×4 rigid transform in mm (given as 16 numbers, row-major, or as 4 rows of 4)."""
    m = _numbers(value, key, name)
    if m.size != 16:
        raise OusterMetadataError(f"Ouster metadata {name}: {key} must be 16 numbers (4×4, row-major), got "
                                  f"{shown(value)}")
    m = m.reshape(4, 4)
    rotation = m[:3, :3]
    # a rotation (the metadata's are identity or a 180° yaw): orthonormal with determinant +1, to 1e-3
    if (not np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-3) or abs(np.linalg.det(rotation) - 1) > 1e-3
            or not np.allclose(m[3], [0, 0, 0, 1], atol=1e-9)):
        raise OusterMetadataError(f"Ouster metadata {name}: {key} must be a rigid transform (a rotation and a "
                                  f"translation, last row 0 0 0 1), got {shown(value)}")
    if np.any(np.abs(m[:3, 3]) > MAX_OFFSET_MM):
        raise OusterMetadataError(f"Ouster metadata {name}: {key} translation must lie within ±{MAX_OFFSET_MM:g} mm "
                                  f"(inside the unit), got {shown(m[:3, 3].tolist())}")
    return m


def _section(d: dict, key: str, name: str) -> dict:
    """A sub-object of the current layout (``beam_intrinsics``, …), or the flat legacy document itself."""
    section = d.get(key, d)
    if not isinstance(section, dict):
        raise OusterMetadataError(f"Ouster metadata {name}: {key} must be an object, got {shown(section)}")
    return section


def _lidar_mode(value, name: str) -> tuple[int, int]:
    """(columns per turn, turns per second) of a ``lidar_mode`` such as ``"1024x10"``."""
    if not isinstance(value, str) or value.lower() not in LIDAR_MODES:
        raise OusterMetadataError(f"Ouster metadata {name}: lidar_mode must be one of {', '.join(LIDAR_MODES)} "
                                  f"(columns x rate), got {shown(value)}")
    columns, rate = (int(v) for v in value.lower().split("x"))
    return columns, rate


def _column_window(value, columns: int, name: str) -> tuple[int, int]:
    """(first, last) measurement column the unit sends, both in ``[0, columns)``; first > last wraps past the
    end of the turn (a window across the encoder's zero)."""
    ok = (isinstance(value, (list, tuple)) and len(value) == 2
          and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < columns for v in value))
    if not ok:
        raise OusterMetadataError(f"Ouster metadata {name}: column_window must be [first, last] columns in "
                                  f"0 … {columns - 1} (lidar_mode's {columns} columns), got {shown(value)}")
    return int(value[0]), int(value[1])


def read_ouster_metadata(source, name: str = "ouster") -> OusterCalibration:
    """An :class:`OusterCalibration` from a metadata file path, JSON text or parsed dict (current or legacy layout);
    ``name`` names the unit (a file's name without extension by default).

    Every key it uses is checked (type, shape, finite, within the unit's bounds); a bad one raises
    :class:`OusterMetadataError` with one line naming it.
    """
    if isinstance(source, (str, os.PathLike)) and not str(source).lstrip().startswith("{"):
        name = os.path.splitext(os.path.basename(os.fspath(source)))[0]
        source = read_document(source, "Ouster metadata", OusterMetadataError, syntax="json")
    elif isinstance(source, str):
        source = parse_document(source, "Ouster metadata", OusterMetadataError, syntax="json")
    if not isinstance(source, dict):
        raise OusterMetadataError("Ouster metadata must be a JSON object")
    d = source
    beams = _section(d, "beam_intrinsics", name)
    lidar = _section(d, "lidar_intrinsics", name)
    config = _section(d, "config_params", name)
    data_format = d.get("lidar_data_format", d.get("data_format", {})) or {}
    if not isinstance(data_format, dict):
        raise OusterMetadataError(f"Ouster metadata {name}: lidar_data_format must be an object, "
                                  f"got {shown(data_format)}")
    for key, section in (("beam_altitude_angles", beams), ("beam_azimuth_angles", beams), ("lidar_mode", config)):
        if key not in section:
            raise OusterMetadataError(f"Ouster metadata {name}: missing {key!r}")
    altitude = _numbers(beams["beam_altitude_angles"], "beam_altitude_angles", name)
    azimuth = _numbers(beams["beam_azimuth_angles"], "beam_azimuth_angles", name)
    if altitude.ndim != 1 or not 1 <= len(altitude) <= MAX_BEAMS:
        raise OusterMetadataError(f"Ouster metadata {name}: beam_altitude_angles must be a list of 1 … {MAX_BEAMS} "
                                  f"numbers, got {shown(beams['beam_altitude_angles'])}")
    if azimuth.shape != altitude.shape:
        raise OusterMetadataError(f"Ouster metadata {name}: beam_azimuth_angles must have one number per beam "
                                  f"({len(altitude)}), got {shown(beams['beam_azimuth_angles'])}")
    # degrees: an elevation within ±90°; an azimuth offset within a half turn (the OS1's are about ±3°)
    if np.any(np.abs(altitude) > 90):
        raise OusterMetadataError(f"Ouster metadata {name}: beam_altitude_angles must lie within ±90°, got "
                                  f"{shown(float(altitude[np.argmax(np.abs(altitude))]))}")
    if np.any(np.abs(azimuth) > 180):
        raise OusterMetadataError(f"Ouster metadata {name}: beam_azimuth_angles must lie within ±180°, got "
                                  f"{shown(float(azimuth[np.argmax(np.abs(azimuth))]))}")
    columns, rate = _lidar_mode(config["lidar_mode"], name)
    if "beam_to_lidar_transform" in beams:
        beam_to_lidar = _matrix(beams["beam_to_lidar_transform"], "beam_to_lidar_transform", name)
        n, z0 = float(beam_to_lidar[0, 3]), float(beam_to_lidar[2, 3])
    else:
        n = float(_numbers(beams.get("lidar_origin_to_beam_origin_mm", 0.0), "lidar_origin_to_beam_origin_mm",
                           name, ()))
        z0 = 0.0
        if abs(n) > MAX_OFFSET_MM:
            raise OusterMetadataError(f"Ouster metadata {name}: lidar_origin_to_beam_origin_mm must lie within "
                                      f"±{MAX_OFFSET_MM:g} mm (inside the unit), got {shown(n)}")
    lidar_to_sensor = _matrix(lidar.get("lidar_to_sensor_transform", np.eye(4).ravel().tolist()),
                              "lidar_to_sensor_transform", name)
    window = _column_window(data_format.get("column_window", [0, columns - 1]), columns, name)
    info = _section(d, "sensor_info", name)
    prod_line, prod_pn, build_rev = (_text(info.get(key), key, name) for key in ("prod_line", "prod_pn", "build_rev"))
    threshold = config.get("min_range_threshold_cm")
    if threshold is not None:
        threshold = float(_numbers(threshold, "min_range_threshold_cm", name, ()))
        if not 0 <= threshold <= MAX_THRESHOLD_CM:
            raise OusterMetadataError(f"Ouster metadata {name}: min_range_threshold_cm must lie in 0 … "
                                      f"{MAX_THRESHOLD_CM:g} cm, got {shown(threshold)}")
    order = config.get("return_order")
    if order is not None and order not in OUSTER_RETURN_ORDERS:
        raise OusterMetadataError(f"Ouster metadata {name}: config_params.return_order must be one of "
                                  f"{', '.join(OUSTER_RETURN_ORDERS)}, got {shown(order)}")
    # the profile sits in config_params (current metadata) or, in firmware 2.x's flat metadata, in data_format
    profile = config.get("udp_profile_lidar", data_format.get("udp_profile_lidar"))
    dual = isinstance(profile, str) and profile.endswith("_DUAL")
    return OusterCalibration(altitude, azimuth, n, z0, lidar_to_sensor, columns, float(rate), window, name,
                             prod_line or None, prod_pn, build_rev, threshold, order, dual)


#: the largest ``min_range_threshold_cm`` taken (units accept 0, 30 or 50 cm; ouster-ros ``min_distance``): a bound
#: against typos
MAX_THRESHOLD_CM = 10_000.0
#: a metadata text field's longest length (part numbers and firmware tags are ~20–100 characters)
MAX_TEXT = 200


def _text(value, key: str, name: str) -> str:
    """A ``sensor_info`` text field ("" when absent), else one line naming ``key``."""
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise OusterMetadataError(f"Ouster metadata {name}: sensor_info.{key} must be a text of at most "
                                  f"{MAX_TEXT} characters, got {shown(value)}")
    return value.strip()


def range_offset_m(cal: OusterCalibration) -> float:
    """What the unit adds to the distance along the beam (from its origin) to report RANGE, in m.

    ouster-sdk ``make_xyz_lut`` (``ouster_core/src/xyzlut.cpp``): ``offset = (n cos θe, n sin θe, z0) − d·direction``
    with ``d = √(n² + z0²)`` (``beam_to_lidar_euclidean_distance_mm``), and a pixel lies at
    ``offset + RANGE·direction``; the beam origin is ``(n cos θe, n sin θe, z0)``, so ``RANGE = t + d``.
    """
    return float(np.hypot(cal.beam_origin_mm, cal.beam_origin_z_mm)) * 1e-3


def ouster_rays(cal: OusterCalibration):
    """The unit's rays in the sensor frame, column-major (ray ``c · B + b`` is beam ``b`` of sent column ``c``).

    → (origins (N, 3) m, unit directions (N, 3), beam id (N,) uint32,
    measurement column (N,) uint32, firing time after the frame's first
    column (N,) float32 s), all float32 but the integers. Only the columns
    in ``column_window`` are fired, as the unit sends only those.
    """
    first, last = cal.column_window
    if last >= first:
        measurement = np.arange(first, last + 1)
    else:  # a window that wraps past the end of the turn
        measurement = np.concatenate([np.arange(first, cal.columns), np.arange(0, last + 1)])
    m = np.repeat(measurement, cal.beams).astype(np.float64)
    beam = np.tile(np.arange(cal.beams), len(measurement))
    encoder = 2.0 * np.pi * (1.0 - m / cal.columns)
    azimuth = encoder - np.radians(cal.azimuth_deg[beam])
    altitude = np.radians(cal.altitude_deg[beam])
    directions = np.stack([np.cos(azimuth) * np.cos(altitude), np.sin(azimuth) * np.cos(altitude),
                           np.sin(altitude)], axis=1)
    origins_mm = np.stack([cal.beam_origin_mm * np.cos(encoder), cal.beam_origin_mm * np.sin(encoder),
                           np.full(len(m), cal.beam_origin_z_mm)], axis=1)
    R, T = cal.lidar_to_sensor_mm[:3, :3], cal.lidar_to_sensor_mm[:3, 3]
    origins = (origins_mm @ R.T + T) * 1e-3
    directions = directions @ R.T
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    column_period_s = 1.0 / (cal.columns * cal.frame_rate_hz)
    time_s = (m - m[0]) % cal.columns * column_period_s
    return (origins.astype(np.float32), directions.astype(np.float32), beam.astype(np.uint32),
            m.astype(np.uint32), time_s.astype(np.float32))


#: a full turn swept clockwise seen from above, as the units turn: +180° down to −180°
_FULL_TURN_CW = [180.0, -180.0]


def _os1_gen1(channels: int) -> dict:
    """The Ouster OS1 (gen 1) preset of ``channels`` beams (16 or 64: they differ in nothing else)."""
    return {
        "range_accuracy_m": 0.03,  # Ouster OS1 (gen 1) datasheet: range accuracy ±3 cm (Lambertian targets)
        "description": f"Ouster OS1-{channels} (gen 1), {channels} beams ±16.6°, 1024 columns at 10 Hz",
        "vertical_fov_deg": [-16.6, 16.6],
        "channels": channels,
        "horizontal_fov_deg": _FULL_TURN_CW,
        "horizontal_samples": 1024,
        "frame_rate_hz": 10.0,
        "min_range_m": 0.8,
        "max_range_m": 120.0,
        "wavelength_nm": 850.0,
        "beam_divergence_mrad": OS1_16_64_DIVERGENCE_MRAD,
        "beam_diameter_m": OS1_BEAM_DIAMETER_M,
        "return_order": "strongest_to_weakest",  # the unit's default (ouster-sdk sensor_config.h)
        "range_reflectivity": {"pairs": [[0.10, 40.0], [0.80, 120.0]], "fit": "log"},
    }


#: what both OS1-128 presets share after their rays (Ouster OS1-128 datasheet)
_OS1_128 = {
    "frame_rate_hz": 10.0,
    "min_range_m": 0.3,
    "max_range_m": 120.0,
    "wavelength_nm": 865.0,
    "beam_divergence_mrad": OS1_128_DIVERGENCE_MRAD,
    "beam_diameter_m": OS1_BEAM_DIAMETER_M,
    "return_order": "strongest_to_weakest",  # the unit's default (ouster-sdk sensor_config.h)
    "range_reflectivity": {"pairs": [[0.10, 40.0], [0.80, 120.0]], "fit": "log"},
}


#: Ouster presets (merged into :data:`lidar_fmu.sensors.presets.PRESETS`). Beam elevations evenly spaced over the
#: datasheet's field (``ouster_os1_128_cal``: one unit's metadata). ``range_reflectivity``: Ouster OS1 (gen 1)
#: datasheet, 40 m at 10 % and 120 m at 80 % (log fit, through both); divergence and the 10 mm exit beam:
#: :data:`OS1_16_64_DIVERGENCE_MRAD`, :data:`OS1_BEAM_DIAMETER_M`.
OUSTER_PRESETS: dict[str, dict] = {
    "ouster_os1_16": _os1_gen1(16),
    "ouster_os1_64": _os1_gen1(64),
    "ouster_os1_128": {
        "range_accuracy_m": 0.03,  # Ouster OS1-128 datasheet: range accuracy ±3 cm (Lambertian), ±10 cm (retroreflectors)
        "description": "Ouster OS1-128, 128 beams ±22.5°, 1024 columns at 10 Hz (512/2048 via horizontal_samples)",
        "vertical_fov_deg": [-22.5, 22.5],
        "channels": 128,
        "horizontal_fov_deg": _FULL_TURN_CW,
        "horizontal_samples": 1024,
        **_OS1_128,
    },
    "ouster_os1_128_cal": {
        "range_accuracy_m": 0.03,  # Ouster OS1-128 datasheet: range accuracy ±3 cm (Lambertian), ±10 cm (retroreflectors)
        "description": "Ouster OS1-128 unit 122201000998 (ouster-sdk test data): its own calibration, 15.8 mm beam origins",
        # the unit's metadata JSON (beam altitudes +20.95…−21.82°, staggered azimuths, beam origins, column
        # timing): sensors/data/ouster_os1_128_v2.3.0_1024x10.json, from ouster-sdk's tests (BSD-3-Clause)
        "ouster_metadata": "ouster_os1_128_v2.3.0_1024x10.json",
        **_OS1_128,
    },
}

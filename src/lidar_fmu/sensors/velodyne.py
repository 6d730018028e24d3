"""A Velodyne unit's calibration YAML (the ros-drivers / velodyne-decoder format) and firing timing as rays.

:func:`read_velodyne_calibration` reads a calibration (YAML, or VeloView's ``db.xml`` through :func:`velodyne_xml`)
within :data:`BOUNDS`; :func:`beam_geometry` turns each laser's corrections into a ray origin and direction (the
HDL-64E manuals' and ros-drivers/velodyne ``RawData::unpack``'s point, in our frame); :data:`FIRING` holds each
model's documented firing sequence and :func:`velodyne_pattern` fires it while the head turns;
:data:`VELODYNE_PRESETS` are the presets. Geometry, equations and sources:
docs/sensors.md#velodyne-calibrations-and-firing-sequences.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..documents import read_document, shown
from ..errors import LidarFmuError
from ..geometry.pattern import RayPattern, check_ray_count


class VelodyneCalibrationError(LidarFmuError, ValueError):
    """A Velodyne calibration file that cannot be read as per-laser corrections."""


@dataclass(frozen=True)
class VelodyneCalibration:
    """Per-laser corrections, sorted by ``laser_id`` (rad, m)."""

    laser_id: np.ndarray  # (L,) int
    vert_correction_rad: np.ndarray  # θ: the laser's elevation
    rot_correction_rad: np.ndarray  # azimuth offset, added to the counter-clockwise head azimuth
    vert_offset_m: np.ndarray  # v: origin above the axis, perpendicular to the beam
    horiz_offset_m: np.ndarray  # h: origin left of the beam, horizontal
    dist_correction_m: np.ndarray  # range only: kept, not applied

    @property
    def lasers(self) -> int:
        return len(self.laser_id)


#: lasers of a unit: Velodyne's have 16 to 128 (a bound against typos, not a datasheet figure)
MAX_LASERS = 1024
#: the largest |value| each per-laser key may have, and why: angles in radians; lengths in m, where a laser
#: leaves the head within its housing (the HDL-64E's head is ~0.2 m across, its vert_offset_correction ~0.2 m)
#: and dist_correction is a range bias (the HDL-64E's are ~1–1.5 m)
BOUNDS = {
    "vert_correction": (np.pi / 2, "rad (an elevation within ±π/2: not radians?)"),
    "rot_correction": (np.pi, "rad (an azimuth offset within a half turn: not radians?)"),
    "vert_offset_correction": (1.0, "m (the laser leaves the head inside its housing)"),
    "horiz_offset_correction": (1.0, "m (the laser leaves the head inside its housing)"),
    "dist_correction": (10.0, "m (a range bias of the unit)"),
}


#: a VeloView / Velodyne ``db.xml`` laser's element → (the YAML key, factor): angles in degrees, lengths in
#: centimetres, as ros-drivers/velodyne's ``gen_calibration.py`` converts them (and VeloView's and PCL's
#: ``HDLGrabber`` read them)
XML_KEYS = {"id_": ("laser_id", 1.0), "rotCorrection_": ("rot_correction", np.pi / 180.0),
            "vertCorrection_": ("vert_correction", np.pi / 180.0), "distCorrection_": ("dist_correction", 0.01),
            "distCorrectionX_": ("dist_correction_x", 0.01), "distCorrectionY_": ("dist_correction_y", 0.01),
            "vertOffsetCorrection_": ("vert_offset_correction", 0.01),
            "horizOffsetCorrection_": ("horiz_offset_correction", 0.01), "focalDistance_": ("focal_distance", 0.01),
            "focalSlope_": ("focal_slope", 1.0)}


def velodyne_xml(path) -> dict:
    """A Velodyne ``db.xml`` (VeloView's calibration file, ``DB/points_/item/px``) as the calibration YAML's mapping
    (``lasers``, ``distance_resolution`` from ``distLSB_`` in cm), the lasers ``enabled_`` lists as off left out.
    One :class:`VelodyneCalibrationError` line for a file that is not one; a document type or entity declaration
    is refused (no entity is expanded)."""
    import xml.etree.ElementTree as ElementTree

    from ..documents import MAX_YAML_BYTES, read_text

    name = os.path.basename(os.fspath(path))
    text = read_text(path, "Velodyne calibration", VelodyneCalibrationError, limit=MAX_YAML_BYTES)
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise VelodyneCalibrationError(f"Velodyne calibration {name}: a document type or entity declaration is not "
                                       "read (a db.xml has none)")
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise VelodyneCalibrationError(f"Velodyne calibration {name}: not XML ({exc})") from None
    db = root if root.tag == "DB" else root.find("DB")
    points = None if db is None else db.find("points_")
    if db is None or points is None:
        raise VelodyneCalibrationError(f"Velodyne calibration {name}: no DB/points_ (not a Velodyne db.xml)")
    enabled = [item.text.strip() != "0" for item in db.findall("enabled_/item") if item.text is not None]
    lasers = []
    for k, item in enumerate(points.findall("item")):
        px = item.find("px")
        if px is None:
            raise VelodyneCalibrationError(f"Velodyne calibration {name}: points_ item {k} has no px")
        laser = {}
        for element, (key, factor) in XML_KEYS.items():
            node = px.find(element)
            if node is None or node.text is None:
                continue
            try:
                laser[key] = float(node.text) * factor
            except ValueError:
                raise VelodyneCalibrationError(f"Velodyne calibration {name}: points_ item {k} {element} must be a "
                                               f"number, got {shown(node.text)}") from None
        index = int(laser.get("laser_id", -1))
        if index >= 0:
            laser["laser_id"] = index
        if index < 0 or index >= len(enabled) or enabled[index]:
            lasers.append(laser)
    calibration: dict = {"lasers": lasers, "num_lasers": len(lasers)}
    lsb = db.find("distLSB_")
    if lsb is not None and lsb.text is not None:
        try:
            calibration["distance_resolution"] = float(lsb.text) * 0.01
        except ValueError:
            raise VelodyneCalibrationError(f"Velodyne calibration {name}: distLSB_ must be a number") from None
    return calibration


def read_velodyne_calibration(path) -> VelodyneCalibration:
    """The corrections of a calibration YAML (``lasers: [{laser_id, vert_correction, rot_correction, …}]``) or of a
    Velodyne ``db.xml`` (:func:`velodyne_xml`).

    Read within the bounds of :mod:`lidar_fmu.documents`; every key it uses is checked (numbers, finite, within
    :data:`BOUNDS`); a bad one raises :class:`VelodyneCalibrationError` with one line naming it and the laser.
    """
    name = os.path.basename(os.fspath(path))
    if os.fspath(path).lower().endswith(".xml"):
        data = velodyne_xml(path)
    else:
        data = read_document(path, "Velodyne calibration", VelodyneCalibrationError, syntax="yaml")
    lasers = data.get("lasers") if isinstance(data, dict) else None
    if not isinstance(lasers, list) or not lasers or not all(isinstance(laser, dict) for laser in lasers):
        raise VelodyneCalibrationError(f"Velodyne calibration {name}: needs a non-empty 'lasers' list of mappings")
    if len(lasers) > MAX_LASERS:
        raise VelodyneCalibrationError(f"Velodyne calibration {name}: at most {MAX_LASERS} lasers, got {len(lasers)}")

    def column(key, default=None):
        values = np.empty(len(lasers))
        for k, laser in enumerate(lasers):  # one laser's values, so that a message names it
            if key not in laser and default is None:
                raise VelodyneCalibrationError(f"Velodyne calibration {name}: lasers[{k}] lacks {key!r}")
            value = laser.get(key, default)
            if isinstance(value, str):  # YAML 1.1 reads 2e-2 (no dot) as a string: a number all the same
                try:
                    value = float(value)
                except ValueError:
                    pass
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
                raise VelodyneCalibrationError(f"Velodyne calibration {name}: lasers[{k}].{key} must be a finite "
                                               f"number, got {shown(value)}")
            bound = BOUNDS.get(key)
            if bound is not None and abs(value) > bound[0]:
                raise VelodyneCalibrationError(f"Velodyne calibration {name}: lasers[{k}].{key} must lie within "
                                               f"±{bound[0]:.4g} {bound[1]}, got {shown(value)}")
            values[k] = value
        return values

    laser_id = column("laser_id")
    order = np.argsort(laser_id, kind="stable")
    if not np.array_equal(laser_id[order], np.arange(len(lasers))):
        raise VelodyneCalibrationError(f"Velodyne calibration {name}: laser_id must be 0…{len(lasers) - 1}, once each")
    return VelodyneCalibration(
        laser_id[order].astype(np.int64), column("vert_correction")[order], column("rot_correction", 0.0)[order],
        column("vert_offset_correction", 0.0)[order], column("horiz_offset_correction", 0.0)[order],
        column("dist_correction", 0.0)[order],
    )


@dataclass(frozen=True)
class FiringTiming:
    """A model's firing sequence: it repeats every ``sequence_s``; laser ``l`` fires ``laser_offset_s(l)`` in."""

    lasers: int
    sequence_s: float
    laser_offset_s: np.ndarray  # (lasers,) s after the sequence starts
    source: str


def _timing(lasers: int, sequence_us: float, offset_us, source: str) -> FiringTiming:
    return FiringTiming(lasers, sequence_us * 1e-6, np.asarray(offset_us, np.float64) * 1e-6, source)


_LASER = np.arange(128)
# HDL-64E: within each 6 µs slot four lasers fire 0, 1.26, 2.46, 3.66 µs in (LidarView's HDL64EAdjustTimeStamp
# constants 2.34/3.54/4.74/6.0 µs, counted back from the slot's end).
_HDL64_SLOT_US = np.array([0.0, 1.26, 2.46, 3.66])

#: Documented firing sequences by model name (``velodyne_model`` spec key).
FIRING: dict[str, FiringTiming] = {
    # VLP-16 user manual (63-9243, "Firing timing"): 16 lasers fire one after another every
    # 2.304 µs, then recharge 18.432 µs: one sequence every 55.296 µs; a data block holds two sequences.
    "VLP-16": _timing(16, 55.296, 2.304 * _LASER[:16], "VLP-16 user manual 63-9243, firing timing"),
    # Puck Hi-Res user manual: the VLP-16's timing.
    "Puck Hi-Res": _timing(16, 55.296, 2.304 * _LASER[:16], "Puck Hi-Res user manual, firing timing"),
    # HDL-32E user's manual ("Laser firing sequence"): 32 lasers 1.152 µs apart, a cycle every 46.08 µs.
    "HDL-32E": _timing(32, 46.08, 1.152 * _LASER[:32], "HDL-32E user's manual, laser firing sequence"),
    # VLP-32C user manual (63-9325, "Firing timing"): lasers fire in pairs (ids 2k and 2k+1 together),
    # 16 firings 2.304 µs apart, a sequence every 55.296 µs.
    "VLP-32C": _timing(32, 55.296, 2.304 * (_LASER[:32] // 2), "VLP-32C user manual 63-9325, firing timing"),
    # HDL-64E S2/S3 user's manuals: the upper block (lasers 0-31) and the lower block (32-63) fire at once,
    # one laser of each at a time; a full upper+lower firing takes 48 µs (≈ 20 833 firings/s: 2083 per turn at
    # 10 Hz, the 0.17° of the datasheet). The sub-slot offsets are LidarView's (Kitware), see _HDL64_SLOT_US.
    "HDL-64E": _timing(64, 48.0, 6.0 * ((_LASER[:64] % 32) // 4) + _HDL64_SLOT_US[_LASER[:64] % 4],
                       "HDL-64E S2/S3 user's manuals (48 µs per firing) + LidarView sub-slot offsets"),
    # VLS-128 (Alpha Prime) user manual ("Firing sequence"): 8 lasers fire at once in each 2.665 µs
    # time slot; a sequence is 20 slots = 53.3 µs: 16 firing groups (lasers 8g…8g+7) with two maintenance
    # slots after group 8 (as ros-drivers/velodyne and LidarView time VLS-128 packets).
    "VLS-128": _timing(128, 53.3, 2.665 * (_LASER // 8 + 2 * (_LASER // 64)),
                       "VLS-128 user manual, firing sequence (2.665 µs slots, 53.3 µs)"),
}


def beam_geometry(cal: VelodyneCalibration, laser: np.ndarray, azimuth_rad: np.ndarray):
    """(origins (N, 3) m, unit directions (N, 3)) of lasers ``laser`` fired with the head at ``azimuth_rad``
    (counter-clockwise, before ``rot_correction``), float64, per the formula of
    docs/sensors.md#velodyne-calibrations-and-firing-sequences."""
    phi = np.asarray(azimuth_rad, np.float64) + cal.rot_correction_rad[laser]
    theta = cal.vert_correction_rad[laser]
    v, h = cal.vert_offset_m[laser], cal.horiz_offset_m[laser]
    cos_t, sin_t, cos_p, sin_p = np.cos(theta), np.sin(theta), np.cos(phi), np.sin(phi)
    directions = np.stack([cos_t * cos_p, cos_t * sin_p, sin_t], axis=1)
    origins = np.stack([-v * sin_t * cos_p - h * sin_p, -v * sin_t * sin_p + h * cos_p, v * cos_t], axis=1)
    return origins, directions


def velodyne_pattern(cal: VelodyneCalibration, timing: FiringTiming, *, columns: int, start_azimuth_rad: float,
                     turn_direction: float, frame_rate_hz: float) -> RayPattern:
    """``columns`` firing sequences from ``start_azimuth_rad``, the head turning once per frame
    (``turn_direction`` −1: clockwise seen from above, as Velodyne units spin).

    Sequence ``c`` starts at ``c · sequence_s``; laser ``l`` fires ``laser_offset_s[l]`` later, with the head
    at ``start + turn_direction · 2π · frame_rate_hz · t``. Rays are column-major (one column per sequence).
    """
    if timing.lasers != cal.lasers:
        raise VelodyneCalibrationError(f"the calibration has {cal.lasers} lasers, the firing timing "
                                       f"{timing.lasers}")
    if columns * timing.sequence_s > 1.0 / frame_rate_hz * (1 + 1e-9):
        raise VelodyneCalibrationError(
            f"{columns} firing sequences of {timing.sequence_s * 1e6:g} µs take longer than a "
            f"{1e3 / frame_rate_hz:g} ms frame")
    check_ray_count(cal.lasers, columns)
    laser = np.tile(np.arange(cal.lasers), columns)
    column = np.repeat(np.arange(columns), cal.lasers)
    time_s = column * timing.sequence_s + timing.laser_offset_s[laser]
    azimuth = start_azimuth_rad + turn_direction * 2.0 * np.pi * frame_rate_hz * time_s
    origins, directions = beam_geometry(cal, laser, azimuth)
    offsets = np.any(cal.vert_offset_m != 0) or np.any(cal.horiz_offset_m != 0)
    return RayPattern(directions.astype(np.float32), laser.astype(np.uint32), column.astype(np.uint32),
                      time_s.astype(np.float32), cal.lasers, columns,
                      origins=origins.astype(np.float32) if offsets else None)


#: velodyne-decoder's model names → our presets of that model (the calibration replaces the preset's own)
MODEL_PRESETS = {"VLP16": "velodyne_vlp16", "PuckLite": "velodyne_vlp16", "PuckHiRes": "velodyne_puck_hires",
                 "HDL32E": "velodyne_hdl32e", "VLP32C": "velodyne_vlp32c", "VLS128": "velodyne_vls128",
                 "AlphaPrime": "velodyne_vls128", "HDL64E_S2": "velodyne_hdl64e_s2",
                 "HDL64E_S3": "velodyne_hdl64e_s3", "HDL64E_S1": "velodyne_hdl64e"}


#: a full turn swept clockwise seen from above, as the units turn: +180° down to −180°
_FULL_TURN_CW = [180.0, -180.0]
#: Velodyne VLS-128 user manual, Table F-1 "Beam Divergence": 3.0 mrad horizontal, 1.5 mrad vertical; the other
#: Velodyne presets assumed the same (docs/sensors.md)
_VELODYNE_DIVERGENCE_MRAD = [3.0, 1.5]

#: what every HDL-64E preset shares (they differ in their unit calibration). HDL-64E S2/S3 datasheets and
#: user's manuals: 120 m, 905 nm, 5–15 Hz (S3: 5–20 Hz), 50 m at 10 % and 120 m at 80 % reflectivity, distance
#: accuracy < 2 cm (1σ); 2083 upper+lower firings of 48 µs per 100 ms turn (velodyne.FIRING["HDL-64E"])
_HDL64E = {
    "velodyne_model": "HDL-64E",
    "horizontal_fov_deg": _FULL_TURN_CW,
    "frame_rate_hz": 10.0,
    "min_range_m": 0.9,
    "max_range_m": 120.0,
    "wavelength_nm": 905.0,
    "range_reflectivity": {"pairs": [[0.10, 50.0], [0.80, 120.0]], "fit": "log"},
    "range_accuracy_m": 0.02,
    "beam_divergence_mrad": _VELODYNE_DIVERGENCE_MRAD,
}

def _puck(description: str, calibration: str) -> dict:
    """A 16-beam Puck preset (VLP-16, Puck Hi-Res: they differ in their beams alone). Range accuracy up to ±3 cm
    (typical): VLP-16 datasheet (63-9229), Puck Hi-Res datasheet."""
    return {
        "range_accuracy_m": 0.03,
        "description": description,
        "calibration": calibration,
        "horizontal_fov_deg": _FULL_TURN_CW,
        "horizontal_samples": 900,
        "frame_rate_hz": 20.0,
        "firing_interval_s": 2.304e-6,
        "min_range_m": 0.5,
        "max_range_m": 100.0,
        "wavelength_nm": 903.0,
        "beam_divergence_mrad": _VELODYNE_DIVERGENCE_MRAD,
    }


#: Velodyne presets (merged into :data:`lidar_fmu.sensors.presets.PRESETS`). Beam elevations from the units'
#: calibration files (``data/``, ros-drivers/velodyne, BSD-3-Clause). ``range_reflectivity``: HDL-64E 50 m at 10 %
#: and 120 m at 80 % (HDL-64E S2 datasheet and user's manual, "50 m for pavement, 120 m for cars and foliage"; the
#: log fit passes through both); the VLP-16, Puck Hi-Res and HDL-32E datasheets give 100 m without a
#: reflectivity, so those presets have no limit below max_range_m. Divergence: :data:`_VELODYNE_DIVERGENCE_MRAD`.
VELODYNE_PRESETS: dict[str, dict] = {
    "velodyne_vlp16": _puck("Velodyne VLP-16 (Puck), 16 beams ±15°, 0.4° at 20 Hz", "velodyne_VLP16db.yaml"),
    "velodyne_puck_hires": _puck("Velodyne Puck Hi-Res, 16 beams ±10° (1.33° steps), 0.4° at 20 Hz",
                                 "velodyne_VLP16_hires_db.yaml"),
    "velodyne_hdl32e": {
        "range_accuracy_m": 0.02,  # HDL-32E datasheet: accuracy < 2 cm (one sigma at 25 m)
        "description": "Velodyne HDL-32E, 32 beams −30.67…+10.67°, 0.16° at 10 Hz",
        "calibration": "velodyne_32db.yaml",
        "horizontal_fov_deg": _FULL_TURN_CW,
        "horizontal_samples": 2250,
        "frame_rate_hz": 10.0,
        "firing_interval_s": 1.152e-6,
        "min_range_m": 1.0,
        "max_range_m": 100.0,
        "wavelength_nm": 903.0,
        "beam_divergence_mrad": _VELODYNE_DIVERGENCE_MRAD,
    },
    "velodyne_hdl64e": {
        **_HDL64E,
        "description": "Velodyne HDL-64E S2, 64 beams −24.7…+2.0° (unit calibration), 0.17° at 10 Hz",
        "calibration": "velodyne_64e_utexas.yaml",
    },
    # From velodyne-decoder's calibrations (data/velodyne_decoder_*.yml, BSD-3-Clause): per-laser angles and,
    # for the HDL-64E, the beam-origin offsets; timed by each model's documented firing sequence
    # (velodyne.FIRING). Columns: the firing sequences of one turn at frame_rate_hz.
    "velodyne_vlp32c": {
        "range_accuracy_m": 0.03,  # VLP-32C datasheet: range accuracy up to ±3 cm (typical)
        # VLP-32C (Ultra Puck) datasheet: 32 channels, −25…+15°, 200 m, 903 nm, 5–20 Hz, 0.1–0.4°
        "description": "Velodyne VLP-32C (Ultra Puck), 32 beams −25…+15°, paired firings, 0.2° at 10 Hz",
        "calibration": "velodyne_decoder_VLP-32C.yml",
        "velodyne_model": "VLP-32C",
        "horizontal_fov_deg": _FULL_TURN_CW,
        "frame_rate_hz": 10.0,
        "min_range_m": 0.5,  # assumed: the datasheet gives none; the VLP-16's 0.5 m (same Puck optics family)
        "max_range_m": 200.0,
        "wavelength_nm": 903.0,
        "beam_divergence_mrad": _VELODYNE_DIVERGENCE_MRAD,
    },
    "velodyne_vls128": {
        "range_accuracy_m": 0.03,  # VLS-128 (Alpha Prime) datasheet: range accuracy ±3 cm (typical)
        # VLS-128 (Alpha Prime) datasheet: 128 channels, −25…+15°, 245 m, 903 nm, 5–20 Hz, 0.1–0.4°
        "description": "Velodyne VLS-128 (Alpha Prime), 128 beams −25…+15°, 8 lasers per 2.665 µs slot, 10 Hz",
        "calibration": "velodyne_decoder_Alpha_Prime.yml",
        "velodyne_model": "VLS-128",
        "horizontal_fov_deg": _FULL_TURN_CW,
        "frame_rate_hz": 10.0,
        "min_range_m": 0.5,  # assumed: the datasheet gives none; as the VLP-16's 0.5 m
        "max_range_m": 245.0,
        "wavelength_nm": 903.0,
        "beam_divergence_mrad": _VELODYNE_DIVERGENCE_MRAD,
    },
    "velodyne_hdl64e_s2": {
        **_HDL64E,
        "description": "Velodyne HDL-64E S2.1 (SZTAKI unit calibration, beam origin offsets), 10 Hz",
        "calibration": "velodyne_decoder_HDL-64E_S2.1-sztaki.yml",
    },
    "velodyne_hdl64e_s3": {
        **_HDL64E,
        "description": "Velodyne HDL-64E S3 (VeloView default calibration, beam origin offsets), 10 Hz",
        "calibration": "velodyne_decoder_HDL-64E_S3-VeloView.yml",
    },
}

"""Predefined sensors as plain spec dictionaries (the same keys a spec file uses).

``range_accuracy_m`` is each datasheet's range accuracy, what ``noise:
"datasheet"`` uses as the range σ. Datasheets write "±3 cm (typical)" without
saying whether that is one sigma; it is taken as one sigma (assumed), as the
units that do say (HDL-32E/-64E, Livox: "1σ") quote values of the same size.

Beam elevations come from the sensors' calibration files where we have them
(Velodyne, ``data/``, ros-drivers/velodyne, BSD-3-Clause) and from datasheets
otherwise (nominal, evenly spaced). Spinning sensors sweep clockwise seen from
above, as Velodyne and Ouster units do, so ``horizontal_fov_deg`` runs from
+180° down to −180°.

``range_reflectivity`` pairs are datasheet values: HDL-64E 50 m at 10 % and
120 m at 80 % (Velodyne, HDL-64E S2 datasheet and user's manual, "50 m for
pavement, 120 m for cars and foliage"); Ouster OS1 (gen 1) 40 m at 10 % and
120 m at 80 % (Ouster OS1 datasheet, gen 1); Ibeo LUX 50 m at 10 % remission
(Ibeo LUX datasheet; one pair: a root-2 fit, extended targets). Two
pairs use the logarithmic fit, which passes through both. Velodyne's VLP-16,
Puck Hi-Res and HDL-32E datasheets give 100 m without a reflectivity, so those
presets have no limit below max_range_m.

``beam_divergence_mrad`` ([horizontal, vertical], full width at half maximum,
:mod:`lidar_fmu.physics.echoes`): Ouster OS1 (gen 1) datasheet "beam divergence 0.13°
(FWHM; 64 and 16 channel), 0.18° (FWHM; 128 channel)", one figure for both
axes; Velodyne's user manuals, appendix "Laser Pulse", §F.2.3 "Beam
Divergence" (VLS-128 manual, Table F-1): 3.0 mrad horizontal, 1.5 mrad
vertical, taken as FWHM (assumed: the manual names no convention). The other
Velodyne units (VLP-16, Puck Hi-Res, HDL-32E, VLP-32C, HDL-64E) carry the same
3.0 × 1.5 mrad, **assumed**: their datasheets give no divergence and they share
the 903/905 nm edge-emitter optics. Livox Mid-70 and Avia datasheets: 0.28°
(vertical) × 0.03° (horizontal). Ibeo LUX: **assumed** 0.08° × 0.8° (h × v):
each of its layers spans its 0.8° spacing vertically (the LUX datasheet's
"3.2° for 4 layers"), horizontally the 0.08° of a 0.125° step unit; no
datasheet figure found. ``beam_diameter_m``: Ouster OS1 (gen 1) datasheet,
"beam diameter exiting sensor 10 mm"; the others give none and leave it 0 (a
point source: their footprints are right beyond a few metres, too small
nearer).
"""
from __future__ import annotations

import numpy as np

from .automotive import AUTOMOTIVE_PRESETS
from .hesai import HESAI_PRESETS
from .ouster import OS1_16_64_DIVERGENCE_MRAD as _OS1_16_64_DIVERGENCE_MRAD
from .ouster import OS1_128_DIVERGENCE_MRAD as _OS1_128_DIVERGENCE_MRAD
from .ouster import OS1_BEAM_DIAMETER_M as _OS1_BEAM_DIAMETER_M
from .rosette import MID70_HORIZONTAL_HZ, MID70_VERTICAL_HZ

_FULL_TURN_CW = [180.0, -180.0]
#: Aeva Aeries II line spacing (deg): 40 lines evenly over 14.4° (presets' note on the Aeries II)
_AEVA_LINE_DEG = 14.4 / 39
#: Velodyne VLS-128 user manual, Table F-1 "Beam Divergence": 3.0 mrad horizontal, 1.5 mrad vertical; the other
#: Velodyne presets assumed the same (module doc)
_VELODYNE_DIVERGENCE_MRAD = [3.0, 1.5]
#: Livox Mid-70 and Avia datasheets: beam divergence 0.28° (vertical) × 0.03° (horizontal)
_LIVOX_DIVERGENCE_MRAD = [round(np.radians(0.03) * 1e3, 3), round(np.radians(0.28) * 1e3, 3)]

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

PRESETS: dict[str, dict] = {
    "velodyne_vlp16": {
        "range_accuracy_m": 0.03,  # VLP-16 datasheet (63-9229): range accuracy up to ±3 cm (typical)
        "description": "Velodyne VLP-16 (Puck), 16 beams ±15°, 0.4° at 20 Hz",
        "calibration": "velodyne_VLP16db.yaml",
        "horizontal_fov_deg": _FULL_TURN_CW,
        "horizontal_samples": 900,
        "frame_rate_hz": 20.0,
        "firing_interval_s": 2.304e-6,
        "min_range_m": 0.5,
        "max_range_m": 100.0,
        "wavelength_nm": 903.0,
        "beam_divergence_mrad": _VELODYNE_DIVERGENCE_MRAD,
    },
    "velodyne_puck_hires": {
        "range_accuracy_m": 0.03,  # Puck Hi-Res datasheet: range accuracy up to ±3 cm (typical)
        "description": "Velodyne Puck Hi-Res, 16 beams ±10° (1.33° steps), 0.4° at 20 Hz",
        "calibration": "velodyne_VLP16_hires_db.yaml",
        "horizontal_fov_deg": _FULL_TURN_CW,
        "horizontal_samples": 900,
        "frame_rate_hz": 20.0,
        "firing_interval_s": 2.304e-6,
        "min_range_m": 0.5,
        "max_range_m": 100.0,
        "wavelength_nm": 903.0,
        "beam_divergence_mrad": _VELODYNE_DIVERGENCE_MRAD,
    },
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
    "ouster_os1_16": {
        "range_accuracy_m": 0.03,  # Ouster OS1 (gen 1) datasheet: range accuracy ±3 cm (Lambertian targets)
        "description": "Ouster OS1-16 (gen 1), 16 beams ±16.6°, 1024 columns at 10 Hz",
        "vertical_fov_deg": [-16.6, 16.6],
        "channels": 16,
        "horizontal_fov_deg": _FULL_TURN_CW,
        "horizontal_samples": 1024,
        "frame_rate_hz": 10.0,
        "min_range_m": 0.8,
        "max_range_m": 120.0,
        "wavelength_nm": 850.0,
        "beam_divergence_mrad": _OS1_16_64_DIVERGENCE_MRAD,
        "beam_diameter_m": _OS1_BEAM_DIAMETER_M,
        "return_order": "strongest_to_weakest",  # the unit's default (ouster-sdk sensor_config.h)
        "range_reflectivity": {"pairs": [[0.10, 40.0], [0.80, 120.0]], "fit": "log"},
    },
    "ouster_os1_64": {
        "range_accuracy_m": 0.03,  # Ouster OS1 (gen 1) datasheet: range accuracy ±3 cm (Lambertian targets)
        "description": "Ouster OS1-64 (gen 1), 64 beams ±16.6°, 1024 columns at 10 Hz",
        "vertical_fov_deg": [-16.6, 16.6],
        "channels": 64,
        "horizontal_fov_deg": _FULL_TURN_CW,
        "horizontal_samples": 1024,
        "frame_rate_hz": 10.0,
        "min_range_m": 0.8,
        "max_range_m": 120.0,
        "wavelength_nm": 850.0,
        "beam_divergence_mrad": _OS1_16_64_DIVERGENCE_MRAD,
        "beam_diameter_m": _OS1_BEAM_DIAMETER_M,
        "return_order": "strongest_to_weakest",  # the unit's default (ouster-sdk sensor_config.h)
        "range_reflectivity": {"pairs": [[0.10, 40.0], [0.80, 120.0]], "fit": "log"},
    },
    "ouster_os1_128": {
        "range_accuracy_m": 0.03,  # Ouster OS1-128 datasheet: range accuracy ±3 cm (Lambertian), ±10 cm (retroreflectors)
        "description": "Ouster OS1-128, 128 beams ±22.5°, 1024 columns at 10 Hz (512/2048 via horizontal_samples)",
        "vertical_fov_deg": [-22.5, 22.5],
        "channels": 128,
        "horizontal_fov_deg": _FULL_TURN_CW,
        "horizontal_samples": 1024,
        "frame_rate_hz": 10.0,
        "min_range_m": 0.3,
        "max_range_m": 120.0,
        "wavelength_nm": 865.0,
        "beam_divergence_mrad": _OS1_128_DIVERGENCE_MRAD,
        "beam_diameter_m": _OS1_BEAM_DIAMETER_M,
        "return_order": "strongest_to_weakest",  # the unit's default (ouster-sdk sensor_config.h)
        "range_reflectivity": {"pairs": [[0.10, 40.0], [0.80, 120.0]], "fit": "log"},
    },
    "ouster_os1_128_cal": {
        "range_accuracy_m": 0.03,  # Ouster OS1-128 datasheet: range accuracy ±3 cm (Lambertian), ±10 cm (retroreflectors)
        "description": "Ouster OS1-128 unit 122201000998 (ouster-sdk test data): its own calibration, 15.8 mm beam origins",
        # the unit's metadata JSON (beam altitudes +20.95…−21.82°, staggered azimuths, beam origins, column
        # timing): sensors/data/ouster_os1_128_v2.3.0_1024x10.json, from ouster-sdk's tests (BSD-3-Clause)
        "ouster_metadata": "ouster_os1_128_v2.3.0_1024x10.json",
        "frame_rate_hz": 10.0,
        "min_range_m": 0.3,
        "max_range_m": 120.0,
        "wavelength_nm": 865.0,
        "beam_divergence_mrad": _OS1_128_DIVERGENCE_MRAD,
        "beam_diameter_m": _OS1_BEAM_DIAMETER_M,
        "return_order": "strongest_to_weakest",  # the unit's default (ouster-sdk sensor_config.h)
        "range_reflectivity": {"pairs": [[0.10, 40.0], [0.80, 120.0]], "fit": "log"},
    },
    # Livox prism scanners: rosettes that never repeat (rosette.py, a ContinuousScan); each frame casts the
    # shots fired since the last.
    "livox_mid70": {
        "range_accuracy_m": 0.02,  # Livox Mid-70 datasheet: range precision (1σ @ 20 m) 2 cm
        # Livox Mid-70 datasheet / user manual v1.2: 70.4° circular FOV, 100 000 points/s (first return),
        # 90 m at 10 %, 260 m at 80 % reflectivity, minimum range 0.05 m, 905 nm, 10 Hz point-cloud frames.
        # Curve rates: Project AirSim's Mid-70 (rosette.MID70_*).
        "description": "Livox Mid-70, 70.4° circular non-repetitive rosette, 100 k points/s, 10 Hz frames",
        "rosette": {"points_per_second": 100000, "channels": 1, "horizontal_rotation_hz": MID70_HORIZONTAL_HZ,
                    "vertical_rotation_hz": MID70_VERTICAL_HZ, "radial_scaling": 1.0,
                    "cone_half_angles_deg": [35.2, 35.2]},
        "frame_rate_hz": 10.0,
        "min_range_m": 0.05,
        "max_range_m": 260.0,
        "wavelength_nm": 905.0,
        "beam_divergence_mrad": _LIVOX_DIVERGENCE_MRAD,
        "range_reflectivity": {"pairs": [[0.10, 90.0], [0.80, 260.0]], "fit": "log"},
    },
    "livox_avia": {
        "range_accuracy_m": 0.02,  # Livox Avia datasheet: range precision (1σ @ 20 m) 2 cm
        # Livox Avia datasheet / user manual v1.0: 70.4° × 77.2° FOV (non-repetitive pattern), 6 lasers,
        # 240 000 points/s (first return), 190 m at 10 %, 450 m at 80 %, 905 nm, 10 Hz frames. Curve rates:
        # assumed the Mid-70's (Livox publishes none); the six channels spread evenly (rosette.py).
        "description": "Livox Avia, 70.4° × 77.2° non-repetitive rosette, 6 channels, 240 k points/s, 10 Hz",
        "rosette": {"points_per_second": 240000, "channels": 6, "horizontal_rotation_hz": MID70_HORIZONTAL_HZ,
                    "vertical_rotation_hz": MID70_VERTICAL_HZ, "radial_scaling": 1.0,
                    "cone_half_angles_deg": [35.2, 38.6]},
        "frame_rate_hz": 10.0,
        "min_range_m": 1.0,  # assumed: the Avia's datasheet gives no minimum; Livox's 1 m blind zone note
        "max_range_m": 450.0,
        "wavelength_nm": 905.0,
        "beam_divergence_mrad": _LIVOX_DIVERGENCE_MRAD,
        "range_reflectivity": {"pairs": [[0.10, 190.0], [0.80, 450.0]], "fit": "log"},
    },
    "ibeo_lux": {
        "range_accuracy_m": 0.10,  # Ibeo LUX datasheet: distance accuracy 10 cm
        # Ibeo LUX datasheet: 4 layers, 3.2° vertical (0.8° apart), 110° horizontal (+50 … −60°, 2 layers
        # at the sides), 0.125°/0.25°/0.5° at 12.5/25/50 Hz; a rotating mirror (BlenSor §3.3, ibeo.py).
        "description": "Ibeo LUX, 4 layers over 3.2° off a rotating mirror, 110° horizontal at 0.25°, 12.5 Hz",
        "vertical_angles_deg": [-1.2, -0.4, 0.4, 1.2],
        "rotating_mirror": True,
        "horizontal_fov_deg": [50.0, -60.0],
        "horizontal_resolution_deg": 0.25,
        "frame_rate_hz": 12.5,
        "min_range_m": 0.3,
        "max_range_m": 200.0,
        "wavelength_nm": 905.0,
        "beam_divergence_mrad": [1.396, 13.963],  # assumed: 0.08° × 0.8° (module doc)
        "range_reflectivity": {"pairs": [[0.10, 50.0]], "fit": "root2"},
    },
    # An FMCW unit: every return carries its radial velocity (physics/fmcw.py). Aeva publishes no datasheet with
    # numbers we can cite from here; its public driver and its own simulation code give the layout:
    # * tier4/nebula's Aeries II driver (Apache-2.0; nebula_ros/config/lidar/aeva/Aeries2.param.yaml): the unit's
    #   default configuration "horizontal_fov_degrees: 110Degrees", "vertical_pattern: 40-14.4-ROI" — 40 lines over
    #   14.4°, the naming of Aeva's own scan patterns (yuchnw/carla ScanPatterns.yaml, "Copyright Aeva 2024":
    #   "64-19.2-Uniform" is 64 lines, 0.3° apart, over 19.2°). The ROI's line density is not public: the lines are
    #   **assumed** evenly spaced (0.37°).
    # * points per line: **assumed** Aeva's own CARLA pattern's azimuth step, 144° / 3051 points = 0.0472°, so
    #   2331 points over 110° (93,240 a frame, 0.93 M points/s at 10 Hz).
    # * 10 Hz: AevaScenes (aevainc/aevascenes, docs/Dataset.md: its Aeva FMCW lidars frame at 10 Hz, wide-FOV ones
    #   110°, "up to 250 m"); Aeva's CARLA sensor's default frame period is 0.1 s.
    # * radial velocity: the point record's velocity is a 16-bit fixed-point number of 2⁻⁸ m/s (nebula
    #   PointCloudPoint::velocity, FixedPoint<int16_t, 8>): the resolution. Its precision is not public: σ **assumed**
    #   0.1 m/s, a 2 µs chirp's velocity bin λ/(2T) = 0.39 m/s over √12 (93,240 points of 4 beams a frame leave
    #   4.3 µs a point for an up- and a down-chirp).
    # * range: the record's range is a 16-bit fixed-point number of 2⁻⁷ m (nebula), at most 512 m: max_range_m 500
    #   (Aeva's product page: detection up to 500 m; not checked from here). r_L **assumed** 250 m at 10 %
    #   (AevaScenes' "up to 250 m" for its 110° units, taken as the 10 % figure; root-2 fit: 500 m by 40 %).
    # * 1550 nm (Aeva's FMCW lidars: silicon photonics at 1550 nm); min range, range σ and divergence **assumed**
    #   (none public: 0.5 m as the other presets' blind zones, 2 cm, none given).
    # Timing: Aeva's scanner sweeps 4 beams (nebula: num_beams) across each line group, one group after the other
    # (the raster below).
    "aeva_aeries2": {
        "description": "Aeva Aeries II (FMCW, 1550 nm), 110° × 14.4°, 40 lines, 2331 points a line at 10 Hz, "
                       "per-point radial velocity",
        # 4 beams a line group, 10 groups down the field (40 lines 14.4°/39 apart, ±7.2°), each group swept left to
        # right over 110° in 2331 shots; the beams of a group on adjacent lines and every sweep in the same direction:
        # **assumed** (how the 4 beams are spaced and whether the mirror sweeps back is not public)
        "raster": {
            "channels": [[0.0, round(-k * _AEVA_LINE_DEG, 5)] for k in range(4)],
            "horizontal_fov_deg": [55.0, -55.0],
            "columns": 2331,
            "lines": 10,
            # (a raster's lines sit at the middle of their share of vertical_fov_deg: groups 4 lines tall whose
            # top lines run from +7.2° down)
            "vertical_fov_deg": [round(7.2 + 2 * _AEVA_LINE_DEG, 5), round(7.2 - 38 * _AEVA_LINE_DEG, 5)],
            "line_order": "same",
        },
        "frame_rate_hz": 10.0,
        "min_range_m": 0.5,
        "max_range_m": 500.0,
        "wavelength_nm": 1550.0,
        "range_accuracy_m": 0.02,
        "range_reflectivity": {"pairs": [[0.10, 250.0]], "fit": "root2"},
        "radial_velocity": {"resolution_m_s": 2.0**-8, "sigma_m_s": 0.1},
    },
}
# Hesai units: their module holds the presets with their sources (sensors/hesai.py)
PRESETS |= HESAI_PRESETS

#: RoboSense, Hesai AT128, Valeo, Luminar, Seyond, Innoviz: sensors/automotive.py, each figure's source there
PRESETS.update(AUTOMOTIVE_PRESETS)


def unknown_preset(name: str) -> str:
    """The message for a preset name that is none: the presets it resembles, else every preset."""
    from ..documents import shown

    hint = close_names(name)
    more = f"; did you mean {', '.join(hint)}?" if hint else f"; known presets: {', '.join(PRESETS)}"
    return f"unknown sensor preset {shown(name)}{more}"


def close_names(name: str, n: int = 3) -> list[str]:
    """Preset names resembling ``name`` (for 'did you mean' messages)."""
    import difflib

    return difflib.get_close_matches(name.lower().replace("-", "_"), list(PRESETS), n=n, cutoff=0.4)

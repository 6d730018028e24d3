"""Presets of the lidars automotive programs buy: RoboSense, Hesai AT128, Valeo SCALA, Luminar, Seyond, Innoviz.

Each entry is a plain spec dict (the keys a spec file uses) merged into :data:`.presets.PRESETS`. Where a
figure comes from a driver or a calibration file it is cited beside it; those are read here
(RoboSense-LiDAR/rs_driver, tier4/nebula). The makers' datasheet PDFs were **not** in reach in this workspace:
figures marked "product page" are the headline figures the makers publish (field of view, resolution, range
at 10 %, wavelength, frame rate), quoted, not read from a datasheet here; figures marked "assumed" have no
published source we could use, and the comment says why the value was taken. docs/sensors.md lists which is
which per preset.

Assumptions shared by several presets:

* ``range_accuracy_m`` 3 cm where no figure is published (the size every 905 nm and 1550 nm ToF unit with a
  figure quotes: Velodyne, Ouster, Hesai ±3 cm), taken as one sigma as in :mod:`.presets`;
* beam divergence of the mirror-scanned units (MEMS, polygon, AT128) one resolution step per axis: their beams
  are made to tile the field without gaps (assumed, no divergence published); the spinning RoboSense units
  take the Velodyne figure the spinning Velodyne presets assume (3.0 × 1.5 mrad, VLS-128 manual), the Valeo
  units the Ibeo LUX rule of :mod:`.presets` (0.08° horizontally, one layer spacing vertically);
* one range–reflectivity pair (the range at 10 %) takes the root-2 fit, as the Ibeo LUX preset does.
"""
from __future__ import annotations

import numpy as np

from .hesai_at128 import at128_raster


def _mrad(horizontal_deg: float, vertical_deg: float) -> list[float]:
    return [round(float(np.radians(horizontal_deg)) * 1e3, 3), round(float(np.radians(vertical_deg)) * 1e3, 3)]


def _stacked(count: int, spacing_deg: float) -> list[list[float]]:
    """``count`` channels one above the other, ``spacing_deg`` apart, centred on the scan direction (top first)."""
    return [[0.0, round(spacing_deg * ((count - 1) / 2 - c), 4)] for c in range(count)]


def _side_by_side(count: int, width_deg: float) -> list[list[float]]:
    """``count`` channels in zones of ``width_deg`` side by side, centred, the leftmost first."""
    return [[round(width_deg * ((count - 1) / 2 - c), 4), 0.0] for c in range(count)]


#: Velodyne VLS-128 user manual, Table F-1 (3.0 mrad horizontal, 1.5 mrad vertical): what spinning 905 nm units
#: without a published divergence are assumed to have (as in sensors/presets.py)
_SPINNING_DIVERGENCE_MRAD = [3.0, 1.5]

AUTOMOTIVE_PRESETS: dict[str, dict] = {
    # ---- RoboSense spinning units: rays from the unit's angle.csv and rs_driver's firing timing (robosense.py)
    "robosense_helios_5515": {
        "description": "RoboSense RS-Helios-5515, 32 beams −54.6…+14.9° (angle.csv), 0.2° at 10 Hz",
        # angles: tier4/nebula's RobosenseHelios.csv (a unit's angle.csv, Apache-2.0, data/NOTICE.md)
        "robosense_angles": "robosense_helios_5515_angle.csv",
        "robosense_model": "RS-Helios",
        "frame_rate_hz": 10.0,
        "min_range_m": 0.2,  # product page: blind zone 0.2 m
        "max_range_m": 150.0,  # product page: 150 m
        "wavelength_nm": 905.0,  # product page
        "range_reflectivity": {"pairs": [[0.10, 110.0]], "fit": "root2"},  # product page: 110 m at 10 %
        "range_accuracy_m": 0.02,  # product page: ±2 cm (typical)
        "beam_divergence_mrad": _SPINNING_DIVERGENCE_MRAD,  # assumed (module doc)
    },
    "robosense_helios_16p": {
        "description": "RoboSense RS-Helios-16P, 16 beams ±15° (2°), a firing sequence every 55.56 µs, 10 Hz",
        # product page: 16 beams over 30°, 2° apart; the horizontal offsets of a unit's angle.csv are not
        # published for it: 0 (assumed). nebula's RobosenseHelios16P.csv holds +14.9…−8.0°, the upper half of
        # the Helios-5515 table, not a 30° unit: not used
        "vertical_angles_deg": [-15.0 + 2.0 * k for k in range(16)],
        "robosense_model": "RS-Helios-16P",
        "frame_rate_hz": 10.0,
        "min_range_m": 0.2,  # product page
        "max_range_m": 150.0,  # product page
        "wavelength_nm": 905.0,
        "range_reflectivity": {"pairs": [[0.10, 110.0]], "fit": "root2"},  # product page: 110 m at 10 %
        "range_accuracy_m": 0.02,  # product page: ±2 cm (typical)
        "beam_divergence_mrad": _SPINNING_DIVERGENCE_MRAD,  # assumed (module doc)
    },
    "robosense_ruby_plus": {
        "description": "RoboSense RS-Ruby Plus, 128 beams −25…+15° (angle.csv), 0.2° at 10 Hz",
        # angles: tier4/nebula's RobosenseRubyPlus.csv (Apache-2.0; its third column is ignored, as rs_driver does)
        "robosense_angles": "robosense_ruby_plus_angle.csv",
        "robosense_model": "RS-Ruby-Plus",
        "frame_rate_hz": 10.0,
        "min_range_m": 0.4,  # rs_driver decoder_RSP128.hpp: distance min 0.4 m
        "max_range_m": 250.0,  # rs_driver decoder_RSP128.hpp: distance max 250 m; product page 250 m
        "wavelength_nm": 905.0,
        # assumed: the product page gives 250 m without a reflectivity; 200 m at 10 %, the long-range units'
        # usual ratio (Ouster OS2, Livox: 10 % range 0.4–0.6 of the 80 % one) leaning long for a 128-beam flagship
        "range_reflectivity": {"pairs": [[0.10, 200.0]], "fit": "root2"},
        "range_accuracy_m": 0.03,  # product page: ±3 cm (typical)
        "beam_divergence_mrad": _SPINNING_DIVERGENCE_MRAD,  # assumed (module doc)
    },
    # ---- RoboSense MEMS: five zones side by side, each a raster of 126 lines × 125 columns scanned top-down in
    # "Z order" (rs_driver doc/howto/18_about_point_layout.md), 630 packets × 25 blocks × 5 points a 100 ms frame
    # (decoder_RSM1.hpp: SINGLE_PKT_NUM 630, FRAME_DURATION 0.1, 25 blocks of 5 channels)
    "robosense_m1": {
        "description": "RoboSense RS-LiDAR-M1 (MEMS), 5 zones × 126 lines × 125 columns, 120° × 25.2°, 10 Hz",
        "raster": {
            # zones 24° wide over the 120° (product page) field; the zone order left to right is assumed
            "channels": _side_by_side(5, 24.0),
            "horizontal_fov_deg": [12.0, -12.0],
            "columns": 125,
            "lines": 126,
            "vertical_fov_deg": [12.6, -12.6],  # RS-LiDAR-M1P user guide: a channel's envelope is 25.2° high
            "line_order": "same",
        },
        "frame_rate_hz": 10.0,
        "min_range_m": 0.5,  # product page: blind zone 0.5 m
        "max_range_m": 200.0,  # rs_driver decoder_RSM1.hpp: distance max 200 m; product page 200 m
        "wavelength_nm": 905.0,  # product page
        "range_reflectivity": {"pairs": [[0.10, 150.0]], "fit": "root2"},  # product page: 150 m at 10 %
        "range_accuracy_m": 0.05,  # product page: ±5 cm (1σ)
        "beam_divergence_mrad": _mrad(0.192, 0.2),  # assumed: one step (module doc)
    },
    "robosense_m2": {
        "description": "RoboSense RS-LiDAR-M2 (MEMS), 5 zones × 126 lines × 250 columns, 120° × 25.2°, 10 Hz",
        "raster": {
            # decoder_RSM2.hpp: SINGLE_PKT_NUM 1260 (twice the M1's points a frame); the doubling taken as twice
            # the columns at the M1's 126 lines (assumed: the driver gives only the count)
            "channels": _side_by_side(5, 24.0),
            "horizontal_fov_deg": [12.0, -12.0],
            "columns": 250,
            "lines": 126,
            "vertical_fov_deg": [12.6, -12.6],
            "line_order": "same",
        },
        "frame_rate_hz": 10.0,
        "min_range_m": 0.5,  # assumed: the M1's
        "max_range_m": 250.0,  # rs_driver decoder_RSM2.hpp: distance max 250 m
        "wavelength_nm": 905.0,
        "range_reflectivity": {"pairs": [[0.10, 200.0]], "fit": "root2"},  # product page: 200 m at 10 %
        "range_accuracy_m": 0.05,  # assumed: the M1's
        "beam_divergence_mrad": _mrad(0.096, 0.2),  # assumed: one step (module doc)
    },
    # ---- Hesai AT128 (hesai_at128.py): 128 channels swept once a frame
    "hesai_at128": {
        "description": "Hesai AT128, 128 VCSEL channels swept by a mirror, 120° × 25.4°, 0.1° × 0.2°, 10 Hz",
        "raster": at128_raster(),
        "frame_rate_hz": 10.0,
        "min_range_m": 1.0,  # nebula pandar_at128.hpp: min_range 1 m
        "max_range_m": 210.0,  # product page: 210 m
        "wavelength_nm": 905.0,  # product page
        "range_reflectivity": {"pairs": [[0.10, 200.0]], "fit": "root2"},  # product page: 200 m at 10 %
        "range_accuracy_m": 0.03,  # product page: ±3 cm
        "beam_divergence_mrad": _mrad(0.1, 0.2),  # assumed: one step (module doc)
    },
    # ---- Valeo SCALA: the Ibeo LUX's rotating-mirror lineage (the LUX preset's mirror geometry)
    "valeo_scala_gen2": {
        "description": "Valeo SCALA gen 2, 16 layers over 10° off a rotating mirror, 133° at 0.125°, 25 Hz",
        # product page: 16 layers, 133° × 10°, 0.125° horizontally, 25 Hz, 905 nm; layers evenly spread (assumed)
        "vertical_angles_deg": [round(-4.6875 + 0.625 * k, 4) for k in range(16)],
        "rotating_mirror": True,
        "horizontal_fov_deg": [66.5, -66.5],
        "horizontal_resolution_deg": 0.125,
        "frame_rate_hz": 25.0,
        "min_range_m": 0.3,  # assumed: the Ibeo LUX's
        # assumed: where an 80 % target fades under the root-2 law (√8 × the 10 % range, 141 m), rounded up
        "max_range_m": 150.0,
        "wavelength_nm": 905.0,
        # assumed: no reflectivity figure published; 50 m at 10 % (the Ibeo LUX datasheet's, its predecessor)
        "range_reflectivity": {"pairs": [[0.10, 50.0]], "fit": "root2"},
        "range_accuracy_m": 0.10,  # assumed: the Ibeo LUX datasheet's 10 cm
        "beam_divergence_mrad": _mrad(0.08, 0.625),  # assumed: the LUX rule (module doc)
    },
    "valeo_scala_gen3": {
        "description": "Valeo SCALA gen 3, 150 rows × 1200 columns (120° × 25°) swept by a mirror, 25 Hz",
        # product page / press release: 4.5 million points a second at 25 frames a second (180 000 a frame),
        # "12 times the resolution, 2.5 times the field" of gen 2. Layout assumed: a column of 150 receiver rows
        # over 25° (2.5 × gen 2's 10°) swept over 120° in 1200 columns = 180 000 a frame
        "raster": {"channels": _stacked(150, 25.0 / 150), "horizontal_fov_deg": [60.0, -60.0], "columns": 1200},
        "frame_rate_hz": 25.0,
        "min_range_m": 0.3,  # assumed: gen 2's
        "max_range_m": 400.0,  # assumed: an 80 % target under the root-2 law, √8 × the 10 % range (424 m)
        # press release: "three times the range" of gen 2: 150 m at 10 % (3 × gen 2's assumed 50 m)
        "range_reflectivity": {"pairs": [[0.10, 150.0]], "fit": "root2"},
        "wavelength_nm": 905.0,  # assumed: gen 2's
        "range_accuracy_m": 0.03,  # assumed (module doc)
        "beam_divergence_mrad": _mrad(0.1, 25.0 / 150),  # assumed: one step (module doc)
    },
    # ---- 1550 nm units: the IR materials are evaluated at 1550 nm (docs/physics.md)
    "luminar_iris": {
        "description": "Luminar Iris (1550 nm), 128 lines × 2000 columns over 120° × 26°, horizon-dense, 10 Hz",
        # product page: 120° × 0–26° (vertical field and line density configurable), over 300 points per square
        # degree at its densest, 250 m at < 10 %, 600 m maximum, 1550 nm; two-axis scanning mirrors. Layout
        # assumed: one beam, 128 lines a frame, 7 × as dense within ±2° of the horizon (18 lines/° there, 0.06°
        # columns: 300 points/deg²), 2000 columns
        "raster": {
            "horizontal_fov_deg": [60.0, -60.0],
            "columns": 2000,
            "lines": 128,
            "vertical_fov_deg": [13.0, -13.0],
            "line_density": [[-2.0, 2.0, 7.0]],
            "line_order": "alternate",  # assumed: the vertical mirror steps, the horizontal one scans both ways
        },
        "frame_rate_hz": 10.0,
        "min_range_m": 0.5,  # assumed: no figure published (a 2 m minimum is quoted for the older Hydra)
        "max_range_m": 600.0,  # product page
        "wavelength_nm": 1550.0,  # product page
        "range_reflectivity": {"pairs": [[0.10, 250.0]], "fit": "root2"},  # product page: 250 m at < 10 %
        "range_accuracy_m": 0.03,  # assumed (module doc)
        "beam_divergence_mrad": _mrad(0.06, 0.06),  # assumed: one step at its densest (module doc)
    },
    "seyond_falcon_k": {
        "description": "Seyond (Innovusion) Falcon K (1550 nm), 4 lasers, polygon + galvo, 160 rows, ROI, 10 Hz",
        "raster": {
            # four lasers 1.0767° apart: tier4/nebula innovusion_data_packet.hpp (commit 3df5ffd0),
            # kInnoVAngleDiffBase = 196 angle units of π/32768 rad between channels
            "channels": _stacked(4, 196 * 180.0 / 32768),
            "horizontal_fov_deg": [60.0, -60.0],  # product page: 120° × 25.4°
            "columns": 1200,  # assumed: 0.1° (the product page's finer figure is for its region of interest)
            "lines": 40,  # assumed: 40 sweeps × 4 lasers = 160 rows
            # the sweeps' scan directions, so that the 4-laser swath spans the product page's 25.4°
            "vertical_fov_deg": [11.085, -11.085],
            "line_density": [[-3.0, 2.0, 3.0]],  # region of interest near the horizon, 3 × as dense (assumed)
            "line_order": "same",  # a polygon turns one way
            # the Falcon calibration in tier4/nebula (Falcon.yaml before d0b33417, n_p: 5) has a 5-facet polygon:
            # a facet turns 72°, sweeping 144° optically, of which the 120° field takes 120/144
            "line_duty": 120.0 / 144.0,
        },
        "frame_rate_hz": 10.0,
        "min_range_m": 0.5,  # assumed: no figure found
        "max_range_m": 500.0,  # product page
        "wavelength_nm": 1550.0,  # product page
        "range_reflectivity": {"pairs": [[0.10, 250.0]], "fit": "root2"},  # product page: 250 m at 10 %
        "range_accuracy_m": 0.03,  # assumed (module doc)
        "beam_divergence_mrad": _mrad(0.1, 0.1),  # assumed: one step (module doc)
    },
    "innoviz_two": {
        "description": "Innoviz Two (905 nm MEMS), 256 lines × 1200 columns over 120° × 43°, ROI, 10 Hz",
        "raster": {
            # product page: 120° × 43°, 0.05° × 0.05° at its finest, 10/15/20 fps, 905 nm. Layout assumed:
            # 1200 columns (0.1°), 256 lines 4 × as dense within ±3° of the horizon (0.06° there, 0.24° outside):
            # 307 200 rays, the point capacity tier4/nebula's InnovizTwo Condor decoder reserves (16·32·600)
            "horizontal_fov_deg": [60.0, -60.0],
            "columns": 1200,
            "lines": 256,
            "vertical_fov_deg": [21.5, -21.5],
            "line_density": [[-3.0, 3.0, 4.0]],
            "line_order": "alternate",  # assumed: a resonant MEMS mirror scans both ways
        },
        "frame_rate_hz": 10.0,
        "min_range_m": 0.3,  # assumed: no figure found
        "max_range_m": 300.0,  # product page: up to 300 m
        "wavelength_nm": 905.0,  # product page
        # assumed: no 10 % figure published; 0.8 × the maximum, the M2's ratio (200 of 250 m)
        "range_reflectivity": {"pairs": [[0.10, 240.0]], "fit": "root2"},
        "range_accuracy_m": 0.03,  # assumed (module doc)
        "beam_divergence_mrad": _mrad(0.1, 0.1),  # assumed: one step (module doc)
    },
}

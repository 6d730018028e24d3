"""Second echoes, ours beside the real OS-1-128 dual-return recording, (run by hand; prints markdown).

    PYTHONPATH=src python scripts/dual_returns_ours.py [SAMPLES]

The real figures come from ``tests/data/ouster_os1_128_dual_returns.json`` (``scripts/ouster_dual_returns.py``).
Ours: :func:`lidar_fmu.tools.figures.indoor_room_scene` scanned in ``dual`` mode by the recording unit's own
calibration (``tests/data/ouster_os1_128_fw3.1_122246000293.json`` through the ``ouster_os1_128_cal`` preset:
its datasheet divergence 0.18° FWHM and 10 mm exit beam), ``SAMPLES`` sub-rays per beam (default 16), once with
the exit beam diameter and once without (a point source). Counted over the azimuth sector the unit sent
(the real recording's returning pixels' 1st–99th percentile of azimuth, wrapping past 180°) and over the whole
turn.
"""
import json
import os
import sys

import numpy as np

from lidar_fmu import Lidar
from lidar_fmu.physics.echoes import second_echo_stats
from lidar_fmu.tools.figures import indoor_room_scene

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")
SAMPLES = int(sys.argv[1]) if len(sys.argv) > 1 else 16
PERCENTILES = (0, 5, 25, 50, 75, 95, 100)

real = json.load(open(os.path.join(DATA, "ouster_os1_128_dual_returns.json")))
scene, pose = indoor_room_scene()
base = {"preset": "ouster_os1_128_cal", "ouster_metadata": os.path.join(DATA, "ouster_os1_128_fw3.1_122246000293.json"),
        "returns": "dual", "divergence_samples": SAMPLES, "motion_distortion": False}
lo, hi = real["returning_azimuth_deg"]["p5"], real["returning_azimuth_deg"]["p1"]  # 134° … −179° (past 180°)


def row(label, stats):
    gaps = stats["gap_m"]
    cells = " | ".join(f"{np.percentile(gaps, p):.2f}" for p in PERCENTILES) if len(gaps) else " | ".join(
        "–" for _ in PERCENTILES)
    return (f"| {label} | {stats['returning_rays']:,} | {stats['second_echo_rays']:,} | "
            f"{100 * stats['second_echo_fraction']:.2f} % | {cells} |")


print(f"| {SAMPLES} sub-rays per beam | returning pixels | with a second echo | fraction | "
      + " | ".join(f"gap p{p} m" for p in PERCENTILES) + " |")
print("|---" * (4 + len(PERCENTILES)) + "|")
gap = real["gap_m"]
print(f"| real OS-1-128 recording, {real['columns_sent']} columns sent | {real['returning_pixels']:,} | "
      f"{real['second_echo_pixels']:,} | {100 * real['second_echo_fraction_of_returning']:.2f} % | "
      + " | ".join(f"{gap[f'p{p}']:.2f}" for p in PERCENTILES) + " |")
for label, extra in (("ours, 10 mm exit beam (OS1 datasheet)", {}), ("ours, point source", {"beam_diameter_m": 0.0})):
    lidar = Lidar(scene, base | extra)
    cloud = lidar.scan(pose)
    azimuth = np.degrees(lidar.sensor.pattern.azimuth_rad)
    sector = np.flatnonzero((azimuth >= lo) | (azimuth <= hi))
    print(row(f"{label}, sector {lo:.0f}° … {hi:.0f}°", second_echo_stats(cloud, sector)))
    print(row(f"{label}, whole turn", second_echo_stats(cloud)))

"""Fraction of rays that return per elevation band, ours, (run by hand; prints JSON).

    PYTHONPATH=src python scripts/ground_band_ours.py [PRESET] > ours.json
    python scripts/ground_band_ours.py --table BEFORE.json AFTER.json   # markdown beside the real recording

Scans, with ``ouster_os1_128_cal`` (the unit of ``tests/data/ouster_os1_128_return_fraction_by_band.json``):
the demo street (``bench.street_scene``: sensor on a car roof, 1.9 m) with its material map, and an
asphalt plane 1.9 m under the sensor (IR material ``asphalt``, ASTER 0425UUUASP). Bands as in
``scripts/ouster_ground_band.py``: 2°, edges at even degrees, plus −11…−5°.
"""
import json
import os
import sys

import numpy as np

from lidar_fmu import Lidar, Scene
from lidar_fmu.geometry.scene import Mesh
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.tools.bench import street_scene

PRESET = sys.argv[1] if len(sys.argv) > 1 else "ouster_os1_128_cal"
REAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                    "ouster_os1_128_return_fraction_by_band.json")
SENSOR_HEIGHT_M = 1.9  # bench.street_scene's roof pose


def asphalt_plane(half_m=500.0):
    v = np.array([[-half_m, -half_m, 0], [half_m, -half_m, 0], [half_m, half_m, 0], [-half_m, half_m, 0]], float)
    return Mesh(v, [[0, 1, 2], [0, 2, 3]], [0, 0], ("asphalt",), "asphalt_plane")


def band_fractions(lidar, pose, bands):
    cloud = lidar.scan(pose)
    elevation = np.degrees(lidar.sensor.pattern.elevation_rad)
    returned = np.zeros(len(elevation), bool)
    returned[cloud.ray_index] = True
    out = {}
    for lo, hi in bands:
        rays = (elevation >= lo) & (elevation < hi)
        out[f"{lo:g}..{hi:g}"] = float(returned[rays].mean()) if rays.any() else None
    return out


def table(before_path, after_path):
    """Markdown: the real recording's fraction per band beside ours before and after."""
    with open(REAL) as f:
        real = json.load(f)
    with open(before_path) as f:
        before = json.load(f)
    with open(after_path) as f:
        after = json.load(f)
    real_bands = {f"{b['lo_deg']:g}..{b['hi_deg']:g}": b["return_fraction"] for b in real["bands"] + [real["issue_band"]]}
    print("| elevation band (°) | real OS-1-128 | demo street before | after | asphalt plane before | after |")
    print("|---|---|---|---|---|---|")
    for band in before["street"]:
        cells = [real_bands.get(band), before["street"][band], after["street"][band], before["asphalt_plane"][band],
                 after["asphalt_plane"][band]]
        print(f"| {band} | " + " | ".join("–" if c is None else f"{100 * c:.0f} %" for c in cells) + " |")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--table":
        table(*sys.argv[2:])
        return
    bands = [(lo, lo + 2.0) for lo in range(-22, 0, 2)] + [(-11.0, -5.0)]
    street, roof = street_scene(None)
    result = {"street": band_fractions(Lidar(street, PRESET), roof, bands)}
    plane = Scene.from_meshes([asphalt_plane()])
    lidar = Lidar(plane, PRESET, materials={"materials": {"asphalt": "asphalt"}})
    result["asphalt_plane"] = band_fractions(lidar, pose_matrix((0.0, 0.0, SENSOR_HEIGHT_M)), bands)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

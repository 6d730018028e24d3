"""An Ouster unit's own metadata as a sensor, held against ouster-sdk (XYZLut of the same unit, kept as data)."""
import os

import numpy as np
import pytest
import trimesh

from lidar_fmu import Lidar, Scene, load_sensor
from lidar_fmu.geometry.scene import Mesh
from lidar_fmu.raycast import make_backend

DATA = os.path.join(os.path.dirname(__file__), "data")
REFERENCE = os.path.join(DATA, "ouster_os1_128_xyzlut_every7.npz")
#: a second unit, firmware 3.1 metadata (beam_to_lidar_transform: 16.721 mm) and ouster-sdk's XYZLut of it
FW31_METADATA = os.path.join(DATA, "ouster_os1_128_fw3.1_122246000293.json")
FW31_REFERENCE = os.path.join(DATA, "ouster_os1_128_fw3.1_xyzlut_every7.npz")


@pytest.fixture(scope="module")
def sdk():
    """ouster-sdk's rays for every 7th pixel (scripts/ouster_reference.py): offset + r·direction, r in mm."""
    return np.load(REFERENCE)


def test_the_calibrated_pattern_is_the_units(sdk):
    sensor = load_sensor("ouster_os1_128_cal")
    p = sensor.pattern
    assert (p.rows, p.columns, len(p)) == (128, 1024, 131072) and sensor.frame_rate_hz == 10.0
    ray = sdk["column"] * 128 + sdk["beam"]  # our rays are column-major
    assert np.array_equal(p.beam_id[ray], sdk["beam"]) and np.array_equal(p.column[ray], sdk["column"])
    # the same line: our origin + t·d against ouster-sdk's offset + r·direction, r = t + 15.806 mm
    n_mm = 15.806
    for t_m in (0.5, 20.0, 120.0):
        ours = p.origins[ray].astype(np.float64) + t_m * p.directions[ray].astype(np.float64)
        theirs = sdk["offset_m"] + (t_m * 1e3 + n_mm) * sdk["direction_m_per_mm"]
        assert np.abs(ours - theirs).max() < 2e-5 * (1 + t_m), t_m  # float32 rounding only
    # beam origins on the 15.8 mm circle, 36.18 mm above the sensor frame's origin (lidar_to_sensor)
    radius = np.hypot(p.origins[:, 0], p.origins[:, 1])
    assert np.allclose(radius, 0.015806, atol=1e-6) and np.allclose(p.origins[:, 2], 0.03618, atol=1e-6)
    # elevations as the unit's calibration gives them, not the datasheet's even ±22.5°
    elevation = np.degrees(p.elevation_rad[:128])
    assert elevation.max() == pytest.approx(20.95, abs=0.01) and elevation.min() == pytest.approx(-21.82, abs=0.01)
    # columns fire evenly over the 100 ms turn
    assert p.time_offset_s[128] == pytest.approx(1e-1 / 1024) and p.time_offset_s.max() < 0.1


def test_points_in_a_closed_sphere_lie_on_the_units_rays_within_2_mm(sdk):
    """The issue's check: every point where the unit's XYZLut ray meets the sphere, within 2 mm."""
    tm = trimesh.creation.icosphere(subdivisions=6, radius=12.0)
    sphere = Mesh(tm.vertices, tm.faces, np.zeros(len(tm.faces), np.int32), ("wall",), "sphere")
    scene = Scene.from_meshes([sphere])
    cloud = Lidar(scene, "ouster_os1_128_cal", backend="embree").scan(np.eye(4))
    assert len(cloud) == 131072  # closed: every ray returns
    ray = sdk["column"] * 128 + sdk["beam"]
    position = {i: k for k, i in enumerate(cloud.ray_index)}
    rows = np.array([position[i] for i in ray])
    ours = np.stack([cloud.points[c][rows] for c in ("x", "y", "z")], axis=1).astype(np.float64)
    # the unit's rays, cast into the same mesh: offset + s·direction (unit direction, s in m)
    direction = sdk["direction_m_per_mm"] / np.linalg.norm(sdk["direction_m_per_mm"], axis=1, keepdims=True)
    hits = make_backend("embree", scene).cast(sdk["offset_m"].astype(np.float32), direction.astype(np.float32))
    theirs = sdk["offset_m"] + hits.range_m[:, None].astype(np.float64) * direction
    assert hits.hit.all()
    error_m = np.linalg.norm(ours - theirs, axis=1)
    assert error_m.max() < 2e-3, error_m.max()
    # ranges are measured from each beam's origin (the unit reports them from its axis: + 15.8 mm)
    origin = cloud.pattern.origins[cloud.ray_index[rows]]
    assert np.allclose(np.linalg.norm(ours - origin, axis=1), cloud.points["range"][rows], atol=2e-3)


def test_a_units_metadata_file_is_a_sensor_spec(tmp_path):
    import json
    import shutil

    source = os.path.join(os.path.dirname(__file__), "..", "src", "lidar_fmu", "sensors", "data",
                          "ouster_os1_128_v2.3.0_1024x10.json")
    legacy = tmp_path / "unit.json"
    shutil.copy(source, legacy)
    sensor = load_sensor(str(legacy))
    assert sensor.name == "unit" and len(sensor.pattern) == 131072 and sensor.pattern.origins is not None
    # the current layout (firmware ≥ 2.4 metadata: beam_intrinsics, lidar_intrinsics, ...) reads the same
    flat = json.loads(legacy.read_text())
    current = {
        "beam_intrinsics": {k: flat[k] for k in ("beam_altitude_angles", "beam_azimuth_angles",
                                                 "lidar_origin_to_beam_origin_mm")},
        "lidar_intrinsics": {"lidar_to_sensor_transform": flat["lidar_to_sensor_transform"]},
        "config_params": {"lidar_mode": "1024x20"},
        "lidar_data_format": {"column_window": [0, 1023], "columns_per_frame": 1024, "pixels_per_column": 128},
    }
    path = tmp_path / "current.json"
    path.write_text(json.dumps(current))
    fast = load_sensor(str(path))
    assert fast.frame_rate_hz == 20.0 and np.allclose(fast.pattern.directions, sensor.pattern.directions)
    assert fast.pattern.time_offset_s.max() < 0.05


def test_a_second_unit_with_firmware_3_1_metadata_matches_ouster_sdk():
    """The other shared OS-1-128 (beam origins from beam_to_lidar_transform, 16.721 mm): its metadata file as the
    sensor spec, our lines against ouster-sdk's XYZLut of that unit for every 7th pixel, and the closed sphere."""
    from lidar_fmu.sensors.ouster import read_ouster_metadata

    sdk = np.load(FW31_REFERENCE)
    n_mm = read_ouster_metadata(FW31_METADATA).beam_origin_mm
    assert n_mm == pytest.approx(16.721)
    p = load_sensor(FW31_METADATA).pattern
    ray = sdk["column"] * 128 + sdk["beam"]
    for t_m in (0.5, 20.0, 120.0):
        ours = p.origins[ray].astype(np.float64) + t_m * p.directions[ray].astype(np.float64)
        theirs = sdk["offset_m"] + (t_m * 1e3 + n_mm) * sdk["direction_m_per_mm"]
        assert np.abs(ours - theirs).max() < 2e-5 * (1 + t_m), t_m
    tm = trimesh.creation.icosphere(subdivisions=5, radius=12.0)
    scene = Scene.from_meshes([Mesh(tm.vertices, tm.faces, np.zeros(len(tm.faces), np.int32), ("wall",), "sphere")])
    cloud = Lidar(scene, FW31_METADATA, backend="embree").scan(np.eye(4))
    rows = np.searchsorted(cloud.ray_index, ray)
    assert len(cloud) == 131072 and np.array_equal(cloud.ray_index[rows], ray)
    direction = sdk["direction_m_per_mm"] / np.linalg.norm(sdk["direction_m_per_mm"], axis=1, keepdims=True)
    hits = make_backend("embree", scene).cast(sdk["offset_m"].astype(np.float32), direction.astype(np.float32))
    theirs = sdk["offset_m"] + hits.range_m[:, None].astype(np.float64) * direction
    assert np.linalg.norm(cloud.xyz[rows].astype(np.float64) - theirs, axis=1).max() < 2e-3

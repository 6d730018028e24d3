import json

import numpy as np
import pytest

from lidar_fmu.sensors import PRESETS, SensorSpecError, load_sensor, preset_rows

LIMOX_PRESETS = [
    "velodyne_vlp16", "velodyne_puck_hires", "velodyne_hdl32e", "velodyne_hdl64e",
    "ouster_os1_16", "ouster_os1_64", "ouster_os1_128", "ibeo_lux",
]


def beam_elevations_deg(sensor):
    p = sensor.pattern
    first_column = p.column == 0
    order = np.argsort(p.beam_id[first_column])
    return np.degrees(p.elevation_rad[first_column][order])


@pytest.mark.parametrize("name", LIMOX_PRESETS)
def test_presets_are_unit_rays_on_a_grid(name):
    sensor = load_sensor(name)
    p = sensor.pattern
    assert len(p) == p.rows * p.columns
    np.testing.assert_allclose(np.linalg.norm(p.directions, axis=1), 1.0, atol=1e-6)
    assert set(np.unique(p.beam_id)) == set(range(p.rows))
    # rays are column-major and fire in order within the frame
    assert np.all(np.diff(p.column.astype(int)) >= 0)
    assert np.all(np.diff(p.time_offset_s[:: p.rows]) > 0)
    assert p.time_offset_s.max() < sensor.frame_period_s


def test_preset_beam_counts_and_angles():
    counts = {name: load_sensor(name).pattern.rows for name in LIMOX_PRESETS}
    assert counts == {
        "velodyne_vlp16": 16, "velodyne_puck_hires": 16, "velodyne_hdl32e": 32, "velodyne_hdl64e": 64,
        "ouster_os1_16": 16, "ouster_os1_64": 64, "ouster_os1_128": 128, "ibeo_lux": 4,
    }
    vlp = beam_elevations_deg(load_sensor("velodyne_vlp16"))
    # laser-id order of the VLP-16 interleaves up and down beams
    np.testing.assert_allclose(vlp, [-15, 1, -13, 3, -11, 5, -9, 7, -7, 9, -5, 11, -3, 13, -1, 15], atol=1e-4)
    hires = np.sort(beam_elevations_deg(load_sensor("velodyne_puck_hires")))
    np.testing.assert_allclose(hires, np.linspace(-10, 10, 16), atol=0.01)
    hdl32 = np.sort(beam_elevations_deg(load_sensor("velodyne_hdl32e")))
    np.testing.assert_allclose(hdl32, np.linspace(-30.67, 10.67, 32), atol=0.01)
    hdl64 = beam_elevations_deg(load_sensor("velodyne_hdl64e"))
    assert -25.0 < hdl64.min() < -24.5 and 1.9 < hdl64.max() < 2.1
    os128 = np.sort(beam_elevations_deg(load_sensor("ouster_os1_128")))
    np.testing.assert_allclose(os128[[0, -1]], [-22.5, 22.5], atol=1e-4)
    np.testing.assert_allclose(np.diff(os128), 45 / 127, atol=1e-4)
    lux = load_sensor("ibeo_lux")  # the first column is at +50°: its mirror shrinks the layers by cos 50°
    layers = np.degrees(np.arcsin(np.sin(np.radians([-1.2, -0.4, 0.4, 1.2])) * np.cos(np.radians(50))))
    np.testing.assert_allclose(np.sort(beam_elevations_deg(lux)), layers, atol=1e-5)
    az = np.degrees(lux.pattern.azimuth_rad)
    # the mirror also turns the layers apart in azimuth: up to ±ε·sin α (< 1.1° here)
    assert az.max() == pytest.approx(50.0, abs=1.1) and az.min() == pytest.approx(-60.0, abs=1.1)


def test_rays_per_frame_of_presets():
    rays = {row[0]: row[3] for row in preset_rows()}
    assert rays["velodyne_vlp16"] == 14_400
    assert rays["ouster_os1_128"] == 131_072
    assert set(rays) == set(PRESETS)


def test_spinning_presets_sweep_clockwise():
    p = load_sensor("ouster_os1_64").pattern
    az = np.unwrap(p.azimuth_rad[:: p.rows])
    assert np.all(np.diff(az) < 0)  # clockwise seen from above = decreasing azimuth


def test_fov_and_resolution_spec():
    sensor = load_sensor({
        "horizontal_fov_deg": [-45, 45], "horizontal_resolution_deg": 1.0,
        "vertical_fov_deg": [-10, 10], "channels": 5, "max_range_m": 50,
    })
    p = sensor.pattern
    assert (p.rows, p.columns) == (5, 91)
    az = np.degrees(p.azimuth_rad)
    assert az.min() == pytest.approx(-45) and az.max() == pytest.approx(45)
    assert sensor.max_range_m == 50


def test_grid_spec_with_samples():
    p = load_sensor({"vertical_angles_deg": [-2, 0, 3], "horizontal_samples": 360}).pattern
    assert (p.rows, p.columns) == (3, 360)
    np.testing.assert_allclose(np.degrees(p.elevation_rad[:3]), [-2, 0, 3], atol=1e-5)


def test_angle_pairs_spec():
    pairs = [[0, 0], [90, 0], [-30, 45], [180, -89]]
    p = load_sensor({"angle_pairs_deg": pairs}).pattern
    np.testing.assert_allclose(np.degrees(p.azimuth_rad[:3]), [0, 90, -30], atol=1e-4)
    np.testing.assert_allclose(np.degrees(p.elevation_rad), [0, 0, 45, -89], atol=1e-4)
    np.testing.assert_allclose(p.directions[1], [0, 1, 0], atol=1e-6)  # +90° azimuth = left


def test_pinhole_spec():
    p = load_sensor({"pinhole": {"width_px": 64, "height_px": 48, "horizontal_fov_deg": 90}}).pattern
    assert (p.rows, p.columns) == (48, 64)
    az = np.degrees(p.azimuth_rad)
    assert az.max() < 45 and az.max() > 44  # pixel centres lie inside the FOV
    top_left = p.directions[0]
    assert top_left[1] > 0 and top_left[2] > 0  # column 0 = left (+y), row 0 = top (+z)


def test_preset_override(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"preset": "ouster_os1_128", "horizontal_samples": 512, "max_range_m": 80}))
    sensor = load_sensor(str(path))
    assert len(sensor.pattern) == 128 * 512 and sensor.max_range_m == 80
    yaml_path = tmp_path / "s.yaml"
    yaml_path.write_text("preset: velodyne_vlp16\nhorizontal_samples: 1800\nwavelength_nm: 905\n")
    assert len(load_sensor(str(yaml_path)).pattern) == 16 * 1800


@pytest.mark.parametrize(
    "spec, message",
    [
        ("ouster_os1_129", "did you mean ouster_os1_128"),
        ({"preset": "veldyne_vlp16"}, "did you mean velodyne_vlp16"),
        ({"vertical_fov_deg": [-10, 10]}, "channels"),
        ({"vertical_angles_deg": [0], "horizontal_samples": -3}, "horizontal_samples"),
        ({"vertical_angles_deg": "abc", "horizontal_samples": 10}, "vertical_angles_deg"),
        ({"angle_pairs_deg": [[1, 2, 3]]}, "angle_pairs_deg"),
        ({"preset": "ibeo_lux", "max_range_mm": 3}, "sensor spec: unknown key 'max_range_mm'"),
        ({"preset": "ibeo_lux", "min_range_m": 300}, "min_range_m"),
        ("missing.yaml", "not found"),
    ],
)
def test_bad_specs_name_the_problem(spec, message):
    with pytest.raises(SensorSpecError, match=message):
        load_sensor(spec)


def test_malformed_spec_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("preset: [unclosed\n")
    with pytest.raises(SensorSpecError, match="bad.yaml"):
        load_sensor(str(path))


# -- limits with clear errors ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, count",
    [
        ({"preset": "velodyne_vlp16", "horizontal_samples": 1_000_000_000}, "1,000,000,000 columns"),
        ({"preset": "ouster_os1_128", "horizontal_samples": 400_000}, "128 beams × 400,000 columns = 51,200,000 rays"),
        ({"preset": "velodyne_vlp16", "horizontal_resolution_deg": 1e-9}, "360,000,000,000 columns"),
        ({"preset": "velodyne_vlp16", "horizontal_resolution_deg": 1e-300}, "3.6e+302 columns"),
        ({"vertical_fov_deg": [-10, 10], "channels": 10**12, "horizontal_samples": 4}, "1,000,000,000,000 channels"),
        ({"pinhole": {"width_px": 100_000, "height_px": 100_000, "horizontal_fov_deg": 90}},
         "100,000 × 100,000 = 10,000,000,000 px"),
    ],
)
def test_too_many_rays_per_frame_is_one_line_before_anything_is_allocated(spec, count):
    import tracemalloc

    from lidar_fmu.sensors import MAX_RAYS_PER_FRAME

    assert MAX_RAYS_PER_FRAME == 50_000_000
    tracemalloc.start()
    try:
        with pytest.raises(SensorSpecError) as info:
            load_sensor(spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert "\n" not in message and count in message and "limit of 50,000,000 rays per frame" in message
    assert peak < 20e6  # nothing the size of the pattern was made


def test_the_ray_limit_is_exact_and_covers_every_pattern(monkeypatch):
    import lidar_fmu.geometry.pattern as pattern
    import lidar_fmu.sensors.spec as sensors

    monkeypatch.setattr(sensors, "MAX_RAYS_PER_FRAME", 1600)
    assert len(load_sensor({"vertical_angles_deg": [0] * 16, "horizontal_samples": 100}).pattern) == 1600
    for spec in ({"vertical_angles_deg": [0] * 16, "horizontal_samples": 101},
                 {"preset": "velodyne_vlp16", "horizontal_resolution_deg": 0.2},
                 {"angle_pairs_deg": [[0, 0]] * 1601},
                 {"pinhole": {"width_px": 41, "height_px": 40, "horizontal_fov_deg": 90}}):
        with pytest.raises(SensorSpecError, match="limit of 1,600 rays per frame"):
            load_sensor(spec)
    # the pattern constructors check too, for callers that skip the spec
    monkeypatch.setattr(pattern, "MAX_RAYS_PER_FRAME", 1600)
    with pytest.raises(ValueError, match="over the limit of 1,600"):
        pattern.pinhole(41, 40, 90.0)
    with pytest.raises(ValueError, match="over the limit"):
        pattern.scan_grid(np.zeros(16), np.zeros(101), frame_period_s=0.1)
    with pytest.raises(ValueError, match="over the limit"):
        pattern.angle_list(np.zeros(1601), np.zeros(1601), frame_period_s=0.1)
    assert len(pattern.scan_grid(np.zeros(16), np.zeros(100), frame_period_s=0.1)) == 1600


def test_a_pinhole_with_infinite_size_is_a_spec_error():
    with pytest.raises(SensorSpecError, match="pinhole needs"):
        load_sensor({"pinhole": {"width_px": float("inf"), "height_px": 1, "horizontal_fov_deg": 90}})


def test_cli_with_too_many_rays_is_one_line_exit_2(tmp_path, capsys):
    import trimesh

    from lidar_fmu.tools.cli import main

    spec = tmp_path / "huge.json"
    spec.write_text(json.dumps({"preset": "velodyne_vlp16", "horizontal_samples": 1_000_000_000}))
    trimesh.creation.box().export(tmp_path / "box.stl")
    code = main(["scan", "--mesh", str(tmp_path / "box.stl"), "--sensor", str(spec), "-o", str(tmp_path / "o.pcd")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "limit of 50,000,000 rays per frame" in err
    assert "Traceback" not in err and "MemoryError" not in err

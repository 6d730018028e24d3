"""Velodyne calibration YAMLs (velodyne-decoder's) as rays: angles, beam origins, documented firing timing."""
import os

import numpy as np
import pytest
import yaml

from lidar_fmu.sensors import SensorSpecError, load_sensor

DATA = os.path.join(os.path.dirname(__file__), os.pardir, "src", "lidar_fmu", "sensors", "data")


def lasers_of(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        lasers = yaml.safe_load(f)["lasers"]
    return sorted(lasers, key=lambda laser: laser["laser_id"])


def head_azimuth_rad(sensor):
    """The head's counter-clockwise azimuth at each ray's firing time: from +180°, one clockwise turn a frame."""
    return np.pi - 2 * np.pi * sensor.frame_rate_hz * sensor.pattern.time_offset_s.astype(np.float64)


@pytest.mark.parametrize("name, yml", [("velodyne_vlp32c", "velodyne_decoder_VLP-32C.yml"),
                                       ("velodyne_vls128", "velodyne_decoder_Alpha_Prime.yml"),
                                       ("velodyne_hdl64e_s3", "velodyne_decoder_HDL-64E_S3-VeloView.yml")])
def test_each_laser_points_where_its_calibration_says(name, yml):
    sensor = load_sensor(name)
    p, lasers = sensor.pattern, lasers_of(yml)
    assert p.rows == len(lasers)
    np.testing.assert_allclose(p.elevation_rad, [lasers[b]["vert_correction"] for b in p.beam_id], atol=2e-6)
    # azimuth = head azimuth at the ray's own firing time + rot_correction
    offset = np.angle(np.exp(1j * (p.azimuth_rad - head_azimuth_rad(sensor))))
    np.testing.assert_allclose(offset, [lasers[b]["rot_correction"] for b in p.beam_id], atol=2e-5)


def test_beam_origins_move_by_the_offsets_as_ros_velodyne_computes_a_point():
    """origin + d·direction against rawdata.cc's formula, written out independently here, at d = 7.5 m."""
    sensor = load_sensor("velodyne_hdl64e_s3")
    p = sensor.pattern
    lasers = lasers_of("velodyne_decoder_HDL-64E_S3-VeloView.yml")
    take = np.arange(0, len(p), 97)
    beam = p.beam_id[take]
    theta = np.array([lasers[b]["vert_correction"] for b in beam])
    v = np.array([lasers[b]["vert_offset_correction"] for b in beam])
    h = np.array([lasers[b]["horiz_offset_correction"] for b in beam])
    psi = -head_azimuth_rad(sensor)[take] - np.array([lasers[b]["rot_correction"] for b in beam])  # clockwise
    d = 7.5
    xy = d * np.cos(theta) - v * np.sin(theta)
    x = xy * np.sin(psi) - h * np.cos(psi)
    y = xy * np.cos(psi) + h * np.sin(psi)
    z = d * np.sin(theta) + v * np.cos(theta)
    ros = np.stack([y, -x, z], axis=1)
    ours = p.origins[take].astype(np.float64) + d * p.directions[take].astype(np.float64)
    assert np.abs(ours - ros).max() < 3e-5 * d
    # the offsets are real: 14–22 cm up, ±2.6 cm sideways, perpendicular to each beam
    assert 0.14 < np.linalg.norm(p.origins, axis=1).min() and np.linalg.norm(p.origins, axis=1).max() < 0.22
    np.testing.assert_allclose(np.sum(p.origins * p.directions, axis=1), 0.0, atol=1e-6)


def test_vlp16_fires_its_documented_sequence():
    """VLP-16 manual: 2.304 µs per firing, a 16-laser sequence every 55.296 µs (two per data block)."""
    sensor = load_sensor({"calibration": "velodyne_VLP16db.yaml", "velodyne_model": "VLP-16", "frame_rate_hz": 10})
    p = sensor.pattern
    assert (p.rows, p.columns) == (16, 1808)  # int(0.1 s / 55.296 µs) sequences a turn
    t_us = p.time_offset_s.astype(np.float64).reshape(p.columns, 16) * 1e6
    assert t_us[1, 15] == pytest.approx(55.296 + 15 * 2.304, abs=1e-3)  # laser 15 of the block's second sequence
    np.testing.assert_allclose(np.diff(t_us[0]), 2.304, atol=1e-3)
    np.testing.assert_allclose(np.diff(t_us[:, 0]), 55.296, atol=2e-2)  # float32 over 0.1 s
    # the head turns on while a sequence fires: laser 15 is 15·2.304 µs · 3600°/s = 0.124° further clockwise
    step = np.degrees(p.azimuth_rad[15] - p.azimuth_rad[0])
    assert step == pytest.approx(-15 * 2.304e-6 * 3600, abs=1e-4)


def test_paired_grouped_and_block_firings():
    def t_us(name):
        p = load_sensor(name).pattern
        return p.time_offset_s[: p.rows].astype(np.float64) * 1e6, p.time_offset_s[p.rows] * 1e6

    vlp32, next_vlp32 = t_us("velodyne_vlp32c")
    np.testing.assert_allclose(vlp32[0::2], vlp32[1::2])  # pairs fire together
    np.testing.assert_allclose(vlp32[::2], 2.304 * np.arange(16), atol=1e-3)
    assert next_vlp32 == pytest.approx(55.296, abs=1e-3)
    hdl64, next_hdl64 = t_us("velodyne_hdl64e_s2")
    np.testing.assert_allclose(hdl64[:32], hdl64[32:])  # upper and lower block fire at once
    assert hdl64[:32].max() < 48 and next_hdl64 == pytest.approx(48.0, abs=1e-3)
    vls, next_vls = t_us("velodyne_vls128")
    assert vls[7] == 0 and vls[8] == pytest.approx(2.665, abs=1e-3)  # 8 lasers per slot
    assert vls[64] == pytest.approx(10 * 2.665, abs=1e-3)  # two maintenance slots after group 8
    assert next_vls == pytest.approx(53.3, abs=1e-3) and len(np.unique(vls)) == 16


def test_old_presets_keep_their_layout():
    assert load_sensor("velodyne_hdl64e").pattern.columns == 2083  # 48 µs firings, as before
    assert load_sensor("velodyne_vlp16").pattern.columns == 900


@pytest.mark.parametrize("text, message", [
    ("lasers: []\n", "non-empty 'lasers'"),
    ("lasers:\n  - {laser_id: 0, rot_correction: 0}\n", "lacks 'vert_correction'"),
    ("lasers:\n  - {laser_id: 1, vert_correction: 0.1}\n", "laser_id must be"),
    ("lasers:\n  - {laser_id: 0, vert_correction: 12.0}\n", "not radians"),
])
def test_malformed_calibration_names_the_problem(tmp_path, text, message):
    path = tmp_path / "cal.yaml"
    path.write_text(text)
    with pytest.raises(SensorSpecError, match=message):
        load_sensor({"calibration": str(path), "horizontal_samples": 10})


def test_model_mismatch_and_overlong_frames_are_refused():
    with pytest.raises(SensorSpecError, match="unknown velodyne_model"):
        load_sensor({"preset": "velodyne_vlp32c", "velodyne_model": "VLP-33"})
    with pytest.raises(SensorSpecError, match="32 lasers, the firing timing 16"):
        load_sensor({"preset": "velodyne_vlp32c", "velodyne_model": "VLP-16"})
    with pytest.raises(SensorSpecError, match="longer than a 50 ms frame"):
        load_sensor({"preset": "velodyne_vlp32c", "frame_rate_hz": 20, "horizontal_samples": 1000})

"""Ibeo LUX with BlenSor's rotating-mirror geometry: layer elevation coupled to the azimuth."""
import numpy as np
import pytest

from lidar_fmu.sensors import load_sensor
from lidar_fmu.sensors.ibeo import mirror_directions

NOMINAL_DEG = np.array([-1.2, -0.4, 0.4, 1.2])


def lux_layers(sensor):
    """(column azimuth °, elevation ° per layer) of every column."""
    p = sensor.pattern
    elevation = np.degrees(p.elevation_rad).reshape(p.columns, p.rows)
    return np.linspace(50.0, -60.0, p.columns), elevation


def test_layers_are_nominal_straight_ahead_and_fall_with_cos_azimuth():
    sensor = load_sensor("ibeo_lux")
    p = sensor.pattern
    assert (p.rows, p.columns) == (4, 441) and sensor.frame_rate_hz == 12.5  # 110° at 0.25°
    column_az, elevation = lux_layers(sensor)
    ahead = np.flatnonzero(np.isclose(column_az, 0.0))[0]
    np.testing.assert_allclose(elevation[ahead], NOMINAL_DEG, atol=1e-5)
    expected = np.degrees(np.arcsin(np.sin(np.radians(NOMINAL_DEG))[None, :] * np.cos(np.radians(column_az))[:, None]))
    np.testing.assert_allclose(elevation, expected, atol=1e-5)
    # at the −60° edge the 2.4° between the outer layers has halved
    assert elevation[-1, 3] - elevation[-1, 0] == pytest.approx(2.4 * np.cos(np.radians(60)), abs=2e-3)


def test_the_mirror_trades_pitch_for_yaw_at_90_degrees():
    """BlenSor §3.3: at a mirror yaw of 90° every laser has the same pitch; their pitch became yaw."""
    d = mirror_directions(np.radians(NOMINAL_DEG), np.full(4, np.pi / 2)).astype(np.float64)
    np.testing.assert_allclose(d[:, 2], 0.0, atol=1e-7)
    np.testing.assert_allclose(np.degrees(np.arctan2(d[:, 1], d[:, 0])), 90.0 - NOMINAL_DEG, atol=1e-4)
    grid = mirror_directions(np.radians(NOMINAL_DEG)[None, :], np.radians(np.arange(-60, 61, 5))[:, None])
    np.testing.assert_allclose(np.linalg.norm(grid, axis=-1), 1.0, atol=1e-6)


def test_rotating_mirror_is_a_switch():
    flat = load_sensor({"preset": "ibeo_lux", "rotating_mirror": False})
    np.testing.assert_allclose(np.degrees(flat.pattern.elevation_rad[:4]), NOMINAL_DEG, atol=1e-5)

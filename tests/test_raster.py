"""Raster patterns (sensors/raster.py): lines, line density, channels, timing, and bad specs named in one line."""
import numpy as np
import pytest

from lidar_fmu.sensors import SensorSpecError, load_sensor
from lidar_fmu.sensors.raster import line_elevations_deg, parse_raster

BASE = {"horizontal_fov_deg": [30, -30], "columns": 60, "lines": 20, "vertical_fov_deg": [10, -10]}


def _sensor(frame_rate_hz=10.0, **raster):
    return load_sensor({"raster": BASE | raster, "frame_rate_hz": frame_rate_hz})


def test_even_lines_fill_the_field_at_cell_centres():
    pattern = _sensor().pattern
    assert (pattern.rows, pattern.columns, len(pattern)) == (1, 20 * 60, 1200)
    azimuth = np.degrees(pattern.azimuth_rad).reshape(20, 60)
    elevation = np.degrees(pattern.elevation_rad).reshape(20, 60)
    np.testing.assert_allclose(azimuth[0], 29.5 - np.arange(60), atol=1e-4)  # left to right, 1° steps
    np.testing.assert_allclose(elevation[:, 0], 9.5 - np.arange(20), atol=1e-4)  # top-down, 1° apart
    np.testing.assert_allclose(azimuth[1], azimuth[0], atol=1e-5)  # "same": every line from the start


def test_alternate_lines_sweep_back():
    azimuth = np.degrees(_sensor(line_order="alternate").pattern.azimuth_rad).reshape(20, 60)
    np.testing.assert_allclose(azimuth[1], azimuth[0][::-1], atol=1e-5)
    np.testing.assert_allclose(azimuth[2], azimuth[0], atol=1e-5)


def test_firing_times_follow_lines_duty_and_channel_delays():
    raster = {"channels": [[0, 1], [0, -1]], "channel_delays_s": [0.0, 1e-6], "line_duty": 0.8, "frame_duty": 0.5}
    pattern = _sensor(**raster).pattern
    time_s = pattern.time_offset_s.astype(np.float64).reshape(20, 60, 2)
    line_s, shot_s = 0.1 * 0.5 / 20, 0.1 * 0.5 * 0.8 / (20 * 60)
    np.testing.assert_allclose(time_s[:, 0, 0], np.arange(20) * line_s, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(np.diff(time_s[3, :, 0]), shot_s, rtol=1e-4)
    np.testing.assert_allclose(time_s[..., 1] - time_s[..., 0], 1e-6, atol=5e-9)  # float32 times
    shots = time_s[..., 0].ravel()
    assert np.all(np.diff(shots) > 0) and shots[-1] < 0.05  # in order, within the frame's active half
    # each shot fires its channels together: beam id is the channel, column the shot
    assert np.array_equal(pattern.beam_id, np.tile([0, 1], 1200)) and pattern.column[-1] == 1199


def test_line_density_puts_lines_in_the_region_of_interest():
    """Weight 4 in [-2, 2] of a [10, -10] field: the cumulative share is linear per band (exact spacing)."""
    elevation = line_elevations_deg(10, -10, 32, [(-2, 2, 4.0)])
    spacing = -np.diff(elevation)
    inside = (elevation[:-1] < 2) & (elevation[1:] > -2)
    # 16° of weight 1 and 4° of weight 4: 32 weighted degrees, one a line: 1° apart outside, 0.25° inside
    np.testing.assert_allclose(spacing[inside], 0.25, rtol=1e-9)
    np.testing.assert_allclose(spacing[(elevation[1:] > 2.5) | (elevation[:-1] < -2.5)], 1.0, rtol=1e-9)
    assert elevation[0] < 10 and elevation[-1] > -10 and np.all(spacing > 0)
    np.testing.assert_allclose(line_elevations_deg(-10, 10, 20), -9.5 + np.arange(20))  # bottom-up, even


def test_facet_tilts_and_channels_offset_the_beams():
    raster = {"channels": [[-20, 0], [20, 0.5]], "facet_tilts_deg": [0.0, 0.1, -0.1]}
    pattern = _sensor(**raster).pattern
    elevation = np.degrees(pattern.elevation_rad).reshape(20, 60, 2)
    azimuth = np.degrees(pattern.azimuth_rad).reshape(20, 60, 2)
    np.testing.assert_allclose(elevation[:4, 0, 0], [9.5, 8.6, 7.4, 6.5], atol=1e-4)
    np.testing.assert_allclose(elevation[..., 1] - elevation[..., 0], 0.5, atol=1e-4)
    np.testing.assert_allclose(azimuth[..., 1] - azimuth[..., 0], 40.0, atol=1e-3)
    assert parse_raster(BASE | raster).horizontal_extent_deg() == pytest.approx(100.0)


@pytest.mark.parametrize("raster, message", [
    ("grid", "'raster' must be a mapping"),
    ({"columns": 10}, "needs horizontal_fov_deg"),
    (BASE | {"colums": 3}, "'raster': unknown key 'colums' (did you mean 'columns'?)"),
    (BASE | {"columns": 0}, "'raster.columns' must be an integer"),
    (BASE | {"lines": 2.5}, "'raster.lines' must be an integer"),
    (BASE | {"horizontal_fov_deg": [10, -10, 3]}, "'raster.horizontal_fov_deg' must be [start_deg, end_deg]"),
    (BASE | {"horizontal_fov_deg": [400, 0]}, "within ±180°"),
    ({"horizontal_fov_deg": [10, -10], "columns": 5, "lines": 3}, "several lines need vertical_fov_deg"),
    (BASE | {"channels": [[0, 1, 2]]}, "'raster.channels' must be a list of [azimuth_deg, elevation_deg] pairs"),
    (BASE | {"channels": [[0, 85]]}, "must stay within ±90°"),
    (BASE | {"line_density": [[-2, 2, 0]]}, "weights > 0"),
    (BASE | {"line_order": "zigzag"}, "'raster.line_order' must be 'same' or 'alternate'"),
    (BASE | {"line_duty": 0}, "'raster.line_duty' must be a number in (0, 1]"),
    (BASE | {"frame_duty": float("nan")}, "'raster.frame_duty' must be a number"),
    (BASE | {"channel_delays_s": [0, 1e-6]}, "needs 1 delays ≥ 0"),
    (BASE | {"channel_delays_s": [1e-3]}, "reaches the next shot"),
    (BASE | {"columns": 10_000, "lines": 10_000}, "more than the limit of 50,000,000 rays per frame"),
])
def test_bad_rasters_are_one_line_naming_the_key(raster, message):
    with pytest.raises(SensorSpecError) as info:
        load_sensor({"raster": raster})
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_raster_spec_file_is_a_sensor(tmp_path):
    """A user's own unit, written as data; a partial window fires the shots that start in it, in order."""
    spec = tmp_path / "my_mems.yaml"
    spec.write_text("raster: {horizontal_fov_deg: [25, -25], columns: 100, lines: 40, vertical_fov_deg: [8, -8],\n"
                    "         line_order: alternate, line_density: [[-1, 1, 3]]}\nframe_rate_hz: 20\n"
                    "wavelength_nm: 1550\n")
    sensor = load_sensor(str(spec))
    assert sensor.name == "my_mems" and len(sensor.pattern) == 4000 and sensor.wavelength_nm == 1550
    half = sensor.rays_between(0.0, 0.025)
    assert half is not None and len(half) == 2000 and np.all(np.diff(half.time_offset_s) > 0)


def test_the_docs_example_is_a_sensor(tmp_path):
    """docs/sensors.md's raster example, as written there."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "sensors.md").read_text(encoding="utf-8")
    example = text.split("# my_mems.yaml")[1].split("```")[0].split("\n", 1)[1]
    (tmp_path / "my_mems.yaml").write_text(example)
    sensor = load_sensor(str(tmp_path / "my_mems.yaml"))
    assert (sensor.pattern.rows, sensor.pattern.columns) == (2, 64 * 1200) and sensor.wavelength_nm == 1550


@pytest.mark.parametrize("spec, key", [
    ({"preset": "robosense_m1", "horizontal_fov_deg": [60, -60]}, "horizontal_fov_deg"),
    ({"preset": "hesai_at128", "rotating_mirror": True}, "rotating_mirror"),
    ({"preset": "robosense_helios_5515", "horizontal_samples": 900}, "horizontal_samples"),
    ({"preset": "robosense_ruby_plus", "firing_interval_s": 1e-6}, "firing_interval_s"),
])
def test_grid_keys_beside_a_raster_or_robosense_model_are_refused_not_ignored(spec, key):
    with pytest.raises(SensorSpecError, match=f"sensor spec key '{key}' does nothing beside") as info:
        load_sensor(spec)
    assert "\n" not in str(info.value)


def test_an_angle_file_and_vertical_angles_together_are_refused(tmp_path):
    path = tmp_path / "angle.csv"
    path.write_text("".join(f"{15 - 2 * k},0\n" for k in range(16)))
    with pytest.raises(SensorSpecError, match="'vertical_angles_deg' does nothing beside 'robosense_angles'"):
        load_sensor({"robosense_angles": str(path), "vertical_angles_deg": [0.0] * 16})
    assert len(load_sensor({"robosense_angles": str(path)}).pattern) == 28_784  # 16 lines: an RS-Helios-16P

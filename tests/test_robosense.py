"""RoboSense units (sensors/robosense.py): angle.csv as rs_driver reads it, firing timing, lens-centre origins."""
import numpy as np
import pytest

from lidar_fmu.sensors import SensorSpecError, load_sensor
from lidar_fmu.sensors.robosense import MODELS, read_robosense_angles
from lidar_fmu.tools.cli import main

HELIOS_ANGLES = [(14.94, -4.07), (13.03, 3.63), (10.92, -4.02)]  # the first lines of the packaged Helios-5515 file


def _angle_file(tmp_path, rows, name="angle.csv"):
    path = tmp_path / name
    path.write_text("".join(f"{v},{h}\t\n" for v, h in rows))
    return path


def _packaged(name):
    from importlib import resources

    return str(resources.files("lidar_fmu.sensors").joinpath("data").joinpath(name))


def test_the_packaged_helios_file_reads_as_rs_driver_reads_it():
    elevation, horizontal = read_robosense_angles(_packaged("robosense_helios_5515_angle.csv"))
    assert len(elevation) == 32 and [tuple(r) for r in np.c_[elevation, horizontal][:3]] == HELIOS_ANGLES
    assert elevation.min() == pytest.approx(-54.6) and elevation.max() == pytest.approx(14.94)
    # a third column, ignored as rs_driver ignores it
    elevation, horizontal = read_robosense_angles(_packaged("robosense_ruby_plus_angle.csv"))
    assert len(elevation) == 128 and (elevation[0], horizontal[0]) == (-11.75, 5.92)


def test_helios_rays_follow_the_head_and_leave_the_lens_centre():
    """rs_driver decoder_RSHELIOS.hpp: 55.56 µs blocks, slot s at 1.73·s µs, azimuth moved on by the same share of
    the block; the point is d·(direction at H + horizontal) + RX·(cos H, −sin H) in RoboSense's clockwise H."""
    sensor = load_sensor("robosense_helios_5515")
    pattern = sensor.pattern
    assert (pattern.rows, pattern.columns, len(pattern)) == (32, 1799, 57_568)  # ⌊1 / (10 Hz · 55.56 µs)⌋ blocks
    time_s = pattern.time_offset_s.astype(np.float64).reshape(1799, 32)
    np.testing.assert_allclose(time_s[0], 1.73e-6 * np.arange(32), atol=1e-9)
    np.testing.assert_allclose(time_s[1:, 0] - time_s[:-1, 0], 55.56e-6, atol=1e-8)  # float32 times
    assert np.all(np.diff(pattern.time_offset_s) >= 0) and time_s.max() < 0.1
    elevation, horizontal = read_robosense_angles(_packaged("robosense_helios_5515_angle.csv"))
    head_deg = 360.0 * 10.0 * time_s  # clockwise from ahead (split_angle 0)
    expected = -(head_deg + horizontal[None, :])
    azimuth = np.degrees(pattern.azimuth_rad).reshape(1799, 32)
    np.testing.assert_allclose(np.angle(np.exp(1j * np.radians(azimuth - expected))), 0.0, atol=2e-6)
    np.testing.assert_allclose(np.degrees(pattern.elevation_rad).reshape(1799, 32), np.tile(elevation, (1799, 1)),
                               atol=2e-5)
    origins = pattern.origins.reshape(1799, 32, 3)
    np.testing.assert_allclose(np.hypot(origins[..., 0], origins[..., 1]), 0.03498, rtol=1e-5)
    np.testing.assert_allclose(np.degrees(np.arctan2(origins[..., 1], origins[..., 0])),
                               np.degrees(np.angle(np.exp(-1j * np.radians(head_deg)))), atol=1e-3)
    assert sensor.min_range_m == 0.2 and sensor.max_range_m == 150.0 and sensor.wavelength_nm == 905.0


def test_ruby_plus_and_16p_timing():
    ruby = load_sensor("robosense_ruby_plus").pattern
    assert (ruby.rows, ruby.columns) == (128, 1799)
    slots = ruby.time_offset_s[:128].astype(np.float64) * 1e6
    assert slots[:4].tolist() == [0, 0, 0, 0] and slots[127] == pytest.approx(53.771, abs=1e-3)  # decoder_RSP128
    assert np.all(np.diff(slots) >= 0) and np.all(np.diff(ruby.time_offset_s) >= 0)
    # user manual §6.2.2: two 16-laser sequences a ~100 µs block: a sequence every 55.56 µs, 288 000 points/s
    helios_16p = load_sensor("robosense_helios_16p").pattern
    assert (helios_16p.rows, helios_16p.columns) == (16, 1799) and np.array_equal(helios_16p.beam_id[:16], range(16))
    np.testing.assert_allclose(np.degrees(helios_16p.elevation_rad[:16]), -15 + 2.0 * np.arange(16), atol=1e-5)
    np.testing.assert_allclose(helios_16p.time_offset_s[16:32] - helios_16p.time_offset_s[:16], 55.56e-6, atol=1e-9)
    assert set(MODELS) == {"RS-Helios", "RS-Helios-16P", "RS-Ruby-Plus"}


def test_a_units_angle_file_is_a_sensor_spec(tmp_path):
    """A bare angle.csv: the model its line count names, that preset's figures, the file's angles; in a spec, a
    relative angle file beside the spec is that file."""
    rows = [(15.0 - 2.0 * k, 0.5 * (-1) ** k) for k in range(16)]
    path = _angle_file(tmp_path, rows)
    sensor = load_sensor(str(path))
    assert sensor.name == "angle" and sensor.spec["robosense_model"] == "RS-Helios-16P"
    assert sensor.max_range_m == load_sensor("robosense_helios_16p").max_range_m
    np.testing.assert_allclose(np.degrees(sensor.pattern.elevation_rad[:16]), [r[0] for r in rows], atol=1e-5)
    spec = tmp_path / "unit.yaml"
    spec.write_text("preset: robosense_helios_5515\nrobosense_model: RS-Helios-16P\nrobosense_angles: angle.csv\n")
    assert np.array_equal(load_sensor(str(spec)).pattern.directions, sensor.pattern.directions)


@pytest.mark.parametrize("text, message", [
    ("", "is empty"),
    ("14.94,-4.07\nabc,1\n", "line 2: expected 'vertical_deg,horizontal_deg'"),
    ("95,0\n", "line 1: angles must be finite"),
    ("10,-120\n", "line 1: angles must be finite"),
    ("nan,0\n", "line 1: angles must be finite"),
    ("1,2\n" * 5, "has 5 channels; a bare angle file is read for 16"),
])
def test_bad_angle_files_are_one_line(tmp_path, text, message):
    path = tmp_path / "angle.csv"
    path.write_text(text)
    if not text:
        path.write_text("\n\n")
    with pytest.raises(SensorSpecError) as info:
        load_sensor({"robosense_model": "RS-Helios", "robosense_angles": str(path)} if "channels;" not in message
                    else str(path))
    assert message in str(info.value) and "\n" not in str(info.value) and "angle.csv" in str(info.value)


def test_a_wrong_model_or_count_is_named(tmp_path):
    path = _angle_file(tmp_path, [(1.0, 0.0)] * 32)
    with pytest.raises(SensorSpecError, match="the angle file has 32 channels, the RS-Ruby-Plus 128 lasers"):
        load_sensor({"robosense_model": "RS-Ruby-Plus", "robosense_angles": str(path)})
    with pytest.raises(SensorSpecError, match="'robosense_model' must be one of RS-Helios, RS-Helios-16P"):
        load_sensor({"robosense_model": "RS-Bpearl", "robosense_angles": str(path)})
    with pytest.raises(SensorSpecError, match="calibration file not found: nowhere.csv"):
        load_sensor({"robosense_model": "RS-Helios", "robosense_angles": "nowhere.csv"})


def test_cli_scan_with_a_bad_angle_file_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "angle.csv"
    bad.write_text("1,2\n3,four\n")
    mesh = tmp_path / "plane.obj"
    mesh.write_text("v 5 -5 -5\nv 5 5 -5\nv 5 0 5\nf 1 2 3\n")
    code = main(["scan", "--mesh", str(mesh), "--sensor", str(bad), "-o", str(tmp_path / "out.pcd")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "angle.csv, line 2" in err and "Traceback" not in err, err

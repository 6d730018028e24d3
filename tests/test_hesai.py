"""Hesai units as sensors: angle-correction and firetime CSVs, the models' firing timing, the presets."""
import os

import numpy as np
import pytest

from lidar_fmu.sensors import PRESETS, SensorSpecError, load_sensor, resolve_spec
from lidar_fmu.sensors.hesai import (
    HESAI_MODELS,
    HESAI_PRESETS,
    HesaiCalibrationError,
    guess_model,
    read_hesai_calibration,
    read_hesai_firetimes,
)

RECORDINGS = os.path.join(os.path.dirname(__file__), "data", "recordings")
XT32_CSV = os.path.join(RECORDINGS, "hesai-xt32-nebula", "PandarXT32.csv")


def test_an_angle_correction_csv_is_read_per_channel():
    cal = read_hesai_calibration(XT32_CSV)
    assert cal.channels == 32
    # PandarXT32.csv (nebula's calibration): channel 1 at 14.972363° up, azimuth +0.082385°; channel 32 −16.023602°
    assert cal.elevation_deg[0] == pytest.approx(14.972363) and cal.azimuth_offset_deg[0] == pytest.approx(0.082385)
    assert cal.elevation_deg[-1] == pytest.approx(-16.023602)


#: angle-correction files that are none, and what the one line says
BAD_ANGLE_FILES = {
    "": "is empty",
    "Elevation,Azimuth\n1,2\n": "must name the columns",
    "Channel,Elevation,Azimuth\n1,2.0,x\n": "line 2: 'x' is not a number",
    "Channel,Elevation,Azimuth\n1,2.0\n": "line 2: 2 values, need 3",
    "Channel,Elevation,Azimuth\n1,2.0,0\n1,3.0,0\n": "channels must be 1…2, once each",
    "Channel,Elevation,Azimuth\n1,1.2,0\n2,95.0,0\n": "within ±90°",
    "Channel,Elevation,Azimuth\n": "has no channel rows",
    "Channel,Elevation,Azimuth\n1,nan,0\n": "not a finite number",
}


def test_a_bad_angle_correction_is_refused_in_one_line(tmp_path):
    for k, (text, message) in enumerate(BAD_ANGLE_FILES.items()):
        path = tmp_path / f"unit{k}.csv"
        path.write_text(text)
        with pytest.raises(HesaiCalibrationError, match=message) as info:
            read_hesai_calibration(path)
        assert "\n" not in str(info.value) and path.name in str(info.value)


def test_a_binary_file_is_no_angle_correction(tmp_path):
    path = tmp_path / "unit.csv"
    path.write_bytes(b"\x00\x01\x02\xff" * 10)
    with pytest.raises(HesaiCalibrationError, match="cannot read Hesai angle correction"):
        read_hesai_calibration(path)


def test_every_layout_of_firetime_corrections_is_read():
    # the simple layout: PandarXT-32 user manual, channel k fires 6 + 1.512 (k − 1) µs into its block
    xt32 = read_hesai_firetimes("hesai_PandarXT32_firetime.csv", 32)
    np.testing.assert_allclose(xt32.offset_s[0], (6.0 + 1.512 * np.arange(32)) * 1e-6, atol=1e-12)
    # QT128C2X's two loops: 96 channels each, channels 1–32 only in loop 1... of the SDK file's Loop2 column
    qt128 = read_hesai_firetimes("hesai_PandarQT128_firetime.csv", 128)
    fires = np.isfinite(qt128.offset_s)
    assert fires.sum(axis=1).tolist() == [96, 96]
    assert not fires[0, :32].any() and fires[1, :32].all() and fires[0, 32:64].all() and not fires[1, 32:64].any()
    # Pandar128E3X's state table: standard mode, angle state 0, far firing; channel 1 at 4436 ns, 2 at 28554 ns
    e3x = read_hesai_firetimes("hesai_Pandar128E3X_firetime.csv", 128)
    assert e3x.offset_s[0, :2] * 1e9 == pytest.approx([4436, 28554])
    # OT128's: operational state 2 (standard), azimuth state 0: channel 1 at 46.645 µs
    ot128 = read_hesai_firetimes("hesai_OT128_firetime.csv", 128)
    assert ot128.offset_s[0, 0] == pytest.approx(46.645e-6)


@pytest.mark.parametrize("text, channels, message", [
    ("Channel,fire time(us)\n1,6\n", 2, "channel\\(s\\) 2 never fire"),
    ("Channel,fire time(us)\n3,6\n", 2, "channel 3 is not one of 1…2"),
    ("Channel,fire time(us)\n1,6000\n2,7\n", 2, "within ±1 ms"),
    ("hello,world\n1,2\n", 2, "not a firetime correction"),
])
def test_a_bad_firetime_correction_is_refused_in_one_line(tmp_path, text, channels, message):
    path = tmp_path / "firetime.csv"
    path.write_text(text)
    with pytest.raises(HesaiCalibrationError, match=message):
        read_hesai_firetimes(str(path), channels)


def test_each_model_has_its_angle_table_and_firing_timing():
    for name, model in HESAI_MODELS.items():
        cal = read_hesai_calibration(os.path.join(os.path.dirname(__file__), os.pardir, "src", "lidar_fmu", "sensors",
                                                  "data", model.angle_file))
        assert cal.channels == model.channels, name
        assert guess_model(cal).name == name  # a model's own table is recognised as that model's
        firetimes = read_hesai_firetimes(model.firetime_file, model.channels)
        assert np.isfinite(firetimes.offset_s).any(axis=0).all(), name


@pytest.mark.parametrize("preset, rows, columns", [
    ("hesai_pandar40p", 40, 1800), ("hesai_pandar64", 64, 1800), ("hesai_xt16", 16, 2000), ("hesai_xt32", 32, 2000),
    ("hesai_xt32m", 32, 2000), ("hesai_qt64", 64, 600), ("hesai_qt128", 96, 900), ("hesai_pandar128e3x", 128, 1800),
    ("hesai_ot128", 128, 1800),
])
def test_hesai_presets_fire_their_models_blocks(preset, rows, columns):
    sensor = load_sensor(preset)
    p = sensor.pattern
    assert (p.rows, p.columns) == (rows, columns)
    np.testing.assert_allclose(np.linalg.norm(p.directions, axis=1), 1.0, atol=1e-6)
    assert sensor.wavelength_nm == 905.0 and sensor.frame_rate_hz == 10.0
    # blocks fire in order a block period apart; the head turns clockwise (azimuth decreasing)
    start = p.time_offset_s.reshape(columns, rows).min(axis=1)
    np.testing.assert_allclose(np.diff(start), 0.1 / columns, rtol=1e-3)
    assert p.time_offset_s.max() < sensor.frame_period_s
    model = HESAI_MODELS[PRESETS[preset]["hesai_model"]]
    cal = read_hesai_calibration(os.path.join(os.path.dirname(__file__), os.pardir, "src", "lidar_fmu", "sensors",
                                              "data", model.angle_file))
    # block 0 at the front: each ray of the first column looks at −(its channel's azimuth offset)
    first = p.column == 0
    channel = p.beam_id[first].astype(int)
    np.testing.assert_allclose(np.degrees(p.azimuth_rad[first]), -cal.azimuth_offset_deg[channel], atol=1e-4)
    np.testing.assert_allclose(np.degrees(p.elevation_rad[first]), cal.elevation_deg[channel], atol=1e-4)
    az = np.unwrap(p.azimuth_rad[p.beam_id == channel[0]])
    assert np.all(np.diff(az) < 0)


def test_qt128_fires_its_loops_in_alternate_blocks():
    p = load_sensor("hesai_qt128").pattern
    beams = p.beam_id.reshape(p.columns, p.rows)
    assert not np.isin(np.arange(32), beams[0]).any() and np.isin(np.arange(32), beams[1]).all()
    assert np.isin(np.arange(64, 128), beams[0]).all() and np.isin(np.arange(64, 128), beams[1]).all()


def test_a_units_csv_is_a_sensor_of_its_model(tmp_path):
    for unit, preset in (("hesai-xt32-nebula/PandarXT32.csv", "hesai_xt32"),
                         ("hesai-pandar64-nebula/Pandar64.csv", "hesai_pandar64"),
                         ("hesai-qt64-nebula/PandarQT64.csv", "hesai_qt64")):
        path = os.path.join(RECORDINGS, unit)
        spec = resolve_spec(path)
        assert spec["hesai_model"] == PRESETS[preset]["hesai_model"] and spec["calibration"] == os.path.abspath(path)
        assert spec["min_range_m"] == PRESETS[preset]["min_range_m"]
        assert load_sensor(path).pattern.rows == HESAI_MODELS[spec["hesai_model"]].channels
    # in a spec file: the unit's CSV beside it, its own firetime correction
    (tmp_path / "unit.csv").write_text(open(XT32_CSV).read())
    (tmp_path / "fire.csv").write_text("Channel,fire time(us)\n" + "".join(f"{k + 1},{6 + 2 * k}\n" for k in range(32)))
    (tmp_path / "spec.yaml").write_text("preset: hesai_xt32\ncalibration: unit.csv\nfiretime_correction: fire.csv\n")
    p = load_sensor(str(tmp_path / "spec.yaml")).pattern
    np.testing.assert_allclose(p.time_offset_s[:32], 2e-6 * np.arange(32), atol=1e-9)


@pytest.mark.parametrize("spec, message", [
    ({"preset": "hesai_xt32", "hesai_model": "PandarXT99"}, "unknown hesai_model 'PandarXT99'"),
    ({"preset": "hesai_pandar64", "calibration": XT32_CSV}, "has 32 channels, the Pandar64 64"),
    ({"preset": "hesai_xt32", "firetime_correction": "hesai_Pandar64_firetime.csv"}, "channel \\d+ is not one of 1…32"),
])
def test_a_hesai_spec_that_does_not_fit_says_so_in_one_line(spec, message):
    with pytest.raises(SensorSpecError, match=message) as info:
        load_sensor(spec)
    assert "\n" not in str(info.value)


def test_every_hesai_preset_cites_its_figures():
    source = open(os.path.join(os.path.dirname(__file__), os.pardir, "src", "lidar_fmu", "sensors",
                               "hesai.py")).read()
    for name, spec in HESAI_PRESETS.items():
        assert name in PRESETS and spec["wavelength_nm"] == 905.0
        assert {"range_reflectivity", "range_accuracy_m", "beam_divergence_mrad", "min_range_m"} <= set(spec)
        block = source[source.index(f'"{name}": _preset('):]
        block = block[:block.find('"hesai_', 20)]  # up to the next preset
        assert "manual" in block or "datasheet" in block, name


@pytest.mark.parametrize("preset", list(HESAI_PRESETS))
def test_each_hesai_preset_scans_the_demo_street(street, preset):
    """1.9 m above the street's middle: every ray more than 10° down meets the road within 11 m, well inside each
    model's reach, so returns; the sky above the buildings does not."""
    from lidar_fmu import Lidar
    from lidar_fmu.geometry.transforms import pose_matrix

    lidar = Lidar(street, preset, materials="street")
    cloud = lidar.scan(pose_matrix((0.0, 0.0, 1.9)))
    p = lidar.sensor.pattern
    down = np.degrees(p.elevation_rad) < -10.0
    returned = np.zeros(len(p), bool)
    returned[cloud.ray_index] = True
    assert returned[down].mean() > 0.95, preset
    assert 0.2 * len(p) < len(cloud.points) <= len(p)

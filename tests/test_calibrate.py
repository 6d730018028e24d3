"""``lidar-fmu calibrate``: a unit simulated with known noise and range limit, recorded as the unit would, fitted
back; the spec it writes loads in ``scan`` and the FMU's model; bad input in one line."""
import os

import numpy as np
import pytest
import yaml

from helpers.recordings import DATA, corrugated_wall_scene, simulated_recording
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.physics.range_limit import fit_range_limit as datasheet_fit
from lidar_fmu.recordings.calibrate import calibrated_spec, fit_detection_width, fit_noise, fit_range_limit
from lidar_fmu.recordings.ouster import OusterGeometry
from lidar_fmu.recordings.validate import sensor_spec
from lidar_fmu.sensors import load_sensor
from lidar_fmu.sensors.ouster import read_ouster_metadata
from lidar_fmu.tools.cli import main

OS1_32 = os.path.join(DATA, "OS-1-32-G_v2.1.1_1024x10")


def _unit():
    metadata = OS1_32 + ".json"
    return read_ouster_metadata(metadata), metadata


@pytest.mark.parametrize("floor_m, shot_m", [(0.008, 0.003), (0.015, 0.0)])
def test_calibrate_recovers_the_noise_a_simulated_unit_has(floor_m, shot_m):
    """σ0 and σ_shot of a unit simulated in a room come back within 20 % (σ_shot within 0.0005 m where 0)."""
    cal, metadata = _unit()
    spec = sensor_spec(metadata, cal, None, False) | {
        "noise": {"range_sigma_m": floor_m, "shot_sigma_m": shot_m, "seed": 5}}
    recording = simulated_recording(cal, metadata, spec=spec)
    sigma0, shot, bins = fit_noise([recording], OusterGeometry(cal, metadata))
    assert sigma0 == pytest.approx(floor_m, rel=0.2)
    assert shot == pytest.approx(shot_m, rel=0.2, abs=5e-4)
    if shot_m:  # the data themselves show σ growing with the signal proxy
        assert bins[-1]["sigma_m"] > 1.5 * bins[0]["sigma_m"]


def test_the_noise_fit_leaves_out_the_surface_shape_the_mesh_follows():
    """A unit of σ = 5 mm before a corrugated wall (±0.2 m over 1.5 m: its shape adds centimetres to a chord over a
    few pixels): the fitted σ(x) is 5 mm within 20 % over the wall's pixels, the shape not taken for noise."""
    cal, metadata = _unit()
    spec = sensor_spec(metadata, cal, None, False) | {"noise": {"range_sigma_m": 0.005, "shot_sigma_m": 0.0, "seed": 3}}
    recording = simulated_recording(cal, metadata, spec=spec, scene=corrugated_wall_scene(amplitude_m=0.2))
    sigma0, shot, bins = fit_noise([recording], OusterGeometry(cal, metadata))
    assert max(b["unit_sigma_m"] for b in bins) > 0.01  # the shape is there, in the unit's own chord
    for b in bins:  # the wall's pixels span too narrow a signal range to tell σ0 from σ_shot apart: σ as fitted
        assert np.hypot(sigma0, shot * np.sqrt(b["x_median"])) == pytest.approx(0.005, rel=0.2)


def test_the_range_limit_fit_finds_the_law_and_its_scale():
    """Returns drawn below r_L = 100 m · ρ^(1/3) (REFLECTIVITY in whole percent, as a unit reports it): the fit
    names root3 and an A within 5 % of 100 m; below a root-2 law it names root2."""
    rng = np.random.default_rng(1)
    percent = rng.integers(1, 101, 200_000)
    for fit, n, a in (("root3", 3, 100.0), ("root2", 2, 140.0)):
        range_m = a * (percent / 100.0) ** (1.0 / n) * np.sqrt(rng.uniform(0.0, 1.0, len(percent)))
        found, found_a = fit_range_limit(range_m, percent.astype(float))
        assert found == fit
        assert found_a == pytest.approx(a, rel=0.05)


def test_calibrated_spec_keeps_the_returns_within_its_limits_and_loads_everywhere(tmp_path):
    """The real OS-1-32 recording: the spec puts ≤ 2 % of every band's returns beyond r_L and every return within
    min/max range; it loads as a sensor, scans, and runs in the FMU's model."""
    cal, metadata = _unit()
    out = tmp_path / "unit.yaml"
    assert main(["calibrate", OS1_32 + ".npz", "--metadata", metadata, "-o", str(out)]) == 0
    spec = yaml.safe_load(out.read_text())
    assert spec["noise"] == "physical" and spec["detection"] == "logistic"
    with np.load(OS1_32 + ".npz") as data:
        range_m = data["range_mm"][0].astype(float) * 1e-3
        percent = data["reflectivity"][0].astype(float)
    valid = range_m > 0
    range_m, percent = range_m[valid], percent[valid]
    assert spec["min_range_m"] <= range_m.min() and range_m.max() <= spec["max_range_m"]
    limit = datasheet_fit(spec["range_reflectivity"]["pairs"], spec["range_reflectivity"]["fit"], spec["max_range_m"])
    r_l = limit.max_range_m_for(np.maximum(percent, 0.5) / 100.0)
    for lo, hi in ((0, 5), (5, 10), (10, 20), (20, 50), (50, 101)):
        band = (percent >= lo) & (percent < hi)
        assert np.mean(range_m[band] > r_l[band]) <= 0.02, (lo, hi)
    sensor = load_sensor(str(out))
    assert sensor.effects.noise is not None and sensor.effects.noise.shot_sigma_m > 0
    assert len(sensor.pattern) == cal.beams * cal.columns
    recording = simulated_recording(cal, metadata, spec=str(out))  # scans a room with every fitted key
    assert np.count_nonzero(recording.images["range_mm"]) > 10_000
    model = OsiSensorModel(sensor=str(out))
    assert model.lidars[0].sensor.effects.detection == "logistic"


def test_a_room_sized_recording_keeps_the_datasheet_limit():
    """Returns that never reach the datasheet's 10 % range (a room) say nothing about r_L: the datasheet's stays,
    and min/max range only widen."""
    cal, metadata = _unit()
    recording = simulated_recording(cal, metadata)
    sheet = load_sensor(metadata)
    spec = calibrated_spec([recording], OusterGeometry(cal, metadata))
    assert spec["range_reflectivity"] == sheet.spec["range_reflectivity"]
    assert spec["max_range_m"] == sheet.max_range_m and spec["min_range_m"] <= sheet.min_range_m


@pytest.mark.parametrize("argv, message", [
    (["missing.npz"], "recording not found: missing.npz"),
    ([OS1_32 + ".npz", "--metadata", "nope.json"], "--metadata nope.json: file not found"),
    ([OS1_32 + ".npz", "-o", "/no/such/folder/unit.yaml"], "does not exist"),
    ([OS1_32 + ".npz", "-o", os.path.dirname(__file__)], "is a folder"),  # refused before the fit, not after
])
def test_calibrate_refuses_bad_input_in_one_line(argv, message, capsys):
    if "--metadata" not in argv:
        argv = [*argv, "--metadata", OS1_32 + ".json"]
    if "-o" not in argv:
        argv = [*argv, "-o", "unit.yaml"]
    assert main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


@pytest.mark.parametrize("width", [0.03, 0.1])
def test_calibrate_recovers_the_detection_edge_a_simulated_unit_has(width):
    """A unit with a logistic edge of width w and r_L = 25 m · ρ^(1/3), three frames in a room: the width comes
    back within 20 % given the limit."""
    cal, metadata = _unit()
    pairs = [[0.005, 25.0 * 0.005 ** (1 / 3)], [1.0, 25.0]]
    spec = sensor_spec(metadata, cal, None, False) | {
        "range_reflectivity": {"pairs": pairs, "fit": "root3"}, "detection": "logistic", "detection_width": width}
    recordings = [simulated_recording(cal, metadata, spec=spec | {"noise": {"seed": seed}}) for seed in range(3)]
    limit = datasheet_fit(pairs, "root3", 120.0)
    found, figures = fit_detection_width(recordings, OusterGeometry(cal, metadata), limit)
    assert figures["fitted"] and figures["pixels"] > 5000
    assert found == pytest.approx(width, rel=0.2)


def test_calibrate_finds_the_intensity_law_a_units_signal_follows():
    """SIGNAL made by a known law (r0 8 m, rising as r^1 inside, falling as r^-2.5 beyond) from random ranges and
    REFLECTIVITY: the fit names that law; a recording without SIGNAL gets none."""
    from lidar_fmu.physics.range_limit import intensity_law_percent
    from lidar_fmu.recordings.calibrate import fit_intensity_law
    from lidar_fmu.recordings.recording import Recording

    rng = np.random.default_rng(2)
    shape = (1, 32, 1024)
    range_mm = rng.integers(1000, 80000, shape).astype(np.uint32)
    refl = rng.integers(1, 101, shape).astype(np.uint16)
    signal = np.vectorize(intensity_law_percent)(refl / 100.0, range_mm * 1e-3, 8.0, 1.0, 2.5) * 60
    images = {"range_mm": range_mm, "reflectivity": refl, "signal": np.rint(signal).astype(np.uint32)}
    recording = Recording("law", images, np.ones((1, 1024), np.uint32), np.zeros((1, 1024), np.uint64),
                          np.array([0]), "synthetic")
    law = fit_intensity_law([recording])
    assert {k: law[k] for k in ("reference_range_m", "near_exponent", "far_exponent")} == {
        "reference_range_m": 8.0, "near_exponent": 1.0, "far_exponent": 2.5}
    del images["signal"]
    assert fit_intensity_law([recording]) is None

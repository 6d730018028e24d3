"""The signal models alone: shot-noise range σ, the logistic detection edge, through the effects pass."""
import math

import numpy as np
import pytest

from lidar_fmu.physics.effects import (
    DETECTION_WIDTH,
    EffectsError,
    apply_effects,
    logistic_detection_probability,
    parse_effects,
    range_sigma_m,
)
from lidar_fmu.pointcloud import POINT_DTYPE, Returns
from lidar_fmu.sensors import load_sensor


def test_shot_noise_grows_with_range_and_falls_with_reflectivity():
    floor, shot = 0.005, 0.002
    near, far = range_sigma_m(floor, 0.0, shot, 5.0, 0.5), range_sigma_m(floor, 0.0, shot, 40.0, 0.5)
    bright, dark = range_sigma_m(floor, 0.0, shot, 20.0, 0.8), range_sigma_m(floor, 0.0, shot, 20.0, 0.05)
    assert far > near and dark > bright
    # σ_shot ∝ r / √ρ, added to the floor in quadrature
    assert range_sigma_m(0.0, 0.0, shot, 20.0, 0.25) == pytest.approx(shot * 2.0 / 0.5)
    assert range_sigma_m(floor, 0.0, shot, 20.0, 0.25) == pytest.approx(math.hypot(floor, 0.008))
    assert range_sigma_m(floor, 0.001, 0.0, 20.0, 0.25) == pytest.approx(floor + 0.02)  # the flat/relative model
    assert range_sigma_m(0.0, 0.0, shot, 20.0, 0.0) == range_sigma_m(0.0, 0.0, shot, 20.0, 0.005)  # floored ρ


def test_logistic_edge_is_soft_and_passes_its_anchor_points():
    w = DETECTION_WIDTH
    assert logistic_detection_probability(1.0, w) == pytest.approx(0.05)
    assert logistic_detection_probability(19.0 ** -w, w) == pytest.approx(0.5)
    x = np.linspace(0.05, 2.0, 200)
    p = np.array([logistic_detection_probability(v, w) for v in x])
    assert np.all(np.diff(p) < 0) and p[0] > 0.999 and p[-1] < 1e-3
    # a narrower edge falls more sharply to the same 5 % at r_L: more inside, less beyond
    assert logistic_detection_probability(0.9, 0.03) > logistic_detection_probability(0.9, 0.1)
    assert logistic_detection_probability(1.1, 0.03) < logistic_detection_probability(1.1, 0.1)


def _wall_returns(sensor, range_m, reflectivity):
    rays = len(sensor.pattern)
    points = np.zeros(rays, POINT_DTYPE)
    d = sensor.pattern.directions
    points["x"], points["y"], points["z"] = (d * range_m).T
    points["range"] = range_m
    points["reflectivity"] = reflectivity
    points["beam_id"] = sensor.pattern.beam_id
    return Returns(points, np.arange(rays, dtype=np.int32), np.full(rays, 50.0, np.float32))


SPEC = {"horizontal_samples": 2000, "vertical_fov_deg": [-10, 10], "channels": 32, "max_range_m": 200.0,
        "range_reflectivity": {"pairs": [[0.005, 10.0], [1.0, 58.5]], "fit": "root3"}, "motion_distortion": False}


@pytest.mark.parametrize("x", [0.6, 0.8, 1.0, 1.2])
def test_the_pass_keeps_the_logistic_share_of_returns(x):
    sensor = load_sensor(SPEC | {"detection": "logistic", "detection_width": 0.1})
    r_l = float(sensor.range_limit.max_range_m_for(0.2))
    kept, existence = apply_effects(_wall_returns(sensor, x * r_l, 0.2), sensor.pattern, sensor, frame=0)
    expected = logistic_detection_probability(x, 0.1)
    assert len(kept.points) / len(sensor.pattern) == pytest.approx(expected, abs=0.01)
    assert np.allclose(existence, expected)


def test_the_pass_draws_the_shot_noise_it_names():
    """σ measured on a wall of 64,000 returns matches σ(r, ρ) for a bright near and a dark far wall; the same
    seed gives the same bytes."""
    spec = SPEC | {"range_noise": {"range_sigma_m": 0.004, "shot_sigma_m": 0.003}, "noise": "physical"}
    sensor = load_sensor(spec)
    for range_m, rho in ((8.0, 0.8), (40.0, 0.05)):
        kept, _ = apply_effects(_wall_returns(sensor, range_m, rho), sensor.pattern, sensor, frame=3)
        again, _ = apply_effects(_wall_returns(sensor, range_m, rho), sensor.pattern, sensor, frame=3)
        assert kept.points.tobytes() == again.points.tobytes()
        measured = float(np.std(kept.points["range"] - range_m))
        assert measured == pytest.approx(range_sigma_m(0.004, 0.0, 0.003, range_m, rho), rel=0.03)


def test_noise_keys_choose_the_model():
    physical = {"range_noise": {"range_sigma_m": 0.004, "shot_sigma_m": 0.003}}
    assert parse_effects(physical | {"noise": "physical"}).noise.shot_sigma_m == 0.003
    assert parse_effects(physical | {"noise": True}).noise.shot_sigma_m == 0.003  # the unit's fitted figures
    datasheet = parse_effects({"range_accuracy_m": 0.03, "noise": True}).noise
    assert datasheet.range_sigma_m == 0.03 and datasheet.shot_sigma_m == 0.0
    assert parse_effects(physical | {"range_accuracy_m": 0.03, "noise": "datasheet"}).noise.shot_sigma_m == 0.0
    assert parse_effects(physical).noise is None  # noise stays off unless asked
    with pytest.raises(EffectsError, match="range_noise"):
        parse_effects({"noise": "physical"})
    with pytest.raises(EffectsError, match="detection_width"):
        parse_effects({"detection": "logistic", "detection_width": -1})


def test_the_intensity_law_is_the_default_law_at_its_defaults_and_follows_its_exponents():
    from lidar_fmu.physics.range_limit import intensity_law_percent, intensity_percent

    for range_m in (0.5, 5.0, 10.0, 12.0, 30.0, 90.0):
        for rho in (0.02, 0.3, 1.0):
            assert intensity_law_percent(rho, range_m, 10.0, 0.0, 2.0) == pytest.approx(intensity_percent(rho, range_m))
    # a near-field rise up to r0 = 12 m as r^0.5, then the range equation's 1/r²
    assert intensity_law_percent(0.5, 3.0, 12.0, 0.5, 2.0) == pytest.approx(50.0 * 0.5)
    assert intensity_law_percent(0.5, 24.0, 12.0, 0.5, 2.0) == pytest.approx(50.0 / 4.0)
    assert intensity_law_percent(0.5, 6.0, 12.0, 0.5, 2.0) < intensity_law_percent(0.5, 12.0, 12.0, 0.5, 2.0)


def test_the_pass_writes_the_units_intensity_law():
    law = {"reference_range_m": 12.0, "near_exponent": 0.5, "far_exponent": 2.0}
    sensor = load_sensor(SPEC | {"intensity_law": law})
    for range_m in (3.0, 30.0):
        kept, _ = apply_effects(_wall_returns(sensor, range_m, 0.4), sensor.pattern, sensor, frame=0)
        expected = 40.0 * (range_m / 12.0) ** 0.5 if range_m < 12 else 40.0 * (12.0 / range_m) ** 2
        assert np.allclose(kept.intensity_percent, expected, rtol=1e-5)
    with pytest.raises(EffectsError, match="intensity_law"):
        parse_effects({"intensity_law": {"reference_range_m": 12.0}})


@pytest.mark.parametrize("spec, key", [
    ({"noise": "physical", "range_noise": {"range_sigma_m": 1e300, "shot_sigma_m": 1e300}}, "range_noise.range_sigma_m"),
    ({"range_noise": "garbage"}, "range_noise must be a mapping"),  # checked where given, noise off or not
    ({"range_noise": {"range_sigma_m": 0.004, "shot_sigma_m": -1}}, "range_noise.shot_sigma_m"),
    ({"noise": {"range_sigma_m": 50.0}}, "noise.range_sigma_m must be a number in 0 … 10"),
    ({"noise": {"range_sigma_per_m": 1.0}}, "noise.range_sigma_per_m"),
    ({"detection": "logistic", "detection_width": 0.5}, "detection_width"),  # beyond what the pass draws whole
])
def test_absurd_noise_and_edge_values_are_refused_naming_the_key(spec, key):
    with pytest.raises(EffectsError, match=key) as info:
        parse_effects(spec)
    assert "\n" not in str(info.value)

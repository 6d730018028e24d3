"""Continuous-wave ToF cameras: ranges fold back modulo c/(2f) (BlenSor's backfolding)."""
import json

import numpy as np
import pytest

from helpers.mirror_scenes import quad
from lidar_fmu import Lidar, Scene
from lidar_fmu.io import read_pcd
from lidar_fmu.physics.tof import SPEED_OF_LIGHT_M_S
from lidar_fmu.sensors import SensorSpecError, load_sensor
from lidar_fmu.tools.cli import main

TOF_CAMERA = {"pinhole": {"width_px": 40, "height_px": 30, "horizontal_fov_deg": 70}, "max_range_m": 30.0,
              "tof": {"modulation_frequency_hz": 20e6}}
AMBIGUITY_20MHZ_M = 7.4948


def _wall_at(distance_m):
    scene = Scene()
    scene.add_instance(8, quad((distance_m, 0, 0), [0, 20, 0], [0, 0, 20], "wall", "wall"), np.eye(4))
    return scene


def test_the_ambiguity_range_is_c_over_2f():
    tof = load_sensor(TOF_CAMERA).tof
    assert tof.ambiguity_range_m == pytest.approx(AMBIGUITY_20MHZ_M, abs=1e-4)
    assert tof.ambiguity_range_m == SPEED_OF_LIGHT_M_S / 40e6


def test_a_wall_at_10_m_reads_its_true_range_mod_7_4948_m_through_scan(tmp_path, capsys):
    """The issue's check, through ``lidar-fmu scan --ground-truth``: every pixel reads range_true mod c/(2f)."""
    from helpers.mirror_scenes import write_obj

    mesh = write_obj(tmp_path, _wall_at(10.0))
    (tmp_path / "tof.json").write_text(json.dumps(TOF_CAMERA))
    out = tmp_path / "tof.pcd"
    code = main(["scan", "--mesh", str(mesh), "--sensor", str(tmp_path / "tof.json"), "-o", str(out),
                 "--ground-truth", "--backend", "embree"])
    assert code == 0, capsys.readouterr().err
    p = read_pcd(out)
    assert len(p) == 40 * 30
    assert p["range_true"].min() >= 10.0 - 1e-4 and p["range_true"].max() > 12.0  # corners lie farther
    np.testing.assert_allclose(p["range"], np.mod(p["range_true"], AMBIGUITY_20MHZ_M), atol=1e-4)
    assert np.all(p["range"] < AMBIGUITY_20MHZ_M)
    # each point stays on its pixel's ray: the measured point is the true one scaled by range / range_true
    scale = p["range"] / p["range_true"]
    for axis in "xyz":
        np.testing.assert_allclose(p[axis], p[axis + "_true"] * scale, atol=1e-4)


def test_a_wall_inside_the_first_interval_is_not_folded():
    lidar = Lidar(_wall_at(5.0), TOF_CAMERA, backend="embree")
    plain = Lidar(_wall_at(5.0), {k: v for k, v in TOF_CAMERA.items() if k != "tof"}, backend="embree")
    a, b = lidar.scan(np.eye(4)), plain.scan(np.eye(4))
    assert np.array_equal(a.points, b.points)


def test_tof_noise_comes_through_the_noise_block_and_folds_with_the_range():
    """σ = 1 cm on the true range, then the fold: the measured range scatters about range_true mod c/(2f)."""
    spec = {**TOF_CAMERA, "noise": {"range_sigma_m": 0.01, "seed": 3}}
    cloud = Lidar(_wall_at(10.0), spec, backend="embree").scan(np.eye(4), ground_truth=True)
    error = cloud.points["range"] - np.mod(cloud.ground_truth["range_true"], AMBIGUITY_20MHZ_M)
    assert 0.008 < error.std() < 0.012 and abs(error.mean()) < 0.002
    again = Lidar(_wall_at(10.0), spec, backend="embree").scan(np.eye(4), ground_truth=True)
    assert again.points.tobytes() == cloud.points.tobytes()  # seeded: same bytes


@pytest.mark.parametrize("spec, match", [
    ({"preset": "velodyne_vlp16", "tof": {"modulation_frequency_hz": 20e6}}, "pinhole"),
    ({**TOF_CAMERA, "tof": {"modulation_frequency_hz": 0}}, "modulation_frequency_hz"),
    ({**TOF_CAMERA, "tof": {"modulation_frequency_hz": "20 MHz"}}, "modulation_frequency_hz"),
    ({**TOF_CAMERA, "tof": {"frequency": 20e6}}, "modulation_frequency_hz"),
    ({**TOF_CAMERA, "tof": 20e6}, "mapping"),
])
def test_bad_tof_specs_say_what_is_wrong(spec, match):
    with pytest.raises(SensorSpecError, match=match):
        load_sensor(spec)

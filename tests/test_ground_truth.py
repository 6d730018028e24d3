"""Ground truth beside the measurement (BlenSor's clean fields): off by default, exact when asked, in every file."""
import numpy as np
import pytest

from helpers.mirror_scenes import MATERIALS, quad
from lidar_fmu import POINT_DTYPE, Lidar, Scene
from lidar_fmu.io import read_pcd, write_las, write_pcd, write_ply
from lidar_fmu.physics.ground_truth import GROUND_TRUTH_DTYPE, NO_MATERIAL
from lidar_fmu.physics.materials import load_database
from lidar_fmu.physics.weather import WEATHER_OBJECT_ID

SENSOR = {"horizontal_fov_deg": [-30, 30], "horizontal_resolution_deg": 2.0, "vertical_fov_deg": [-10, 10],
          "channels": 11, "max_range_m": 80.0, "motion_distortion": False}
NOISY = {**SENSOR, "noise": {"range_sigma_m": 0.05, "angle_sigma_deg": 0.2, "seed": 7}}
TILT_RAD = np.radians(30)


@pytest.fixture(scope="module")
def tilted_wall():
    """A 50 % wall at x = 10 m turned 30° about z: every ray's incidence angle is known in closed form."""
    scene = Scene()
    c, s = np.cos(TILT_RAD), np.sin(TILT_RAD)
    scene.add_instance(8, quad((10, 0, 0), [-s * 20, c * 20, 0], [0, 0, 10], "wall", "wall"), np.eye(4))
    return scene


def test_off_by_default(tilted_wall):
    cloud = Lidar(tilted_wall, SENSOR, backend="embree", materials=MATERIALS).scan(np.eye(4))
    assert cloud.ground_truth is None and cloud.points.dtype == POINT_DTYPE
    assert not set(GROUND_TRUTH_DTYPE.names) & set(cloud.records().dtype.names)


def test_the_truth_is_the_noise_free_return(tilted_wall):
    clean = Lidar(tilted_wall, SENSOR, backend="embree", materials=MATERIALS).scan(np.eye(4))
    noisy = Lidar(tilted_wall, NOISY, backend="embree", materials=MATERIALS).scan(np.eye(4), ground_truth=True)
    truth = noisy.ground_truth
    assert truth.dtype == GROUND_TRUTH_DTYPE and len(truth) == len(noisy) == len(clean) > 100
    assert np.array_equal(noisy.ray_index, clean.ray_index)
    for name in ("x", "y", "z", "range"):
        assert np.array_equal(truth[name + "_true"], clean.points[name]), name
    assert 0.04 < np.std(noisy.points["range"] - truth["range_true"]) < 0.06  # the measurement is the noisy one
    assert load_database(905).names[int(truth["material_id"][0])] == "lambertian_50"
    assert np.all(truth["material_id"] == truth["material_id"][0])
    # incidence: the angle between each ray and the wall's normal (−cos 30°, −sin 30°, 0)
    normal = np.array([-np.cos(TILT_RAD), -np.sin(TILT_RAD), 0.0])
    cos_expected = -(clean.direction.astype(np.float64) @ normal)
    # (cosines compared: arccos magnifies float32 rounding near normal incidence)
    np.testing.assert_allclose(np.cos(truth["incidence_angle_rad"]), cos_expected, atol=1e-6)
    assert np.degrees(truth["incidence_angle_rad"]).max() > 60


def test_every_file_writer_carries_the_truth(tilted_wall, tmp_path):
    cloud = Lidar(tilted_wall, NOISY, backend="embree", materials=MATERIALS).scan(np.eye(4), ground_truth=True)
    names = cloud.records().dtype.names
    assert names[-len(GROUND_TRUTH_DTYPE.names):] == GROUND_TRUTH_DTYPE.names  # after the point record's fields
    for compression in ("none", "binary_compressed"):
        write_pcd(tmp_path / f"{compression}.pcd", cloud, compression=compression)
        back = read_pcd(tmp_path / f"{compression}.pcd")
        assert back.dtype.names == names
        for name in GROUND_TRUTH_DTYPE.names:
            assert np.array_equal(back[name], cloud.ground_truth[name]), name
    write_ply(tmp_path / "t.ply", cloud)
    header = (tmp_path / "t.ply").read_bytes().split(b"end_header")[0].decode()
    assert all(f" {name}\n" in header for name in GROUND_TRUTH_DTYPE.names)
    import laspy

    write_las(tmp_path / "t.las", cloud)
    las = laspy.read(tmp_path / "t.las")
    np.testing.assert_array_equal(np.asarray(las["range_true"]), cloud.ground_truth["range_true"])
    np.testing.assert_array_equal(np.asarray(las["material_id"]), cloud.ground_truth["material_id"])


def test_a_weather_echo_in_clear_space_has_no_truth():
    """Fog echoes on rays that met nothing: NaN positions, no material."""
    spec = {**SENSOR, "weather": {"fog_visibility_m": 15.0}, "noise": {"seed": 1}}
    cloud = Lidar(Scene(), spec, backend="embree").scan(np.eye(4), ground_truth=True)
    fog = cloud.points["object_id"] == WEATHER_OBJECT_ID
    assert fog.sum() > 0 and fog.all()
    assert np.isnan(cloud.ground_truth["range_true"]).all()
    assert np.all(cloud.ground_truth["material_id"] == NO_MATERIAL)

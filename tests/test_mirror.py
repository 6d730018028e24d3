"""Mirrors: specular bounces, ghosts on the original ray at the whole path length (BlenSor), on every CPU backend
(the CUDA backend: tests/test_cuda_sim.py; through the FMU: tests/test_fmu.py)."""
import numpy as np
import pytest

from helpers.mirror_scenes import (
    MATERIALS,
    MIRROR_REFLECTANCE,
    SENSOR,
    ghost_range_side_mirror,
    periscope_scene,
    quad,
    side_mirror_scene,
    write_obj,
)
from lidar_fmu import Lidar, Scene
from lidar_fmu.io import read_pcd
from lidar_fmu.sensors import SensorSpecError, load_sensor
from lidar_fmu.tools.cli import main


def test_a_45_degree_mirror_puts_ghosts_at_20_m_on_the_original_rays():
    """The issue's check: mirror 10 m ahead, wall 10 m to its side → every ray's point at x ≈ 20 m on its own ray."""
    cloud = Lidar(side_mirror_scene(), SENSOR, backend="embree", materials=MATERIALS).scan(np.eye(4))
    directions = cloud.direction.astype(np.float64)
    assert len(cloud) == len(cloud.pattern) == 49
    path_m, reflected = ghost_range_side_mirror(directions)
    np.testing.assert_allclose(cloud.points["range"], path_m, atol=2e-4)
    # on the original ray (not where the light turned), at the whole path: x ≈ 20 m straight ahead
    along = cloud.xyz / np.linalg.norm(cloud.xyz, axis=1, keepdims=True)
    np.testing.assert_allclose(along, directions, atol=1e-6)
    centre = np.argmin(np.abs(cloud.points["y"]) + np.abs(cloud.points["z"]))
    assert cloud.points["x"][centre] == pytest.approx(20.0, abs=1e-3)
    assert np.all(np.abs(cloud.points["x"] - 20.0) < 0.6)
    assert set(cloud.points["object_id"].tolist()) == {8}  # the wall, the surface finally hit
    # the wall's normal (0, −1, 0) seen in the mirror: (−1, 0, 0), facing the sensor along the original rays
    np.testing.assert_allclose(cloud.points["normal_x"], -1.0, atol=1e-5)
    # ρ = 0.5 · cos θ at the wall · R² (out and back off the mirror)
    np.testing.assert_allclose(cloud.points["reflectivity"],
                               0.5 * np.abs(reflected[:, 1]) * MIRROR_REFLECTANCE**2, rtol=2e-3)


@pytest.mark.parametrize("glass", [False, True])
def test_every_cpu_backend_gives_the_same_ghosts(glass):
    """Two bounces (a periscope), through a glass pane or not: embree (in its packets) = embreex (by recasting)."""
    scene = periscope_scene(glass)
    clouds = [Lidar(scene, SENSOR, backend=name, materials=MATERIALS).scan(np.eye(4)) for name in ("embree", "embreex")]
    a, b = clouds
    assert len(a) == 49 and np.array_equal(a.ray_index, b.ray_index)
    for name in ("x", "y", "z", "range", "normal_x", "normal_y", "normal_z", "reflectivity"):
        np.testing.assert_allclose(a.points[name], b.points[name], atol=2e-4, err_msg=name)
    assert set(a.points["object_id"].tolist()) == {8}
    centre = np.argmin(np.abs(a.points["y"]) + np.abs(a.points["z"]))
    assert a.points["range"][centre] == pytest.approx(10 + 6 + 10, abs=1e-3)
    np.testing.assert_allclose(a.points["reflectivity"][centre], 0.5 * MIRROR_REFLECTANCE**4, rtol=1e-3)


def test_max_bounces_is_the_budget():
    """The periscope needs two bounces: with one, the second mirror ends the ray without a return."""
    scene = periscope_scene()
    two = Lidar(scene, SENSOR, backend="embree", materials=MATERIALS).scan(np.eye(4))
    one = Lidar(scene, {**SENSOR, "max_bounces": 1}, backend="embree", materials=MATERIALS).scan(np.eye(4))
    none = Lidar(scene, {**SENSOR, "max_bounces": 0}, backend="embreex", materials=MATERIALS).scan(np.eye(4))
    assert len(two) == 49 and len(one) == 0 and len(none) == 0
    assert load_sensor(SENSOR).max_bounces == 2
    for bad in (-1, 17, 1.5, True):
        with pytest.raises(SensorSpecError, match="max_bounces"):
            load_sensor({**SENSOR, "max_bounces": bad})


def test_a_scene_without_mirrors_does_no_bounce_work():
    """No mirror triangle in the scene → the continuation asks for no bounces and hits carry no path gain."""
    scene = Scene()
    scene.add_instance(8, quad((10, 0, 0), [0, 5, 0], [0, 0, 5], "wall", "wall"), np.eye(4))
    lidar = Lidar(scene, SENSOR, backend="embree", materials=MATERIALS)
    assert lidar.return_model().continuation().max_bounces == 0
    assert lidar.cast(np.eye(4)).path_gain is None
    scene.add_instance(7, quad((20, 0, 0), [0, 5, 0], [0, 0, 5], "mirror", "mirror"), np.eye(4))  # behind the wall
    assert lidar.return_model().continuation().max_bounces == 2
    assert np.all(lidar.cast(np.eye(4)).path_gain == 1.0)


def test_scan_writes_ghosts(tmp_path, capsys):
    """``lidar-fmu scan`` of an OBJ with a mirror: the PCD holds the ghosts at x ≈ 20 m."""
    import json

    mesh = write_obj(tmp_path, side_mirror_scene())
    (tmp_path / "map.json").write_text(json.dumps(MATERIALS))
    (tmp_path / "sensor.json").write_text(json.dumps(SENSOR))
    out = tmp_path / "ghost.pcd"
    code = main(["scan", "--mesh", str(mesh), "--sensor", str(tmp_path / "sensor.json"), "--materials",
                 str(tmp_path / "map.json"), "-o", str(out), "--backend", "embree"])
    assert code == 0, capsys.readouterr().err
    points = read_pcd(out)
    assert len(points) == 49
    assert np.all(np.abs(points["x"] - 20.0) < 0.6) and np.all(points["range"] > 19.9)

"""The scaling benchmark and what it made faster: the compiled top-level update, vectorised instance lookup."""
import numpy as np
import pytest

from lidar_fmu import Lidar, Scene
from lidar_fmu.geometry.scene import box_mesh
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.raycast.embree4 import normal_transforms
from lidar_fmu.tools.bench_scaling import city_scene, growth_exponent, run_scaling


def test_normal_transforms_are_the_inverse_transpose():
    rng = np.random.default_rng(3)
    poses = np.repeat(np.eye(4)[None], 50, axis=0)
    poses[:, :3, :3] = rng.normal(size=(50, 3, 3)) + 3 * np.eye(3)  # affine: sheared and scaled
    expected = np.transpose(np.linalg.inv(poses)[:, :3, :3], (0, 2, 1))
    np.testing.assert_allclose(normal_transforms(poses), expected, rtol=1e-9, atol=1e-12)
    collapsed = np.zeros((1, 4, 4))  # a box of zero size: no inverse, and no error either (as numpy's)
    assert not np.isfinite(normal_transforms(collapsed)).all()


def test_set_poses_finds_instances_by_id_and_names_an_unknown_one():
    scene = Scene()
    box = box_mesh(1, 1, 1)
    for instance_id in (40, 7, 2**62, 13):
        scene.add_instance(instance_id, box, pose_matrix((instance_id % 100, 0, 0)))
    scene.set_poses([13, 2**62], [pose_matrix((1, 2, 3)), pose_matrix((4, 5, 6))])
    assert scene.pose_of(13)[:3, 3].tolist() == [1, 2, 3] and scene.pose_of(2**62)[:3, 3].tolist() == [4, 5, 6]
    assert scene.pose_of(40)[:3, 3].tolist() == [40, 0, 0]
    with pytest.raises(KeyError, match="no instance with id 8"):
        scene.set_poses([7, 8], [np.eye(4), np.eye(4)])
    scene.remove_instance(7)
    scene.add_instance(8, box)  # the sorted ids follow a new revision
    scene.set_poses([8], [pose_matrix((9, 9, 9))])
    assert scene.pose_of(8)[:3, 3].tolist() == [9, 9, 9]
    with pytest.raises(KeyError, match="no instance with id 7"):
        scene.set_poses([7], [np.eye(4)])


def test_many_moving_instances_are_hit_where_they_moved():
    """After the compiled transform update, every moved box is hit at its new place (10,000 instances)."""
    scene = Scene()
    box = box_mesh(0.5, 0.5, 0.5)
    count = 10_000
    poses = np.repeat(np.eye(4)[None], count, axis=0)
    poses[:, 0, 3] = 10.0 + np.arange(count)  # a row of boxes along +x
    ids = np.arange(1, count + 1)
    for i, pose in zip(ids, poses):
        scene.add_instance(int(i), box, pose)
    lidar = Lidar(scene, {"pinhole": {"width_px": 3, "height_px": 3, "horizontal_fov_deg": 0.5},
                          "max_range_m": 100.0})
    centre = 4  # the middle pixel looks along +x
    assert np.allclose(lidar.cast(np.eye(4)).range_m[centre], 9.75, atol=1e-3)
    poses[:, 0, 3] += 3.0
    poses[0, 0, 3] = 30.0  # the first box now behind the second
    scene.set_poses(ids, poses)
    hits = lidar.cast(np.eye(4))
    assert np.allclose(hits.range_m[centre], 13.75, atol=1e-3)  # the second box (x = 11 m), moved 3 m


def test_scaling_bench_prints_its_tables_and_draws_the_figure(tmp_path, capsys):
    result = run_scaling(repeat=1, max_triangles=10_000, max_instances=10, output=str(tmp_path), max_stationary=100,
                         max_lidars=2)
    out = capsys.readouterr().out
    assert "| one mesh | 10,400 |" in out and "| tiled city |" in out and "| 10 |" in out
    assert (tmp_path / "scaling.png").stat().st_size > 10_000
    assert [r["instances"] for r in result["moving"]] == [1, 10]
    assert all(r["cast_ms"] > 0 for r in result["mesh"] + result["city"] + result["rays"])
    assert [r["lidars"] for r in result["lidars"]] == [1, 2] and [r["objects"] for r in result["stationary"]] == [1, 100]
    assert "| rays (cast) | 14,400 → 262,144 |" in out and "growth exponent" in out


def test_the_growth_exponent_is_the_log_log_slope():
    rows = [{"n": n, "ms": 3.0 * n**0.5} for n in (1, 10, 100, 1000)]
    assert abs(growth_exponent(rows, "n", "ms") - 0.5) < 1e-9
    assert np.isnan(growth_exponent(rows[:1], "n", "ms"))


def test_the_city_puts_the_sensor_in_a_street():
    scene = city_scene(100_000)
    hits = Lidar(scene, "velodyne_vlp16").cast(pose_matrix((0.0, 0.0, 1.9)))
    assert hits.hit.mean() > 0.5 and hits.range_m[hits.hit].min() > 5.0  # nothing closer than the street's half

"""What files say about how their points were made: per-point time only for a sweep, the frame's times, the OSI
intensity and the ring as ROS tools read them."""
import dataclasses
import json

import laspy
import numpy as np
import pytest

from helpers.osi_views import HOST_ID, sensor_view
from lidar_fmu import Lidar, Scene, box_mesh, load_sensor
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.io import read_pcd, write_las, write_pcd, write_ply
from lidar_fmu.physics.returns import returns_cloud
from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE, POINT_DTYPE, Returns, beam_rings, place_on_rays
from lidar_fmu.tools.replay_outputs import first_firing_s


@pytest.fixture(scope="module")
def scene():
    scene = Scene()
    scene.add_instance(ENVIRONMENT_ID_BASE, box_mesh(100, 100, 0.2), pose_matrix((0, 0, -1.9)))
    scene.add_instance(7, box_mesh(4.5, 1.9, 1.5), pose_matrix((8, -3, -1.05), (0, 0, 0.3)))
    return scene


def _ply_header(path):
    return path.read_bytes().partition(b"end_header\n")[0].decode()


@pytest.mark.parametrize("distortion", [True, False])
def test_per_point_time_only_where_the_points_were_fired_over_time(scene, tmp_path, distortion):
    """A snapshot (motion_distortion off: every ray cast from one pose) carries no `time` in any file; a sweep does."""
    lidar = Lidar(scene, {"preset": "velodyne_vlp16", "motion_distortion": distortion}, backend="embree")
    cloud = lidar.scan(pose_matrix((1.0, 0.0, 0.2)), timestamp_s=2.0, first_firing_s=1.95)
    assert cloud.snapshot is (not distortion) and np.ptp(cloud.points["time"]) > 0.04  # in memory: the ray's firing
    write_pcd(tmp_path / "a.pcd", cloud)
    write_ply(tmp_path / "a.ply", cloud)
    write_las(tmp_path / "a.las", cloud)
    assert ("time" in read_pcd(tmp_path / "a.pcd").dtype.names) is distortion
    assert ("property float time" in _ply_header(tmp_path / "a.ply")) is distortion
    las = laspy.read(tmp_path / "a.las")
    gps = np.asarray(las.gps_time)
    if distortion:  # when each point fired: the first firing plus its time
        assert np.allclose(gps, 1.95 + cloud.points["time"].astype(np.float64), atol=1e-9)
    else:  # all cast at the frame's end
        assert np.all(gps == 2.0)


def test_every_file_records_the_frame_s_end_and_first_firing(scene, tmp_path):
    lidar = Lidar(scene, "velodyne_vlp16", backend="embree")
    cloud = lidar.scan(np.eye(4), timestamp_s=3.1, first_firing_s=3.05)
    assert cloud.frame_stamps == {"timestamp_s": 3.1, "first_firing_s": 3.05}
    write_pcd(tmp_path / "a.pcd", cloud, compression="binary_compressed")
    head = (tmp_path / "a.pcd").read_bytes().partition(b"DATA")[0].decode()
    assert "# lidar_fmu timestamp_s 3.1\n# lidar_fmu first_firing_s 3.05\n" in head
    write_ply(tmp_path / "a.ply", cloud)
    assert "comment timestamp_s 3.1\ncomment first_firing_s 3.05" in _ply_header(tmp_path / "a.ply")
    write_las(tmp_path / "a.las", cloud)
    vlr = next(v for v in laspy.read(tmp_path / "a.las").header.vlrs if v.user_id == "lidar_fmu")
    assert json.loads(vlr.record_data) == {"timestamp_s": 3.1, "first_firing_s": 3.05}
    # no first firing given and no motion window to take it from: files say only what is known
    unknown = lidar.scan(np.eye(4), timestamp_s=0.2)
    assert unknown.first_firing_s is None and unknown.frame_stamps == {"timestamp_s": 0.2}


def test_rings_are_numbered_by_elevation_from_the_lowest_beam():
    """velodyne_pointcloud's rings: a VLP-16's lasers interleave (−15°, +1°, −13°, +3°, …), its rings go bottom up."""
    vlp16 = load_sensor("velodyne_vlp16")
    assert beam_rings(vlp16.pattern).tolist() == [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15]
    # the Ouster unit numbers its beams top down: its beam 0 is the highest ring
    ouster = load_sensor("ouster_os1_128_cal")
    rings = beam_rings(ouster.pattern)
    assert rings[0] == 127 and rings[127] == 0 and rings.dtype == np.uint16
    assert sorted(rings.tolist()) == list(range(128))


def test_first_firing_is_where_the_model_opens_its_window():
    """The replay's rule for a frame's first firing is the model's: a whole frame, then half-frame steps."""
    sweep = {"horizontal_fov_deg": [60, -60], "horizontal_samples": 240, "vertical_fov_deg": [-5, 5], "channels": 8,
             "frame_rate_hz": 10.0, "max_range_m": 120.0}
    model = OsiSensorModel(sensor=sweep)
    wall = (50, (40.0, 0.0, 2.0), (0, 0, 0), (0.2, 200.0, 20.0), "")
    previous = None
    for t in (0.1, 0.15, 0.2, 0.3):
        view = sensor_view([wall], time_s=t, host=(HOST_ID, (5.0 * t, 0.0, 0.75), 0.0), host_velocity=(5.0, 0, 0))
        assert model.step(view, t).valid
        assert model.last_cloud.first_firing_s == pytest.approx(first_firing_s(previous, t, 0.1), abs=1e-12), t
        previous = t
    assert first_firing_s(None, 0.1, 0.1) == pytest.approx(0.0) and first_firing_s(0.1, 0.15, 0.1) == 0.1


def test_a_ros_bag_is_written_into_a_new_folder_only(scene, tmp_path):
    from lidar_fmu.io import PointCloudFileError
    from lidar_fmu.io.rosbag import RosbagWriter

    (tmp_path / "taken").mkdir()
    with pytest.raises(PointCloudFileError, match="already exists"):
        RosbagWriter(tmp_path / "taken")
    cloud = Lidar(scene, "velodyne_vlp16", backend="embree").scan(np.eye(4), timestamp_s=0.1)
    with RosbagWriter(tmp_path / "bag") as bag:
        assert bag.add_lidar("front") == "/front/points"
        with pytest.raises(PointCloudFileError, match="taken"):
            bag.add_lidar("front")
        with pytest.raises(PointCloudFileError, match="'rear' was not added"):
            bag.write("rear", cloud, np.eye(4))
        cloud.timestamp_s = -1.0
        with pytest.raises(PointCloudFileError, match="≥ 0 s"):
            bag.write("front", cloud, np.eye(4))


@pytest.mark.parametrize("own_origins", [False, True])
def test_returns_are_placed_and_stamped_in_float32_as_numpy_computes_it(own_origins):
    """The compiled passes over the point records (place_on_rays; returns_cloud's firing times and range offset)
    give the bytes numpy's float32 arithmetic gives, every other field untouched."""
    rng = np.random.default_rng(3)
    sensor = load_sensor({"horizontal_fov_deg": [-180, 180], "horizontal_samples": 64, "vertical_fov_deg": [-10, 10],
                          "channels": 4, "max_range_m": 100})
    pattern = sensor.pattern
    n = len(pattern)
    ray = np.sort(rng.choice(n, n // 2, replace=False)).astype(np.int32)
    points = np.zeros(len(ray), POINT_DTYPE)
    points["range"] = rng.uniform(0.5, 90.0, len(ray)).astype(np.float32)
    points["object_id"] = rng.integers(0, 2**40, len(ray))
    origins = rng.normal(size=(n, 3)).astype(np.float32) if own_origins else np.zeros((1, 3), np.float32)
    placed = points.copy()
    place_on_rays(placed, ray, pattern.directions, origins)
    o = origins[ray] if own_origins else origins
    for k, axis in enumerate("xyz"):
        np.testing.assert_array_equal(placed[axis], o[:, k] + points["range"] * pattern.directions[ray, k])
    offset = 0.0158  # an Ouster's lidar-axis offset
    cloud = returns_cloud(Returns(placed.copy(), ray, np.zeros(len(ray), np.float32)),
                          dataclasses.replace(pattern, range_offset_m=offset), np.eye(4))
    expected = placed.copy()
    expected["time"] = pattern.time_offset_s[ray]
    expected["range"] += np.float32(offset)
    assert cloud.points.tobytes() == expected.tobytes()

"""`lidar-fmu replay --rosbag`: a ROS 2 bag (MCAP) that rosbags and KISS-ICP's rosbag dataloader read back."""
import json
from pathlib import Path

import numpy as np
import pytest

from lidar_fmu.io import read_pcd

pytestmark = pytest.mark.slow

FRAMES = 5
#: a 10 Hz sensor, so that each demo step (0.1 s) is one whole frame and every point's firing time is known
SENSOR = {"vertical_fov_deg": [-15, 15], "channels": 16, "horizontal_samples": 512, "horizontal_fov_deg": [180, -180],
          "frame_rate_hz": 10.0, "max_range_m": 100}
POINT_FIELDS = [("x", 7), ("y", 7), ("z", 7), ("intensity", 7), ("ring", 4), ("time", 7), ("range", 7),
                ("reflectivity", 7), ("beam_id", 6), ("object_id_low", 6), ("object_id_high", 6)]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from lidar_fmu.tools.demo import make_demo_scenario

    folder = tmp_path_factory.mktemp("demo") / "scenario"
    make_demo_scenario(folder, frames=FRAMES)
    return folder


def _replay(demo, tmp_path, distortion: bool):
    from lidar_fmu.tools.cli import main

    scenario = tmp_path / "scenario.yaml"
    spec = json.loads(json.dumps(__import__("yaml").safe_load((demo / "scenario.yaml").read_text())))
    for key in ("trace", "assets", "environment", "materials"):
        if spec.get(key):
            spec[key] = str(demo / spec[key])
    spec["sensor"] = SENSOR | {"motion_distortion": distortion}
    scenario.write_text(json.dumps(spec))
    out, bag = tmp_path / "out", tmp_path / "bag"
    assert main(["replay", str(scenario), "-o", str(out), "-q", "--rosbag", str(bag)]) == 0
    return json.loads((out / "summary.json").read_text()), out, bag


def _messages(bag):
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
        counts = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
        messages = [(c.topic, t, reader.deserialize(raw, c.msgtype)) for c, t, raw in reader.messages()]
    return counts, messages


def test_replay_writes_a_bag_rosbags_and_kiss_icp_read(demo, tmp_path):
    summary, out, bag = _replay(demo, tmp_path, distortion=True)
    assert summary["frame_end_s"] == pytest.approx([0.1 * (k + 1) for k in range(FRAMES)])
    assert summary["frame_first_firing_s"] == pytest.approx([0.1 * k for k in range(FRAMES)])
    counts, messages = _messages(bag)
    assert counts == {"/tf": ("tf2_msgs/msg/TFMessage", FRAMES), "/lidar/points": ("sensor_msgs/msg/PointCloud2", FRAMES)}
    clouds = [(t, m) for topic, t, m in messages if topic == "/lidar/points"]
    poses = [(t, m) for topic, t, m in messages if topic == "/tf"]
    for k, ((t, cloud), (t_tf, tf)) in enumerate(zip(clouds, poses)):
        stamp_ns = round(summary["frame_end_s"][k] * 1e9)
        assert t == t_tf == stamp_ns  # log times and header stamps: the SensorView's time
        assert cloud.header.stamp.sec * 10**9 + cloud.header.stamp.nanosec == stamp_ns
        assert cloud.header.frame_id == "lidar" and cloud.height == 1
        assert cloud.width == summary["returns_per_frame"][k]
        assert [(f.name, f.datatype) for f in cloud.fields] == POINT_FIELDS
        transform = tf.transforms[0]
        assert (transform.header.frame_id, transform.child_frame_id) == ("map", "lidar")
        assert transform.header.stamp.sec * 10**9 + transform.header.stamp.nanosec == stamp_ns
        # the same points as the frame's PCD; time relative to the stamp (velodyne_pointcloud's, stamped at the end)
        from kiss_icp.tools.point_cloud2 import read_points

        points = read_points(cloud)
        pcd = read_pcd(out / "frames" / f"frame_{k:04d}.pcd")
        for name in ("x", "ring", "intensity", "beam_id"):
            assert np.array_equal(points[name], pcd[name]), name
        object_id = points["object_id_low"].astype(np.uint64) | (points["object_id_high"].astype(np.uint64) << 32)
        assert np.array_equal(object_id, pcd["object_id"])
        assert np.allclose(points["time"], pcd["time"] - 0.1, atol=1e-6) and points["time"].min() >= -0.1 - 1e-6
    # the host drives along the street: the sensor's pose moves
    moved = [np.array([p.transforms[0].transform.translation.x, p.transforms[0].transform.translation.y])
             for _, p in poses]
    assert np.linalg.norm(moved[-1] - moved[0]) > 1.0

    from kiss_icp.datasets import dataset_factory  # KISS-ICP's own rosbag dataloader (the dev extra)

    dataset = dataset_factory(dataloader="rosbag", data_dir=Path(bag), topic="/lidar/points")
    assert len(dataset) == FRAMES
    for k in range(FRAMES):
        xyz, timestamps = dataset[k]
        assert xyz.shape == (summary["returns_per_frame"][k], 3) and len(timestamps) == len(xyz)
        assert np.ptp(timestamps) > 0.09  # a sweep: KISS-ICP deskews by these


def test_a_snapshot_replay_writes_no_per_point_time(demo, tmp_path):
    summary, out, bag = _replay(demo, tmp_path, distortion=False)
    _, messages = _messages(bag)
    clouds = [m for topic, _, m in messages if topic == "/lidar/points"]
    assert len(clouds) == FRAMES
    for cloud in clouds:
        names = [f.name for f in cloud.fields]
        assert "time" not in names and {"intensity", "ring"} <= set(names)
    for k in range(FRAMES):
        path = out / "frames" / f"frame_{k:04d}.pcd"
        assert "time" not in read_pcd(path).dtype.names
        head = path.read_bytes().partition(b"DATA")[0].decode()
        assert f"# lidar_fmu timestamp_s {summary['frame_end_s'][k]!r}" in head
        assert f"# lidar_fmu first_firing_s {summary['frame_first_firing_s'][k]!r}" in head

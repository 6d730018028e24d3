"""KISS-ICP odometry on the demo street's ROS 2 bag, against the sensor poses the bag carries (run by hand).

    python scripts/kiss_icp_on_demo.py [FRAMES] [PRESET] [OUT]     # defaults: 20 ouster_os1_64 out/kiss_icp

Generates the demo scenario (``lidar-fmu demo``'s street), replays it through the FMU twice with
``--rosbag`` — ``motion_distortion`` on (a sweep: per-point ``time``) and off (a snapshot: no ``time``) — reads
each bag with KISS-ICP's own rosbag dataloader and runs its odometry (``KissICP``, voxel 1 m, max range
100 m) with deskewing on and off. Ground truth: the ``/tf`` poses in the same bag, relative to the first
frame. Prints, per run, the ATE (RMS of the position error over the frames), the same after taking out the
mean position error (KISS-ICP's deskewed poses refer to another instant of the frame than its first,
undeskewed one: a constant offset), and the RPE (RMS of the error of each frame-to-frame translation from the
third frame on).
"""
import sys
from pathlib import Path

import numpy as np
from kiss_icp.config import load_config
from kiss_icp.datasets import dataset_factory
from kiss_icp.kiss_icp import KissICP
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore

from lidar_fmu.tools.demo import make_demo_scenario
from lidar_fmu.tools.replay import replay

FRAMES = int(sys.argv[1]) if len(sys.argv) > 1 else 20
PRESET = sys.argv[2] if len(sys.argv) > 2 else "ouster_os1_64"
OUT = Path(sys.argv[3] if len(sys.argv) > 3 else "out/kiss_icp")


def rotation(q) -> np.ndarray:
    w, x, y, z = q.w, q.x, q.y, q.z
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def ground_truth(bag: Path) -> list:
    poses = []
    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
        for connection, _, raw in reader.messages():
            if connection.topic == "/tf":
                transform = reader.deserialize(raw, connection.msgtype).transforms[0].transform
                pose = np.eye(4)
                pose[:3, :3] = rotation(transform.rotation)
                pose[:3, 3] = transform.translation.x, transform.translation.y, transform.translation.z
                poses.append(pose)
    return [np.linalg.inv(poses[0]) @ pose for pose in poses]


def odometry(bag: Path, deskew: bool) -> list:
    config = load_config(None)
    config.data.deskew, config.data.max_range, config.mapping.voxel_size = deskew, 100.0, 1.0
    dataset = dataset_factory(dataloader="rosbag", data_dir=bag, topic="/lidar/points")
    kiss = KissICP(config)
    poses = []
    for k in range(len(dataset)):
        xyz, timestamps = dataset[k]
        kiss.register_frame(xyz, timestamps)
        poses.append(kiss.last_pose.copy())
    return poses


def main() -> None:
    scenario = OUT / "scenario"
    if not scenario.exists():
        make_demo_scenario(scenario, frames=FRAMES)
    for distortion in (True, False):
        bag = OUT / f"bag_{PRESET}_{'sweep' if distortion else 'snapshot'}"
        if not bag.exists():
            sensor = {"preset": PRESET, "motion_distortion": distortion}
            replay(scenario, OUT / bag.name.replace("bag", "replay"), progress=False, write_pcd_every=0,
                   rosbag_path=str(bag), overrides={"sensor": sensor})
        truth = ground_truth(bag)
        for deskew in (True, False):
            estimate = odometry(bag, deskew)
            error = np.array([e[:3, 3] - g[:3, 3] for e, g in zip(estimate, truth)])
            ate = np.sqrt(np.mean(np.sum(error ** 2, axis=1)))
            ate_centred = np.sqrt(np.mean(np.sum((error - error.mean(axis=0)) ** 2, axis=1)))
            steps = [np.linalg.inv(a) @ b for a, b in zip(estimate[1:], estimate[2:])]
            true_steps = [np.linalg.inv(a) @ b for a, b in zip(truth[1:], truth[2:])]
            rpe = np.sqrt(np.mean([np.sum((s[:3, 3] - t[:3, 3]) ** 2) for s, t in zip(steps, true_steps)]))
            print(f"{PRESET} motion_distortion={distortion!s:5} deskew={deskew!s:5}: {len(estimate)} frames, "
                  f"{np.linalg.norm(truth[-1][:3, 3]):.1f} m driven, ATE {ate:.3f} m ({ate_centred:.3f} m less the mean "
                  f"offset), RPE {rpe * 1e3:.1f} mm/frame")


if __name__ == "__main__":
    main()

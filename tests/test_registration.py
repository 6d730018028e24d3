"""Per-frame poses by KISS-ICP for a recording without poses (validate --poses icp)."""
import os
import sys

import numpy as np
import pytest

from helpers.recordings import DATA
from lidar_fmu.recordings.ouster import read_recording
from lidar_fmu.recordings.recording import read_kitti_poses
from lidar_fmu.recordings.registration import RegistrationError, icp_poses
from lidar_fmu.recordings.validate import pixel_rays, unit_metadata, unit_points

LB_N3 = "OS-1-128_v2.3.0_1024x10_lb_n3"
METADATA = os.path.join(DATA, "OS-1-128_v2.3.0_1024x10.json")


def lb_n3_frames():
    cal = unit_metadata(METADATA)
    recording = read_recording(os.path.join(DATA, LB_N3 + ".npz"), cal, METADATA)
    rays = pixel_rays(cal)
    range_m = recording.images["range_mm"].astype(np.float64) / 1000.0
    frames = [unit_points(rays, np.where(r > 0, r, np.nan)) for r in range_m]
    return frames, read_kitti_poses(os.path.join(DATA, LB_N3 + "_poses_kitti.txt"), recording.frames)


def test_icp_finds_the_steps_of_the_shared_poses():
    pytest.importorskip("kiss_icp")
    frames, shared = lb_n3_frames()
    poses = icp_poses(frames, max_range_m=120.0)
    assert poses.shape == (3, 4, 4) and np.allclose(poses[0], np.eye(4))
    for f in (1, 2):
        truth = np.linalg.inv(shared[f - 1]) @ shared[f]
        ours = np.linalg.inv(poses[f - 1]) @ poses[f]
        assert np.linalg.norm(truth[:3, 3]) > 0.2  # the unit moves 0.25 m a frame
        assert np.linalg.norm(ours[:3, 3] - truth[:3, 3]) < 0.025
        cos = (np.trace(truth[:3, :3].T @ ours[:3, :3]) - 1.0) / 2.0
        assert np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))) < 0.1


def test_without_kiss_icp_the_reason_is_one_line(monkeypatch):
    for name in ("kiss_icp", "kiss_icp.config", "kiss_icp.kiss_icp"):  # as if not installed: imports fail
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(RegistrationError, match="needs the kiss-icp package"):
        icp_poses([np.zeros((200, 3))], 100.0)


def test_a_frame_without_returns_is_refused():
    pytest.importorskip("kiss_icp")
    with pytest.raises(RegistrationError, match="frame 0 has 0 returns"):
        icp_poses([np.full((500, 3), np.nan)], 100.0)


@pytest.mark.slow
def test_validate_with_icp_poses_measures_the_noise_the_shared_poses_show():
    """lb_n3 frame to frame, the unit's σ per band with KISS-ICP's poses against the shared poses': within 20 %
    (measured: 2.36/2.41/4.62/5.98 cm against 2.36/2.11/4.19/5.59 cm)."""
    pytest.importorskip("kiss_icp")
    from lidar_fmu.recordings.validate import validate

    npz = os.path.join(DATA, LB_N3 + ".npz")
    shared = validate(npz, METADATA, poses_path=os.path.join(DATA, LB_N3 + "_poses_kitti.txt"), echo=lambda _: None)
    icp = validate(npz, METADATA, poses_path="icp", echo=lambda _: None)
    compared = 0
    for a, b in zip(shared["noise_frame_to_frame"]["bands"], icp["noise_frame_to_frame"]["bands"], strict=True):
        if np.isfinite(a["real_sigma_m"] or np.nan) and np.isfinite(b["real_sigma_m"] or np.nan):
            assert b["real_sigma_m"] == pytest.approx(a["real_sigma_m"], rel=0.2)
            compared += 1
    assert compared == 4

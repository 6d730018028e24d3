"""A recording's per-frame poses by scan registration, for ``lidar-fmu validate --poses icp``.

``validate`` compares noise from frame to frame, which needs each frame's pose. A unit's recording rarely comes
with poses (ouster-sdk's lb_n3 test recording does, from its SLAM); without them the frames are registered here
with KISS-ICP (Vizzo et al. 2023, "KISS-ICP: In Defense of Point-to-Point ICP", RA-L; the ``kiss-icp``
package, optional: the command says so in one line where it is missing). Each frame's returns are placed in
the unit's convention (:func:`lidar_fmu.recordings.validate.unit_points`) and registered in order; deskewing is off,
because ``validate`` compares frames swept alike (at one azimuth the motion within the sweep cancels between two
frames, docs/validation.md). On the lb_n3 recording the frame-to-frame steps come within 8–17 mm and 0.02–0.04°
of the shared poses (``tests/test_registration.py``).
"""
from __future__ import annotations

import numpy as np

from ..errors import LidarFmuError

#: KISS-ICP's voxel size for the local map (m): its own default for a 100 m range is max_range/100 = 1 m; finer
#: for the short frame-to-frame steps a recording of a few frames has (checked on lb_n3: 0.5 m, 8–17 mm)
VOXEL_SIZE_M = 0.5
#: returns nearer than this are left out of the registration (the unit's own housing and mount)
MIN_RANGE_M = 0.3


class RegistrationError(LidarFmuError, RuntimeError):
    """Poses that cannot be estimated: the registration library is missing, or a frame has too few returns."""


def icp_poses(frames_xyz: list[np.ndarray], max_range_m: float) -> np.ndarray:
    """(F, 4, 4) world_from_sensor poses of ``frames_xyz`` (each (N, 3) sensor-frame points of one frame, NaN
    rows allowed), the first frame the world: KISS-ICP run over the frames in order."""
    try:
        from kiss_icp.config import KISSConfig
        from kiss_icp.kiss_icp import KissICP
    except ImportError as error:
        raise RegistrationError(f"--poses icp needs the kiss-icp package (pip install kiss-icp): {error}") from None
    config = KISSConfig()
    config.data.deskew = False
    config.data.max_range = float(max_range_m)
    config.data.min_range = MIN_RANGE_M
    config.mapping.voxel_size = VOXEL_SIZE_M
    odometry = KissICP(config)
    poses = []
    for index, xyz in enumerate(frames_xyz):
        xyz = np.asarray(xyz, np.float64).reshape(-1, 3)
        xyz = xyz[np.isfinite(xyz).all(axis=1)]
        if len(xyz) < 100:
            raise RegistrationError(f"--poses icp: frame {index} has {len(xyz)} returns, too few to register")
        odometry.register_frame(xyz, np.zeros(len(xyz)))
        poses.append(np.array(odometry.last_pose, np.float64))
    return np.stack(poses)

"""The point-cloud record: one row per lidar return, in the sensor frame.

``PointCloud.points`` is a packed numpy structured array whose layout is the
binary PCD record, so writing a file is a header plus one ``tobytes()``.
:mod:`lidar_fmu.physics` fills it from hits in one compiled pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: object_id reported for returns from the static environment (OSI: no object).
NO_OBJECT_ID = np.uint64(2**64 - 1)
#: Scene instance ids at or above this are environment geometry, not OSI objects.
ENVIRONMENT_ID_BASE = 2**62

POINT_DTYPE = np.dtype(
    [
        ("x", "<f4"), ("y", "<f4"), ("z", "<f4"),  # m, sensor frame
        ("range", "<f4"),  # m along the beam
        ("reflectivity", "<f4"),  # 0–1, Lambertian-equivalent
        ("normal_x", "<f4"), ("normal_y", "<f4"), ("normal_z", "<f4"),  # unit, sensor frame, facing the sensor
        ("beam_id", "<u4"),  # emitter (laser) index
        ("object_id", "<u8"),  # instance id hit; NO_OBJECT_ID for the environment
        ("saturated", "u1"),  # 1: a retroreflector saturated the receiver
    ]
)

@dataclass
class PointCloud:
    """Returns of one scan.

    ``points`` (M,) POINT_DTYPE; ``ray_index`` (M,) int32 the pattern ray each
    return came from (its column and firing time are in the sensor's
    pattern); ``rows``/``columns`` the pattern's organized grid shape.
    """

    points: np.ndarray
    ray_index: np.ndarray
    rows: int
    columns: int
    timestamp_s: float = 0.0
    sensor_pose: np.ndarray = field(default_factory=lambda: np.eye(4))  # world_from_sensor
    sensor_name: str = ""
    intensity_percent: np.ndarray | None = None  # (M,) OSI intensity, see lidar_fmu.physics

    def __len__(self) -> int:
        return len(self.points)

    @property
    def xyz(self) -> np.ndarray:
        """(M, 3) float32 copy of the positions (m, sensor frame)."""
        return np.stack([self.points["x"], self.points["y"], self.points["z"]], axis=1)

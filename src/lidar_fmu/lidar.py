"""The one entry point: a sensor looking into a scene.

    lidar = Lidar(scene, load_sensor("ouster_os1_128"))
    cloud = lidar.scan(sensor_pose)          # PointCloud in the sensor frame

``sensor_pose`` is the 4×4 world_from_sensor matrix (m). Each scan re-reads the
scene's instance poses, casts the sensor's pattern and turns hits into points.
"""
from __future__ import annotations

import time

import numpy as np

from .pointcloud import PointCloud, hits_to_points
from .raycast import make_backend
from .sensors import Sensor, load_sensor
from .transforms import check_pose, rotate


class Lidar:
    def __init__(self, scene, sensor, backend: str = "auto"):
        self.scene = scene
        self.sensor: Sensor = sensor if isinstance(sensor, Sensor) else load_sensor(sensor)
        self.backend = make_backend(backend, scene)
        #: seconds spent per stage in the last scan
        self.last_timings: dict[str, float] = {}

    def world_rays(self, sensor_pose: np.ndarray):
        """(origin (3,), directions (N,3)) of the pattern in the world frame."""
        pose = np.asarray(sensor_pose, dtype=np.float64)
        return pose[:3, 3].astype(np.float32), rotate(self.sensor.pattern.directions, pose[:3, :3])

    def cast(self, sensor_pose):
        """Raw :class:`~lidar_fmu.raycast.Hits` (world frame) of the pattern from ``sensor_pose``."""
        pose = check_pose(sensor_pose, "sensor pose")
        return self.backend.cast_frame(pose, self.sensor.pattern.directions, self.sensor.max_range_m)

    def returns(self, hits, sensor_pose, timestamp_s: float = 0.0) -> PointCloud:
        """Hits of this sensor's pattern cast from ``sensor_pose`` → returns in the sensor frame."""
        return hits_to_points(
            hits, self.sensor.pattern, sensor_pose, self.sensor.min_range_m,
            timestamp_s=timestamp_s, sensor_name=self.sensor.name,
        )

    def scan(self, sensor_pose, timestamp_s: float = 0.0) -> PointCloud:
        pose = check_pose(sensor_pose, "sensor pose")
        t0 = time.perf_counter()
        hits = self.backend.cast_frame(pose, self.sensor.pattern.directions, self.sensor.max_range_m)
        t1 = time.perf_counter()
        cloud = self.returns(hits, pose, timestamp_s)
        t2 = time.perf_counter()
        self.last_timings = {"cast": t1 - t0, "points": t2 - t1}
        return cloud

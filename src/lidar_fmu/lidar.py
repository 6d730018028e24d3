"""The one entry point: a sensor looking into a scene.

    lidar = Lidar(scene, load_sensor("ouster_os1_128"))
    cloud = lidar.scan(sensor_pose)          # PointCloud in the sensor frame

``sensor_pose`` is the 4×4 world_from_sensor matrix (m). Each scan re-reads the
scene's instance poses, casts the sensor's pattern and turns hits into points.
"""
from __future__ import annotations

import time

import numpy as np

from .physics import (
    TRANSPARENT,
    Materials,
    ReturnModel,
    classify_hits,
    continue_through_transparent,
    hits_to_returns,
    return_model,
    returns_cloud,
)
from .pointcloud import PointCloud
from .raycast import make_backend
from .sensors import Sensor, load_sensor
from .transforms import check_pose, rotate


class Lidar:
    """``materials``: a visual→IR material map (file or dict), ``None`` for the default map."""

    def __init__(self, scene, sensor, backend: str = "auto", materials=None, warn=None):
        self.scene = scene
        self.sensor: Sensor = sensor if isinstance(sensor, Sensor) else load_sensor(sensor)
        self.backend = make_backend(backend, scene)
        self.materials = Materials(self.sensor.wavelength_nm, materials, warn=warn)
        #: seconds spent per stage in the last scan
        self.last_timings: dict[str, float] = {}

    def world_rays(self, sensor_pose: np.ndarray):
        """(origin (3,), directions (N,3)) of the pattern in the world frame."""
        pose = np.asarray(sensor_pose, dtype=np.float64)
        return pose[:3, 3].astype(np.float32), rotate(self.sensor.pattern.directions, pose[:3, :3])

    def return_model(self) -> ReturnModel:
        """This sensor's limits and the scene's current materials, as the physics passes read them."""
        return return_model(self.sensor, self.materials, self.scene)

    def _see_through(self, model: ReturnModel):
        """What a backend needs to pass rays through transparent surfaces itself (or None)."""
        if not model.max_transparent_layers or not (model.class_code == TRANSPARENT).any():
            return None
        return (model.max_transparent_layers, model.triangles, model.slot_offset, model.class_code)

    def cast(self, sensor_pose, model: ReturnModel | None = None):
        """Raw :class:`~lidar_fmu.raycast.Hits` (world frame) of the pattern from ``sensor_pose``.

        Backends that can continue rays through transparent surfaces do so here
        (``model``: this frame's :meth:`return_model`, made here when not given).
        """
        pose = check_pose(sensor_pose, "sensor pose")
        see_through = None
        if getattr(self.backend, "sees_through", False):
            see_through = self._see_through(model or self.return_model())
        return self.backend.cast_frame(pose, self.sensor.pattern.directions, self.sensor.max_range_m, see_through)

    def returns(self, hits, sensor_pose, timestamp_s: float = 0.0, model: ReturnModel | None = None) -> PointCloud:
        """Hits of this sensor's pattern cast from ``sensor_pose`` → returns in the sensor frame.

        Applies the materials (rays through transparent surfaces are cast on,
        in place on ``hits``), the incidence angle and the range limit.
        """
        pose = np.asarray(sensor_pose, dtype=np.float64)
        model = model or self.return_model()

        def classes(h):
            return classify_hits(h.instance_index, h.primitive_id, model.triangles, model.slot_offset, model.class_code)

        if not getattr(self.backend, "sees_through", False) and self._see_through(model) is not None:
            continue_through_transparent(
                self.backend, hits, pose[:3, 3], rotate(self.sensor.pattern.directions, pose[:3, :3]), classes,
                self.sensor.max_transparent_layers, self.sensor.max_range_m,
            )
        return hits_to_returns(hits, self.sensor.pattern, pose, model, timestamp_s=timestamp_s,
                               sensor_name=self.sensor.name)

    def scan(self, sensor_pose, timestamp_s: float = 0.0) -> PointCloud:
        """Returns of one frame from ``sensor_pose``; ``last_timings`` gets the cast and points seconds.

        A backend that decides returns itself (the CUDA one: cast, glass,
        materials and limits in one kernel, only returns copied back) is used
        whole; otherwise hits are cast, then turned into returns on the CPU.
        """
        pose = check_pose(sensor_pose, "sensor pose")
        t0 = time.perf_counter()
        model = self.return_model()
        if getattr(self.backend, "casts_returns", False):
            points, ray_index, intensity = self.backend.cast_returns(pose, self.sensor.pattern, model)
            t1 = time.perf_counter()
            cloud = returns_cloud(points, ray_index, intensity, self.sensor.pattern, pose, timestamp_s=timestamp_s,
                                  sensor_name=self.sensor.name)
        else:
            hits = self.cast(pose, model)
            t1 = time.perf_counter()
            cloud = self.returns(hits, pose, timestamp_s, model)
        self.last_timings = {"cast": t1 - t0, "points": time.perf_counter() - t1}
        return cloud

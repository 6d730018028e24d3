"""One co-simulation step, independent of FMI: SensorView bytes in, SensorData bytes out.

    model = LidarSensorModel(sensor="ouster_os1_128", assets_dir="scenario/assets")
    result = model.step(sensor_view_bytes, time_s)
    result.sensor_data, result.valid, result.count

Bad input never raises out of :meth:`step`: it yields an empty SensorData whose
header says the data are not available, ``valid=False`` and a message.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from .errors import LidarFmuError
from .lidar import Lidar
from .osi.decode import check_position, decode_sensor_view
from .osi.encode import encode_empty_sensor_data, encode_sensor_data_buffer
from .parallel import serial, serialised, serialised_message, threadsafe_layer
from .scene import Scene
from .scene_update import SceneUpdater
from .transforms import PoseError, check_pose, pose_matrix

STAGES = ("decode", "scene", "cast", "physics", "encode")


@dataclass
class StepResult:
    sensor_data: bytes | np.ndarray  # serialized SensorData (a uint8 view when encoded into ``out``)
    valid: bool
    count: int
    message: str = ""  # why the step is invalid, for the FMI logger
    timings_s: dict = field(default_factory=dict)


class LidarSensorModel:
    """The lidar as an OSI sensor model (what the FMU wraps).

    Several models may step at once from several threads: Numba's threading
    layer is a thread-safe one (:mod:`lidar_fmu.parallel`), or else their scans
    take turns.
    """

    def __init__(self, sensor="ouster_os1_128", assets_dir: str = "", environment: str = "",
                 materials: str = "", backend: str = "auto", default_mounting_pose=None, disable_self_hits: bool = True,
                 sensor_id: int | None = None, warn=None):
        self.warn = warn or (lambda message: None)
        threadsafe_layer()  # before the backend starts Numba's threads
        if serialised():
            self.warn(serialised_message())
        self.materials = materials
        self.scene = Scene()
        self.updater = SceneUpdater(self.scene, assets_dir, environment, disable_self_hits, self.warn)
        self.lidar = Lidar(self.scene, sensor, backend=backend, materials=materials or None, warn=self.warn)
        self.default_mounting_pose = check_pose(
            pose_matrix() if default_mounting_pose is None else default_mounting_pose, "mounting pose"
        )
        try:
            check_position(self.default_mounting_pose[:3, 3], "mounting pose position")
        except LidarFmuError as exc:
            raise PoseError(str(exc)) from None
        self.sensor_id = sensor_id
        self.cycle_counter = 0
        self.last_measurement_time_s = None

    @property
    def sensor(self):
        return self.lidar.sensor

    def _empty(self, time_s: float, message: str, mounting=None) -> StepResult:
        data = encode_empty_sensor_data(
            timestamp_s=time_s,
            sensor_id=self.sensor_id or 0,
            mounting_position=self.default_mounting_pose if mounting is None else mounting,
            cycle_counter=self.cycle_counter,
        )
        return StepResult(data, False, 0, message)

    def step(self, sensor_view: bytes | None, time_s: float, out: np.ndarray | None = None) -> StepResult:
        """Process one SensorView (``None`` = no buffer) at simulation time ``time_s``.

        ``out``: a uint8 buffer to encode the SensorData into when it is big
        enough (saves a 10 MB copy per step in the FMU).
        """
        self.cycle_counter += 1
        if not sensor_view:
            return self._empty(time_s, "no SensorView input (null pointer or size 0)")
        try:
            return self._step(sensor_view, time_s, out)
        except LidarFmuError as exc:  # the input's fault (SensorView, poses, meshes): one line names it
            return self._empty(time_s, f"SensorView rejected: {exc}")
        except Exception as exc:  # a bug; still never let a step take the co-simulation down
            return self._empty(time_s, f"step failed: {exc!r}\n{traceback.format_exc()}")

    def _step(self, sensor_view: bytes, time_s: float, out) -> StepResult:
        t0 = time.perf_counter()
        frame = decode_sensor_view(sensor_view)
        t1 = time.perf_counter()
        self.updater.apply(frame)
        mounting = frame.mounting_pose if frame.mounting_pose is not None else self.default_mounting_pose
        vehicle = frame.host_pose()
        if vehicle is None:
            if frame.host_vehicle_id is not None:
                return self._empty(frame.timestamp_s, f"host vehicle {frame.host_vehicle_id} is not in the ground truth", mounting)
            vehicle = np.eye(4)  # no host: the mounting pose is a world pose
        else:
            check_position(vehicle[:3, 3], f"host vehicle {frame.host_vehicle_id} position")
        sensor_pose = vehicle @ mounting
        check_position(sensor_pose[:3, 3], "sensor position (host vehicle · mounting_position)")
        t2 = time.perf_counter()
        with serial():
            cloud = self.lidar.scan(sensor_pose, frame.timestamp_s)
        t4 = time.perf_counter()
        t3 = t2 + self.lidar.last_timings["cast"]
        sensor_id = self.sensor_id if self.sensor_id is not None else frame.sensor_id
        data = encode_sensor_data_buffer(
            cloud,
            out=out,
            timestamp_s=frame.timestamp_s,
            sensor_id=sensor_id,
            mounting_position=mounting,
            cycle_counter=self.cycle_counter,
            measurement_time_s=frame.timestamp_s,
            last_measurement_time_s=frame.timestamp_s,
            intensity_percent=cloud.intensity_percent,
        )
        t5 = time.perf_counter()
        self.last_cloud = cloud
        self.last_sensor_pose = sensor_pose
        timings = dict(zip(STAGES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)))
        return StepResult(data, True, len(cloud), "", timings)

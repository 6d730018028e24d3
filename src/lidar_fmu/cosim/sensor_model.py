"""One co-simulation step, independent of FMI: SensorView bytes in, SensorData bytes out.

    model = OsiSensorModel(sensor="ouster_os1_128", assets_dir="scenario/assets")
    result = model.step(sensor_view_bytes, time_s)
    result.sensor_data, result.valid, result.count

Bad input never raises out of :meth:`OsiSensorModel.step`: it yields an empty SensorData whose header says the
data are not available, ``valid=False`` and a message. A step publishes the rays fired since the previous
SensorView, with the sensor and objects moving between the two views (:mod:`lidar_fmu.scan.motion`); an FMCW
lidar's velocities come from :func:`view_velocities`. A rig's lidars (:class:`MountedLidar`, :func:`mounting_of`)
cast into one scene, each from its own mounting and on its own clock. Docs: docs/fmu.md#one-step,
docs/fmu.md#several-lidars-in-one-fmu, docs/sensors.md#firing-time-and-motion-distortion.
"""
from __future__ import annotations

import math
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from ..errors import LidarFmuError
from ..geometry.scene import Scene
from ..geometry.transforms import PoseError, angular_velocity, check_pose, extrapolate_pose, pose_matrix
from ..osi.decode import ObjectState, check_position, decode_sensor_view
from ..osi.encode import LidarDetectionBlock, encode_empty_sensor_data, encode_lidars_buffer
from ..osi.layers import LayerEncoder, LayerLidar
from ..parallel import serial, serialised, serialised_message, threadsafe_layer
from ..pointcloud import POINT_DTYPE, PointCloud
from ..scan.lidar import Lidar, ScanPlan
from ..scan.motion import first_firing_s, motion_since, rates_jump
from ..scan.velocity import SceneVelocities, velocities_of_motion
from ..sensors.outputs import DEFAULT_OUTPUTS, model_outputs
from ..sensors.rig import RigMember, load_rig, rig_sensor_ids
from ..world.scene_update import SceneUpdater

STAGES = ("decode", "scene", "cast", "physics", "encode")


@dataclass
class StepResult:
    sensor_data: bytes | np.ndarray  # serialized SensorData (a uint8 view when encoded into ``out``)
    valid: bool
    count: int
    message: str = ""  # why the step is invalid, for the FMI logger
    timings_s: dict = field(default_factory=dict)


class OsiSensorModel:
    """The lidar as an OSI sensor model (what the FMU wraps).

    Several models may step at once from several threads: Numba's threading
    layer is a thread-safe one (:mod:`lidar_fmu.parallel`), or else their scans
    take turns.
    """

    def __init__(self, sensor="ouster_os1_128", assets_dir: str = "", environment: str = "",
                 materials: str = "", backend: str = "auto", default_mounting_pose=None,
                 disable_self_hits: bool | None = None, sensor_id: int | None = None, warn=None, up_axis: str = "",
                 ground_truth: bool = False, ir_database: str = "", objects: str = "auto", outputs: str = ""):
        """``sensor``: a preset name, spec file or mapping, a :class:`~lidar_fmu.sensors.Sensor`, or a rig of
        several (:func:`~lidar_fmu.sensors.rig.load_rig`). ``materials``: a visual → IR material map file;
        ``ir_database``: a user's IR material database file (both optional). ``environment`` (a mesh file,
        "auto" or "none") and ``objects`` ("auto" or "boxes"): :class:`~lidar_fmu.world.scene_update.SceneUpdater`.
        ``outputs``: the OSI layers to publish, a comma list (:mod:`lidar_fmu.sensors.outputs`; "": the lidars'
        specs', else the detections alone)."""
        self.warn = warn or (lambda message: None)
        threadsafe_layer()  # before the backend starts Numba's threads
        if serialised():
            self.warn(serialised_message())
        self.materials = materials
        self.scene = Scene()
        self.lidars: list[MountedLidar] = []
        for member in load_rig(sensor):
            # one scene, one backend: the BVH is built once and updated once per step for every lidar
            backend_of = self.lidars[0].lidar.backend if self.lidars else backend
            lidar = Lidar(self.scene, member.sensor, backend=backend_of, materials=materials or None, warn=self.warn,
                          ir_database=ir_database or None)
            self.lidars.append(MountedLidar(lidar, member, default_mounting_pose, self.warn))
        #: the OSI layers each step publishes (docs/fmu.md#osi-layers); the detections alone take the path they
        #: always took
        self.outputs = model_outputs(outputs, [mounted.sensor.spec.get("outputs") for mounted in self.lidars])
        self.layers = None if self.outputs == DEFAULT_OUTPUTS else LayerEncoder(self.outputs)
        for mounted in self.lidars:  # reflections carry every return's Doppler shift, whatever the unit measures
            mounted.doppler = "reflections" in self.outputs
        seeds = [m.sensor.effects.seed for m in self.lidars if m.sensor.effects.noise is not None]
        if len(seeds) > len(set(seeds)):
            self.warn("several lidars of the rig draw their noise with the same noise.seed: their noise is the same "
                      "numbers (give each its own seed)")
        if disable_self_hits is None:  # an AirSim lidar entry's own disable-self-hits, else the host is not seen
            disable_self_hits = bool(self.sensor.spec.get("airsim_disable_self_hits", True))
        # the terrain built from ground truth reaches as far as the farthest-reaching lidar
        reach_m = max(float(mounted.sensor.max_range_m) for mounted in self.lidars)
        self.updater = SceneUpdater(self.scene, assets_dir, environment, disable_self_hits, self.warn, up_axis,
                                    objects, reach_m)
        self.sensor_id = sensor_id
        #: keep each point's ground truth in ``last_cloud`` (OSI carries none: for hosts that read it in-process)
        self.ground_truth = ground_truth
        self.cycle_counter = 0
        self.last_measurement_time_s = None
        #: per lidar, the last step's cloud (sensor frame) and world_from_sensor pose
        self.last_clouds: list[PointCloud] = []
        self.last_sensor_poses: list[np.ndarray] = []

    @property
    def lidar(self) -> Lidar:
        """The first (or only) lidar."""
        return self.lidars[0].lidar

    @property
    def sensor(self):
        return self.lidar.sensor

    @property
    def default_mounting_pose(self) -> np.ndarray:
        return self.lidars[0].default_mounting_pose

    @property
    def last_cloud(self) -> PointCloud:
        return self.last_clouds[0]

    @property
    def last_sensor_pose(self) -> np.ndarray:
        return self.last_sensor_poses[0]

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
        enough (saves a 10 MB copy per step in the FMU). A ``time_s`` that is
        not finite is the caller's error, not the input's: ``ValueError``.
        """
        if not math.isfinite(time_s):
            raise ValueError(f"time_s must be a finite time, got {time_s}")
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
        single = len(self.lidars) == 1
        mountings = [mounted.mounting(frame, k, single) for k, mounted in enumerate(self.lidars)]
        vehicle = frame.host_pose()
        if vehicle is None:
            if frame.host_vehicle_id is not None:
                return self._empty(frame.timestamp_s, f"host vehicle {frame.host_vehicle_id} is not in the ground truth",
                                   mountings[0])
            vehicle = np.eye(4)  # no host: the mounting pose is a world pose
        else:
            check_position(vehicle[:3, 3], f"host vehicle {frame.host_vehicle_id} position")
        sensor_poses = []
        for mounting in mountings:
            sensor_poses.append(vehicle @ mounting)
            check_position(sensor_poses[-1][:3, 3], "sensor position (host vehicle · mounting_position)")
        t2 = time.perf_counter()
        scene_now = (self.scene.instance_ids.copy(), self.scene.poses.copy())  # what every lidar fired into
        # every lidar's rays in one go: lidars firing into the same poses (a rig's motion slices) share the
        # scene updates (Backend.returns_together)
        backend = self.lidar.backend
        with serial():  # (the planning, the cast and the finishing all run parallel kernels)
            plans = [mounted.plan(frame, sensor_pose, mounting, self.cycle_counter, self.ground_truth)
                     for mounted, sensor_pose, mounting in zip(self.lidars, sensor_poses, mountings)]
            jobs = [plan.job for plan in plans if plan is not None]
            returns = iter(backend.returns_together(jobs) if jobs else ())
            for mounted, sensor_pose in zip(self.lidars, sensor_poses):  # cast: the next view fires on from here
                mounted.previous = (frame.timestamp_s, sensor_pose, scene_now)
            cast_s = backend.last_timings["cast"] if jobs else 0.0
            clouds = [mounted.nothing_fired(frame, sensor_pose) if plan is None else plan.finish(next(returns))
                      for mounted, plan, sensor_pose in zip(self.lidars, plans, sensor_poses)]
        sensor_id = self.sensor_id if self.sensor_id is not None else frame.sensor_id
        lidar_ids = rig_sensor_ids([mounted.sensor_id for mounted in self.lidars], sensor_id)
        detections = [
            LidarDetectionBlock(cloud, lidar_id, mounting, frame.timestamp_s,
                                1.0 if cloud.existence_probability is None else cloud.existence_probability,
                                cloud.intensity_percent, echo_pulse_width_m=cloud.echo_pulse_width_m,
                                # (a pulsed unit's clouds carry exact velocities only for the reflections)
                                radial_velocity_m_s=cloud.radial_velocity_m_s
                                if mounted.sensor.radial_velocity is not None else None)
            for lidar_id, cloud, mounting, mounted in zip(lidar_ids, clouds, mountings, self.lidars)
        ]
        t4 = time.perf_counter()
        layers = None if self.layers is None else self.layers.layers(
            [LayerLidar(cloud, mounted.sensor, mounting, lidar_id)
             for cloud, mounted, mounting, lidar_id in zip(clouds, self.lidars, mountings, lidar_ids)],
            frame, frame.timestamp_s, self.cycle_counter)
        data = encode_lidars_buffer(detections, out=out, timestamp_s=frame.timestamp_s, sensor_id=sensor_id,
                                    mounting_position=mountings[0], cycle_counter=self.cycle_counter,
                                    last_measurement_time_s=frame.timestamp_s, layers=layers)
        t5 = time.perf_counter()
        self.last_clouds, self.last_sensor_poses = clouds, sensor_poses
        timings = dict(zip(STAGES, (t1 - t0, t2 - t1, cast_s, t4 - t2 - cast_s, t5 - t4)))
        return StepResult(data, True, sum(len(cloud) for cloud in clouds), "", timings)


class MountedLidar:
    """One lidar of a model: where it sits on the vehicle, its own clock and the last view it fired up to."""

    def __init__(self, lidar: Lidar, member: RigMember, default_mounting_pose, warn):
        self.lidar = lidar
        self.warn = warn
        self.sensor_id = member.sensor_id
        self.default_mounting_pose = check_pose(member_mounting(member, default_mounting_pose), "mounting pose")
        try:
            check_position(self.default_mounting_pose[:3, 3], "mounting pose position")
        except LidarFmuError as exc:
            raise PoseError(str(exc)) from None
        #: the last view the sensor fired up to: (timestamp s, world_from_sensor, (instance ids, world poses))
        self.previous: tuple[float, np.ndarray, tuple[np.ndarray, np.ndarray]] | None = None
        #: scenario time at which the sensor's own clock (its frame phase) starts: the first window's start
        self._sensor_t0_s: float | None = None
        self._warned_long_step = False
        #: give every return its radial velocity, whatever the unit measures (the OSI reflections' Doppler shift)
        self.doppler = False

    @property
    def sensor(self):
        return self.lidar.sensor

    def mounting(self, frame, k: int, single: bool) -> np.ndarray:
        """This lidar's vehicle_from_sensor in ``frame`` (which mounting wins:
        docs/fmu.md#several-lidars-in-one-fmu)."""
        if single and frame.mounting_pose is not None:
            return frame.mounting_pose
        mounting = frame.lidar_mountings[k] if k < len(frame.lidar_mountings) else None
        if isinstance(mounting, LidarFmuError):  # the view's mounting for this lidar is unusable: say so
            raise mounting
        return self.default_mounting_pose if mounting is None else mounting

    def plan(self, frame, sensor_pose: np.ndarray, mounting: np.ndarray, cycle_counter: int,
             ground_truth: bool = False) -> ScanPlan | None:
        """The scan of the rays this lidar fired since its previous view, into the scene as it is now, up to
        its cast (:meth:`Lidar.plan_scan`); ``None`` when nothing fired (a step shorter than one firing)."""
        pattern, motion = self._window(frame, sensor_pose, mounting)
        if pattern is None:
            return None
        velocities = None
        if self.sensor.radial_velocity is not None or self.doppler:  # what radial velocities are measured from
            velocities = view_velocities(frame, velocities_of_motion(motion, self.lidar.scene, sensor_pose)
                                         if motion is not None else SceneVelocities(carrier_centre_m=sensor_pose[:3, 3]))
        return self.lidar.plan_scan(sensor_pose, frame.timestamp_s, pattern=pattern, motion=motion,
                                    frame=cycle_counter, weather=frame.weather, ground_truth=ground_truth,
                                    velocities=velocities, doppler=self.doppler)

    def nothing_fired(self, frame, sensor_pose: np.ndarray) -> PointCloud:
        self.lidar.last_timings = {"cast": 0.0, "points": 0.0}
        return PointCloud(np.zeros(0, POINT_DTYPE), np.zeros(0, np.int32), 0, 0, frame.timestamp_s, sensor_pose,
                          self.sensor.name, np.zeros(0, np.float32))

    def _window(self, frame, sensor_pose: np.ndarray, mounting: np.ndarray):
        """(the rays fired since the previous view, or None; how poses moved meanwhile) for this view."""
        sensor, now = self.sensor, frame.timestamp_s
        period = sensor.frame_period_s
        previous = self.previous if self.previous is not None and self.previous[0] < now else None
        # a step longer than a frame publishes the last frame period before the view (a rosette too: after a
        # gap its shots would otherwise pile up without bound)
        start = previous[0] if previous is not None else now - period  # what the poses move from
        window_start = first_firing_s(None if previous is None else previous[0], now, period)
        if now - start > period * (1 + 1e-6) and not self._warned_long_step:
            self._warned_long_step = True
            self.warn(f"step of {now - start:g} s is longer than {sensor.name}'s frame period {period:g} s: each "
                      "step publishes the frame fired in the last frame period before its SensorView")
        if self._sensor_t0_s is None:
            self._sensor_t0_s = window_start
        pattern = sensor.rays_between(window_start - self._sensor_t0_s, now - self._sensor_t0_s)
        # radial velocities (an FMCW unit's, the reflections' Doppler shifts) take the motion's velocities too,
        # distorted or not
        if pattern is None or not (sensor.motion_distortion or sensor.radial_velocity is not None or self.doppler):
            return pattern, None
        host = frame.host() if previous is None else None
        jumped: dict[int, str] = {}  # object id → why its OSI rates are no motion (rates_jump): it stands still

        def moves(obj: ObjectState) -> bool:
            """Is ``obj`` to be taken back along its OSI velocity and orientation rate over the window?"""
            if not obj.moves:
                return False
            jumped[obj.id] = rates_jump(obj.velocity_m_s, obj.orientation_rate_rad_s, start - now)
            return not jumped[obj.id]

        sensor_start = sensor_pose
        if host is not None and moves(host):  # before the first view: back along the host's velocity
            sensor_start = _finite_or(frame.host_pose(start - now) @ mounting, sensor_pose)

        def start_of_new(object_id: int) -> np.ndarray | None:
            """An object without an earlier pose: back along its OSI velocity, if it moves."""
            k = frame.moving.first_index(object_id)  # (of objects sharing an id, the scene took the first)
            if k is None:
                return None
            obj = frame.moving.state(k)
            if not moves(obj):
                return None
            end = self.lidar.scene.pose_of(object_id)
            return _finite_or(extrapolate_pose(end, obj.velocity_m_s, obj.orientation_rate_rad_s, start - now), end)

        motion = motion_since(self.lidar.scene, start, now, window_start, sensor_pose,
                              None if previous is None else (previous[1], previous[2]), sensor_start, start_of_new)
        self._warn_jumped({k: why for k, why in jumped.items() if why}, frame.host_vehicle_id)
        return pattern, motion

    def _warn_jumped(self, jumped: dict[int, str], host_id: int | None) -> None:
        """One warning for the objects whose OSI velocity or orientation rate is no motion (at most 5 named)."""
        if not jumped:
            return
        named = [f"{'host vehicle' if k == host_id else 'object'} {k}: {why}" for k, why in list(jumped.items())[:5]]
        more = f"; and {len(jumped) - 5} more" if len(jumped) > 5 else ""
        self.warn(f"{self.sensor.name}: OSI base.velocity/orientation_rate beyond any vehicle's motion, taken as a "
                  f"jump (standing still over the frame before its first SensorView): {'; '.join(named)}{more}")


def view_velocities(frame, velocities: SceneVelocities) -> SceneVelocities:
    """``velocities`` (what the poses' motion implies, :func:`~lidar_fmu.scan.velocity.velocities_of_motion`) with
    OSI's own where the SensorView sets them: each moving object's ``base.velocity`` (of its bounding-box centre)
    and ``base.orientation_rate`` (as an angular velocity, :func:`~lidar_fmu.geometry.transforms.angular_velocity`),
    an unset one of the two zero; the host's are its carrier's, about its bounding-box centre. Objects the view
    gives neither keep the motion's (none before their second view: they stand still)."""
    ids, velocity, spin, seen = [], [], [], set()
    for obj in frame.objects:  # of objects sharing an id, the scene took the first
        if obj.id in seen:
            continue
        seen.add(obj.id)
        if obj.velocity_m_s is None and obj.orientation_rate_rad_s is None:
            continue
        ids.append(obj.id)
        velocity.append(obj.velocity_m_s if obj.velocity_m_s is not None else (0.0, 0.0, 0.0))
        spin.append(angular_velocity(obj.orientation_rad, obj.orientation_rate_rad_s))
    velocities = velocities.with_instances(ids, velocity, spin)
    host = frame.host()
    if host is not None and host.id in ids:
        k = ids.index(host.id)
        velocities = velocities.with_carrier(host.position_m, velocity[k], spin[k])
    return velocities


def _finite_or(pose: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """``pose`` if it is a usable one (finite, within the world), else ``fallback``: a wild OSI velocity
    extrapolates nowhere rather than invalidating the frame."""
    try:
        check_position(pose[:3, 3], "extrapolated position")
    except LidarFmuError:
        return fallback
    return pose if np.all(np.isfinite(pose)) else fallback


def member_mounting(member: RigMember, default_mounting_pose=None) -> np.ndarray:
    """A rig member's mounting when the SensorView gives none: its spec's ``mounting``, else
    ``default_mounting_pose`` (the FMU's parameters) as :func:`mounting_of` completes it."""
    pose = member.mounting_pose if member.mounting_pose is not None else default_mounting_pose
    return mounting_of(member.sensor, pose)


def mounting_of(sensor, pose=None) -> np.ndarray:
    """The sensor's default mounting: ``pose`` (4×4 vehicle_from_sensor), unless it is missing or identity and
    the sensor spec carries one of its own (an AirSim entry's ``origin``)."""
    if pose is None or np.array_equal(pose, np.eye(4)):
        origin = sensor.spec.get("airsim_origin")
        if origin is not None:
            return pose_matrix(origin["xyz_m"], np.radians(origin["rpy_deg"]))
    return pose_matrix() if pose is None else np.asarray(pose, np.float64)

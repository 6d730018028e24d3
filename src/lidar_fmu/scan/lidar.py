"""The one entry point: a sensor looking into a scene.

    lidar = Lidar(scene, load_sensor("ouster_os1_128"))
    cloud = lidar.scan(sensor_pose)          # PointCloud in the sensor frame

``sensor_pose`` is the 4×4 world_from_sensor matrix (m). Each scan re-reads the scene's instance poses, casts the
sensor's pattern as one :class:`~lidar_fmu.raycast.RayBatch` and turns hits into returns, all behind the backend's
one call (:meth:`~lidar_fmu.raycast.Backend.returns`). Then, whichever backend cast them:

* a sensor with ``divergence_samples`` > 1 casts each beam's footprint as that many sub-rays, adjacent in the
  batch, and forms the beam's echoes from their hits (:mod:`lidar_fmu.physics.echoes`) before the effects;
* with a :class:`~lidar_fmu.scan.motion.FrameMotion` and the sensor's ``motion_distortion`` on, each ray leaves the
  sensor where it was when the ray fired and meets the objects where they were then
  (:func:`~lidar_fmu.scan.motion.cast_moving`);
* an FMCW sensor (spec key ``radial_velocity``) gives each return its radial velocity from the velocities of the
  sensor and of the instances (:class:`~lidar_fmu.scan.velocity.SceneVelocities`, else those the motion implies;
  :mod:`lidar_fmu.physics.fmcw`), last, after the effects.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..geometry.transforms import check_pose
from ..physics.echoes import (
    first_pass_sub_rays,
    form_echoes,
    nearest_range_m,
    pulse_widths_after,
    refine_mask,
    scan_grid,
    sub_ray_pattern,
    sub_ray_stream,
    subset_pattern,
    truth_per_echo,
)
from ..physics.effects import apply_effects
from ..physics.fmcw import RadialVelocity
from ..physics.returns import Materials, ReturnModel, return_model, returns_cloud, returns_of_hits
from ..physics.tof import backfold
from ..pointcloud import PointCloud, Returns, beam_rings
from ..raycast import Backend, CastJob, Hits, RayBatch, make_backend
from ..sensors import Sensor, load_sensor
from .motion import FrameMotion, plan_moving
from .velocity import SceneVelocities, radial_velocity_of, velocities_of_motion

if TYPE_CHECKING:
    from ..geometry.pattern import RayPattern
    from ..geometry.scene import Scene
    from ..physics.echoes import Footprint, ScanGrid
    from ..physics.materials.database import MaterialDatabaseSource
    from ..physics.materials.mapping import MaterialMapSource
    from ..physics.weather import Weather
    from ..sensors.spec import SensorSpec


#: the parts of adaptive sampling :attr:`Lidar.last_timings` times (s), besides its "cast" (both casts) and "points":
#: the first cast, the step search, the refined beams' cast, and echo formation
ADAPTIVE_STAGES = ("first cast", "steps", "refinement cast", "echoes")


class ScanPlan(NamedTuple):
    """A scan up to its cast (:meth:`Lidar.plan_scan`): the job to cast, and what makes its returns a cloud."""

    job: CastJob
    finish: Callable[[Returns], PointCloud]


class Lidar:
    """``materials``: a visual→IR material map (file or dict), ``None`` for the default map. ``ir_database``: a
    user's IR material database file (or several) laid over the built-in materials, or a
    :class:`~lidar_fmu.physics.materials.MaterialDatabase` (:class:`~lidar_fmu.physics.returns.Materials`).
    ``backend``: a name (:func:`~lidar_fmu.raycast.make_backend`) or a backend over ``scene`` to share."""

    def __init__(self, scene: Scene, sensor: Sensor | SensorSpec, backend: str | Backend = "auto",
                 materials: MaterialMapSource | None = None, warn: Callable[[str], object] | None = None,
                 ir_database: MaterialDatabaseSource | None = None) -> None:
        self.scene = scene
        self.sensor: Sensor = sensor if isinstance(sensor, Sensor) else load_sensor(sensor)
        # a Backend instance is shared (several lidars casting into one scene build and update it once)
        self.backend = backend if isinstance(backend, Backend) else make_backend(backend, scene)
        self.materials = Materials(self.sensor.wavelength_nm, materials, ir_database, warn=warn)
        #: seconds spent per stage in the last scan
        self.last_timings: dict[str, float] = {}
        #: scans so far: the frame counter that, with the noise seed, decides a frame's random numbers
        self.frames = 0
        self.last_refined = 0  # beams the last adaptive-sampling scan cast as all their sub-rays
        self.last_rays_cast = 0  # rays the last adaptive-sampling scan cast: the first cast's and the refinement's
        # (a pattern, its sub-ray pattern): kept while the same pattern is cast
        self._sub_rays: tuple[RayPattern | None, RayPattern | None] = (None, None)
        self._first_pass: tuple[RayPattern | None, RayPattern | None, np.ndarray | None] = (None, None, None)
        self._grid: tuple[RayPattern | None, ScanGrid | None] = (None, None)
        self._beam_rings: np.ndarray | None = None

    @property
    def beam_rings(self) -> np.ndarray:
        """(beams,) uint16 ring of each beam id of this sensor (:func:`~lidar_fmu.pointcloud.beam_rings`)."""
        if self._beam_rings is None:
            self._beam_rings = beam_rings(self.sensor.pattern)
        return self._beam_rings

    def rays(self, sensor_pose: ArrayLike) -> RayBatch:
        """This sensor's pattern from ``sensor_pose`` (4×4 world_from_sensor, m)."""
        return RayBatch.from_pattern(self.sensor.pattern, check_pose(sensor_pose, "sensor pose"),
                                     self.sensor.max_range_m)

    def world_rays(self, sensor_pose: ArrayLike) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """(origins (1, 3) or (N, 3), directions (N, 3)) of the pattern in the world frame."""
        return self.rays(sensor_pose).world_rays()

    def sub_rays(self, pattern: RayPattern) -> RayPattern:
        """``pattern``'s beams as their footprints' sub-rays (:func:`~lidar_fmu.physics.echoes.sub_ray_pattern`), kept
        while the same pattern is cast."""
        if self._sub_rays[0] is not pattern:
            self._sub_rays = (pattern, sub_ray_pattern(pattern, self.sensor.footprint))
        return cast("RayPattern", self._sub_rays[1])  # made just above for this pattern

    def first_pass_rays(self, pattern: RayPattern) -> RayPattern:
        """Adaptive sampling's first cast: one sub-ray per beam
        (:func:`~lidar_fmu.physics.echoes.first_pass_sub_rays`), kept while the same pattern is cast."""
        if self._first_pass[0] is not pattern:
            ids = first_pass_sub_rays(pattern, self.sensor.footprint)
            self._first_pass = (pattern, subset_pattern(self.sub_rays(pattern), ids), ids)
        return cast("RayPattern", self._first_pass[1])

    def first_pass_ids(self, pattern: RayPattern) -> np.ndarray:
        """(N,) int64: the sub-ray (index into :meth:`sub_rays`) adaptive sampling's first cast casts for each beam of
        ``pattern`` (:func:`~lidar_fmu.physics.echoes.first_pass_sub_rays`)."""
        self.first_pass_rays(pattern)
        return cast("np.ndarray", self._first_pass[2])

    def return_model(self) -> ReturnModel:
        """This sensor's limits and the scene's current materials, as the physics passes read them."""
        return return_model(self.sensor, self.materials, self.scene)

    def cast(self, sensor_pose: ArrayLike) -> Hits:
        """Raw :class:`~lidar_fmu.raycast.Hits` (world frame) of the pattern, through transparent surfaces."""
        return self.backend.cast_batch(self.rays(sensor_pose), self.return_model().continuation())

    def returns(self, hits: Hits, sensor_pose: ArrayLike, timestamp_s: float = 0.0) -> PointCloud:
        """Hits of this sensor's pattern cast from ``sensor_pose`` (by :meth:`cast`) → returns, on the CPU."""
        rays = self.rays(sensor_pose)
        return returns_cloud(returns_of_hits(hits, rays, self.return_model()), self.sensor.pattern,
                             rays.world_from_frame, timestamp_s=timestamp_s, sensor_name=self.sensor.name)

    def scan(self, sensor_pose: ArrayLike, timestamp_s: float = 0.0, *, pattern: RayPattern | None = None,
             motion: FrameMotion | None = None, frame: int | None = None, weather: Weather | None = None,
             ground_truth: bool = False, first_firing_s: float | None = None,
             velocities: SceneVelocities | None = None) -> PointCloud:
        """Returns of one frame from ``sensor_pose``; ``last_timings`` gets the cast and points seconds.

        ``pattern``: the rays to fire (default: the sensor's frame;
        :meth:`~lidar_fmu.sensors.Sensor.rays_between` gives a partial sweep).
        ``motion``: how the sensor (from its start pose to ``sensor_pose``) and
        the scene's instances moved while they fired; ignored when the
        sensor's ``motion_distortion`` is off. ``frame``: the frame counter that seeds this frame's noise and
        detection draws (default: this Lidar's scans so far, :attr:`frames`). ``weather``: a
        :class:`~lidar_fmu.physics.weather.Weather` for a sensor whose spec sets none (the FMU: the SensorView's).
        ``ground_truth``: the cloud also carries each point's noise-free return, material and incidence angle
        (``cloud.ground_truth``, :mod:`lidar_fmu.physics.ground_truth`). A ToF camera's ranges fold last
        (:mod:`lidar_fmu.physics.tof`). ``timestamp_s``: when the frame ends (the pose's time);
        ``first_firing_s``: when its first ray fired, which the points' ``time`` counts from (default: the
        ``motion``'s window start; None without one). With ``motion_distortion`` off the cloud is a
        ``snapshot``: every ray cast from ``sensor_pose``, so files carry no per-point time. ``velocities``: of
        the sensor's carrier and the instances at the frame's end, which an FMCW sensor's radial velocities
        (``cloud.radial_velocity_m_s``) are measured from (default: those ``motion`` implies; without it all
        stand still).
        """
        plan = self.plan_scan(sensor_pose, timestamp_s, pattern=pattern, motion=motion, frame=frame, weather=weather,
                              ground_truth=ground_truth, first_firing_s=first_firing_s, velocities=velocities)
        return plan.finish(self.backend.returns_together([plan.job])[0])

    def plan_scan(self, sensor_pose: ArrayLike, timestamp_s: float = 0.0, *, pattern: RayPattern | None = None,
                  motion: FrameMotion | None = None, frame: int | None = None, weather: Weather | None = None,
                  ground_truth: bool = False, first_firing_s: float | None = None,
                  velocities: SceneVelocities | None = None, doppler: bool = False) -> ScanPlan:
        """:meth:`scan` in two parts around the cast: its :class:`~lidar_fmu.raycast.CastJob`, and ``finish``, which
        makes that job's returns the cloud. A rig casts its lidars' jobs together
        (:meth:`~lidar_fmu.raycast.Backend.returns_together`). ``doppler``: a unit that measures no radial velocity
        gives each return its exact one all the same (``cloud.radial_velocity_m_s``, for OSI reflections'
        ``doppler_shift``)."""
        pattern = self.sensor.pattern if pattern is None else pattern
        sensor_pose = check_pose(sensor_pose, "sensor pose")
        footprint = self.sensor.footprint
        model = self.return_model()
        if ground_truth:  # the returns then keep the material each hit
            model = dataclasses.replace(model, keep_material=True)
        # sub-rays are cast without the range limit: it decides on whole echoes (lidar_fmu.physics.echoes); adaptive
        # sampling casts one sub-ray per beam first, the sub-rays of the beams at edges in _finish
        full = footprint.active and footprint.sampling == "full"
        rays, model = (self.sub_rays(pattern) if full else self.first_pass_rays(pattern), model.unlimited()) \
            if footprint.active else (pattern, model)
        # the first cast's rays are the beams turned a little each way: packets of the beams' own neighbours (the
        # centre rays' packet order) keep them coherent, where the dithered directions alone scatter them
        key = pattern.directions if footprint.active and not full else None
        job, after = self._cast_job(rays, sensor_pose, motion, model, full, coherence_key=key)
        if first_firing_s is None and motion is not None:
            first_firing_s = motion.window_start_s
        stamps = (timestamp_s, first_firing_s)
        return ScanPlan(job, functools.partial(self._finish, after, pattern, sensor_pose, stamps, footprint,
                                               frame, weather, ground_truth, (motion, model), velocities, doppler))

    def _moves(self, motion: FrameMotion | None, sensor_pose: np.ndarray) -> bool:
        """Is a frame with ``motion`` cast moving (:func:`~lidar_fmu.scan.motion.plan_moving`), not as a snapshot?"""
        return motion is not None and self.sensor.motion_distortion and not motion.is_still(sensor_pose)

    def _cast_job(self, rays: RayPattern, sensor_pose: np.ndarray, motion: FrameMotion | None, model: ReturnModel,
                  keep_order: bool, coherence_key: np.ndarray | None = None
                  ) -> tuple[CastJob, Callable[[Returns], Returns] | None]:
        """The cast of ``rays`` from ``sensor_pose`` (moving with ``motion`` where the sensor distorts) and what
        takes its returns to the sensor frame (None: nothing); ``keep_order``: a beam's sub-rays stay adjacent;
        ``coherence_key``: directions (one per ray) the caster groups the rays into packets by, instead of their own
        (:attr:`~lidar_fmu.raycast.RayBatch.coherence_key`)."""
        if self._moves(motion, sensor_pose):
            assert motion is not None  # (_moves says so)
            return plan_moving(self.scene, rays, sensor_pose, motion, model, self.sensor.max_range_m,
                               self.sensor.motion_slices, keep_order=keep_order, coherence_key=coherence_key)
        batch = RayBatch.from_pattern(rays, sensor_pose, self.sensor.max_range_m)
        if keep_order:  # a beam's sub-rays stay adjacent, so that packets hold whole footprints
            batch = dataclasses.replace(batch, in_packet_order=True)
        elif coherence_key is not None:
            batch = dataclasses.replace(batch, coherence_key=np.ascontiguousarray(coherence_key, np.float32))
        return CastJob(batch, model), None

    def _adaptive_echoes(self, centre: Returns, pattern: RayPattern, sensor_pose: np.ndarray, footprint: Footprint,
                         cast_with: tuple[FrameMotion | None, ReturnModel], timings: dict[str, float]
                         ) -> tuple[Returns, np.ndarray]:
        """Echoes of every beam from its first-cast sub-ray's return (``centre``); where its footprint may straddle
        an edge (:func:`~lidar_fmu.physics.echoes.refine_mask`) its other sub-rays are cast too and all are formed
        into echoes as full sampling forms them. ``timings`` gets the seconds of each part (:data:`ADAPTIVE_STAGES`;
        the refinement's cast also counts in ``cast``)."""
        t0 = time.perf_counter()
        s = footprint.samples
        range_m = nearest_range_m(centre, len(pattern))
        if self._grid[0] is not pattern:
            self._grid = (pattern, scan_grid(pattern))
        refine = refine_mask(self._grid[1], range_m, footprint)
        rays = np.flatnonzero(refine)
        t1 = time.perf_counter()
        timings.update({"steps": t1 - t0, "refinement cast": 0.0, "echoes": 0.0})
        first = self.first_pass_ids(pattern)
        # the refined beams' sub-rays the first cast has not cast, adjacent and in order
        others = rays[:, None] * s + np.arange(s)
        ids = others[others != first[rays][:, None]]
        parts = [centre._replace(ray_index=first[centre.ray_index])]  # returns by sub-ray, each part in order
        if len(ids):
            recast = self._cast_sub_rays(pattern, ids, sensor_pose, cast_with)
            timings["cast"] = timings.get("cast", 0.0) + self.backend.last_timings.get("cast", 0.0)
            parts.append(recast._replace(ray_index=ids[recast.ray_index]))
        t2 = time.perf_counter()
        self.last_refined = len(rays)
        self.last_rays_cast = len(pattern) + len(ids)
        # one stream of every beam's returns, read in sub-ray order: a refined beam's weigh their sub-rays' weights,
        # a beam cast as one ray's weighs 1
        stream, order = sub_ray_stream(parts)
        echoes = form_echoes(stream, pattern, footprint, self.sensor.physics_range_limit, self.sensor.max_range_m,
                             one_ray=~refine, order=order)
        timings.update({"refinement cast": t2 - t1, "echoes": time.perf_counter() - t2})
        return echoes

    def _cast_sub_rays(self, pattern: RayPattern, ids: np.ndarray, sensor_pose: np.ndarray,
                       cast_with: tuple[FrameMotion | None, ReturnModel]) -> Returns:
        """Returns of the sub-rays ``ids`` (indices into :meth:`sub_rays`), by position in ``ids``, sensor frame."""
        motion, model = cast_with
        job, after = self._cast_job(subset_pattern(self.sub_rays(pattern), ids), sensor_pose, motion, model, True)
        returns = self.backend.returns_together([job])[0]
        return returns if after is None else after(returns)

    def _finish(self, after: Callable[[Returns], Returns] | None, pattern: RayPattern, sensor_pose: np.ndarray,
                stamps: tuple[float, float | None], footprint: Footprint, frame: int | None, weather: Weather | None,
                ground_truth: bool, cast_with: tuple[FrameMotion | None, ReturnModel],
                velocities: SceneVelocities | None, doppler: bool, returns: Returns) -> PointCloud:
        """A scan's returns → its cloud: echoes, effects, ToF folding, radial velocity, ground truth
        (:meth:`plan_scan`)."""
        t0 = time.perf_counter()
        timings = dict(self.backend.last_timings)  # the frame's (first) cast
        first_cast_s = timings.get("cast", 0.0)
        if after is not None:
            returns = after(returns)
        pulse_width_m = None
        if footprint.active and footprint.sampling == "adaptive":
            timings["first cast"] = first_cast_s
            returns, pulse_width_m = self._adaptive_echoes(returns, pattern, sensor_pose, footprint, cast_with,
                                                           timings)
        elif footprint.active:
            returns, pulse_width_m = form_echoes(returns, pattern, footprint, self.sensor.physics_range_limit,
                                                 self.sensor.max_range_m)
        echoes = returns
        # before the effects change the returns: per echo number, each ray's truth
        truth = truth_per_echo(returns, pattern, footprint.max_echoes) if ground_truth else None
        frame = self.frames if frame is None else frame
        returns, existence = apply_effects(returns, pattern, self.sensor, frame, weather)
        if self.sensor.tof is not None:
            returns = backfold(returns, pattern, self.sensor.tof)
        unit = self.sensor.radial_velocity or (RadialVelocity() if doppler else None)
        radial_velocity = None if unit is None else self._radial_velocity(
            returns, pattern, sensor_pose, cast_with[0], velocities, frame, unit)
        self.frames += 1
        cloud = returns_cloud(returns, pattern, sensor_pose, timestamp_s=stamps[0], first_firing_s=stamps[1],
                              sensor_name=self.sensor.name, snapshot=not self.sensor.motion_distortion,
                              beam_rings=self.beam_rings)
        cloud.existence_probability = existence
        cloud.radial_velocity_m_s = radial_velocity
        if pulse_width_m is not None:
            cloud.echo_pulse_width_m = pulse_widths_after(echoes, pulse_width_m, returns, footprint.separation_m)
        if truth is not None:
            cloud.ground_truth = truth[returns.points["echo"], returns.ray_index]
        # the points: all but the casts (an adaptive refinement's cast is in "cast")
        timings["points"] = (timings.get("points", 0.0) + time.perf_counter() - t0
                             - (timings.get("cast", 0.0) - first_cast_s))
        self.last_timings = timings
        return cloud

    def _radial_velocity(self, returns: Returns, pattern: RayPattern, sensor_pose: np.ndarray,
                         motion: FrameMotion | None, velocities: SceneVelocities | None, frame: int,
                         unit: RadialVelocity) -> np.ndarray:
        """(M,) float32: each return's radial velocity as ``unit`` reports it (this FMCW sensor's, or an exact one)
        (:func:`~lidar_fmu.scan.velocity.radial_velocity_of`), from ``velocities``, else from the velocities
        ``motion`` implies, else standing still."""
        if velocities is None:
            velocities = (velocities_of_motion(motion, self.scene, sensor_pose) if motion is not None
                          else SceneVelocities(carrier_centre_m=sensor_pose[:3, 3]))
        effects = self.sensor.effects
        return radial_velocity_of(returns, pattern, sensor_pose, motion if self._moves(motion, sensor_pose) else None,
                                  velocities, self.scene, unit, effects.seed, frame, effects.noise is not None)

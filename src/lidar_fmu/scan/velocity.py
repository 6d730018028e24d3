"""Velocities at a frame, and each return's radial velocity from them (an FMCW unit's, :mod:`lidar_fmu.physics.fmcw`).

A :class:`SceneVelocities` holds, in the world frame at the frame's end (the view's time), the rigid-body velocity
of the body that carries the sensor (the host vehicle, or the sensor alone) and of each moving scene instance: the
velocity ``v`` of a reference point ``c`` and an angular velocity ``ω``, so a point ``x`` of the body moves with
``v + ω × (x − c)``. An instance's reference point is its pose's origin (an OSI object's ``base.position``, the
bounding-box centre); the carrier's is given. They come from :func:`velocities_of_motion` (the pose changes of a
:class:`~lidar_fmu.scan.motion.FrameMotion`, for the sensor and every instance that moved), with OSI's own
``base.velocity`` and ``base.orientation_rate`` laid over those where the SensorView sets them
(:func:`lidar_fmu.cosim.sensor_model.view_velocities`), or from a script's own, passed to
:meth:`~lidar_fmu.scan.lidar.Lidar.scan`.

:func:`radial_velocity_of` places each return's ray where it fired (the sensor's turn and shift over the frame, as
the cast placed it) and hands the returns to the compiled pass. The model: docs/physics.md, "FMCW radial velocity".
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..geometry.scene import find_ids
from ..geometry.transforms import split_scale
from ..physics.fmcw import RadialVelocity, radial_velocities
from ..pointcloud import Returns
from .motion import FrameMotion, rotate_about, rotation_vectors_between, sensor_turn


class SceneVelocities:
    """World-frame velocities at a frame's end (module doc); units m, m/s, rad/s.

    ``carrier_*``: the body carrying the sensor, about its point ``carrier_centre_m`` (default: all zero, a still
    sensor at the origin). ``ids`` (K,): the instances that move, ``velocity_m_s`` (K, 3) of each one's pose
    origin, ``spin_rad_s`` (K, 3) its angular velocity (kept sorted by id). An instance not listed, and the
    environment, stand still.
    """

    def __init__(self, carrier_centre_m: ArrayLike = (0.0, 0.0, 0.0), carrier_velocity_m_s: ArrayLike = (0.0, 0.0, 0.0),
                 carrier_spin_rad_s: ArrayLike = (0.0, 0.0, 0.0), ids: ArrayLike = (),
                 velocity_m_s: ArrayLike = (), spin_rad_s: ArrayLike = ()) -> None:
        self.carrier_centre_m = np.array(carrier_centre_m, np.float64).reshape(3)
        self.carrier_velocity_m_s = np.array(carrier_velocity_m_s, np.float64).reshape(3)
        self.carrier_spin_rad_s = np.array(carrier_spin_rad_s, np.float64).reshape(3)
        id_array = np.asarray(ids, np.int64).reshape(-1)
        velocity = np.asarray(velocity_m_s, np.float64).reshape(-1, 3)
        spin = np.asarray(spin_rad_s, np.float64).reshape(-1, 3)
        if not len(id_array) == len(velocity) == len(spin):
            raise ValueError(f"{len(id_array)} ids need as many velocities and spins, got {len(velocity)} and "
                             f"{len(spin)}")
        order = np.argsort(id_array, kind="stable")
        if len(id_array) > 1 and np.any(np.diff(id_array[order]) == 0):
            raise ValueError("an instance id is given two velocities")
        self.ids, self.velocity_m_s, self.spin_rad_s = id_array[order], velocity[order], spin[order]

    def with_carrier(self, centre_m: ArrayLike, velocity_m_s: ArrayLike, spin_rad_s: ArrayLike) -> SceneVelocities:
        """These velocities with the sensor's carrier moving as given."""
        return SceneVelocities(centre_m, velocity_m_s, spin_rad_s, self.ids, self.velocity_m_s, self.spin_rad_s)

    def with_instances(self, ids: ArrayLike, velocity_m_s: ArrayLike, spin_rad_s: ArrayLike) -> SceneVelocities:
        """These velocities with instances ``ids`` moving as given (in place of what they had)."""
        new = np.asarray(ids, np.int64).reshape(-1)
        keep = ~np.isin(self.ids, new)
        return SceneVelocities(self.carrier_centre_m, self.carrier_velocity_m_s, self.carrier_spin_rad_s,
                               np.r_[self.ids[keep], new],
                               np.r_[self.velocity_m_s[keep], np.asarray(velocity_m_s, np.float64).reshape(-1, 3)],
                               np.r_[self.spin_rad_s[keep], np.asarray(spin_rad_s, np.float64).reshape(-1, 3)])


def _twist(start: np.ndarray, end: np.ndarray, dt_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(velocity of the origin, world angular velocity) of poses (K, 4, 4) moving from ``start`` to ``end`` over
    ``dt_s`` by the motion law: position linear, rotation ``R0 · exp(f θ k)`` (slerp) — an angular velocity
    ``R0 · k θ / dt`` in the world."""
    r0, _ = split_scale(start)
    r1, _ = split_scale(end)
    rotvec = rotation_vectors_between(r0, r1)
    spin = np.einsum("kij,kj->ki", r0, rotvec) / dt_s
    return (end[:, :3, 3] - start[:, :3, 3]) / dt_s, spin


def velocities_of_motion(motion: FrameMotion, scene, sensor_end_pose: np.ndarray) -> SceneVelocities:
    """The velocities a frame's motion implies: the sensor (its own carrier, about its origin) and every instance
    that moved, each at the constant rate that takes its start pose to its end pose (the law the motion distortion
    interpolates by, :func:`~lidar_fmu.scan.motion.interpolate_pose`)."""
    dt_s = motion.end_s - motion.start_s
    if not dt_s > 0:
        return SceneVelocities(carrier_centre_m=sensor_end_pose[:3, 3])
    sensor_velocity, sensor_spin = _twist(motion.sensor_start_pose[None], np.asarray(sensor_end_pose)[None], dt_s)
    moving = [i for i in motion.instance_start_poses if i in scene]
    ids = np.array(moving, np.int64)
    if len(ids):
        velocity, spin = _twist(np.stack([motion.instance_start_poses[i] for i in moving]),
                                np.stack([scene.pose_of(i) for i in moving]), dt_s)
    else:
        velocity, spin = np.zeros((0, 3)), np.zeros((0, 3))
    return SceneVelocities(sensor_end_pose[:3, 3], sensor_velocity[0], sensor_spin[0], ids, velocity, spin)


def rays_at_firing(pattern, ray_index: np.ndarray, sensor_end_pose: np.ndarray, motion: FrameMotion | None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where the rays ``ray_index`` of ``pattern`` fired, in the sensor frame at the frame's end: (directions
    (·, 3), origins ((·, 3), or (1, 3) for all), each ray's row in them (M,), s from the frame's end to each firing
    (M,) ≤ 0). Moved with the sensor as :func:`~lidar_fmu.scan.motion.plan_moving` cast them (one row per ray);
    ``motion`` None: a snapshot, every ray the pattern's own, fired at the end (rows: the rays)."""
    ray_index = np.asarray(ray_index, np.int64)
    origins = np.zeros((1, 3), np.float32) if pattern.origins is None else pattern.origins
    if motion is None:
        return pattern.directions, origins, ray_index, np.zeros(len(ray_index))
    time_s = pattern.time_offset_s[ray_index].astype(np.float64)
    fraction = motion.fraction(time_s)
    dt_s = np.minimum(motion.window_start_s + time_s - motion.end_s, 0.0)
    rotvec, shift = sensor_turn(motion, sensor_end_pose)
    # float32 as the cast turned them (plan_moving): the same rays, half the memory traffic of float64
    directions = rotate_about(pattern.directions[ray_index], rotvec, fraction - 1.0, dtype=np.float32)
    origins = rotate_about(origins if pattern.origins is None else origins[ray_index], rotvec, fraction - 1.0, shift,
                           dtype=np.float32)
    return directions, origins, np.arange(len(ray_index)), dt_s


def radial_velocity_of(returns: Returns, pattern, sensor_end_pose: np.ndarray, motion: FrameMotion | None,
                       velocities: SceneVelocities, scene, unit: RadialVelocity, seed: int, frame: int,
                       noise: bool) -> np.ndarray:
    """(M,) float32: each return's radial velocity as ``unit`` reports it (:mod:`lidar_fmu.physics.fmcw`).

    ``returns``: a frame's returns of ``pattern`` (``range`` along each ray from its origin: before the unit's
    range offset), cast from ``sensor_end_pose`` moving with ``motion`` (None: a snapshot). ``velocities``: the
    carrier's and the instances' at the frame's end; an instance's reference point is its pose's origin in
    ``scene`` now (the end pose). ``seed``, ``frame``: the noise's; ``noise``: draw the unit's σ. Computed in the
    sensor frame at the frame's end (a radial velocity is the same in every frame): the K bodies' velocities are
    turned into it, not the M rays into the world.
    """
    directions, origins, row, dt_s = rays_at_firing(pattern, returns.ray_index, sensor_end_pose, motion)
    # the bodies still in the scene and their reference points, by one sorted search (no lookup per id)
    index, present = find_ids(scene.instance_ids, velocities.ids)
    ids = velocities.ids[present]
    rotation, _ = split_scale(sensor_end_pose)
    position = np.asarray(sensor_end_pose, np.float64)[:3, 3]
    world_centre = scene.poses[index[present], :3, 3]
    # row vectors: v @ R is Rᵀ v, a world vector in the sensor frame
    carrier = np.stack([velocities.carrier_velocity_m_s @ rotation, velocities.carrier_spin_rad_s @ rotation,
                        (velocities.carrier_centre_m - position) @ rotation])
    return radial_velocities(returns.points, returns.ray_index, row, directions, origins, dt_s, ids,
                             velocities.velocity_m_s[present] @ rotation, velocities.spin_rad_s[present] @ rotation,
                             (world_centre - position) @ rotation, carrier, unit, seed=seed, frame=frame, noise=noise)


__all__ = ["SceneVelocities", "radial_velocity_of", "rays_at_firing", "velocities_of_motion"]

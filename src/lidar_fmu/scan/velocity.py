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

:func:`radial_velocity_of` gives each return its radial velocity in one compiled pass: its ray placed where it fired
(the sensor's turn and shift over the frame, as the cast placed it) and the physics' formula
(:func:`~lidar_fmu.physics.fmcw.reported_m_s`). The model: docs/physics.md, "FMCW radial velocity".
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from numpy.typing import ArrayLike

from ..geometry.scene import find_ids
from ..geometry.transforms import split_scale
from ..physics.fmcw import RadialVelocity, frame_key_of, reported_m_s
from ..pointcloud import Returns
from .motion import TURN_CHUNK, FrameMotion, axis_angle, fraction_at, rotation_vectors_between, sensor_turn, turned_row


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
    ids, starts = motion.start_poses()
    index, found = find_ids(scene.instance_ids, ids)  # (those still in the scene)
    ids = ids[found]
    if len(ids):
        velocity, spin = _twist(starts[found], scene.poses[index[found]], dt_s)
    else:
        velocity, spin = np.zeros((0, 3)), np.zeros((0, 3))
    return SceneVelocities(sensor_end_pose[:3, 3], sensor_velocity[0], sensor_spin[0], ids, velocity, spin)


@njit(cache=True, nogil=True, parallel=True)
def _radial_velocities(points, ray_index, directions, origins, time_offset_s, moving, window_start_s, start_s, end_s,
                       axis, angle, shift, ids, velocity, spin, centre, carrier, key, sigma_m_s, resolution_m_s, out):
    """out[k]: the reported radial velocity of return k (``points[k]``, of the pattern's ray ``ray_index[k]``), in
    the sensor frame at the frame's end, in one pass: the ray's direction and origin (``directions``, ``origins``:
    the pattern's, float32; one origin for all or one per ray) moved to where the ray fired and the physics'
    velocity (:func:`~lidar_fmu.physics.fmcw.reported_m_s`; its ``ids`` … ``carrier`` in this frame).

    ``moving``: the sensor turned ``angle`` about the unit ``axis`` and moved ``shift`` over the frame
    (:func:`~lidar_fmu.scan.motion.sensor_turn`): a ray fired at ``window_start_s + time_offset_s`` is turned
    and shifted by ``f − 1`` of that (``f``: :meth:`~lidar_fmu.scan.motion.FrameMotion.fraction` between
    ``start_s`` and ``end_s``), rounded to float32 as the cast turned it (:func:`~lidar_fmu.scan.motion.plan_moving`);
    else every ray is the pattern's, fired at the end.
    """
    one_origin = origins.shape[0] == 1
    span = end_s - start_s
    m = out.shape[0]
    for chunk in prange((m + TURN_CHUNK - 1) // TURN_CHUNK):  # on every core, a column's returns in one task
        last, c, s = np.nan, 1.0, 0.0
        for k in range(chunk * TURN_CHUNK, min(m, (chunk + 1) * TURN_CHUNK)):
            i = ray_index[k]
            j = 0 if one_origin else i
            if moving:
                f = fraction_at(time_offset_s[i], window_start_s, start_s, span) - 1.0
                dt = min(window_start_s + np.float64(time_offset_s[i]) - end_s, 0.0)
                if f != last:  # rays fired together turn alike: a cos and a sin per firing, not per ray
                    last = f
                    c, s = math.cos(f * angle), math.sin(f * angle)
                ux, uy, uz = turned_row(directions, i, axis, c, s, f, _NO_SHIFT)
                ox, oy, oz = turned_row(origins, j, axis, c, s, f, shift)
                u = (np.float64(np.float32(ux)), np.float64(np.float32(uy)), np.float64(np.float32(uz)))
                o = (np.float64(np.float32(ox)), np.float64(np.float32(oy)), np.float64(np.float32(oz)))
            else:
                dt = 0.0
                u = (np.float64(directions[i, 0]), np.float64(directions[i, 1]), np.float64(directions[i, 2]))
                o = (np.float64(origins[j, 0]), np.float64(origins[j, 1]), np.float64(origins[j, 2]))
            p = points[k]
            out[k] = reported_m_s(u, o, np.float64(p["range"]), dt, p["object_id"], p["echo"], i, ids, velocity,
                                  spin, centre, carrier, key, sigma_m_s, resolution_m_s)
    return out


#: a direction is turned, not shifted
_NO_SHIFT = np.zeros(3)


def radial_velocity_of(returns: Returns, pattern, sensor_end_pose: np.ndarray, motion: FrameMotion | None,
                       velocities: SceneVelocities, scene, unit: RadialVelocity, seed: int, frame: int,
                       noise: bool) -> np.ndarray:
    """(M,) float32: each return's radial velocity as ``unit`` reports it (:mod:`lidar_fmu.physics.fmcw`).

    ``returns``: a frame's returns of ``pattern`` (``range`` along each ray from its origin: before the unit's
    range offset), cast from ``sensor_end_pose`` moving with ``motion`` (None: a snapshot, every ray the
    pattern's, fired at the end). ``velocities``: the carrier's and the instances' at the frame's end; an
    instance's reference point is its pose's origin in ``scene`` now (the end pose). ``seed``, ``frame``: the
    noise's; ``noise``: draw the unit's σ. Computed in the sensor frame at the frame's end (a radial velocity is
    the same in every frame): the K bodies' velocities are turned into it, not the M rays into the world.
    """
    m = len(returns.points)
    out = np.empty(m, np.float32)
    if not m:
        return out
    # the bodies still in the scene and their reference points, by one sorted search (no lookup per id)
    index, present = find_ids(scene.instance_ids, velocities.ids)
    ids = np.asarray(velocities.ids[present], np.uint64)
    order = np.argsort(ids, kind="stable")  # the kernel's binary search
    rotation, _ = split_scale(sensor_end_pose)
    position = np.asarray(sensor_end_pose, np.float64)[:3, 3]

    def in_sensor_frame(world: np.ndarray) -> np.ndarray:  # row vectors: v @ R is Rᵀ v, (K, 3) by sorted id
        return np.ascontiguousarray((np.asarray(world, np.float64).reshape(-1, 3) @ rotation)[order])

    carrier = np.stack([velocities.carrier_velocity_m_s @ rotation, velocities.carrier_spin_rad_s @ rotation,
                        (velocities.carrier_centre_m - position) @ rotation])
    origins = np.zeros((1, 3), np.float32) if pattern.origins is None else pattern.origins
    axis, angle, shift = np.zeros(3), 0.0, np.zeros(3)
    if motion is not None:
        rotvec, sensor_shift = sensor_turn(motion, sensor_end_pose)
        (axis, angle), shift = axis_angle(rotvec), np.asarray(sensor_shift, np.float64)
    timing = (0.0, 0.0, 0.0) if motion is None else (motion.window_start_s, motion.start_s, motion.end_s)
    return _radial_velocities(np.ascontiguousarray(returns.points), np.ascontiguousarray(returns.ray_index, np.int64),
                              np.ascontiguousarray(pattern.directions), np.ascontiguousarray(origins),
                              np.ascontiguousarray(pattern.time_offset_s), motion is not None, float(timing[0]),
                              float(timing[1]), float(timing[2]), axis, angle, shift, np.ascontiguousarray(ids[order]),
                              in_sensor_frame(velocities.velocity_m_s[present]),
                              in_sensor_frame(velocities.spin_rad_s[present]), in_sensor_frame(
                                  scene.poses[index[present], :3, 3] - position),
                              np.ascontiguousarray(carrier, np.float64), frame_key_of(seed, frame),
                              float(unit.sigma_m_s) if noise else 0.0, float(unit.resolution_m_s), out)


__all__ = ["SceneVelocities", "radial_velocity_of", "velocities_of_motion"]

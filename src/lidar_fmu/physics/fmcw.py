"""FMCW radial velocity: the Doppler velocity an FMCW lidar measures with each return.

An FMCW lidar's up- and down-chirp beat frequencies differ by twice the Doppler shift, so every return carries
its radial velocity ``v_r = dr/dt``: the velocity of the surface point hit minus that of the ray's origin, both
rigid bodies' velocity fields, projected on the ray at its firing time (Hexsel, Vhavle, Chen, "DICP", RSS 2022,
§III; :func:`radial_velocity_m_s`):

    ``v_r = u · (v_o + ω_o × (p − c_o(t)) − v_s − ω_s × (o − c_s(t)))``

positive when the range grows, as an Aeva Aeries II reports it. The unit then quantizes it to its resolution and,
with the spec's ``noise`` on, adds Gaussian noise of its precision drawn from the noise seed, the frame counter and
the ray (:func:`~lidar_fmu.physics.effects.draw_normal`): ``v = res · round((v_r + σ·n) / res)``.

Spec key ``radial_velocity`` (:func:`parse_radial_velocity`): absent or ``false`` (a pulsed unit: nothing in the
outputs changes), ``true`` (exact), or ``{resolution_m_s, sigma_m_s}``. The model, its sign and sources, and where
the velocities come from: docs/physics.md, "FMCW radial velocity"; the Aeries II's figures: docs/sensors.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba.extending import register_jitable

from ..documents import refuse_unknown_keys, shown
from .effects import _frame_key_of, draw_normal

#: keys of a spec's ``radial_velocity`` mapping
RADIAL_VELOCITY_KEYS = ("resolution_m_s", "sigma_m_s")
#: largest resolution or σ (m/s): 10 m/s is no FMCW unit's figure (they are cm/s to dm/s) but a typo
MAX_VELOCITY_FIGURE_M_S = 10.0
#: the draw number of a ray's velocity noise: a stream of its own, beside those of
#: :mod:`lidar_fmu.physics.effects` (1–7, 11–13; an echo's draws are offset by 16 there and here)
DRAW_VELOCITY = 9
_ECHO_DRAW_STRIDE = 16


class RadialVelocityError(ValueError):
    """A ``radial_velocity`` spec that cannot be used."""


@dataclass(frozen=True)
class RadialVelocity:
    """An FMCW unit's radial velocity output: its resolution (quantum) and precision (σ), m/s; 0: none."""

    resolution_m_s: float = 0.0
    sigma_m_s: float = 0.0


def parse_radial_velocity(value) -> RadialVelocity | None:
    """A spec's ``radial_velocity`` → :class:`RadialVelocity`, or None (a unit without). One line naming the key on
    bad input (:class:`RadialVelocityError`)."""
    if value is None or value is False:
        return None
    if value is True:
        return RadialVelocity()
    if not isinstance(value, dict):
        raise RadialVelocityError(f"radial_velocity must be true, false or a mapping of "
                                  f"{', '.join(RADIAL_VELOCITY_KEYS)} (m/s), got {shown(value)}")
    refuse_unknown_keys(value, RADIAL_VELOCITY_KEYS, "radial_velocity", RadialVelocityError)
    figures = {}
    for key in RADIAL_VELOCITY_KEYS:
        figure = value.get(key, 0.0)
        if isinstance(figure, bool) or not isinstance(figure, (int, float)) or not math.isfinite(figure) \
                or not 0.0 <= figure <= MAX_VELOCITY_FIGURE_M_S:
            raise RadialVelocityError(f"radial_velocity.{key} must be a number in 0 … {MAX_VELOCITY_FIGURE_M_S:g} "
                                      f"m/s, got {shown(figure)}")
        figures[key] = float(figure)
    return RadialVelocity(**figures)


@register_jitable(inline="always")
def radial_velocity_m_s(u, p, o, object_velocity, object_spin, object_centre, sensor_velocity, sensor_spin,
                        sensor_centre):
    """``dr/dt`` (m/s, > 0 receding) of the point ``p`` seen along the unit ray ``u`` from its origin ``o``.

    Every argument is a 3-vector (tuple or array), world frame, at the firing time. Each body is the velocity of
    its reference point, its angular velocity and that point: the point moves with ``object_velocity +
    object_spin × (p − object_centre)``, the ray's origin with ``sensor_velocity + sensor_spin × (o −
    sensor_centre)``; the result is their difference projected on ``u``.
    """
    lx, ly, lz = p[0] - object_centre[0], p[1] - object_centre[1], p[2] - object_centre[2]
    wx, wy, wz = object_spin[0], object_spin[1], object_spin[2]
    vx = object_velocity[0] + wy * lz - wz * ly
    vy = object_velocity[1] + wz * lx - wx * lz
    vz = object_velocity[2] + wx * ly - wy * lx
    lx, ly, lz = o[0] - sensor_centre[0], o[1] - sensor_centre[1], o[2] - sensor_centre[2]
    wx, wy, wz = sensor_spin[0], sensor_spin[1], sensor_spin[2]
    vx -= sensor_velocity[0] + wy * lz - wz * ly
    vy -= sensor_velocity[1] + wz * lx - wx * lz
    vz -= sensor_velocity[2] + wx * ly - wy * lx
    return u[0] * vx + u[1] * vy + u[2] * vz


@register_jitable(inline="always")
def measured_m_s(true_m_s, sigma_m_s, resolution_m_s, normal):
    """What the unit reports for a true ``dr/dt``: plus ``sigma_m_s · normal`` (a standard normal number), rounded
    to the nearest multiple of ``resolution_m_s`` (halves away from zero: symmetric for approach and recession);
    a resolution of 0 keeps it as it is."""
    value = true_m_s + sigma_m_s * normal
    if resolution_m_s > 0.0:
        steps = value / resolution_m_s
        value = resolution_m_s * (math.floor(steps + 0.5) if steps >= 0.0 else -math.floor(0.5 - steps))
    return value


@register_jitable(inline="always")
def reported_m_s(u, o, range_m, dt_s, object_id, echo, ray, ids, velocity, spin, centre, carrier, key, sigma_m_s,
                 resolution_m_s):
    """The reported radial velocity (module doc) of one return, everything in one frame (any, the same for all).

    The return (its ``range_m`` along the ray, ``object_id``, ``echo`` number) lies on the ray ``o + range_m · u``
    (``u`` unit; both float64 3-tuples), fired ``dt_s`` (≤ 0) before the frame's end. ``ids`` (K,) uint64 sorted:
    the moving bodies, with the ``velocity``, ``spin`` and ``centre`` (at the frame's end) of each, (K, 3); any
    other object stands still. ``carrier`` (3, 3): the velocity, spin and centre of the body carrying the sensor.
    ``key``: the frame's :func:`frame_key_of`; the noise of ray ``ray`` draws on its ray and echo.
    """
    # the reference points move with their bodies: where they were when the ray fired
    carrier_centre = (carrier[2, 0] + carrier[0, 0] * dt_s, carrier[2, 1] + carrier[0, 1] * dt_s,
                      carrier[2, 2] + carrier[0, 2] * dt_s)
    p = (o[0] + range_m * u[0], o[1] + range_m * u[1], o[2] + range_m * u[2])
    b = np.searchsorted(ids, object_id)
    if b < ids.shape[0] and ids[b] == object_id:
        object_velocity = (velocity[b, 0], velocity[b, 1], velocity[b, 2])
        object_spin = (spin[b, 0], spin[b, 1], spin[b, 2])
        object_centre = (centre[b, 0] + velocity[b, 0] * dt_s, centre[b, 1] + velocity[b, 1] * dt_s,
                         centre[b, 2] + velocity[b, 2] * dt_s)
    else:
        still = (0.0, 0.0, 0.0)
        object_velocity, object_spin, object_centre = still, still, still
    v = radial_velocity_m_s(u, p, o, object_velocity, object_spin, object_centre, (carrier[0, 0], carrier[0, 1],
                            carrier[0, 2]), (carrier[1, 0], carrier[1, 1], carrier[1, 2]), carrier_centre)
    normal = 0.0
    if sigma_m_s > 0.0:
        normal = draw_normal(key, ray, DRAW_VELOCITY + _ECHO_DRAW_STRIDE * np.int64(echo))
    return measured_m_s(v, sigma_m_s, resolution_m_s, normal)


def frame_key_of(seed: int, frame: int) -> np.uint64:
    """The key of a frame's velocity noise (:func:`~lidar_fmu.physics.effects.frame_key`) for :func:`reported_m_s`."""
    return np.uint64(_frame_key_of(np.uint64(seed), np.uint64(frame)))


__all__ = ["DRAW_VELOCITY", "RADIAL_VELOCITY_KEYS", "RadialVelocity", "RadialVelocityError", "frame_key_of",
           "measured_m_s", "parse_radial_velocity", "radial_velocity_m_s", "reported_m_s"]

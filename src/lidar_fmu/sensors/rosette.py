"""Rosette scans (Project AirSim's ``generic_rosette``, Livox prism scanners) as a :class:`ContinuousScan`.

The curve, as the Project AirSim lidar documentation describes it (seed
003, "Generic rosette lidar type"): a rolling circle's centre goes round a
fixed circle at ``horizontal_rotation_hz`` while the tracing point turns on
the rolling circle at ``vertical_rotation_hz`` the other way (a
hypotrochoid; a negative ``vertical_rotation_hz`` turns it the same way: an
epitrochoid). Both radii are ½, so the polar radius runs 0 … 1:

    p(t) = ½ · exp(i·2π·f_h·t) + ½ · exp(−i·2π·f_v·t)

``radial_scaling`` scales the tracing point's angular offset from the
rolling circle centre's polar angle (seen from the fixed centre), the
radius unchanged. Two ways to point a beam from ``p = r·exp(iθ)``:

* ``vertical_fov_deg`` [lower, upper] (AirSim's mapping): θ is the
  horizontal angle (AirSim: clockwise positive, so our azimuth is −θ) and
  the elevation runs from ``lower`` at r = 0 to ``upper`` at r = 1; with
  ``lower`` = 90° that is a cone about +z;
* ``cone_half_angles_deg`` [horizontal, vertical] (a Livox unit looking
  along +x): r scales the off-axis angle up to the half-angles, θ turns
  about +x (θ = 0: left, θ = 90°: up).

Shot ``k`` fires at ``k / shots_per_second`` with ``shots_per_second =
points_per_second / channels``; channel ``c`` traces the same curve turned
by ``2π·c / channels`` about the axis (an assumption: the beams' layout is
not published; it spreads them evenly over the pattern).
"""
from __future__ import annotations

import numpy as np

from ..geometry.pattern import ContinuousScan, spherical_directions

#: Livox Mid-70 as Project AirSim models it (Project AirSim's Livox settings): the rolling circle goes
#: round at 10·(1 + 1/6) − 1/360 Hz and turns at 170 Hz: the curve almost closes every 1/10 s and drifts by
#: 1/360 turn, so it never repeats and fills the circle over time.
MID70_HORIZONTAL_HZ = 10.0 * (1.0 + 1.0 / 6.0) - 1.0 / 360.0
MID70_VERTICAL_HZ = 170.0
#: the most points a second a rosette fires: Livox units fire 0.1–0.24 M points/s (Mid-70: 100 000, Avia: 240 000
#: single return, datasheets), the densest spinning units a few million; 10⁸ leaves room and keeps a frame's rays
#: countable (a second of them: 10⁸ directions, 1.2 GB)
MAX_POINTS_PER_SECOND = 1e8


def _polar(time_s: np.ndarray, horizontal_hz: float, vertical_hz: float, radial_scaling: float):
    """(polar angle θ rad, radius r in 0 … 1) of the rosette at ``time_s``."""
    centre = 2.0 * np.pi * np.mod(horizontal_hz * time_s, 1.0)
    point = 0.5 * np.exp(1j * centre) + 0.5 * np.exp(-1j * 2.0 * np.pi * np.mod(vertical_hz * time_s, 1.0))
    theta = np.angle(point)
    if radial_scaling != 1.0:
        theta = centre + radial_scaling * np.angle(np.exp(1j * (theta - centre)))
    return theta, np.abs(point)


def rosette_scan(*, points_per_second: float, channels: int, horizontal_rotation_hz: float,
                 vertical_rotation_hz: float, radial_scaling: float = 1.0, vertical_fov_deg=None,
                 cone_half_angles_deg=None) -> ContinuousScan:
    """A :class:`ContinuousScan` of the rosette (exactly one of ``vertical_fov_deg``, ``cone_half_angles_deg``)."""
    if (vertical_fov_deg is None) == (cone_half_angles_deg is None):
        raise ValueError("a rosette needs exactly one of vertical_fov_deg and cone_half_angles_deg")
    if not 0 < points_per_second <= MAX_POINTS_PER_SECOND:
        raise ValueError(f"a rosette fires 0 … {MAX_POINTS_PER_SECOND:.0e} points/s, got {points_per_second:g}")
    shots_per_second = points_per_second / channels
    turn = 2.0 * np.pi * np.arange(channels) / channels

    def rays_of_shots(shots: np.ndarray):
        time_s = np.asarray(shots, np.float64) / shots_per_second
        theta, radius = _polar(time_s, horizontal_rotation_hz, vertical_rotation_hz, radial_scaling)
        theta = (theta[:, None] + turn[None, :]).ravel()  # shot-major: all channels of a shot together
        radius = np.repeat(radius, channels)
        if vertical_fov_deg is not None:
            lower, upper = np.radians(vertical_fov_deg)
            directions = spherical_directions(-theta, lower + radius * (upper - lower))
        else:
            half_h, half_v = np.radians(cone_half_angles_deg)
            # off-axis angle per axis, combined into one tilt away from +x, turned about it
            across, up = half_h * radius * np.cos(theta), half_v * radius * np.sin(theta)
            tilt, roll = np.hypot(across, up), np.arctan2(up, across)
            directions = np.stack([np.cos(tilt), np.sin(tilt) * np.cos(roll), np.sin(tilt) * np.sin(roll)],
                                  axis=1).astype(np.float32)
        return directions, np.tile(np.arange(channels, dtype=np.uint32), len(time_s))

    return ContinuousScan(shots_per_second, channels, rays_of_shots)

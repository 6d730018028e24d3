"""Rosette scans (Project AirSim's ``generic_rosette``, Livox prism scanners) as a :class:`ContinuousScan`.

:func:`rosette_scan` traces the curve Project AirSim's documentation describes (seed 003, "Generic rosette lidar
type"): a hypotrochoid (an epitrochoid for a negative ``vertical_rotation_hz``) whose polar radius runs 0 … 1,
pointed either by AirSim's ``vertical_fov_deg`` mapping or as a Livox cone about +x (``cone_half_angles_deg``);
each channel traces it turned about the axis. :data:`LIVOX_PRESETS` are the Livox Mid-70 and Avia, each figure
cited beside it. The curve, both mappings and the channel assumption: docs/sensors.md#rosettes.
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


#: Livox Mid-70 and Avia datasheets: beam divergence 0.28° (vertical) × 0.03° (horizontal)
_LIVOX_DIVERGENCE_MRAD = [round(np.radians(0.03) * 1e3, 3), round(np.radians(0.28) * 1e3, 3)]
#: Livox presets (merged into :data:`lidar_fmu.sensors.presets.PRESETS`)
LIVOX_PRESETS: dict[str, dict] = {
    # Livox prism scanners: rosettes that never repeat (rosette.py, a ContinuousScan); each frame casts the
    # shots fired since the last.
    "livox_mid70": {
        "range_accuracy_m": 0.02,  # Livox Mid-70 datasheet: range precision (1σ @ 20 m) 2 cm
        # Livox Mid-70 datasheet / user manual v1.2: 70.4° circular FOV, 100 000 points/s (first return),
        # 90 m at 10 %, 260 m at 80 % reflectivity, minimum range 0.05 m, 905 nm, 10 Hz point-cloud frames.
        # Curve rates: Project AirSim's Mid-70 (rosette.MID70_*).
        "description": "Livox Mid-70, 70.4° circular non-repetitive rosette, 100 k points/s, 10 Hz frames",
        "rosette": {"points_per_second": 100000, "channels": 1, "horizontal_rotation_hz": MID70_HORIZONTAL_HZ,
                    "vertical_rotation_hz": MID70_VERTICAL_HZ, "radial_scaling": 1.0,
                    "cone_half_angles_deg": [35.2, 35.2]},
        "frame_rate_hz": 10.0,
        "min_range_m": 0.05,
        "max_range_m": 260.0,
        "wavelength_nm": 905.0,
        "beam_divergence_mrad": _LIVOX_DIVERGENCE_MRAD,
        "range_reflectivity": {"pairs": [[0.10, 90.0], [0.80, 260.0]], "fit": "log"},
    },
    "livox_avia": {
        "range_accuracy_m": 0.02,  # Livox Avia datasheet: range precision (1σ @ 20 m) 2 cm
        # Livox Avia datasheet / user manual v1.0: 70.4° × 77.2° FOV (non-repetitive pattern), 6 lasers,
        # 240 000 points/s (first return), 190 m at 10 %, 450 m at 80 %, 905 nm, 10 Hz frames. Curve rates:
        # assumed the Mid-70's (Livox publishes none); the six channels spread evenly (rosette.py).
        "description": "Livox Avia, 70.4° × 77.2° non-repetitive rosette, 6 channels, 240 k points/s, 10 Hz",
        "rosette": {"points_per_second": 240000, "channels": 6, "horizontal_rotation_hz": MID70_HORIZONTAL_HZ,
                    "vertical_rotation_hz": MID70_VERTICAL_HZ, "radial_scaling": 1.0,
                    "cone_half_angles_deg": [35.2, 38.6]},
        "frame_rate_hz": 10.0,
        "min_range_m": 1.0,  # assumed: the Avia's datasheet gives no minimum; Livox's 1 m blind zone note
        "max_range_m": 450.0,
        "wavelength_nm": 905.0,
        "beam_divergence_mrad": _LIVOX_DIVERGENCE_MRAD,
        "range_reflectivity": {"pairs": [[0.10, 190.0], [0.80, 450.0]], "fit": "log"},
    },
}

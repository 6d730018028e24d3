"""Ibeo LUX: fixed lasers fire at a rotating 45° mirror, which couples each layer's elevation to the azimuth.

BlenSor (Gschwandtner et al., "BlenSor: Blender Sensor Simulation
Toolbox", ISVC 2011, §3.3 "Line LIDAR", Fig. 3; seed 004): the LUX's lasers
are fixed and fire at a mirror turning about the scanner's axis. "In its
initial position (yaw 0°) the mirror reflects the rays at the same yaw
angle and with the same pitch angle between the rays as they are emitted";
as the mirror turns the pitch changes, and "when the mirror reaches a yaw
angle of 90°, the pitch angle of all lasers becomes the same. The former
pitch angle between the lasers has become the yaw angle between the lasers."

Geometry (our derivation of that mirror, as BlenSor's scanner casts it by
reflecting each laser's ray off the turned mirror): the axis is z, laser
``ε`` comes up the axis tilted by ``ε`` towards +x, ``d = (sin ε, 0, cos ε)``;
the mirror, normal ``(1, 0, −1)/√2`` turned by ``α`` about z, sends it out as

    ``(cos ε cos α + sin ε sin²α,  sin α (cos ε − sin ε cos α),  sin ε cos α)``

so a layer's elevation is ``asin(sin ε · cos α)``: its nominal ``ε`` ahead
(α = 0), ``ε·cos α`` to first order elsewhere, 0 at α = ±90° where ``ε`` has
become an azimuth offset. ``α`` is the column azimuth (the beam azimuth of a
laser with ε = 0).
"""
from __future__ import annotations

import numpy as np


def mirror_directions(elevation_rad, mirror_azimuth_rad) -> np.ndarray:
    """(N, 3) float32 unit directions of lasers at nominal elevation ``ε`` off a mirror turned to ``α``."""
    eps = np.asarray(elevation_rad, np.float64)
    alpha = np.asarray(mirror_azimuth_rad, np.float64)
    ce, se, ca, sa = np.cos(eps), np.sin(eps), np.cos(alpha), np.sin(alpha)
    return np.stack([ce * ca + se * sa * sa, sa * (ce - se * ca), se * ca], axis=-1).astype(np.float32)

"""Ibeo LUX: fixed lasers fire at a rotating 45° mirror, which couples each layer's elevation to the azimuth.

:func:`mirror_directions` reflects each laser off the mirror turned to the column azimuth, as BlenSor's scanner
does (Gschwandtner et al., ISVC 2011, §3.3 "Line LIDAR"; seed 004): a layer's elevation is
``asin(sin ε · cos α)``. :data:`IBEO_PRESETS` is the ``ibeo_lux`` preset, each figure cited beside it. BlenSor's
description and the derivation: docs/sensors.md#rotating-mirrors-ibeo-lux.
"""
from __future__ import annotations

import numpy as np


def mirror_directions(elevation_rad, mirror_azimuth_rad) -> np.ndarray:
    """(N, 3) float32 unit directions of lasers at nominal elevation ``ε`` off a mirror turned to ``α``."""
    eps = np.asarray(elevation_rad, np.float64)
    alpha = np.asarray(mirror_azimuth_rad, np.float64)
    ce, se, ca, sa = np.cos(eps), np.sin(eps), np.cos(alpha), np.sin(alpha)
    return np.stack([ce * ca + se * sa * sa, sa * (ce - se * ca), se * ca], axis=-1).astype(np.float32)


#: the Ibeo preset (merged into :data:`lidar_fmu.sensors.presets.PRESETS`). ``range_reflectivity``: 50 m at 10 %
#: remission (Ibeo LUX datasheet; one pair: a root-2 fit, extended targets). Divergence **assumed** 0.08° × 0.8°
#: (h × v): each layer spans its 0.8° spacing vertically (the datasheet's "3.2° for 4 layers"), horizontally the
#: 0.08° of a 0.125° step unit; no datasheet figure found.
IBEO_PRESETS: dict[str, dict] = {
    "ibeo_lux": {
        "range_accuracy_m": 0.10,  # Ibeo LUX datasheet: distance accuracy 10 cm
        # Ibeo LUX datasheet: 4 layers, 3.2° vertical (0.8° apart), 110° horizontal (+50 … −60°, 2 layers
        # at the sides), 0.125°/0.25°/0.5° at 12.5/25/50 Hz; a rotating mirror (BlenSor §3.3, ibeo.py).
        "description": "Ibeo LUX, 4 layers over 3.2° off a rotating mirror, 110° horizontal at 0.25°, 12.5 Hz",
        "vertical_angles_deg": [-1.2, -0.4, 0.4, 1.2],
        "rotating_mirror": True,
        "horizontal_fov_deg": [50.0, -60.0],
        "horizontal_resolution_deg": 0.25,
        "frame_rate_hz": 12.5,
        "min_range_m": 0.3,
        "max_range_m": 200.0,
        "wavelength_nm": 905.0,
        "beam_divergence_mrad": [1.396, 13.963],  # assumed: 0.08° × 0.8° (above)
        "range_reflectivity": {"pairs": [[0.10, 50.0]], "fit": "root2"},
    },
}

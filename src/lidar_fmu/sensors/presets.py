"""Predefined sensors as plain spec dictionaries (the same keys a spec file uses): the table of every maker's
presets, each maker's own defined, with its sources, in its module (:mod:`.velodyne`, :mod:`.ouster`,
:mod:`.rosette` for Livox, :mod:`.ibeo`, :mod:`.hesai`, :mod:`.automotive`); the Aeva Aeries II, whose maker has
no module, here.

Conventions every preset keeps (``range_accuracy_m`` taken as one sigma, beam elevations from calibration files
or datasheets, spinning units sweeping clockwise, ``[180, -180]``) and the table of presets: docs/sensors.md.
"""
from __future__ import annotations

from .automotive import AUTOMOTIVE_PRESETS
from .hesai import HESAI_PRESETS
from .ibeo import IBEO_PRESETS
from .ouster import OUSTER_PRESETS
from .rosette import LIVOX_PRESETS
from .velodyne import VELODYNE_PRESETS

#: Aeva Aeries II line spacing (deg): 40 lines evenly over 14.4° (presets' note on the Aeries II)
_AEVA_LINE_DEG = 14.4 / 39

PRESETS: dict[str, dict] = {
    **VELODYNE_PRESETS,
    **OUSTER_PRESETS,
    **LIVOX_PRESETS,
    **IBEO_PRESETS,
    # An FMCW unit: every return carries its radial velocity (physics/fmcw.py). Aeva publishes no datasheet with
    # numbers we can cite from here; its public driver and its own simulation code give the layout:
    # * tier4/nebula's Aeries II driver (Apache-2.0; nebula_ros/config/lidar/aeva/Aeries2.param.yaml): the unit's
    #   default configuration "horizontal_fov_degrees: 110Degrees", "vertical_pattern: 40-14.4-ROI" — 40 lines over
    #   14.4°, the naming of Aeva's own scan patterns (yuchnw/carla ScanPatterns.yaml, "Copyright Aeva 2024":
    #   "64-19.2-Uniform" is 64 lines, 0.3° apart, over 19.2°). The ROI's line density is not public: the lines are
    #   **assumed** evenly spaced (0.37°).
    # * points per line: **assumed** Aeva's own CARLA pattern's azimuth step, 144° / 3051 points = 0.0472°, so
    #   2331 points over 110° (93,240 a frame, 0.93 M points/s at 10 Hz).
    # * 10 Hz: AevaScenes (aevainc/aevascenes, docs/Dataset.md: its Aeva FMCW lidars frame at 10 Hz, wide-FOV ones
    #   110°, "up to 250 m"); Aeva's CARLA sensor's default frame period is 0.1 s.
    # * radial velocity: the point record's velocity is a 16-bit fixed-point number of 2⁻⁸ m/s (nebula
    #   PointCloudPoint::velocity, FixedPoint<int16_t, 8>): the resolution. Its precision is not public: σ **assumed**
    #   0.1 m/s, a 2 µs chirp's velocity bin λ/(2T) = 0.39 m/s over √12 (93,240 points of 4 beams a frame leave
    #   4.3 µs a point for an up- and a down-chirp).
    # * range: the record's range is a 16-bit fixed-point number of 2⁻⁷ m (nebula), at most 512 m: max_range_m 500
    #   (Aeva's product page: detection up to 500 m; not checked from here). r_L **assumed** 250 m at 10 %
    #   (AevaScenes' "up to 250 m" for its 110° units, taken as the 10 % figure; root-2 fit: 500 m by 40 %).
    # * 1550 nm (Aeva's FMCW lidars: silicon photonics at 1550 nm); min range, range σ and divergence **assumed**
    #   (none public: 0.5 m as the other presets' blind zones, 2 cm, none given).
    # Timing: Aeva's scanner sweeps 4 beams (nebula: num_beams) across each line group, one group after the other
    # (the raster below).
    "aeva_aeries2": {
        "description": "Aeva Aeries II (FMCW, 1550 nm), 110° × 14.4°, 40 lines, 2331 points a line at 10 Hz, "
                       "per-point radial velocity",
        # 4 beams a line group, 10 groups down the field (40 lines 14.4°/39 apart, ±7.2°), each group swept left to
        # right over 110° in 2331 shots; the beams of a group on adjacent lines and every sweep in the same direction:
        # **assumed** (how the 4 beams are spaced and whether the mirror sweeps back is not public)
        "raster": {
            "channels": [[0.0, round(-k * _AEVA_LINE_DEG, 5)] for k in range(4)],
            "horizontal_fov_deg": [55.0, -55.0],
            "columns": 2331,
            "lines": 10,
            # (a raster's lines sit at the middle of their share of vertical_fov_deg: groups 4 lines tall whose
            # top lines run from +7.2° down)
            "vertical_fov_deg": [round(7.2 + 2 * _AEVA_LINE_DEG, 5), round(7.2 - 38 * _AEVA_LINE_DEG, 5)],
            "line_order": "same",
        },
        "frame_rate_hz": 10.0,
        "min_range_m": 0.5,
        "max_range_m": 500.0,
        "wavelength_nm": 1550.0,
        "range_accuracy_m": 0.02,
        "range_reflectivity": {"pairs": [[0.10, 250.0]], "fit": "root2"},
        "radial_velocity": {"resolution_m_s": 2.0**-8, "sigma_m_s": 0.1},
    },
}
# Hesai units: their module holds the presets with their sources (sensors/hesai.py)
PRESETS |= HESAI_PRESETS

#: RoboSense, Hesai AT128, Valeo, Luminar, Seyond, Innoviz: sensors/automotive.py, each figure's source there
PRESETS.update(AUTOMOTIVE_PRESETS)


def unknown_preset(name: str) -> str:
    """The message for a preset name that is none: the presets it resembles, else every preset."""
    from ..documents import shown

    hint = close_names(name)
    more = f"; did you mean {', '.join(hint)}?" if hint else f"; known presets: {', '.join(PRESETS)}"
    return f"unknown sensor preset {shown(name)}{more}"


def close_names(name: str, n: int = 3) -> list[str]:
    """Preset names resembling ``name`` (for 'did you mean' messages)."""
    import difflib

    return difflib.get_close_matches(name.lower().replace("-", "_"), list(PRESETS), n=n, cutoff=0.4)

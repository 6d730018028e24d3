"""Hesai AT128: 128 VCSEL channels swept across the field by a rotating mirror, as a :mod:`.raster`.

:func:`at128_raster` is the unit's ``raster`` mapping: the packaged channel table (:data:`ANGLES_FILE`, read by
:func:`channel_table`; tier4/nebula's ``PandarAT128.csv``), :data:`COLUMNS` blocks over the 120° field in the
first :data:`FRAME_DUTY` of the frame, each channel :data:`FIRING_OFFSETS_NS` into its block (nebula's AT128
decoder; numbers only, no code taken). The mirror, the timing, the sources and what is left out:
docs/sensors.md#the-lidars-automotive-programs-buy.
"""
from __future__ import annotations

from importlib import resources

import numpy as np

#: firing time of each channel after its block starts, ns (nebula ``pandar_at128.hpp`` ``firing_time_offset_ns``,
#: channel order)
FIRING_OFFSETS_NS = (
    0, 0, 8240, 4112, 4144, 8240, 0, 0, 12424, 4144, 4112, 8264, 12376, 12376, 8264, 12424, 0, 0, 4112, 8240,
    4144, 0, 0, 4144, 12424, 8264, 4112, 12376, 12376, 12424, 8264, 848, 2504, 4976, 6616, 6616, 9112, 2504, 848,
    10768, 13280, 13280, 4976, 9112, 14928, 14928, 10768, 2504, 848, 6616, 4976, 9112, 6616, 848, 2504, 13280,
    10768, 4976, 13280, 14928, 9112, 10768, 14928, 13280, 848, 9112, 13280, 2504, 4976, 848, 2504, 14928, 10768,
    10768, 14928, 4976, 6616, 6616, 9112, 848, 13280, 13280, 9112, 4976, 2504, 2504, 848, 10768, 14928, 14928,
    10768, 6616, 4976, 9112, 6616, 4112, 12424, 0, 4144, 0, 0, 12424, 0, 8264, 4112, 4144, 8240, 8240, 8264,
    12376, 12376, 12424, 4112, 4144, 0, 0, 0, 0, 0, 12424, 8264, 8240, 4144, 8264, 8240, 12376, 12376, 8264,
)
#: blocks a frame: 120° of optical azimuth at 0.1° (41.666 µs apart at 10 Hz)
COLUMNS = 1200
#: share of the 100 ms frame the field of view takes: 120° of the 240° of optical azimuth a mirror field sweeps
FRAME_DUTY = 0.5
#: the packaged channel table
ANGLES_FILE = "hesai_at128_angles.csv"


def channel_table() -> np.ndarray:
    """(128, 2) [azimuth offset, elevation] of the channels in degrees, our convention (azimuth positive left).

    The table's ``Azimuth`` is Hesai's (clockwise, added to the optical azimuth), so ours is its negative.
    """
    path = resources.files(__package__).joinpath("data").joinpath(ANGLES_FILE)
    table = np.loadtxt(str(path), delimiter=",", skiprows=1)
    return np.stack([-table[:, 2], table[:, 1]], axis=1)


def at128_raster() -> dict:
    """The AT128's ``raster`` spec: the channel column swept from 60° left to 60° right once a frame."""
    channels = channel_table()
    return {
        "channels": np.round(channels, 4).tolist(),
        "channel_delays_s": [t * 1e-9 for t in FIRING_OFFSETS_NS],
        "horizontal_fov_deg": [60.0, -60.0],
        "columns": COLUMNS,
        "frame_duty": FRAME_DUTY,
    }

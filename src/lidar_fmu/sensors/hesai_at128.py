"""Hesai AT128: 128 VCSEL channels swept across the field by a rotating mirror, as a :mod:`.raster`.

Sources (the numbers only; no code is taken):

* the channel table ``data/hesai_at128_angles.csv`` (``Channel,Elevation,Azimuth``, degrees) is tier4/nebula's
  generic ``PandarAT128.csv`` (Apache-2.0, ``data/NOTICE.md``): elevations 12.93° … −12.47° in 0.2° steps, each
  channel's azimuth offset one of ±0.65°, ±2.4°;
* the mirror and its timing from nebula's AT128 decoder and correction reader
  (``pandar_at128.hpp``, ``angle_corrector_correction_based.hpp``, ``hesai_common.hpp`` ``HesaiCorrection``) and
  the unit's correction file in nebula's test data (``PandarAT128.dat``): the mirror has three fields of 120°
  of encoder angle, one per frame; within a field the optical azimuth is twice the encoder angle past the
  field's start, minus the channel's azimuth (``get_corrected_azimuth``); points are kept within 30° … 150° of
  that azimuth (``fov_mdeg``: 120° centred on the sensor's x axis, nebula ``x = r cos E sin A``). A 10 Hz
  frame is one field: the mirror turns 120° in 100 ms, the optical azimuth sweeps 240°, of which the 120°
  field of view takes the first 50 ms (``frame_duty`` 0.5);
* a firing block every 41.666 µs (``get_packet_relative_point_time_offset``: blocks 41 666 ns apart), so 1200
  blocks cover the 120° in 50 ms at 0.1° (2400°/s optical), 1200 × 128 = 153 600 points a frame, the
  datasheet's 1 536 000 points/s at 10 Hz; within a block channel ``c`` fires ``FIRING_OFFSETS_NS[c]`` after
  the block starts (``firing_time_offset_ns``, the manual's "laser firing time" table);
* the figures of the unit (120° × 25.4°, 0.1° × 0.2°, 200 m at 10 %, 905 nm, 10 Hz) are Hesai's AT128
  product page's (the datasheet PDF was not in reach here: quoted, not read).

Left out: a unit's own correction file adds per-channel adjustments that vary with the encoder angle (up to
0.84° of azimuth and 0.46° of elevation in nebula's sample); the generic table has none. The channel offsets
widen the swept field to 124.8°; the unit's driver crops its points to 120°, which is not done here.
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

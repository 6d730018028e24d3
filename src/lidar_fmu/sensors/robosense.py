"""RoboSense spinning units: a unit's ``angle.csv`` and each model's firing timing as rays.

:func:`read_robosense_angles` reads an ``angle.csv`` as rs_driver does (one ``vertical_deg,horizontal_deg`` line
per channel; :class:`RoboSenseAnglesError` naming the file and line otherwise); :data:`MODELS` holds each model's
block and slot timing and lens centre, each cited beside it; :func:`robosense_pattern` fires each channel at the
head's azimuth at its own firing time, from the lens centre; :func:`angles_spec` makes a bare ``angle.csv`` a
sensor spec (:data:`MODEL_BY_LASERS`). rs_driver's file, geometry and timing, as taken here:
docs/sensors.md#robosense-angle-files.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..documents import read_text, shown
from ..errors import LidarFmuError
from ..geometry.pattern import RayPattern, check_ray_count, spherical_directions


class RoboSenseAnglesError(LidarFmuError, ValueError):
    """An ``angle.csv`` that cannot be read as one elevation and horizontal offset per channel."""


@dataclass(frozen=True)
class RoboSenseModel:
    """A spinning model's firing: block length, each channel slot's laser and firing time, lens centre."""

    name: str
    lasers: int
    block_s: float
    slot_laser: np.ndarray  # (S,) laser fired in slot s of a block
    slot_time_s: np.ndarray  # (S,) s after the block starts
    lens_offset_m: float  # RX: the lens centre's distance from the axis, along the head azimuth
    source: str


def _model(name: str, lasers: int, block_us: float, slot_us, lens_offset_m: float, source: str,
           slot_laser=None) -> RoboSenseModel:
    slot_time = np.asarray(slot_us, np.float64) * 1e-6
    laser = np.arange(len(slot_time)) % lasers if slot_laser is None else np.asarray(slot_laser)
    return RoboSenseModel(name, lasers, block_us * 1e-6, laser.astype(np.int64), slot_time, lens_offset_m, source)


#: RS-Helios (32 lasers): rs_driver ``decoder_RSHELIOS.hpp``: block 55.56 µs, slot s fires 1.73·s µs in
#: (``firing_tss``), lens centre RX 0.03498 m
_HELIOS_SLOTS_US = 1.73 * np.arange(32)
#: RS-Ruby Plus (128 lasers): rs_driver ``decoder_RSP128.hpp`` ``firing_tss`` (µs; lasers fire four at a time),
#: block 55.56 µs, RX 0.02892 m
_RUBY_PLUS_SLOTS_US = np.repeat([0.0, 1.13, 2.13, 3.26, 4.26, 5.38, 6.38, 7.51, 8.51, 10.01, 11.38, 13.31, 15.11,
                                 17.04, 18.85, 21.14], 4).tolist() + [21.14] + np.repeat(
    [23.31, 25.61, 27.78, 30.07, 32.24, 34.54, 36.7, 38.64, 40.44, 41.94, 43.3, 44.8, 46.17, 47.66, 49.03], 4
).tolist() + [50.53, 50.53, 53.771]

MODELS: dict[str, RoboSenseModel] = {
    "RS-Helios": _model("RS-Helios", 32, 55.56, _HELIOS_SLOTS_US, 0.03498,
                        "rs_driver decoder_RSHELIOS.hpp (55.56 µs blocks, 1.73 µs slots, RX 0.03498 m)"),
    # RS-Helios-16P: its user manual (§6.2.2, §6.2.2.3): a packet's data block holds two firing sequences of the 16
    # lasers (32 channel data, rs_driver decoder_RSHELIOS_16P.hpp: slot s is laser s % 16), blocks ~100 µs apart:
    # one sequence of 16 lasers every 55.56 µs (the Helios' block, rs_driver's BLOCK_DURATION for it too), 0.2° at
    # 10 Hz. The lasers' times within a sequence are not given (rs_driver sets none): assumed spread as the Helios'
    # 32 slots, every other one (3.46 µs apart)
    "RS-Helios-16P": _model("RS-Helios-16P", 16, 55.56, 2.0 * _HELIOS_SLOTS_US[:16], 0.03498,
                            "RS-Helios-16P user manual §6.2.2 (two 16-laser sequences a block) and rs_driver "
                            "decoder_RSHELIOS_16P.hpp (55.56 µs); laser times within a sequence assumed"),
    "RS-Ruby-Plus": _model("RS-Ruby-Plus", 128, 55.56, _RUBY_PLUS_SLOTS_US, 0.02892,
                           "rs_driver decoder_RSP128.hpp (55.56 µs blocks, firing_tss, RX 0.02892 m)"),
}

#: the model a bare angle.csv of this many lines is read as (Bpearl and RS-Ruby share the 32 and 128 line counts:
#: they need a spec naming robosense_model)
MODEL_BY_LASERS = {16: "RS-Helios-16P", 32: "RS-Helios", 128: "RS-Ruby-Plus"}


def read_robosense_angles(path) -> tuple[np.ndarray, np.ndarray]:
    """(elevation_deg (L,), horizontal_deg (L,)) of a RoboSense ``angle.csv``, in channel order.

    Read within :func:`lidar_fmu.documents.read_text`'s bounds; blank lines at the end are allowed. Each line
    must start with a number, optionally ``,`` and a second number; elevations within ±90°, horizontal offsets
    within -90° … 180° (rs_driver's check of the same values from the unit). One line of
    :class:`RoboSenseAnglesError` naming the file and line otherwise.
    """
    path = os.fspath(path)
    name = os.path.basename(path)
    text = read_text(path, "RoboSense angle file", RoboSenseAnglesError, limit=1 << 20)
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise RoboSenseAnglesError(f"RoboSense angle file {name} is empty: it needs one 'vertical,horizontal' line "
                                   "per channel")
    if len(lines) > 1024:
        raise RoboSenseAnglesError(f"RoboSense angle file {name} has {len(lines):,} lines: at most 1024 channels")
    rows = np.empty((len(lines), 2))
    for number, line in enumerate(lines, 1):
        cells = [c.strip() for c in line.split(",")]
        try:
            values = [float(cells[0]), float(cells[1]) if len(cells) > 1 and cells[1] else 0.0]
        except ValueError:
            raise RoboSenseAnglesError(f"RoboSense angle file {name}, line {number}: expected 'vertical_deg,"
                                       f"horizontal_deg', got {shown(line)}") from None
        if not all(np.isfinite(values)) or abs(values[0]) > 90 or not -90 <= values[1] <= 180:
            raise RoboSenseAnglesError(f"RoboSense angle file {name}, line {number}: angles must be finite, the "
                                       "vertical within ±90° and the horizontal within -90 … 180°, "
                                       f"got {shown(line)}")
        rows[number - 1] = values
    return rows[:, 0], rows[:, 1]


def robosense_pattern(elevation_deg, horizontal_deg, model: RoboSenseModel, *, frame_rate_hz: float,
                      start_deg: float = 0.0) -> RayPattern:
    """One turn's rays: ``⌊1 / (frame_rate_hz · block)⌋`` blocks, the head turning clockwise from ``start_deg``
    (RoboSense's clockwise azimuth: 0 ahead, 90° right), each slot at the head's azimuth at its firing time,
    leaving the lens centre (docs/sensors.md#robosense-angle-files)."""
    elevation = np.radians(np.asarray(elevation_deg, np.float64))
    horizontal = np.radians(np.asarray(horizontal_deg, np.float64))
    if len(elevation) != model.lasers:
        raise RoboSenseAnglesError(f"the angle file has {len(elevation)} channels, the {model.name} "
                                   f"{model.lasers} lasers")
    blocks = int(1.0 / (frame_rate_hz * model.block_s) + 1e-9)
    if blocks < 1:
        raise RoboSenseAnglesError(f"a {model.name} block of {model.block_s * 1e6:g} µs is longer than a frame of "
                                   f"{1e3 / frame_rate_hz:g} ms")
    slots = len(model.slot_time_s)
    check_ray_count(slots, blocks)
    block = np.repeat(np.arange(blocks), slots)
    slot = np.tile(np.arange(slots), blocks)
    laser = model.slot_laser[slot]
    time_s = block * model.block_s + model.slot_time_s[slot]
    head = np.radians(start_deg) + 2.0 * np.pi * frame_rate_hz * time_s  # clockwise, RoboSense's convention
    phi_head, phi_beam = -head, -(head + horizontal[laser])
    origins = model.lens_offset_m * np.stack([np.cos(phi_head), np.sin(phi_head), np.zeros_like(phi_head)], axis=1)
    return RayPattern(spherical_directions(phi_beam, elevation[laser]), laser.astype(np.uint32), block.astype(np.uint32),
                      time_s.astype(np.float32), slots, blocks, origins=origins.astype(np.float32))


def angles_spec(path: str) -> dict:
    """A sensor spec for a bare ``angle.csv`` given as the sensor: the model its line count names
    (:data:`MODEL_BY_LASERS`) and that model's preset figures, the rays from the file."""
    elevation, _ = read_robosense_angles(path)
    model = MODEL_BY_LASERS.get(len(elevation))
    if model is None:
        known = ", ".join(f"{n} ({m})" for n, m in MODEL_BY_LASERS.items())
        raise RoboSenseAnglesError(f"RoboSense angle file {os.path.basename(path)} has {len(elevation)} channels; "
                                   f"a bare angle file is read for {known}: write a spec naming robosense_model and "
                                   "robosense_angles for other units")
    return {"preset": PRESET_OF_MODEL[model], "robosense_angles": path,
            "name": os.path.splitext(os.path.basename(path))[0]}


#: the preset whose figures a bare angle file of each model takes (sensors/automotive.py)
PRESET_OF_MODEL = {"RS-Helios-16P": "robosense_helios_16p", "RS-Helios": "robosense_helios_5515",
                   "RS-Ruby-Plus": "robosense_ruby_plus"}


def looks_like_robosense_angles(path: str) -> bool:
    """Does the text file ``path`` start like a RoboSense angle.csv (a number first: it has no header line)?"""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as fh:
            first = fh.readline(200)
    except OSError:
        return False
    try:
        float(first.split(",")[0])
    except ValueError:
        return False
    return True

"""Hesai point-cloud packets decoded (:func:`decode_hesai`; each model's layout: :func:`packet_layout`), and a Hesai
recording as rings × azimuth bins (:func:`open_hesai`).

A firing of the head is ``n`` adjacent blocks with the same Azimuth in an ``n``-return mode; a return of channel
``k`` lies at sweep ``Azimuth/100 + azimuth_k`` (clockwise from the front) and elevation ``elevation_k`` of the
unit's angle-correction CSV (:mod:`lidar_fmu.sensors.hesai`). Each firing's strongest return is the first, the
strongest of the others at another distance the second (:func:`hesai_firings`). Checked against nebula's own
decoder (``tests/test_recordings.py``); how, and the recordings read: docs/validation.md ("Velodyne and Hesai
recordings").
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from ..sensors.hesai import (
    HESAI_MODELS,
    HESAI_PRESETS,
    HesaiCalibration,
    HesaiCalibrationError,
    HesaiModel,
    preset_of,
    read_hesai_firetimes,
)
from ..sensors.spec import SensorSpecError, data_file
from .packets import Packets, PacketSourceError, read_packets
from .recording import Firings, Recording, RecordingError
from .units import BinnedGeometry, BinnedUnit, UnitFile, open_binned

#: Return Mode byte → (returns a firing holds, name)
RETURN_MODES = {0x33: (1, "first"), 0x34: (1, "second"), 0x35: (1, "third"), 0x36: (1, "fourth"),
                0x37: (1, "strongest"), 0x38: (1, "last"), 0x39: (2, "last, strongest"), 0x3A: (2, "first, second"),
                0x3B: (2, "first, last"), 0x3C: (2, "first, strongest"), 0x3D: (3, "first, last, strongest"),
                0x3E: (2, "strongest, second strongest")}

_HEADER12 = [("sop", "<u2"), ("major", "u1"), ("minor", "u1"), ("status", "u1"), ("reserved", "u1"),
             ("laser_num", "u1"), ("block_num", "u1"), ("echo", "u1"), ("dis_unit", "u1"), ("echo_num", "u1"),
             ("flags", "u1")]
_TAIL_40P = [("reserved", "u1", 10), ("timestamp", "<u4"), ("return_mode", "u1"), ("factory", "u1"),
             ("date", "u1", 6)]


def _units(size: int) -> list:
    return [("distance", "<u2"), ("reflectivity", "u1")] + ([("extra", "u1", size - 3)] if size > 3 else [])


def _blocks(blocks: int, lasers: int, unit_size: int, sob: bool = False) -> tuple:
    block = ([("sob", "<u2")] if sob else []) + [("azimuth", "<u2"), ("units", _units(unit_size), lasers)]
    return ("blocks", block, blocks)


@dataclass(frozen=True)
class Layout:
    """One packet format: the model, its numpy dtype, the year offset of its date and its fixed distance unit
    (None: the header's)."""

    model: str
    dtype: np.dtype
    year_offset: int
    distance_unit_m: float | None = None


def packet_layout(payload: bytes) -> Layout | None:
    """The :class:`Layout` of one UDP payload, or None when it is no Hesai point-cloud packet of a model here.

    Each model's layout, from the user manuals' "Data structure" chapters (Point Cloud Data Packet: header, body of
    blocks, tail), as nebula (tier4/nebula, ``nebula_hesai_decoders/decoders/pandar_*.hpp``) and
    HesaiLidar_SDK_2.0 (``libhesai/UdpProtocol/``) lay them out. All little-endian:

    * Pandar40P: no header; 10 blocks of (0xFFEE, Azimuth u16, 40 × (Distance u16, Reflectivity u8)); tail of
      22 bytes (Timestamp µs at byte 10, Return Mode at 14, date and time from byte 16, year − 2000); 4 mm units.
    * Pandar64: 8-byte header (0xEEFF, lasers, blocks, reserved, distance unit mm, 2 reserved); 6 blocks of
      (Azimuth, 64 × 3 bytes); the Pandar40P's tail.
    * 12-byte header (0xEEFF, protocol major.minor, status, reserved, lasers, blocks, echo, distance unit mm,
      echo number, flags), then by protocol:

      * 6.1 PandarXT-16/32 (8 blocks), XT32M2X (6 blocks): blocks of (Azimuth, lasers × (Distance,
        Reflectivity, reserved)); tail of 24 bytes (Return Mode at 10, date and time at 13, year − 1900,
        Timestamp at 19);
      * 3.1 PandarQT64: 4 blocks of 4-byte units; tail (Timestamp at 12, Return Mode at 16, date at 18);
      * 3.2 QT128C2X: 2 blocks of 4-byte units, body CRC, functional safety (17 bytes); tail (mode flag at 5,
        Return Mode at 12, date at 15, Timestamp at 21);
      * 1.4 Pandar128E3X / OT128 (status byte above 127): 2 blocks of 3-byte units (+1 byte each for the flags'
        confidence, weight factor, ambient light), body CRC, functional safety where flag 0x04, tail of 26 bytes
        (azimuth state at 9, operational state at 11, Return Mode at 12, date at 15, Timestamp at 21).

    Return Mode byte: 0x33–0x38 single, 0x39–0x3c and 0x3e dual, 0x3d triple (:data:`RETURN_MODES`). Distance ×
    the distance unit is the range (m, from the unit's origin)."""
    size = len(payload)
    if size in (1262, 1266):  # Pandar40P: 1240-byte body + 22-byte tail (+ UDP sequence)
        return Layout("Pandar40P", np.dtype([_blocks(10, 40, 3, sob=True), ("tail", _TAIL_40P)]), 2000, 0.004)
    if size < 12 or payload[0] != 0xEE or payload[1] != 0xFF:
        return None
    if size in (1194, 1198) and payload[2] == 64 and payload[3] == 6:  # Pandar64
        header = [("sop", "<u2"), ("laser_num", "u1"), ("block_num", "u1"), ("reserved", "u1"),
                  ("dis_unit", "u1"), ("reserved2", "u1", 2)]
        return Layout("Pandar64", np.dtype(header + [_blocks(6, 64, 3), ("tail", _TAIL_40P)]), 1900)
    major, minor, status, lasers, blocks, flags = payload[2], payload[3], payload[4], payload[6], payload[7], payload[11]
    if (major, minor) == (6, 1):  # PandarXT-16 / XT-32 (8 blocks), XT32M2X (6 blocks)
        model = {(16, 8): "PandarXT16", (32, 8): "PandarXT32", (32, 6): "PandarXT32M"}.get((lasers, blocks))
        tail = [("reserved", "u1", 10), ("return_mode", "u1"), ("motor", "<u2"), ("date", "u1", 6),
                ("timestamp", "<u4"), ("factory", "u1")]
        body = [_blocks(blocks, lasers, 4)]
    elif (major, minor) == (3, 1):  # PandarQT64
        model = "PandarQT64" if (lasers, blocks) == (64, 4) else None
        tail = [("reserved", "u1", 10), ("motor", "<u2"), ("timestamp", "<u4"), ("return_mode", "u1"),
                ("factory", "u1"), ("date", "u1", 6)]
        body = [_blocks(blocks, lasers, 4)]
    elif (major, minor) == (3, 2):  # QT128C2X
        model = "PandarQT128" if (lasers, blocks) == (128, 2) else None
        tail = [("reserved", "u1", 5), ("mode_flag", "u1"), ("reserved2", "u1", 6), ("return_mode", "u1"),
                ("motor", "<u2"), ("date", "u1", 6), ("timestamp", "<u4"), ("factory", "u1")]
        body = [_blocks(blocks, lasers, 4), ("crc", "<u4"), ("safety", "u1", 17)]
    elif (major, minor) == (1, 4):  # Pandar128E3X, OT128 (status info version above 127)
        model = ("OT128" if status > 127 else "Pandar128E3X") if (lasers, blocks) == (128, 2) else None
        unit = 3 + bool(flags & 0x10) + bool(flags & 0x20) + bool(flags & 0x40)
        tail = [("reserved", "u1", 9), ("azimuth_state", "<u2"), ("operational_state", "u1"), ("return_mode", "u1"),
                ("motor", "<u2"), ("date", "u1", 6), ("timestamp", "<u4"), ("factory", "u1")]
        body = [_blocks(blocks, lasers, unit), ("crc", "<u4")] + ([("safety", "u1", 17)] if flags & 0x04 else [])
    else:
        return None
    if model is None:
        return None
    dtype = np.dtype(_HEADER12 + body + [("tail", tail)])
    return Layout(model, dtype, 1900) if dtype.itemsize <= size else None


@dataclass(frozen=True)
class HesaiScan:
    """Decoded packets of one Hesai unit: per firing of the head (a group of blocks) its Azimuth and time, and per
    return and channel the distance and reflectivity."""

    model: HesaiModel
    return_mode: int
    azimuth_cdeg: np.ndarray  # (G,) int64, 0.01°
    time_ns: np.ndarray  # (G,) int64: the firing's block start, absolute
    distance_m: np.ndarray  # (G, R, C) float64; 0: none
    reflectivity: np.ndarray  # (G, R, C) uint8, percent
    loop: np.ndarray  # (G,) int64: the firing loop each firing fired (QT128C2X); 0 elsewhere
    packets: int
    skipped: int  # packets that were not this unit's point-cloud packets

    @property
    def returns(self) -> int:
        return self.distance_m.shape[1]

    @property
    def profile(self) -> str:
        returns, name = RETURN_MODES.get(self.return_mode, (self.returns, f"mode 0x{self.return_mode:02x}"))
        return f"Hesai {self.model.name}, {'single' if returns == 1 else 'dual' if returns == 2 else 'triple'} " \
               f"return ({name})"


def decode_hesai(packets: Packets) -> HesaiScan:
    """The point-cloud packets of ``packets`` decoded (each model's layout: :func:`packet_layout`): the first
    Hesai packet decides the model, and packets of other sizes (GPS, other devices) are skipped. One
    :class:`RecordingError` line where none is a Hesai point-cloud packet, or the return mode changes within the
    recording."""
    layout = next((found for found in map(packet_layout, packets.payloads[:200]) if found is not None), None)
    if layout is None:
        sizes = sorted({len(p) for p in packets.payloads[:200]})
        raise RecordingError(f"recording {packets.source}: no Hesai point-cloud packet of a model read here "
                             f"({', '.join(HESAI_MODELS)}); packet sizes {sizes[:6]}")
    model = HESAI_MODELS[layout.model]
    index = next(i for i, p in enumerate(packets.payloads) if packet_layout(p) is not None)
    first = packets.payloads[index]
    # the same size and the same leading bytes: the header's marker and protocol (the Pandar40P has no header: its
    # first block's marker); from the same UDP port (a capture of two units keeps the first's)
    lead = 2 if layout.model == "Pandar40P" else 4
    keep = np.array([len(p) == len(first) and p[:lead] == first[:lead] for p in packets.payloads])
    keep &= packets.port == packets.port[index]
    n = layout.dtype.itemsize
    data = np.frombuffer(b"".join(p[:n] for p, k in zip(packets.payloads, keep) if k), layout.dtype)
    tail = data["tail"]
    modes = np.unique(tail["return_mode"])
    if len(modes) != 1 or int(modes[0]) not in RETURN_MODES:
        raise RecordingError(f"recording {packets.source}: return mode(s) {', '.join(f'0x{m:02x}' for m in modes)}: "
                             "one known return mode per recording")
    returns = RETURN_MODES[int(modes[0])][0]
    blocks = data["blocks"]
    P, B = blocks.shape
    if B % returns:
        raise RecordingError(f"recording {packets.source}: {B} blocks do not hold {returns}-return firings")
    G = B // returns
    unit_m = layout.distance_unit_m if layout.distance_unit_m is not None else data["dis_unit"].astype(np.float64) * 1e-3
    distance = blocks["units"]["distance"].astype(np.float64) * np.reshape(unit_m, (-1, 1, 1))
    distance = distance.reshape(P, G, returns, model.channels)
    reflectivity = blocks["units"]["reflectivity"].reshape(P, G, returns, model.channels)
    azimuth = blocks["azimuth"].astype(np.int64).reshape(P, G, returns)[:, :, 0]
    # a packet's time: its date (seconds) and Timestamp (µs within the second); blocks one block period apart,
    # the packet's time at its last block (QT64: its first), as the manuals' "absolute time" appendices time them
    seconds = _epoch_seconds(tail["date"], layout.year_offset)
    packet_ns = seconds * 1_000_000_000 + tail["timestamp"].astype(np.int64) * 1000
    step_ns = int(round(model.block_period_s * 1e9))
    group = np.arange(G) if model.name == "PandarQT64" else np.arange(G) - (G - 1)
    time_ns = packet_ns[:, None] + group[None, :] * step_ns
    loop = np.zeros((P, G), np.int64)
    if model.name == "PandarQT128":  # blocks alternate loops; in multi-return the tail's mode flag says which
        loop[:] = (np.arange(G)[None, :] % 2) if returns == 1 else (1 - (tail["mode_flag"] & 1))[:, None]
    return HesaiScan(model, int(modes[0]), azimuth.ravel() % 36000, time_ns.ravel(),
                     distance.reshape(P * G, returns, model.channels),
                     reflectivity.reshape(P * G, returns, model.channels), loop.ravel(), int(keep.sum()),
                     int((~keep).sum()))


def _epoch_seconds(date: np.ndarray, year_offset: int) -> np.ndarray:
    """(P,) int64 UTC seconds of the tails' date fields: year − offset, month, day, hour, minute, second; or, where
    year and month read 0, big-endian seconds since 1970 in the last four bytes (HesaiLidar_SDK_2.0's
    ``GetMicroLidarTimeU64``)."""
    d = date.astype(np.int64)
    months = (d[:, 0] + year_offset - 1970) * 12 + np.clip(d[:, 1], 1, 12) - 1
    first_of_month = (np.datetime64("1970-01", "M") + months.astype("timedelta64[M]")).astype("datetime64[D]")
    days = first_of_month.astype(np.int64) + d[:, 2] - 1
    seconds = days * 86400 + d[:, 3] * 3600 + d[:, 4] * 60 + d[:, 5]
    since_epoch = (d[:, 2] << 24) | (d[:, 3] << 16) | (d[:, 4] << 8) | d[:, 5]
    return np.where((d[:, 0] == 0) & (d[:, 1] == 0), since_epoch, seconds)


def scan_points(scan: HesaiScan, cal: HesaiCalibration, *, min_range_m: float = 0.0, max_range_m: float = np.inf,
                multi_return_threshold_m: float = 0.1) -> dict[str, np.ndarray]:
    """Every return as a point the way nebula's decoder emits them (``HesaiDecoder::convert_returns``): of a
    firing's returns of one channel, an identical one (same distance and reflectivity as another) or one within
    ``multi_return_threshold_m`` of another is dropped but for the last block's; ranges outside the limits are
    dropped. Returns arrays: ``xyz`` (N, 3) in our frame (x forward, y left), ``channel``, ``firing`` (index of
    the firing), ``sweep_deg`` (clockwise from the front, [0, 360))."""
    G, R, C = scan.distance_m.shape
    d = scan.distance_m
    keep = (d > 0) & (d >= min_range_m) & (d <= max_range_m)
    for r in range(R - 1):  # only the last block's copy of a duplicate or too-close pair stays
        others = [o for o in range(R) if o != r]
        identical = np.zeros((G, C), bool)
        close = np.zeros((G, C), bool)
        for o in others:
            identical |= (d[:, r] == d[:, o]) & (scan.reflectivity[:, r] == scan.reflectivity[:, o])
            close |= np.abs(d[:, o] - d[:, r]) < multi_return_threshold_m
        keep[:, r] &= ~identical & ~close
    firing, ret, channel = np.nonzero(keep)
    sweep = np.mod(scan.azimuth_cdeg[firing] / 100.0 + cal.azimuth_offset_deg[channel], 360.0)
    xyz = _xyz(d[firing, ret, channel], sweep, cal.elevation_deg[channel])
    order = np.lexsort((ret, channel, firing))  # nebula's order: firing, channel, block
    return {"xyz": xyz[order], "channel": channel[order], "firing": firing[order], "sweep_deg": sweep[order]}


def _xyz(distance_m: np.ndarray, sweep_deg: np.ndarray, elevation_deg: np.ndarray) -> np.ndarray:
    """Points in our frame of ranges at Hesai angles (sweep clockwise from the front): Hesai's
    (d cos e sin a, d cos e cos a, d sin e) in its frame (Y forward, X right) is (y, −x, z) in ours."""
    a, e = np.radians(sweep_deg), np.radians(elevation_deg)
    return np.stack([distance_m * np.cos(e) * np.cos(a), -distance_m * np.cos(e) * np.sin(a),
                     distance_m * np.sin(e)], axis=-1)


def hesai_firings(scan: HesaiScan, cal: HesaiCalibration, fires: np.ndarray | None = None) -> Firings:
    """Every fired (firing, channel) slot as one firing: its sweep, time, and its strongest and second returns
    (module doc). ``fires`` (loops, channels) bool: which channels fire in which loop (None: all, always)."""
    G, R, C = scan.distance_m.shape
    d, refl = scan.distance_m, scan.reflectivity.astype(np.float64)
    # strongest first: by reflectivity, ties to the earlier block; a return at no distance ranks last
    rank = np.where(d > 0, refl, -1.0) - 1e-3 * np.arange(R)[None, :, None]
    order = np.argsort(-rank, axis=1, kind="stable")
    d_sorted = np.take_along_axis(d, order, axis=1)
    r_sorted = np.take_along_axis(refl, order, axis=1)
    strongest, strongest_refl = d_sorted[:, 0], r_sorted[:, 0]
    second = np.zeros((G, C))
    second_refl = np.zeros((G, C))
    for k in range(1, R):  # the strongest of the others at another distance
        take = (second == 0) & (d_sorted[:, k] > 0) & (d_sorted[:, k] != strongest)
        second = np.where(take, d_sorted[:, k], second)
        second_refl = np.where(take, r_sorted[:, k], second_refl)
    fired = np.ones((G, C), bool) if fires is None else fires[scan.loop % len(fires)]
    firing, channel = np.nonzero(fired)
    sweep = np.mod(scan.azimuth_cdeg[firing] / 100.0 + cal.azimuth_offset_deg[channel], 360.0)
    two = R > 1
    return Firings(channel.astype(np.int64), sweep, scan.time_ns[firing], strongest[firing, channel],
                   strongest_refl[firing, channel], second[firing, channel] if two else None,
                   second_refl[firing, channel] if two else None)


def azimuth_step_deg(scan: HesaiScan) -> float:
    """The unit's horizontal step: the median advance of the Azimuth from one firing to the next (0.01° units)."""
    advance = np.diff(scan.azimuth_cdeg) % 36000
    advance = advance[(advance > 0) & (advance < 1000)]
    if not len(advance):
        raise RecordingError("the recording's Azimuth never advances: the head is not turning")
    return float(np.median(advance)) / 100.0


def open_hesai(recording_path: str, unit: UnitFile) -> tuple[Recording, BinnedGeometry]:
    """A Hesai recording (capture or bag) and its unit (``unit``: an angle-correction CSV or a ``hesai_*`` preset).
    One line where the recording is no Hesai capture, or its unit does not match the file."""
    return open_binned(recording_path, unit, "Hesai", _binned_unit)


def _binned_unit(recording_path: str, unit: UnitFile) -> BinnedUnit:
    """Binned at the unit's step (the Azimuth's median advance between firings), every firing known (an empty slot
    is a firing without a return), except the channels that do not fire in a block: the QT128C2X's firing loops
    (its firetime correction says which channel fires in which loop)."""
    cal: HesaiCalibration = unit.calibration
    try:
        scan = decode_hesai(read_packets(recording_path))
    except PacketSourceError as exc:
        raise RecordingError(str(exc)) from None
    model = scan.model
    if unit.preset is not None and HESAI_PRESETS[unit.preset]["hesai_model"] != model.name:
        raise RecordingError(f"recording {recording_path} is a {model.name}, not the preset {unit.preset}'s "
                             f"{HESAI_PRESETS[unit.preset]['hesai_model']}")
    if cal.channels != model.channels:
        raise RecordingError(f"recording {recording_path} is a {model.name} ({model.channels} channels), but "
                             f"{os.path.basename(unit.path)} calibrates {cal.channels} channels")
    preset = unit.preset or preset_of(model.name)
    fires = None
    if model.name == "PandarQT128":
        try:
            firetimes = read_hesai_firetimes(data_file(HESAI_PRESETS[preset]["firetime_correction"]), model.channels)
        except (HesaiCalibrationError, SensorSpecError) as exc:
            raise UserError(str(exc)) from None
        fires = np.isfinite(firetimes.offset_s)
    skipped = (f"{scan.skipped} packet(s) that are not this {model.name}'s point-cloud packets skipped",)
    return BinnedUnit(model.name, scan.profile, hesai_firings(scan, cal, fires),
                      np.argsort(-cal.elevation_deg, kind="stable"), np.radians(cal.elevation_deg),
                      azimuth_step_deg(scan), True, {"preset": preset, "calibration": os.path.abspath(unit.path)},
                      capture_notes=skipped if scan.skipped else (),
                      too_short=f" (its {scan.packets} packets cover less than half a turn)")

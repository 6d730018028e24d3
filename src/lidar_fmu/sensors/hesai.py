"""Hesai spinning units: a unit's angle-correction CSV and firetime correction, their firing timing, and presets.

:func:`read_hesai_calibration` reads the angle CSV (``Channel,Elevation,Azimuth``), :func:`read_hesai_firetimes`
the firetime correction (the SDK's three layouts); :data:`HESAI_MODELS` holds each model's block period and
channel count, :func:`guess_model` the model a CSV is nearest, and :func:`hesai_pattern` fires a block every
period, each channel at its offset, at azimuth ``−(A + azimuth_k)`` (the manuals' clockwise angle in our frame;
:mod:`lidar_fmu.recordings.hesai` uses the same). :data:`HESAI_PRESETS` (merged into
:data:`lidar_fmu.sensors.presets.PRESETS`) carry each model's packaged tables (``data/NOTICE.md``) and datasheet
figures, each cited beside it. The conventions and each preset's sources:
docs/sensors.md#hesai-angle-corrections-and-firing-times.
"""
from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from importlib import resources

import numpy as np

from ..documents import read_text, shown
from ..errors import LidarFmuError
from ..geometry.pattern import RayPattern, check_ray_count, spherical_directions


class HesaiCalibrationError(LidarFmuError, ValueError):
    """A Hesai angle-correction or firetime CSV that cannot be read, or does not fit its model."""


#: largest correction CSV read (a 128-channel angle file is ~3 kB, a firetime state table ~12 kB)
MAX_CSV_BYTES = 2**20


@dataclass(frozen=True)
class HesaiCalibration:
    """A unit's angle correction: per channel (0-based, the UDP data's channel order) elevation and azimuth
    offset, degrees, Hesai's convention (azimuth clockwise from the front)."""

    name: str
    elevation_deg: np.ndarray  # (channels,)
    azimuth_offset_deg: np.ndarray  # (channels,)

    @property
    def channels(self) -> int:
        return len(self.elevation_deg)


@dataclass(frozen=True)
class HesaiModel:
    """What a Hesai model fires: its channels, block (column) period, firing offsets and range limits."""

    name: str
    channels: int
    #: time between two blocks (firings of the whole head) in single return mode, s
    block_period_s: float
    #: packaged firetime correction CSV (``data/``) and angle-correction CSV of the model
    firetime_file: str
    angle_file: str
    #: nearest and farthest distance the unit reports (nebula's decoder limits, from the user manuals)
    min_range_m: float
    max_range_m: float
    source: str


#: Hesai models by name (``hesai_model`` spec key). Block periods: the user manuals' horizontal resolution at
#: 600 rpm (10 Hz), i.e. 0.1 s over the blocks of a turn, as nebula times its blocks (``pandar_*.hpp``,
#: ``get_packet_relative_point_time_offset``).
HESAI_MODELS: dict[str, HesaiModel] = {
    # Pandar40P user manual, "Laser firing time": a block every 55.56 µs (0.2° at 10 Hz)
    "Pandar40P": HesaiModel("Pandar40P", 40, 55.56e-6, "hesai_Pandar40P_firetime.csv", "hesai_Pandar40P.csv",
                            0.3, 200.0, "Pandar40P user manual, Appendix: laser firing time"),
    # Pandar64 user manual (640-en), "Laser firing time": 55.56 µs blocks (0.2° at 10 Hz)
    "Pandar64": HesaiModel("Pandar64", 64, 55.56e-6, "hesai_Pandar64_firetime.csv", "hesai_Pandar64.csv",
                           0.3, 200.0, "Pandar64 user manual, Appendix: laser firing time"),
    # PandarXT-16 / XT32 / XT32M2X user manuals, "Absolute time and laser firing time": 50 µs blocks (0.18°)
    "PandarXT16": HesaiModel("PandarXT16", 16, 50e-6, "hesai_PandarXT16_firetime.csv", "hesai_PandarXT16.csv",
                             0.05, 120.0, "PandarXT-16 user manual, Appendix II: laser firing time"),
    "PandarXT32": HesaiModel("PandarXT32", 32, 50e-6, "hesai_PandarXT32_firetime.csv", "hesai_PandarXT32.csv",
                             0.05, 120.0, "PandarXT user manual, Appendix II: laser firing time"),
    "PandarXT32M": HesaiModel("PandarXT32M", 32, 50e-6, "hesai_PandarXT32M_firetime.csv", "hesai_PandarXT32M.csv",
                              0.5, 300.0, "XT32M2X user manual, Appendix II: laser firing time"),
    # PandarQT user manual (Q01-en), "Laser firing time": 166.67 µs blocks (0.6° at 10 Hz)
    "PandarQT64": HesaiModel("PandarQT64", 64, 500e-6 / 3, "hesai_PandarQT64_firetime.csv", "hesai_PandarQT64.csv",
                             0.1, 60.0, "PandarQT user manual, Appendix: laser firing time"),
    # QT128C2X user manual, "Absolute time of point cloud data": 111.11 µs blocks (0.4°); two firing loops
    # alternate block by block, channels 1–32 firing in one and 33–64 in the other (0.8° each), 65–128 in both
    "PandarQT128": HesaiModel("PandarQT128", 128, 1e-3 / 9, "hesai_PandarQT128_firetime.csv",
                              "hesai_PandarQT128.csv", 0.05, 50.0, "QT128C2X user manual, Appendix II: firing time"),
    # Pandar128E3X user manual (128-en), "Start time of each block": standard mode 2 × 27.778 µs (0.2°)
    "Pandar128E3X": HesaiModel("Pandar128E3X", 128, 2 * 27.778e-6, "hesai_Pandar128E3X_firetime.csv",
                               "hesai_Pandar128E3X.csv", 0.1, 230.0,
                               "Pandar128E3X user manual, Appendix: laser firing time, standard mode"),
    # OT128 user manual, "Laser firing time": standard mode, 0.2° at 10 Hz (55.56 µs blocks)
    "OT128": HesaiModel("OT128", 128, 55.56e-6, "hesai_OT128_firetime.csv", "hesai_OT128.csv", 0.1, 230.0,
                        "OT128 user manual, Appendix: laser firing time, standard mode"),
}


def _data_path(name: str) -> str:
    """A file name as given when it exists, else the packaged ``data/`` file of that name."""
    if os.path.isfile(name):
        return name
    packaged = resources.files(__package__).joinpath("data").joinpath(name)
    if not packaged.is_file():
        raise HesaiCalibrationError(f"Hesai correction file not found: {name}")
    return str(packaged)


def _rows(path: str, what: str) -> list[list[str]]:
    text = read_text(_data_path(path), what, HesaiCalibrationError, limit=MAX_CSV_BYTES)
    return [[cell.strip() for cell in row] for row in csv.reader(io.StringIO(text)) if any(c.strip() for c in row)]


def _number(cell: str, where: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise HesaiCalibrationError(f"{where}: {shown(cell)} is not a number") from None
    if not np.isfinite(value):
        raise HesaiCalibrationError(f"{where}: {shown(cell)} is not a finite number")
    return value


def read_hesai_calibration(path: str | os.PathLike[str]) -> HesaiCalibration:
    """A unit's angle-correction CSV: a header naming the channel, elevation and azimuth columns, then one row per
    channel 1…N (any order), degrees. One :class:`HesaiCalibrationError` line for anything else."""
    path = os.fspath(path)
    name = os.path.basename(path)
    rows = _rows(path, "Hesai angle correction")
    if not rows:
        raise HesaiCalibrationError(f"Hesai angle correction {name} is empty")
    header = [cell.lower() for cell in rows[0]]
    try:
        columns = [next(i for i, cell in enumerate(header) if key in cell) for key in ("id" if "laser id" in
                                                                                         header else "channel",
                                                                                         "elevation", "azimuth")]
    except StopIteration:
        raise HesaiCalibrationError(f"Hesai angle correction {name}: the first row must name the columns "
                                    f"Channel (or Laser id), Elevation, Azimuth; got {shown(','.join(rows[0]))}") from None
    values = []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) <= max(columns):
            raise HesaiCalibrationError(f"Hesai angle correction {name} line {line}: {len(row)} values, need "
                                        f"{max(columns) + 1}")
        values.append([_number(row[c], f"Hesai angle correction {name} line {line}") for c in columns])
    if not values:
        raise HesaiCalibrationError(f"Hesai angle correction {name} has no channel rows")
    table = np.asarray(values)
    channel = table[:, 0]
    if not np.array_equal(np.sort(channel), np.arange(1, len(channel) + 1)):
        raise HesaiCalibrationError(f"Hesai angle correction {name}: channels must be 1…{len(channel)}, once each")
    if np.any(np.abs(table[:, 1]) > 90) or np.any(np.abs(table[:, 2]) > 180):
        raise HesaiCalibrationError(f"Hesai angle correction {name}: elevations must lie within ±90° and azimuth "
                                    "offsets within ±180° (degrees, not radians?)")
    order = np.argsort(channel)
    return HesaiCalibration(os.path.splitext(name)[0], table[order, 1], table[order, 2])


@dataclass(frozen=True)
class HesaiFiretimes:
    """When each channel fires after its block starts (s), per firing loop: ``offset_s[loop, channel]``, NaN where
    the channel does not fire in that loop. One loop for most models; blocks take the loops in turn."""

    offset_s: np.ndarray  # (loops, channels)

    @property
    def loops(self) -> int:
        return self.offset_s.shape[0]


def read_hesai_firetimes(path: str | os.PathLike[str], channels: int) -> HesaiFiretimes:
    """A firetime correction CSV, in any of HesaiLidar_SDK_2.0's three layouts:

    * ``Channel,fire time(us)`` then ``channel,µs`` rows (Pandar40P/64, XT, QT64);
    * QT128C2X's loops: ``EEFF,…``, ``… LoopNum,2``, ``Loop1,Firetime1,Loop2,Firetime2`` then
      ``channel,µs,channel,µs`` rows (channel 0: padding);
    * a state table (Pandar128E3X, OT128): header rows of operational state (``operation mode``), azimuth state
      and (128E3X) near/far firing, then ``channel,µs…`` rows, ``-`` where a channel does not fire. The column of
      standard mode (state 2), azimuth state 0 and far firing is read: the mode the presets model.
    """
    path = os.fspath(path)
    name = os.path.basename(path)
    where = f"Hesai firetime correction {name}"
    rows = _rows(path, "Hesai firetime correction")
    if not rows:
        raise HesaiCalibrationError(f"{where} is empty")
    first = rows[0][0].lower()
    if first.startswith("eeff"):
        return _loop_firetimes(rows, channels, where)
    if first.startswith("channel"):
        offset = np.full((1, channels), np.nan)
        for line, row in enumerate(rows[1:], start=2):
            if len(row) < 2:
                raise HesaiCalibrationError(f"{where} line {line}: need channel,time")
            channel = int(_number(row[0], f"{where} line {line}"))
            if not 1 <= channel <= channels:
                raise HesaiCalibrationError(f"{where} line {line}: channel {channel} is not one of 1…{channels}")
            offset[0, channel - 1] = _number(row[1], f"{where} line {line}") * 1e-6
        return _checked(offset, where, channels)
    return _state_table_firetimes(rows, channels, where)


def _loop_firetimes(rows: list[list[str]], channels: int, where: str) -> HesaiFiretimes:
    header = next((i for i, row in enumerate(rows) if row[0].lower().startswith("loop1")), None)
    if header is None:
        raise HesaiCalibrationError(f"{where}: a loop table needs a 'Loop1,Firetime1,…' header row")
    loops = len(rows[header]) // 2
    offset = np.full((loops, channels), np.nan)
    for line, row in enumerate(rows[header + 1:], start=header + 2):
        for loop in range(loops):
            if 2 * loop + 1 >= len(row):
                continue
            channel = int(_number(row[2 * loop], f"{where} line {line}"))
            if channel == 0:  # padding rows
                continue
            if not 1 <= channel <= channels:
                raise HesaiCalibrationError(f"{where} line {line}: channel {channel} is not one of 1…{channels}")
            offset[loop, channel - 1] = _number(row[2 * loop + 1], f"{where} line {line}") * 1e-6
    return _checked(offset, where, channels)


def _state_table_firetimes(rows: list[list[str]], channels: int, where: str) -> HesaiFiretimes:
    mode = state = far = None
    body = 0
    for i, row in enumerate(rows):
        label = row[0].lower()
        if "operation" in label:
            mode = row[1:]
        elif "state" in label:
            state = row[1:]
        elif any("distance>=" in cell.replace(" ", "").lower() for cell in row[1:]):
            far = [cell.replace(" ", "").lower().startswith("distance>=") for cell in row[1:]]
        else:
            body = i
            break
    if mode is None or state is None:
        raise HesaiCalibrationError(f"{where}: not a firetime correction (need 'Channel,fire time', a loop table "
                                    "or operational/azimuth state rows)")
    pick = [k for k in range(min(len(mode), len(state)))
            if mode[k] == "2" and state[k] == "0" and (far is None or (k < len(far) and far[k]))]
    if not pick:
        raise HesaiCalibrationError(f"{where}: no column for standard mode (operational state 2), azimuth state 0")
    column = pick[0] + 1
    offset = np.full((1, channels), np.nan)
    for line, row in enumerate(rows[body:], start=body + 1):
        channel = int(_number(row[0], f"{where} line {line}"))
        if not 1 <= channel <= channels or column >= len(row):
            raise HesaiCalibrationError(f"{where} line {line}: channel {channel} of 1…{channels} with a value in "
                                        f"column {column + 1}")
        if row[column] != "-":  # the 128E3X table's times are ns (they exceed any µs block), the OT128's µs
            offset[0, channel - 1] = _number(row[column], f"{where} line {line}")
    unit = 1e-9 if np.nanmax(offset) > 1000 else 1e-6
    return _checked(offset * unit, where, channels)


def _checked(offset: np.ndarray, where: str, channels: int) -> HesaiFiretimes:
    fired = np.isfinite(offset).any(axis=0)
    if not fired.all():
        missing = np.flatnonzero(~fired)[:5] + 1
        raise HesaiCalibrationError(f"{where}: channel(s) {', '.join(map(str, missing))} never fire "
                                    f"(a {channels}-channel unit's file?)")
    finite = offset[np.isfinite(offset)]
    if np.any(np.abs(finite) > 1e-3):
        raise HesaiCalibrationError(f"{where}: firing offsets must lie within ±1 ms of their block")
    return HesaiFiretimes(offset)


def model_of(name: str) -> HesaiModel:
    """The :class:`HesaiModel` named ``name`` (``hesai_model``), or one line naming the known ones."""
    model = HESAI_MODELS.get(str(name))
    if model is None:
        raise HesaiCalibrationError(f"unknown hesai_model {shown(name)}; known: {', '.join(HESAI_MODELS)}")
    return model


def guess_model(cal: HesaiCalibration) -> HesaiModel:
    """The model whose default angle table is nearest ``cal``'s elevations (same channel count): a user's CSV given
    without ``hesai_model``. Pandar128E3X and OT128 share channel count and field of view: their CSVs differ in
    azimuth offsets (the E3X's staggered columns), which decide."""
    best: tuple[float, HesaiModel] | None = None
    for model in HESAI_MODELS.values():
        if model.channels != cal.channels:
            continue
        default = read_hesai_calibration(_data_path(model.angle_file))
        distance = float(np.median(np.abs(default.elevation_deg - cal.elevation_deg))
                         + np.median(np.abs(default.azimuth_offset_deg - cal.azimuth_offset_deg)))
        if best is None or distance < best[0]:
            best = (distance, model)
    if best is None:
        raise HesaiCalibrationError(f"Hesai angle correction {cal.name}: no Hesai model here has {cal.channels} "
                                    f"channels (known: {', '.join(f'{m.name} {m.channels}' for m in HESAI_MODELS.values())})")
    return best[1]


def hesai_pattern(cal: HesaiCalibration, model: HesaiModel, firetimes: HesaiFiretimes, *,
                  frame_rate_hz: float) -> RayPattern:
    """One turn of the unit: a block every ``model.block_period_s`` from the unit's front (Azimuth 0), the head
    turning clockwise once per frame; block ``c`` fires loop ``c mod loops`` of ``firetimes``.

    Rays are column-major, one column per block holding the channels its loop fires (all of them but on the
    QT128C2X, which fires 96 a block: 64 in every block, 32 in alternate ones), sorted by channel. A ray's
    direction is its block's Azimuth plus the channel's offset (module doc); its time is the block's start plus
    the channel's firing offset (shifted so that a block's earliest firing is at its start).
    """
    if cal.channels != model.channels:
        raise HesaiCalibrationError(f"Hesai angle correction {cal.name} has {cal.channels} channels, the "
                                    f"{model.name} {model.channels}")
    if firetimes.offset_s.shape[1] != model.channels:
        raise HesaiCalibrationError(f"the firetime correction has {firetimes.offset_s.shape[1]} channels, the "
                                    f"{model.name} {model.channels}")
    period_s = 1.0 / frame_rate_hz
    columns = int(round(period_s / model.block_period_s))
    if columns < 1:
        raise HesaiCalibrationError(f"a frame of {period_s * 1e3:g} ms is shorter than one {model.name} block")
    fired = np.isfinite(firetimes.offset_s)  # (loops, channels)
    per_loop = fired.sum(axis=1)
    if np.any(per_loop != per_loop[0]):
        raise HesaiCalibrationError(f"the firetime correction's loops fire {per_loop.tolist()} channels: a grid "
                                    "needs the same number in each")
    rows = int(per_loop[0])
    check_ray_count(rows, columns)
    offsets = firetimes.offset_s - np.nanmin(firetimes.offset_s)
    loop_of_column = np.arange(columns) % firetimes.loops
    channel_of_loop = np.stack([np.flatnonzero(f) for f in fired])  # (loops, rows), ascending channels
    channel = channel_of_loop[loop_of_column].ravel()  # column-major
    column = np.repeat(np.arange(columns), rows)
    time_s = column * (period_s / columns) + offsets[loop_of_column[column], channel]
    # the head turns clockwise through one turn a frame; a block's Azimuth is where the turn has reached
    head_deg = 360.0 * column / columns
    azimuth = -np.radians(head_deg + cal.azimuth_offset_deg[channel])
    elevation = np.radians(cal.elevation_deg[channel])
    return RayPattern(spherical_directions(azimuth, elevation), channel.astype(np.uint32), column.astype(np.uint32),
                      time_s.astype(np.float32), rows, columns)


#: assumed for every Hesai preset: none of the user manuals used here gives a beam divergence. The 905 nm
#: edge-emitter units of this class (Velodyne's manuals: 3.0 mrad × 1.5 mrad) are the nearest documented figure
_ASSUMED_DIVERGENCE_MRAD = [3.0, 1.5]


def _preset(model: str, description: str, range_m: tuple[float, float], reach_at_10_percent_m: float,
            range_accuracy_m: float) -> dict:
    """A Hesai preset: the model's packaged angle and firetime files, 10 Hz, 905 nm, the assumed divergence, its
    min/max range, the range at 10 % reflectivity (one pair: a root-2 fit, extended targets) and accuracy."""
    return {"description": description, "hesai_model": model, "calibration": HESAI_MODELS[model].angle_file,
            "firetime_correction": HESAI_MODELS[model].firetime_file, "frame_rate_hz": 10.0, "wavelength_nm": 905.0,
            "beam_divergence_mrad": _ASSUMED_DIVERGENCE_MRAD, "min_range_m": range_m[0], "max_range_m": range_m[1],
            "range_reflectivity": {"pairs": [[0.10, reach_at_10_percent_m]], "fit": "root2"},
            "range_accuracy_m": range_accuracy_m}


#: Hesai presets (merged into :data:`lidar_fmu.sensors.presets.PRESETS`). Figures from each model's user manual
#: ("Specifications" section and the "Channel Distribution" appendix) or datasheet, cited per line; min/max range
#: the unit's reporting limits (the manuals' measurement range, as nebula's decoders enforce them). All 905 nm
#: (the manuals' laser safety sections). ``range_accuracy_m`` is the datasheet's typical accuracy taken as 1σ
#: (assumed, as for every preset: docs/sensors.md, "Presets").
HESAI_PRESETS: dict[str, dict] = {
    "hesai_pandar40p": _preset(
        "Pandar40P", "Hesai Pandar40P, 40 channels −25…+15°, 0.2° at 10 Hz",
        # Pandar40 user manual, Appendix I "Channel Distribution": 200 m at 10 % for the central channels,
        # 200 m at 20 % for the outer ones (the preset takes the central figure); 0.3 m minimum (§1.4)
        (0.3, 200.0), 200.0, 0.02),  # Pandar40P datasheet: ±2 cm (0.5–200 m), ±5 cm (0.3–0.5 m)
    "hesai_pandar64": _preset(
        "Pandar64", "Hesai Pandar64, 64 channels −25…+15°, 0.2° at 10 Hz",
        # Pandar64 user manual (640-en) §1.4: measurement range 0.3–200 m, 200 m at 10 % reflectivity (the
        # central channels, as the Pandar40's appendix; not re-read here: assumed the same split)
        (0.3, 200.0), 200.0, 0.02),  # Pandar64 datasheet: ±2 cm (0.5–200 m), ±5 cm (0.3–0.5 m)
    "hesai_xt16": _preset(
        "PandarXT16", "Hesai PandarXT-16, 16 channels −15…+15° (2°), 0.18° at 10 Hz",
        # PandarXT-16 user manual, Appendix I: instrument range 120 m; 80 m at 10 % (channels 5–12), 50 m at
        # 10 % (1–4, 13–16); the preset takes the central channels' 80 m. 0.05 m minimum (nebula PandarXT16)
        (0.05, 120.0), 80.0, 0.01),  # PandarXT-16 datasheet: accuracy ±1 cm
    "hesai_xt32": _preset(
        "PandarXT32", "Hesai PandarXT-32, 32 channels −16…+15° (1°), 0.18° at 10 Hz",
        # PandarXT user manual §1.4: 0.05–120 m, 80 m at 10 % (the XT-16's appendix figure for the central
        # channels; assumed the same for the XT-32, whose appendix was not read here)
        (0.05, 120.0), 80.0, 0.01),  # PandarXT datasheet: accuracy ±1 cm, precision 0.5 cm (1σ)
    "hesai_xt32m": _preset(
        "PandarXT32M", "Hesai XT32M2X, 32 channels −20.8…+19.5° (1.3°), 0.18° at 10 Hz",
        # XT32M2X user manual, Appendix I: elevations 19.5° … −20.8° in 1.3° steps; instrument range 0.5–300 m
        # (nebula PandarXT32M); 80 m at 10 % assumed as the XT-32 (not read here)
        (0.5, 300.0), 80.0, 0.01),  # XT32M2X datasheet: accuracy ±1 cm (assumed as the XT-32: not read here)
    "hesai_qt64": _preset(
        "PandarQT64", "Hesai PandarQT64, 64 channels −52.1…+52.1°, 0.6° at 10 Hz",
        # PandarQT user manual (Q01-en) §1.4: 0.1–60 m, 20 m at 10 % reflectivity. The unit reports nearer: 12.6 % of
        # the returns of the shared recording (tier4/nebula's QT64 bag, docs/validation.md) lie 0.027–0.1 m away, its
        # lowest channels seeing its own base plate. A real recording beats the datasheet: the preset's minimum is
        # the recording's nearest return, 0.027 m (the manual's 0.1 m is where its accuracy figure starts)
        (0.027, 60.0), 20.0, 0.03),  # PandarQT datasheet: accuracy ±3 cm
    "hesai_qt128": _preset(
        "PandarQT128", "Hesai QT128C2X, 128 channels −52.6…+52.6°, 0.4° blocks (0.8° per loop) at 10 Hz",
        # QT128C2X user manual §1.4: 0.05–50 m, 20 m at 10 % (as the QT64; assumed: not read here)
        (0.05, 50.0), 20.0, 0.03),  # QT128C2X datasheet: accuracy ±3 cm (assumed as the QT64)
    "hesai_pandar128e3x": _preset(
        "Pandar128E3X", "Hesai Pandar128E3X, 128 channels −25…+14.4°, 0.2° (standard mode) at 10 Hz",
        # Pandar128E3X user manual (128-en) §1.4: 0.3–200 m at 10 % reflectivity; nebula's decoder 0.1–230 m
        (0.3, 230.0), 200.0, 0.02),  # Pandar128E3X datasheet: ±8 cm (0.3–0.5 m), ±2 cm (0.5–200 m)
    "hesai_ot128": _preset(
        "OT128", "Hesai OT128, 128 channels −25…+14.4°, 0.2° at 10 Hz",
        # OT128 datasheet: 0.3–200 m at 10 % reflectivity (as the Pandar128E3X it replaces; assumed: not read
        # here); nebula's Pandar128E4X decoder 0.1–230 m
        (0.3, 230.0), 200.0, 0.03),  # OT128 datasheet: accuracy ±3 cm (assumed: not read here)
}


def preset_of(model: str) -> str:
    """The name of the Hesai preset of ``model`` (a :data:`HESAI_MODELS` name)."""
    return next(name for name, spec in HESAI_PRESETS.items() if spec["hesai_model"] == model)

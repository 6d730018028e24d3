"""A real lidar recording as range images, whatever the maker: rows = the unit's beams, columns = where they fired.

Two kinds of column, one :class:`Recording`:

* **the unit's own grid** (Ouster): a column is one measurement column (one firing time), exactly as
  ouster-sdk's ``LidarScan`` holds it, *staggered* (the beams of a column look different ways;
  :mod:`.ouster` reads them, and the unit's metadata gives every pixel's ray);
* **azimuth bins** (units that do not fire on a fixed grid: Velodyne, Hesai; :func:`binned_recording`): a
  column is an azimuth bin of the unit's horizontal step, each return put in the bin of its own azimuth, so the
  columns are already *destaggered*; ``azimuth_rad`` holds each pixel's ray azimuth (the firing's own) and
  ``fired`` which pixels the unit fired in that frame.

Ranges are the unit's: millimetres along the beam from where the unit measures (``0`` = no return). Reflectivity
is the unit's calibrated reflectivity in percent (0–100 Lambertian; above 100 retroreflectors), as Ouster's
REFLECTIVITY, Velodyne's "calibrated reflectivity" and Hesai's reflectivity byte all give it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..documents import read_text
from ..errors import LidarFmuError

#: range-image fields (npz key → ouster-sdk ChanField name) a recording may hold
FIELDS = {"range_mm": "RANGE", "reflectivity": "REFLECTIVITY", "signal": "SIGNAL", "near_ir": "NEAR_IR",
          "range2_mm": "RANGE2", "reflectivity2": "REFLECTIVITY2"}


class RecordingError(LidarFmuError, ValueError):
    """A recording that cannot be read as range images of its unit."""


@dataclass(frozen=True)
class Recording:
    """Frames of one unit: ``images[key]`` (F, beams, columns) per :data:`FIELDS` key present."""

    name: str
    images: dict[str, np.ndarray]
    status: np.ndarray  # (F, columns) uint32; bit 0: the unit sent that column
    timestamp_ns: np.ndarray  # (F, columns)
    frame_id: np.ndarray  # (F,)
    profile: str  # the unit's data format, e.g. Ouster's udp_profile_lidar RNG15_RFL8_NIR8
    #: (F, beams, columns) bool: the pixels the unit fired (azimuth bins); None: every pixel of a sent column
    fired: np.ndarray | None = None
    #: (F, beams, columns) float64: each pixel's ray azimuth (rad, ours: counter-clockwise from x); None: the
    #: unit's own grid, whose metadata gives the rays
    azimuth_rad: np.ndarray | None = None
    #: what the reader found worth saying (pixels binned out, rings that never returned, …), one line each
    notes: tuple[str, ...] = field(default=())

    @property
    def frames(self) -> int:
        return len(self.frame_id)

    @property
    def dual(self) -> bool:
        return "range2_mm" in self.images

    def sent(self, frame: int) -> np.ndarray:
        """(columns,) bool: the columns the unit sent in ``frame``."""
        return (self.status[frame] & 1).astype(bool)

    def pixels_sent(self, frame: int) -> np.ndarray:
        """(beams, columns) bool: the pixels the unit fired and sent in ``frame``."""
        sent = np.broadcast_to(self.sent(frame)[None, :], self.images["range_mm"].shape[1:])
        return sent if self.fired is None else sent & self.fired[frame]

    def first_returns(self) -> np.ndarray:
        """(F, beams, columns) bool: the pixels of the sent columns that hold a first return."""
        valid = (self.images["range_mm"] > 0) & (self.status & 1).astype(bool)[:, None, :]
        return valid if self.fired is None else valid & self.fired


#: a frame is kept when the unit fired at least this fraction of its pixels in it (partial turns at a
#: recording's start and end are left out)
MIN_FRAME_COVERAGE = 0.5


@dataclass(frozen=True)
class Firings:
    """A unit's firings, one per (channel, firing), in firing order: what :func:`binned_recording` bins.

    ``sweep_deg`` is where the firing looked, clockwise seen from above from the unit's front, in [0, 360): the
    way the head turns, so that it grows with time (Velodyne and Hesai heads turn clockwise). ``range_m`` 0 is no
    return; ``returned`` False rows are firings known to have had none (a packet's empty slot)."""

    channel: np.ndarray  # (N,) int64, 0…channels−1
    sweep_deg: np.ndarray  # (N,) float64
    time_ns: np.ndarray  # (N,) int64, absolute
    range_m: np.ndarray  # (N,) float64: the strongest return (0: none)
    reflectivity: np.ndarray  # (N,) float64, percent
    range2_m: np.ndarray | None = None  # (N,): a second, weaker return (0: none); None: single-return data
    reflectivity2: np.ndarray | None = None


def sweep_rate_deg_per_s(firings: Firings) -> float:
    """How fast the head turns (°/s): the median advance of the sweep over the time between consecutive firings
    of a channel, where less than a few degrees apart."""
    order = np.lexsort((firings.time_ns, firings.channel))
    channel, sweep, time_ns = firings.channel[order], firings.sweep_deg[order], firings.time_ns[order]
    same = channel[1:] == channel[:-1]
    advance = np.mod(np.diff(sweep), 360.0)[same]
    dt = np.diff(time_ns)[same].astype(np.float64) * 1e-9
    ok = (dt > 0) & (advance < 5.0)
    if not ok.any():
        raise RecordingError("the recording's sweep never advances: the head is not turning")
    return float(np.median(advance[ok] / dt[ok]))


def binned_recording(name: str, profile: str, firings: Firings, row_of_channel: np.ndarray, step_deg: float, *,
                     empty_firings_known: bool) -> Recording:
    """Frames of rings × azimuth bins from ``firings``.

    Each channel's firings are unwrapped over the turns and put in the bin of their own azimuth: bin
    ``round((sweep − phase) / step)`` of the unwrapped sweep, where ``phase`` is the channel's own (the circular
    mean of its sweep modulo the step), so that the jitter of the head's position around its nominal steps
    never moves a firing into its neighbour's bin; ``W = round(360 / step)`` bins make a frame, the frame cut at
    the front. A bin that two firings of one channel fall into (the head turning a little faster than nominal)
    keeps the first; the notes say how many went.

    ``empty_firings_known``: the firings include those without a return (a packet decoder sees every slot).
    Else (a point decoder gives returns only) each frame's columns between its first and last return are taken
    as fired by every channel that returned in the recording at all, at its bin's azimuth.

    Frames where fewer than :data:`MIN_FRAME_COVERAGE` of the pixels fired (the partial turns at either end)
    are left out.
    """
    channels = len(row_of_channel)
    width = int(round(360.0 / step_deg))
    step_deg = 360.0 / width
    order = np.lexsort((np.arange(len(firings.channel)), firings.channel))  # by channel, firing order within
    channel = firings.channel[order]
    sweep = np.mod(firings.sweep_deg[order], 360.0)
    time_ns = firings.time_ns[order]
    starts = np.searchsorted(channel, np.arange(channels + 1))
    counts = np.diff(starts)
    present = counts > 0
    group_start = np.repeat(starts[:-1], counts)  # each firing's channel's first firing
    # unwrap each channel's sweep over the turns: between two of its firings the head turned by about
    # rate · Δt (however long the gap without returns), and the sweep advanced by that modulo a turn
    rate = sweep_rate_deg_per_s(firings)
    advance = np.diff(sweep, prepend=sweep[:1])
    elapsed = rate * np.diff(time_ns, prepend=time_ns[:1]).astype(np.float64) * 1e-9
    step_turns = np.rint((elapsed - advance) / 360.0)
    step_turns[starts[:-1][present]] = 0
    turns = np.cumsum(step_turns)
    turns -= turns[group_start]
    unwrapped = sweep + 360.0 * turns
    # the channels' turns counted alike: each channel's first firing within half a turn of where the channel
    # that fired most often had reached at that time (channel offsets are a few degrees)
    reference = int(np.argmax(counts))
    ref = slice(starts[reference], starts[reference + 1])
    opening = starts[:-1][present]
    at = np.interp(time_ns[opening].astype(np.float64), time_ns[ref].astype(np.float64), unwrapped[ref])
    shift = np.zeros(channels)
    shift[present] = 360.0 * np.rint((at - unwrapped[opening]) / 360.0)
    unwrapped += shift[channel]
    # each channel's phase within a bin: the circular mean of its sweep modulo the step
    angle = np.exp(2j * np.pi * np.mod(sweep, step_deg) / step_deg)
    phase = np.zeros(channels)
    sums = np.zeros(channels, complex)
    np.add.at(sums, channel, angle)
    phase[present] = np.mod(np.angle(sums[present]), 2 * np.pi) * step_deg / (2 * np.pi)
    global_bin = np.rint((unwrapped - phase[channel]) / step_deg).astype(np.int64)
    frame = np.floor_divide(global_bin, width)
    frame -= frame.min() if len(frame) else 0
    column = np.mod(global_bin, width)
    row = np.asarray(row_of_channel, np.int64)[channel]
    frames = int(frame.max()) + 1 if len(frame) else 0
    pixel = (frame * channels + row) * width + column
    unique_pixel, first = np.unique(pixel, return_index=True)  # np.unique keeps each pixel's first firing
    collided = len(pixel) - len(unique_pixel)
    pick = order[first]  # indices into the firings
    f, r, c = frame[first], row[first], column[first]
    shape = (frames, channels, width)
    fired = np.zeros(shape, bool)
    fired[f, r, c] = True
    range_mm = np.zeros(shape, np.uint32)
    range_mm[f, r, c] = np.rint(firings.range_m[pick] * 1000.0).astype(np.uint32)
    reflectivity = np.zeros(shape, np.uint16)
    reflectivity[f, r, c] = np.clip(np.rint(firings.reflectivity[pick]), 0, 65535).astype(np.uint16)
    images: dict[str, np.ndarray] = {"range_mm": range_mm, "reflectivity": reflectivity}
    if firings.range2_m is not None and firings.reflectivity2 is not None:
        range2_mm = np.zeros(shape, np.uint32)
        range2_mm[f, r, c] = np.rint(firings.range2_m[pick] * 1000.0).astype(np.uint32)
        reflectivity2 = np.zeros(shape, np.uint16)
        reflectivity2[f, r, c] = np.clip(np.rint(firings.reflectivity2[pick]), 0, 65535).astype(np.uint16)
        images |= {"range2_mm": range2_mm, "reflectivity2": reflectivity2}
    # each pixel's azimuth: the firing's own; elsewhere its bin's centre at the channel's phase
    row_phase = np.zeros(channels)
    row_phase[np.asarray(row_of_channel, np.int64)] = phase
    sweep_image = (np.arange(width)[None, None, :] * step_deg + row_phase[None, :, None]).repeat(frames, axis=0)
    sweep_image[f, r, c] = unwrapped[first] - 360.0 * (unwrapped[first] // 360.0)
    notes = []
    if not empty_firings_known:
        returned_rows = np.zeros(channels, bool)
        returned_rows[np.unique(r)] = True
        for k in range(frames):
            columns = np.flatnonzero(fired[k].any(axis=0))
            if len(columns):
                fired[k][np.ix_(returned_rows, np.arange(columns.min(), columns.max() + 1))] = True
        silent = np.flatnonzero(~returned_rows[np.asarray(row_of_channel, np.int64)])  # as channels
        if len(silent):
            notes.append(f"channel(s) {', '.join(map(str, silent))} (0-based) never returned in the recording: left "
                         "out (a laser that is off or blocked)")
    time_image = np.full(shape, np.iinfo(np.int64).max, np.int64)
    time_image[f, r, c] = firings.time_ns[pick]
    column_time = time_image.min(axis=1)
    sent = np.asarray(fired.any(axis=1))
    keep: np.ndarray = fired.reshape(frames, -1).mean(axis=1) >= MIN_FRAME_COVERAGE
    if collided:
        notes.append(f"{collided:,} of {len(pixel):,} firings fell into a bin already holding one of their channel "
                     f"(the head turning faster than {step_deg:g}° a firing): left out")
    dropped = int((~keep).sum())
    if dropped:
        notes.append(f"{dropped} partial turn(s) left out (under {MIN_FRAME_COVERAGE:.0%} of the pixels fired)")
    column_time = np.where(sent, column_time, 0)
    azimuth = -np.radians(sweep_image)
    return Recording(name, {key: image[keep] for key, image in images.items()}, sent[keep].astype(np.uint32),
                     column_time[keep].astype(np.uint64), np.flatnonzero(keep), profile, fired=fired[keep],
                     azimuth_rad=azimuth[keep], notes=tuple(notes))


#: largest KITTI pose file read (12 numbers a frame: room for 10⁴ frames and more)
MAX_POSES_BYTES = 2**22


def read_kitti_poses(path: str, frames: int) -> np.ndarray:
    """(frames, 4, 4) world_from_sensor poses from a KITTI pose file: one row-major 3×4 matrix (12 numbers) per
    line, one line per frame of the recording."""
    text = read_text(path, "poses", RecordingError, limit=MAX_POSES_BYTES)
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if len(lines) != frames:
        raise RecordingError(f"poses {path}: {len(lines)} poses for a recording of {frames} frame(s)")
    try:
        values = np.array([[float(v) for v in line] for line in lines])
    except ValueError:
        values = np.empty((0, 0))
    if values.shape != (frames, 12) or not np.all(np.isfinite(values)):
        raise RecordingError(f"poses {path}: each line must hold 12 finite numbers (a 3×4 matrix, KITTI layout)")
    poses = np.tile(np.eye(4), (frames, 1, 1))
    poses[:, :3, :] = values.reshape(frames, 3, 4)
    return poses

"""Scanned patterns as data: lines swept by a mirror (MEMS, galvanometer, polygon) and fired by several channels.

A spec's ``raster`` mapping (:data:`RASTER_KEYS`) describes a unit whose beams are steered by mirrors rather than
by turning the head: :func:`parse_raster` checks it into a :class:`Raster` (:class:`RasterSpecError` naming the
key otherwise), :func:`line_elevations_deg` spreads the lines by their density, and :func:`raster_pattern` fires
the shots line by line, in order, each ray with its own time; rays are shot-major (rows are the channels, columns
the shots). The keys, their defaults, the timing and an example: docs/sensors.md#scanned-patterns-raster.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..documents import refuse_unknown_keys, shown
from ..errors import LidarFmuError
from ..geometry.pattern import MAX_RAYS_PER_FRAME, RayPattern, spherical_directions

#: the keys a ``raster`` mapping may have
RASTER_KEYS = ("channels", "channel_delays_s", "horizontal_fov_deg", "columns", "lines", "vertical_fov_deg",
               "line_density", "facet_tilts_deg", "line_order", "line_duty", "frame_duty")
#: most channels a shot fires (the densest units fire 128–256 at once); a bound against typos, not a datasheet figure
MAX_CHANNELS = 4096


class RasterSpecError(LidarFmuError, ValueError):
    """A ``raster`` mapping that does not describe a pattern: one line naming the key."""


@dataclass(frozen=True)
class Raster:
    """A raster pattern, checked (angles in rad, times as shares of the frame)."""

    channel_offsets_rad: np.ndarray  # (C, 2) [azimuth, elevation] of each channel from the scan direction
    channel_delays_s: np.ndarray  # (C,) s after its shot
    start_rad: float  # scan azimuth of a line's start and end
    end_rad: float
    columns: int  # shots a line
    line_elevations_rad: np.ndarray  # (L,) elevation of each line's scan direction, facet tilts included
    alternate: bool  # odd lines sweep from end to start
    line_duty: float
    frame_duty: float

    @property
    def channels(self) -> int:
        return len(self.channel_offsets_rad)

    @property
    def lines(self) -> int:
        return len(self.line_elevations_rad)

    @property
    def rays(self) -> int:
        return self.channels * self.lines * self.columns

    def shot_interval_s(self, frame_period_s: float) -> float:
        return frame_period_s * self.frame_duty * self.line_duty / (self.lines * self.columns)

    def horizontal_extent_deg(self) -> float:
        """Degrees of azimuth the channels cover together (the sweep widened by the channels' spread)."""
        azimuths = self.channel_offsets_rad[:, 0]
        return float(np.degrees(abs(self.end_rad - self.start_rad) + np.ptp(azimuths)))

    def pattern(self, frame_period_s: float) -> RayPattern:
        """The rays of one frame of period ``frame_period_s``, shot-major (rows: channels; columns: shots)."""
        lines, columns, channels = self.lines, self.columns, self.channels
        line_period_s = frame_period_s * self.frame_duty / lines
        shot_s = self.shot_interval_s(frame_period_s)
        step = np.arange(columns, dtype=np.float64)
        share = np.empty((lines, columns))
        share[:] = (step + 0.5) / columns
        if self.alternate:
            share[1::2] = share[1::2, ::-1]  # odd lines sweep back
        scan_azimuth = (self.start_rad + (self.end_rad - self.start_rad) * share).ravel()
        scan_elevation = np.repeat(self.line_elevations_rad, columns)
        shot_time_s = (np.arange(lines)[:, None] * line_period_s + step[None, :] * shot_s).ravel()
        azimuth = scan_azimuth[:, None] + self.channel_offsets_rad[None, :, 0]
        elevation = scan_elevation[:, None] + self.channel_offsets_rad[None, :, 1]
        time_s = shot_time_s[:, None] + self.channel_delays_s[None, :]
        shots = lines * columns
        return RayPattern(spherical_directions(azimuth.ravel(), elevation.ravel()),
                          np.tile(np.arange(channels, dtype=np.uint32), shots),
                          np.repeat(np.arange(shots, dtype=np.uint32), channels),
                          time_s.ravel().astype(np.float32), channels, shots)


def line_elevations_deg(first_deg: float, last_deg: float, lines: int, density=()) -> np.ndarray:
    """(lines,) elevations from ``first_deg`` to ``last_deg``, spread by the piecewise-constant ``density``
    (``[(from_deg, to_deg, weight), …]``, 1 outside the bands, a later band winning where bands overlap): line
    ``i`` where the density's cumulative share reaches ``(i + ½) / lines`` (even spacing without bands)."""
    low, high = min(first_deg, last_deg), max(first_deg, last_deg)
    edges = {low, high}
    for start, end, _ in density:
        edges.update(float(np.clip(v, low, high)) for v in (start, end))
    edges_deg = np.array(sorted(edges))
    middle = 0.5 * (edges_deg[:-1] + edges_deg[1:])
    weight = np.ones(len(middle))
    for start, end, value in density:
        weight[(middle >= min(start, end)) & (middle <= max(start, end))] = value
    cumulative = np.concatenate([[0.0], np.cumsum(weight * np.diff(edges_deg))])
    if cumulative[-1] <= 0:  # a zero-width field: every line at it
        return np.full(lines, float(first_deg))
    targets = (np.arange(lines) + 0.5) / lines * cumulative[-1]
    from_low = np.interp(targets, cumulative, edges_deg)  # exact: the cumulative is linear within a band
    return from_low if first_deg <= last_deg else from_low[::-1]


def _number(raster: dict, key: str, default: float | None = None, *, low: float, high: float,
            low_open: bool = False) -> float:
    value = raster.get(key, default)
    number = float(value) if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, bool) else float("nan")
    if not (np.isfinite(number) and (low < number if low_open else low <= number) and number <= high):
        bound = f"{'(' if low_open else '['}{low:g}, {high:g}]"
        raise RasterSpecError(f"sensor spec key 'raster.{key}' must be a number in {bound}, got {shown(value)}")
    return number


def _integer(raster: dict, key: str, default: int | None, high: int) -> int:
    value = raster.get(key, default)
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not 1 <= value <= high:
        raise RasterSpecError(f"sensor spec key 'raster.{key}' must be an integer in 1 … {high:,}, "
                              f"got {shown(value)}")
    return int(value)


def _array(raster: dict, key: str, shape_text: str, width: int | None, limit_deg: float | None = None) -> np.ndarray:
    """A list (``width`` None) or list of ``width``-long rows of finite numbers, at most ``limit_deg`` in size."""
    value = raster[key]
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        array = np.empty((0, 0))
    good_shape = array.ndim == 1 if width is None else (array.ndim == 2 and array.shape[1] == width)
    if not good_shape or len(array) == 0 or not np.all(np.isfinite(array)):
        raise RasterSpecError(f"sensor spec key 'raster.{key}' must be {shape_text}, got {shown(value)}")
    if limit_deg is not None and np.any(np.abs(array) > limit_deg):
        raise RasterSpecError(f"sensor spec key 'raster.{key}' must hold angles within ±{limit_deg:g}°, "
                              f"got {shown(value)}")
    return array


def _pair(raster: dict, key: str, shape_text: str, limit_deg: float) -> tuple[float, float]:
    values = _array(raster, key, shape_text, None, limit_deg)
    if len(values) != 2:
        raise RasterSpecError(f"sensor spec key 'raster.{key}' must be {shape_text}, got {shown(raster[key])}")
    return float(values[0]), float(values[1])


def parse_raster(raster) -> Raster:
    """A checked :class:`Raster` from a spec's ``raster`` mapping (:data:`RASTER_KEYS`,
    docs/sensors.md#scanned-patterns-raster); one-line :class:`RasterSpecError` naming the key otherwise, before
    any ray is made."""
    if not isinstance(raster, dict):
        raise RasterSpecError(f"sensor spec key 'raster' must be a mapping of the keys {', '.join(RASTER_KEYS)}, "
                              f"got {shown(raster)}")
    refuse_unknown_keys(raster, RASTER_KEYS, "sensor spec key 'raster'", RasterSpecError)
    if "horizontal_fov_deg" not in raster or "columns" not in raster:
        raise RasterSpecError("sensor spec key 'raster' needs horizontal_fov_deg [start, end] and columns")
    channels = (_array(raster, "channels", "a list of [azimuth_deg, elevation_deg] pairs", 2, 180.0)
                if "channels" in raster else np.zeros((1, 2)))
    if len(channels) > MAX_CHANNELS:
        raise RasterSpecError(f"sensor spec key 'raster.channels' holds {len(channels):,} channels, more than "
                              f"{MAX_CHANNELS}")
    start, end = _pair(raster, "horizontal_fov_deg", "[start_deg, end_deg]", 180.0)
    columns = _integer(raster, "columns", None, MAX_RAYS_PER_FRAME)
    lines = _integer(raster, "lines", 1, MAX_RAYS_PER_FRAME)
    rays = len(channels) * lines * columns
    if rays > MAX_RAYS_PER_FRAME:
        raise RasterSpecError(f"sensor spec asks for {len(channels):,} channels × {lines:,} lines × {columns:,} "
                              f"columns = {rays:,} rays: more than the limit of {MAX_RAYS_PER_FRAME:,} rays per frame")
    if "vertical_fov_deg" in raster:
        first, last = _pair(raster, "vertical_fov_deg", "[first_line_deg, last_line_deg]", 90.0)
    elif lines > 1:
        raise RasterSpecError("sensor spec key 'raster': several lines need vertical_fov_deg "
                              "[first_line_deg, last_line_deg]")
    else:
        first = last = 0.0
    density: tuple[tuple[float, ...], ...] = ()
    if "line_density" in raster:
        bands = _array(raster, "line_density", "a list of [from_deg, to_deg, weight] bands", 3)
        if np.any(np.abs(bands[:, :2]) > 90) or np.any(bands[:, 2] <= 0):
            raise RasterSpecError("sensor spec key 'raster.line_density' needs bands within ±90° and weights > 0, "
                                  f"got {shown(raster['line_density'])}")
        density = tuple(map(tuple, bands))
    elevation_deg = line_elevations_deg(first, last, lines, density)
    if "facet_tilts_deg" in raster:
        tilts = _array(raster, "facet_tilts_deg", "a list of elevation offsets in degrees", None, 10.0)
        elevation_deg = elevation_deg + tilts[np.arange(lines) % len(tilts)]
    reach = np.abs(elevation_deg)[:, None] + np.abs(channels[None, :, 1])
    if np.any(reach > 90.0):
        raise RasterSpecError("sensor spec key 'raster': lines and channel elevations together must stay within "
                              f"±90°, got up to {reach.max():g}°")
    order = raster.get("line_order", "same")
    if order not in ("same", "alternate"):
        raise RasterSpecError(f"sensor spec key 'raster.line_order' must be 'same' or 'alternate', got {shown(order)}")
    line_duty = _number(raster, "line_duty", 1.0, low=0.0, high=1.0, low_open=True)
    frame_duty = _number(raster, "frame_duty", 1.0, low=0.0, high=1.0, low_open=True)
    delays = np.zeros(len(channels))
    if "channel_delays_s" in raster:
        delays = _array(raster, "channel_delays_s", "a list of one delay in s per channel", None)
        if len(delays) != len(channels) or np.any(delays < 0):
            raise RasterSpecError(f"sensor spec key 'raster.channel_delays_s' needs {len(channels)} delays ≥ 0 "
                                  f"(one per channel), got {shown(raster['channel_delays_s'])}")
    return Raster(np.radians(channels), delays, float(np.radians(start)), float(np.radians(end)), columns,
                  np.radians(elevation_deg), order == "alternate", line_duty, frame_duty)


def raster_pattern(raster: Raster, frame_period_s: float) -> RayPattern:
    """The frame's rays; a channel delay that reaches the next shot is refused (shots fire in order)."""
    shot_s = raster.shot_interval_s(frame_period_s)
    if len(raster.channel_delays_s) and raster.channel_delays_s.max() >= shot_s:
        raise RasterSpecError(f"sensor spec key 'raster.channel_delays_s': a delay of "
                              f"{raster.channel_delays_s.max():g} s reaches the next shot, {shot_s:g} s later")
    return raster.pattern(frame_period_s)

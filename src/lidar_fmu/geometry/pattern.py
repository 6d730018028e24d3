"""Ray patterns: where a sensor looks, as data.

Sensor frame: x forward, y left, z up. Azimuth is counter-clockwise from +x
(positive = left), elevation positive up, so a direction is
``(cos el · cos az, cos el · sin az, sin el)``.

Rays are stored column-major: ray ``i`` sits at ``row = i % rows`` and
``column = i // rows`` of an organized ``rows × columns`` grid, in firing order.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

#: The most rays one frame may cast: a pattern that asks for more is refused before anything is allocated
#: (50 M rays: the pattern holds 1.2 GB, about 4 GB while it is built, a frame's rays and hits more).
MAX_RAYS_PER_FRAME = 50_000_000


def check_ray_count(rows: int, columns: int) -> int:
    """``rows · columns`` (exact integers); ``ValueError`` above :data:`MAX_RAYS_PER_FRAME`."""
    count = int(rows) * int(columns)
    if count > MAX_RAYS_PER_FRAME:
        raise ValueError(f"{int(rows):,} × {int(columns):,} = {count:,} rays per frame is over the limit of "
                         f"{MAX_RAYS_PER_FRAME:,}")
    return count


@dataclass(frozen=True, eq=False)
class RayPattern:
    """Unit directions in the sensor frame with their beam, column and firing time."""

    directions: np.ndarray  # (N, 3) float32, unit, sensor frame
    beam_id: np.ndarray  # (N,) uint32 emitter index (laser id)
    column: np.ndarray  # (N,) uint32 firing column (azimuth step)
    time_offset_s: np.ndarray  # (N,) float32 firing time after frame start
    rows: int
    columns: int
    #: (N, 3) float32 m, sensor frame: where each ray leaves (a unit's beam origins); None: the sensor origin
    origins: np.ndarray | None = None
    #: m the unit adds to the distance along the beam (from its origin) to report a return's ``range``: its own
    #: convention (an Ouster measures from its lidar axis, :func:`lidar_fmu.sensors.ouster.range_offset_m`);
    #: 0: from where the ray leaves. Only the reported range: x, y, z stay on the ray
    range_offset_m: float = 0.0

    def __post_init__(self):
        n = len(self.directions)
        if n == 0:
            raise ValueError("a ray pattern needs at least one ray")
        if self.rows * self.columns != n:
            raise ValueError(f"rows × columns = {self.rows}×{self.columns} does not match {n} rays")
        for name in ("beam_id", "column", "time_offset_s") + (("origins",) if self.origins is not None else ()):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries for {n} rays")

    def __len__(self) -> int:
        return len(self.directions)

    @property
    def azimuth_rad(self) -> np.ndarray:
        return np.arctan2(self.directions[:, 1], self.directions[:, 0])

    @property
    def elevation_rad(self) -> np.ndarray:
        return np.arcsin(np.clip(self.directions[:, 2], -1.0, 1.0))

    def select_grid(self, rows, columns) -> RayPattern:
        """The rays at grid rows ``rows`` and columns ``columns`` (indices into ``0 … rows-1`` and
        ``0 … columns-1``, in the order given): an organized ``len(rows) × len(columns)`` grid whose rays keep their
        beam, column and firing time."""
        rows = np.asarray(rows, np.int64)
        columns = np.asarray(columns, np.int64)
        rays = (columns[:, None] * self.rows + rows[None, :]).ravel()
        origins = None if self.origins is None else np.ascontiguousarray(self.origins[rays])
        return RayPattern(np.ascontiguousarray(self.directions[rays]), self.beam_id[rays], self.column[rays],
                          self.time_offset_s[rays], len(rows), len(columns), origins=origins,
                          range_offset_m=self.range_offset_m)

    def select_columns(self, columns, time_shift_s=0.0) -> RayPattern:
        """The rays of grid columns ``columns`` (indices into ``0 … columns-1``, in the order given), their firing
        times moved by ``time_shift_s`` (s, one value or one per column): one partial sweep, still an organized
        ``rows × len(columns)`` grid."""
        columns = np.asarray(columns, np.int64)
        part = self.select_grid(np.arange(self.rows), columns)
        shift = np.repeat(np.broadcast_to(np.asarray(time_shift_s, np.float64), columns.shape), self.rows)
        return replace(part, time_offset_s=(part.time_offset_s.astype(np.float64) + shift).astype(np.float32))


@dataclass(frozen=True, eq=False)
class ContinuousScan:
    """A pattern that does not repeat every frame (a rosette, a Livox prism scan): rays as a function of time.

    The unit fires shot ``k`` at ``k / shots_per_second`` seconds of sensor
    time (0 = its first shot); each shot fires ``channels`` beams at once.
    ``rays_of_shots(k) → (directions (S·channels, 3) float32 unit, sensor
    frame, shot-major; beam_id (S·channels,) uint32)`` for an int64 array of
    shot indices ``k``. Shots are counted in integers, so a pattern cast step
    after step goes on exactly where the previous step stopped.
    """

    shots_per_second: float
    channels: int
    rays_of_shots: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

    def shots_between(self, start_s: float, end_s: float) -> np.ndarray:
        """int64 indices of the shots fired in ``[start_s, end_s)`` of sensor time."""
        first = int(np.ceil(start_s * self.shots_per_second - 1e-9))
        last = int(np.ceil(end_s * self.shots_per_second - 1e-9))  # exclusive
        check_ray_count(self.channels, max(last - first, 0))
        return np.arange(first, last, dtype=np.int64)

    def rays_between(self, start_s: float, end_s: float) -> RayPattern | None:
        """The rays fired in ``[start_s, end_s)`` as a ``channels × shots`` grid, times after ``start_s``.

        An empty window (shorter than one shot) gives ``None``.
        """
        shots = self.shots_between(start_s, end_s)
        if len(shots) == 0:
            return None
        directions, beam_id = self.rays_of_shots(shots)
        time_s = np.repeat(shots / self.shots_per_second - start_s, self.channels)
        return RayPattern(np.ascontiguousarray(directions, np.float32), np.asarray(beam_id, np.uint32),
                          np.repeat((shots - shots[0]).astype(np.uint32), self.channels), time_s.astype(np.float32),
                          self.channels, len(shots))


def spherical_directions(azimuth_rad, elevation_rad, dtype=np.float32) -> np.ndarray:
    """(..., 3) unit vectors from azimuth/elevation arrays (rad), computed in float64 and given as ``dtype``
    (float32: rays; float64: a recording's pixels)."""
    az = np.asarray(azimuth_rad, dtype=np.float64)
    el = np.asarray(elevation_rad, dtype=np.float64)
    ce = np.cos(el)
    return np.stack([ce * np.cos(az), ce * np.sin(az), np.sin(el)], axis=-1).astype(dtype)


def scan_grid(
    elevation_rad,
    column_azimuth_rad,
    *,
    frame_period_s: float,
    azimuth_offset_rad=None,
    firing_interval_s: float = 0.0,
) -> RayPattern:
    """A rotating/sweeping scan: every beam fires once per column.

    ``elevation_rad[b]`` is beam ``b``'s elevation, ``column_azimuth_rad[c]``
    column ``c``'s azimuth in firing order, ``azimuth_offset_rad[b]`` a
    per-beam horizontal offset (Velodyne ``rot_correction``). Columns are spread
    evenly over the frame period; within a column beam ``b`` fires
    ``b · firing_interval_s`` after the column starts.
    """
    elevation = np.asarray(elevation_rad, dtype=np.float64).ravel()
    azimuth = np.asarray(column_azimuth_rad, dtype=np.float64).ravel()
    rows, columns = len(elevation), len(azimuth)
    check_ray_count(rows, columns)
    offset = np.zeros(rows) if azimuth_offset_rad is None else np.asarray(azimuth_offset_rad, np.float64)
    az = azimuth[:, None] + offset[None, :]
    el = np.broadcast_to(elevation[None, :], az.shape)
    beam = np.broadcast_to(np.arange(rows, dtype=np.uint32)[None, :], az.shape)
    column = np.broadcast_to(np.arange(columns, dtype=np.uint32)[:, None], az.shape)
    time_s = column * (frame_period_s / columns) + beam * firing_interval_s
    return RayPattern(
        spherical_directions(az.ravel(), el.ravel()),
        beam.ravel().copy(),
        column.ravel().copy(),
        time_s.ravel().astype(np.float32),
        rows,
        columns,
    )


def angle_list(azimuth_rad, elevation_rad, *, frame_period_s: float) -> RayPattern:
    """Arbitrary directions, fired one after another by a single beam over the frame."""
    az = np.asarray(azimuth_rad, dtype=np.float64).ravel()
    n = len(az)
    check_ray_count(1, n)
    return RayPattern(
        spherical_directions(az, elevation_rad),
        np.zeros(n, np.uint32),
        np.arange(n, dtype=np.uint32),
        (np.arange(n) * (frame_period_s / max(n, 1))).astype(np.float32),
        1,
        n,
    )


def pinhole(width_px: int, height_px: int, horizontal_fov_deg: float) -> RayPattern:
    """A depth camera: one ray through each pixel centre, all fired at once.

    Row 0 is the top image row, column 0 the left image column; ``beam_id`` is
    the row.
    """
    if width_px < 1 or height_px < 1 or not 0 < horizontal_fov_deg < 180:
        raise ValueError("pinhole needs width_px, height_px ≥ 1 and 0 < horizontal_fov_deg < 180")
    check_ray_count(height_px, width_px)
    focal_px = 0.5 * width_px / np.tan(np.radians(horizontal_fov_deg) / 2)
    u = np.arange(width_px) + 0.5 - width_px / 2  # right-positive
    v = np.arange(height_px) + 0.5 - height_px / 2  # down-positive
    uu, vv = np.meshgrid(u, v, indexing="xy")  # (H, W)
    # column-major: transpose so that ray i = column * rows + row
    d = np.stack([np.full(uu.shape, focal_px), -uu, -vv], axis=-1).transpose(1, 0, 2).reshape(-1, 3)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    rows, columns = height_px, width_px
    return RayPattern(
        d.astype(np.float32),
        np.tile(np.arange(rows, dtype=np.uint32), columns),
        np.repeat(np.arange(columns, dtype=np.uint32), rows),
        np.zeros(rows * columns, np.float32),
        rows,
        columns,
    )

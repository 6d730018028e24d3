"""Preview images of a scan: a bird's-eye view and the range image.

:func:`bev_image` renders the bird's-eye view straight into an RGB array with
numpy (no matplotlib), so it can make animation frames cheaply;
:func:`write_preview` composes a labelled PNG with matplotlib's Agg backend.

Bird's-eye orientation: sensor x (forward) points up the image, y (left) to the
left, one pixel = ``resolution_m`` on both axes.
"""
from __future__ import annotations

import math

import numpy as np

from .ptx import cloud_pattern, grid_index, row_elevation_rad

# Range colour map, near → far: indigo, blue, cyan, green, yellow, orange, red.
# Kept as data so numpy renderers and matplotlib colour bars agree.
_ANCHORS = np.array([
    (0.00, 62, 38, 168),
    (0.12, 67, 110, 238),
    (0.28, 36, 190, 232),
    (0.44, 52, 236, 150),
    (0.58, 160, 250, 70),
    (0.70, 240, 215, 55),
    (0.84, 250, 135, 35),
    (1.00, 200, 40, 20),
])
#: (256, 3) uint8 lookup table of the range colour map
RANGE_LUT = np.stack(
    [np.interp(np.linspace(0, 1, 256), _ANCHORS[:, 0], _ANCHORS[:, c]) for c in (1, 2, 3)], axis=1
).round().astype(np.uint8)


def colorize(values, vmin: float, vmax: float, lut: np.ndarray = RANGE_LUT) -> np.ndarray:
    """(…, 3) uint8 colours of ``values`` on ``lut``, clipped to [vmin, vmax]."""
    t = (np.asarray(values, np.float64) - vmin) / max(vmax - vmin, 1e-12)
    return lut[np.clip(np.nan_to_num(t * (len(lut) - 1)), 0, len(lut) - 1).astype(np.intp)]


def _fields(points):
    """x, y, z, range (float64 arrays) from a PointCloud, structured array or (N, ≥2) array."""
    points = getattr(points, "points", points)
    points = np.asarray(points)
    if points.dtype.names is not None:
        x, y = points["x"].astype(np.float64), points["y"].astype(np.float64)
        z = points["z"].astype(np.float64) if "z" in points.dtype.names else np.zeros_like(x)
        rng = points["range"].astype(np.float64) if "range" in points.dtype.names else None
    else:
        if points.ndim != 2 or points.shape[1] < 2:
            raise ValueError(f"expected a structured point array or (N, ≥2) coordinates, got shape {points.shape}")
        x, y = points[:, 0].astype(np.float64), points[:, 1].astype(np.float64)
        z = points[:, 2].astype(np.float64) if points.shape[1] > 2 else np.zeros_like(x)
        rng = None
    if rng is None:
        rng = np.sqrt(x * x + y * y + z * z)
    return x, y, z, rng


def _bounds(extent_m) -> tuple[float, float, float, float]:
    if np.ndim(extent_m) == 0:
        e = float(extent_m)
        return -e, e, -e, e
    x_min, x_max, y_min, y_max = (float(v) for v in extent_m)
    return x_min, x_max, y_min, y_max


def bev_image(
    points,
    extent_m,
    resolution_m: float,
    *,
    max_range_m: float | None = None,
    point_size_px: int = 1,
    rings_m: float | None = None,
    background=(0, 0, 0),
) -> np.ndarray:
    """Bird's-eye view of ``points`` as an (H, W, 3) uint8 image, coloured by range.

    ``points``: PointCloud, structured array with x/y[/z/range] fields, or
    (N, ≥2) coordinates (m, sensor frame). ``extent_m``: half-width of a square
    around the sensor, or ``(x_min, x_max, y_min, y_max)``. Row 0 is
    ``x_max`` (forward at the top), column 0 ``y_max`` (left on the left).
    Where several points share a pixel the highest one shows, as seen from
    above. Colour runs 0 → ``max_range_m`` on :data:`RANGE_LUT` (default: the
    largest distance of an extent edge from the sensor, the same every frame). ``point_size_px`` > 1 grows each point into empty
    neighbouring pixels; ``rings_m`` draws faint range rings at that spacing.
    """
    if resolution_m <= 0:
        raise ValueError(f"resolution_m must be positive, got {resolution_m}")
    x_min, x_max, y_min, y_max = _bounds(extent_m)
    if not (x_max > x_min and y_max > y_min):
        raise ValueError(f"empty extent {extent_m}")
    height = max(1, int(math.ceil((x_max - x_min) / resolution_m - 1e-9)))
    width = max(1, int(math.ceil((y_max - y_min) / resolution_m - 1e-9)))
    image = np.empty((height, width, 3), np.uint8)
    image[:] = np.asarray(background, np.uint8)

    if rings_m:
        # pixel-centre distance from the sensor, rings one pixel wide
        cx = x_max - (np.arange(height) + 0.5) * resolution_m
        cy = y_max - (np.arange(width) + 0.5) * resolution_m
        d = np.hypot(cx[:, None], cy[None, :])
        ring = (np.abs(d - np.round(d / rings_m) * rings_m) < 0.5 * resolution_m) & (d > 0.5 * rings_m)
        image[ring] = (np.asarray(background, np.float64) * 0.5 + 45).astype(np.uint8)

    x, y, z, rng = _fields(points)
    row = np.floor((x_max - x) / resolution_m).astype(np.int64)
    col = np.floor((y_max - y) / resolution_m).astype(np.int64)
    inside = (row >= 0) & (row < height) & (col >= 0) & (col < width)
    if not inside.any():
        return image
    pixel = row[inside] * width + col[inside]
    z, rng = z[inside], rng[inside]
    # sort by pixel, then height: the last entry of each pixel run is its highest point
    order = np.lexsort((z, pixel))
    pixel = pixel[order]
    last = np.ones(len(pixel), bool)
    last[:-1] = pixel[1:] != pixel[:-1]
    top_pixel, top_range = pixel[last], rng[order][last]
    # a fixed scale (not the farthest point) keeps colours steady across animation frames
    vmax = float(max_range_m) if max_range_m else max(abs(x_min), abs(x_max), abs(y_min), abs(y_max))
    flat = image.reshape(-1, 3)
    flat[top_pixel] = colorize(top_range, 0.0, vmax)

    if point_size_px > 1:
        has_point: np.ndarray = np.zeros(height * width, bool)
        has_point[top_pixel] = True
        has_point = has_point.reshape(height, width)
        filled = has_point.copy()
        source = image.copy()
        lo = -((point_size_px - 1) // 2)
        for dr in range(lo, lo + point_size_px):  # loops over kernel offsets, not points
            for dc in range(lo, lo + point_size_px):
                if dr == 0 and dc == 0:
                    continue
                dst = (slice(max(dr, 0), height + min(dr, 0)), slice(max(dc, 0), width + min(dc, 0)))
                src = (slice(max(-dr, 0), height + min(-dr, 0)), slice(max(-dc, 0), width + min(-dc, 0)))
                # grow from real points only, never from pixels grown in an earlier pass
                grow = has_point[src] & ~filled[dst]
                image[dst][grow] = source[src][grow]
                filled[dst] |= grow
    return image


#: margins (px) of a framed bird's-eye view: left (x labels), top (title), right, bottom (y labels)
FRAME_MARGINS_PX = (44, 22, 12, 34)


def _nice_step_m(extent_m: float) -> float:
    """A tick spacing (m) giving about 3–6 ticks on each side of the sensor."""
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 500):
        if extent_m / step <= 6:
            return float(step)
    return 10.0 ** math.ceil(math.log10(extent_m / 5))


def framed_bev(image: np.ndarray, extent_m: float, title: str):
    """A :func:`bev_image` of a square ``extent_m`` around the sensor (its default orientation) as a PIL image with
    its axes — ticks in metres, x (forward) up and y (left) across — and ``title`` (the frame's time) above: a
    frame of an animation that says where and when it is."""
    from PIL import Image, ImageDraw

    height, width = image.shape[:2]
    left, top, right, bottom = FRAME_MARGINS_PX
    framed = Image.new("RGB", (left + width + right, top + height + bottom), (24, 24, 28))
    framed.paste(Image.fromarray(np.ascontiguousarray(image)), (left, top))
    draw = ImageDraw.Draw(framed)
    ink, faint = (220, 220, 220), (80, 80, 88)
    draw.rectangle((left - 1, top - 1, left + width, top + height), outline=faint)
    step = _nice_step_m(extent_m)
    for k in range(-int(extent_m // step), int(extent_m // step) + 1):
        value = k * step
        row = top + (extent_m - value) / (2 * extent_m) * height  # x: forward up
        col = left + (extent_m - value) / (2 * extent_m) * width  # y: left to the left
        draw.line((left - 5, row, left - 1, row), fill=ink)
        draw.text((left - 7, row), f"{value:g}", fill=ink, anchor="rm")
        draw.line((col, top + height, col, top + height + 4), fill=ink)
        draw.text((col, top + height + 6), f"{value:g}", fill=ink, anchor="mt")
    draw.text((left, top + height + 20), "y (m), left positive", fill=ink, anchor="lt")
    draw.text((4, top - 4), "x (m), forward", fill=ink, anchor="ls")
    draw.text((left + width, top - 4), title, fill=ink, anchor="rs")
    return framed


def range_grid(cloud, pattern=None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) range (m, NaN for misses) with rows sorted top = highest elevation, and their elevations (rad).

    The grid is ``pattern``'s, by default the one the cloud carries.
    """
    elevation = row_elevation_rad(cloud, pattern)
    order = np.argsort(-elevation, kind="stable")
    index = grid_index(cloud)[order]
    grid = np.full(index.shape, np.nan, np.float32)
    hit = index >= 0
    grid[hit] = cloud.points["range"][index[hit]]
    return grid, elevation[order]


def column_azimuth_rad(cloud, pattern=None) -> np.ndarray:
    """(columns,) azimuth of each grid column (rad), circular mean over its rays.

    From ``pattern``, by default the one the cloud carries.
    """
    pattern = cloud_pattern(cloud, pattern, "the column azimuths")
    az = pattern.azimuth_rad.reshape(pattern.columns, pattern.rows)
    return np.arctan2(np.sin(az).mean(axis=1), np.cos(az).mean(axis=1))


def _nice_extent_m(rng: np.ndarray) -> float:
    """A round BEV half-width that holds nearly all returns (the farthest few may be stray)."""
    if len(rng) == 0:
        return 10.0
    far = float(np.percentile(rng, 99.5))
    step = 5.0 if far <= 50 else 10.0 if far <= 150 else 50.0
    return max(step, math.ceil(far / step) * step)


def write_preview(path, cloud, max_range_m: float | None = None, pattern=None, dpi: int = 110) -> None:
    """Write a PNG with the bird's-eye view (top) and the range image (bottom) of ``cloud``.

    ``max_range_m`` sets the BEV half-width and the top of the range colour
    scale (default: a round number just above the 99.5th percentile of the
    ranges). The range image is the grid of ``pattern``, by default the ray
    pattern the cloud carries; a cloud without one (points read from a file
    or decoded from OSI) gets the bird's-eye view alone.
    """
    # a bare Figure renders with Agg and never touches pyplot or the user's backend
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Colormap, ListedColormap, Normalize
    from matplotlib.figure import Figure

    if pattern is not None or cloud.pattern is not None:
        pattern = cloud_pattern(cloud, pattern)
    points = cloud.points
    rng = points["range"].astype(np.float64)
    extent = float(max_range_m) if max_range_m else _nice_extent_m(rng)
    cmap: Colormap = ListedColormap(RANGE_LUT / 255.0, name="lidar_range")
    cmap = cmap.with_extremes(bad="black") if hasattr(cmap, "with_extremes") else cmap
    norm = Normalize(0.0, extent)

    # figure size in inches at ``dpi``: the BEV axes come out ~780 px square
    if pattern is None:
        fig = Figure(figsize=(9.0, 9.2), dpi=dpi)
        grid = fig.add_gridspec(1, 2, width_ratios=[30, 1], left=0.09, right=0.9, top=0.94, bottom=0.07, wspace=0.04)
    else:
        fig = Figure(figsize=(9.0, 11.6), dpi=dpi)
        grid = fig.add_gridspec(2, 2, height_ratios=[4.0, 1.05], width_ratios=[30, 1],
                                left=0.09, right=0.9, top=0.955, bottom=0.055, hspace=0.36, wspace=0.04)
    ax_bev = fig.add_subplot(grid[0, 0])
    ax_bar = fig.add_subplot(grid[0, 1])

    bev_px = 800
    resolution = 2 * extent / bev_px
    image = bev_image(points, extent, resolution, max_range_m=extent,
                      point_size_px=2 if len(points) < 60_000 else 1, rings_m=None, background=(12, 12, 16))
    # imshow extent (left, right, bottom, top): +y on the left, +x up
    ax_bev.imshow(image, extent=(extent, -extent, -extent, extent), interpolation="nearest")
    ax_bev.plot([0], [0], marker="^", color="white", markersize=7, markeredgecolor="black")
    ax_bev.set_xlabel("y (m), left positive")
    ax_bev.set_ylabel("x (m), forward")
    ax_bev.set_aspect("equal")
    name = cloud.sensor_name or "lidar"
    of_rays = f" of {len(pattern):,} rays" if pattern is not None else " (no ray pattern: no range image)"
    ax_bev.set_title(f"{name} — bird's-eye view, {len(points):,} returns{of_rays}"
                     f" (t = {cloud.timestamp_s:.3f} s)", fontsize=11)
    ax_bev.grid(color="white", alpha=0.12, linewidth=0.6)
    colorbar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), cax=ax_bar)
    colorbar.set_label("range (m)")
    if pattern is None:
        fig.savefig(path, dpi=dpi)
        return

    ax_rng = fig.add_subplot(grid[1, :])
    ranges, elevation = range_grid(cloud, pattern)
    elevation_deg = np.degrees(elevation)
    ax_rng.imshow(np.ma.masked_invalid(ranges), cmap=cmap, norm=norm, aspect="auto",
                  interpolation="nearest", extent=(0, pattern.columns, pattern.rows, 0))
    ax_rng.set_title(f"range image: {pattern.rows} rows (by elevation) × {pattern.columns} columns,"
                     f" misses black", fontsize=10, pad=26)
    ax_rng.set_xlabel("column (firing order)")
    ticks = np.unique(np.linspace(0, pattern.rows - 1, min(pattern.rows, 5)).round().astype(int))
    ax_rng.set_yticks(ticks + 0.5)
    ax_rng.set_yticklabels([f"{elevation_deg[t]:+.1f}°" for t in ticks])
    ax_rng.set_ylabel("elevation")
    azimuth_deg = np.degrees(column_azimuth_rad(cloud, pattern))
    top = ax_rng.secondary_xaxis("top")
    col_ticks = np.unique(np.linspace(0, pattern.columns - 1, min(pattern.columns, 9)).round().astype(int))
    top.set_xticks(col_ticks + 0.5)
    top.set_xticklabels([f"{round(float(azimuth_deg[c])):+d}°" for c in col_ticks], fontsize=8)
    top.set_xlabel("azimuth (counter-clockwise from forward)", fontsize=8)
    fig.savefig(path, dpi=dpi)

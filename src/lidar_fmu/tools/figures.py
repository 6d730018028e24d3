"""Figures in the manner of LiMOX (Rott et al.), written straight to PNG.

* :func:`plot_range_limits` — Fig. 7: the range–reflectivity limit r_L(R) of
  every fit through the datasheet pairs.
* :func:`plot_reflectivity_bev` — Fig. 8/9: bird's-eye views of point clouds
  side by side, coloured by reflectivity.
* :func:`plot_livox_coverage` — how a non-repetitive (Livox) pattern fills
  its field of view as the integration time grows.

Figures are built on :class:`matplotlib.figure.Figure` and saved with the Agg
canvas, never through ``pyplot``: no global figure state leaks into callers
(an FMU, a test run) and no display is needed.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from ..physics.range_limit import FITS, RangeReflectivityLimit, fit_range_limit

if TYPE_CHECKING:
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    from ..geometry.pattern import RayPattern
    from ..pointcloud import PointCloud

# The stages a command needs are imported inside the functions that run it: `lidar-fmu` starts, and each
# command runs, without loading what it does not use (numba kernels, osi3, the FMU).

#: Datasheet pairs LiMOX uses in Fig. 7–9: [10 %, 60 m] and [80 %, 120 m].
LIMOX_PAIRS = ((0.10, 60.0), (0.80, 120.0))
#: Fields a point array needs for a bird's-eye view (see pointcloud.POINT_DTYPE).
BEV_FIELDS = ("x", "y", "z", "reflectivity")
REFLECTIVITY_CMAP = "viridis"  # perceptually uniform, readable in grey and by colour-blind readers
DPI = 150

# One fixed colour per fit, so a fit keeps its colour whichever subset is drawn.
_FIT_COLORS = {
    "linear": "#1f77b4", "root2": "#2ca02c", "root3": "#17becf", "root4": "#9467bd",
    "log": "#d62728", "blensor": "#ff7f0e", "constant": "#7f7f7f",
}
# BlenSor equals the linear fit above the first pair: dashes keep both visible.
_LINE_STYLES: dict[str, dict[str, Any]] = {
    "blensor": {"linewidth": 2.0, "linestyle": (0, (5, 3)), "zorder": 3},
    "constant": {"linewidth": 1.6, "linestyle": "--"},
}
_ROOT_TARGET = {"root2": "extended target", "root3": "line target", "root4": "point target"}


# ----------------------------------------------------------- helpers


def _new_figure(width_in: float, height_in: float) -> Figure:
    figure = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)  # attach Agg explicitly: savefig then never consults pyplot's backend
    return figure


def _save(figure: Figure, path) -> None:
    figure.savefig(path, dpi=DPI, facecolor="white")


# ------------------------------------------------ Fig. 7: r_L(R) curves


def _fit_label(limit: RangeReflectivityLimit) -> str:
    """Legend text: the fit's name and its fitted closed form (r_L in m, R in 0–1)."""
    a, b, c = limit.coefficients
    fit = limit.fit
    if fit == "linear":
        return rf"linear: ${a:.1f} + {b:.1f}\,R$"
    if fit in _ROOT_TARGET:
        n = fit[-1]
        return rf"root {n} ({_ROOT_TARGET[fit]}): ${a:.1f}\,R^{{1/{n}}}$"
    if fit == "log":
        return rf"log: ${a:.1f} + {b:.1f}\,\ln R$"
    if fit == "blensor":
        return rf"BlenSor: $\max({c:.0f},\ {a:.1f} + {b:.1f}\,R)$"
    return "constant: sensor max range"


def _draw_pairs(ax, pairs) -> None:
    refl_pct = [100.0 * r for r, _ in pairs]
    ranges = [d for _, d in pairs]
    ax.plot(refl_pct, ranges, linestyle="none", marker="o", markersize=8, markerfacecolor="white",
            markeredgecolor="black", markeredgewidth=1.8, zorder=5, label="datasheet pairs")
    for r, d in zip(refl_pct, ranges):
        ax.annotate(f"{r:.0f} %, {d:.0f} m", (r, d), xytext=(8, -14), textcoords="offset points",
                    fontsize=8.5, zorder=6)


def plot_range_limits(path, pairs=LIMOX_PAIRS, max_range_m: float = 150.0, fits: Sequence[str] = FITS) -> None:
    """LiMOX Fig. 7: r_L (m) against reflectivity (0–100 %) for each fit, pairs marked, to a PNG at ``path``."""
    limits = [fit_range_limit(pairs, fit, max_range_m) for fit in fits]
    # Start just above 0: r_L(0) = 0 by definition, which would draw a vertical
    # drop at the axis for the fits with a floor (BlenSor, constant).
    reflectivity = np.linspace(1e-3, 1.0, 1000)

    figure = _new_figure(7.5, 5.0)
    ax = figure.add_subplot()
    tails = [limit.tail[0] for limit in limits if limit.tail[0] > 0.0]
    if tails:  # below the lowest pair every fitted law gives way to root 2 (range_limit module doc)
        refl_lo = 100.0 * min(tails)
        ax.axvspan(0.0, refl_lo, color="0.93", zorder=0)
        own = [limit.fit for limit in limits if limit.tail[0] == 0.0]
        note = "below the lowest pair (shaded):\n" + r"root 2, $r_L = r_{lo}\sqrt{R/R_{lo}}$"
        note += f"\n({', '.join(own)}: own law)" if own else ""
        ax.annotate(note, (refl_lo + 1.0, 0.03), xycoords=("data", "axes fraction"), ha="left", va="bottom",
                    fontsize=8)
    for limit in limits:
        ax.plot(100.0 * reflectivity, limit.max_range_m_for(reflectivity), color=_FIT_COLORS[limit.fit],
                label=_fit_label(limit), **_LINE_STYLES.get(limit.fit, {"linewidth": 2.0}))
    _draw_pairs(ax, limits[0].pairs if limits else pairs)

    if np.isfinite(max_range_m):
        ax.set_ylim(0.0, 1.1 * max_range_m)
    ax.set_xlim(0.0, 100.0)
    ax.set_xlabel("target reflectivity R (%)")
    ax.set_ylabel(r"range limit $r_L(R)$ (m)")
    ax.set_title(rf"Range–reflectivity limit $r_L(R)$, sensor max range {max_range_m:g} m")
    ax.grid(True, color="0.88", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.legend(loc="lower right", fontsize=8.5, framealpha=0.95)
    _save(figure, path)


# ------------------------------------------- Fig. 8/9: bird's-eye views


def _points_of(cloud) -> np.ndarray:
    """The structured point array of a cloud (an array or anything with ``.points``)."""
    points = getattr(cloud, "points", cloud)
    names = getattr(getattr(points, "dtype", None), "names", None) or ()
    missing = [name for name in BEV_FIELDS if name not in names]
    if missing:
        raise ValueError(f"point cloud lacks field(s) {', '.join(missing)}; need {', '.join(BEV_FIELDS)}")
    return points


def _auto_point_size(count: int) -> float:
    """Marker area (pt²): dense clouds need fine dots, sparse ones visible ones."""
    return float(np.clip(3.0e4 / max(count, 1), 0.25, 6.0))


def _bev_axes(ax, extent_m: float) -> None:
    """A bird's-eye panel's frame: the sensor, ±``extent_m`` with +x up and +y (left) to the left, a light grid."""
    # The sensor: a triangle pointing forward (+x, up in the panel).
    ax.plot([0.0], [0.0], marker="^", markersize=8, color="#e8402a", markeredgecolor="black", zorder=4)
    ax.set_xlim(extent_m, -extent_m)  # +y (left) to the left: x-axis runs from +extent to −extent
    ax.set_ylim(-extent_m, extent_m)
    ax.set_aspect("equal")
    ax.set_xlabel("y (m), left ←")
    ax.grid(True, color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)


def _draw_bev(ax, title: str, points: np.ndarray, extent_m: float, norm, cmap, point_size) -> None:
    x = np.asarray(points["x"], dtype=np.float64)
    y = np.asarray(points["y"], dtype=np.float64)
    z = np.asarray(points["z"], dtype=np.float64)
    refl = np.asarray(points["reflectivity"], dtype=np.float64)
    shown = np.isfinite(x) & np.isfinite(y) & (np.abs(x) <= extent_m) & (np.abs(y) <= extent_m)
    # Draw low points first: seen from above, roofs and walls cover the ground.
    visible = np.flatnonzero(shown)
    order = visible[np.argsort(z[visible], kind="stable")]
    size = _auto_point_size(len(order)) if point_size is None else point_size
    ax.scatter(y[order], x[order], c=refl[order], cmap=cmap, norm=norm, s=size, linewidths=0, rasterized=True)
    ax.set_title(f"{title}\n{len(points):,} points", fontsize=10)
    _bev_axes(ax, extent_m)
    if not len(points):
        ax.text(0.5, 0.5, "no points", transform=ax.transAxes, ha="center", va="center", color="0.5")


def plot_reflectivity_bev(path, clouds: Sequence[tuple[str, np.ndarray]], extent_m: float = 60.0,
                          point_size: float | None = None) -> None:
    """LiMOX Fig. 8/9: one bird's-eye panel per ``(title, points)``, coloured by reflectivity.

    ``points`` is a structured array with at least x, y, z (m, sensor frame)
    and reflectivity (0–1), e.g. ``PointCloud.points``. Panels show x forward
    (up) and y left (to the left) over ±``extent_m``, equal aspect, one shared
    0–1 colour bar. ``point_size`` is the marker area (pt²), automatic if None.
    """
    clouds = [(str(title), _points_of(points)) for title, points in clouds]
    if not clouds:
        raise ValueError("plot_reflectivity_bev needs at least one (title, points) cloud")
    if not extent_m > 0.0:
        raise ValueError(f"extent_m must be positive, got {extent_m}")
    norm = Normalize(vmin=0.0, vmax=1.0)
    cmap = colormaps[REFLECTIVITY_CMAP]

    figure = _new_figure(4.4 * len(clouds) + 1.0, 5.0)
    cast("ConstrainedLayoutEngine", figure.get_layout_engine()).set(wspace=0.06)  # room between panels for the ±extent tick labels
    axes = figure.subplots(1, len(clouds), sharex=True, sharey=True, squeeze=False)[0]
    for ax, (title, points) in zip(axes, clouds):
        _draw_bev(ax, title, points, extent_m, norm, cmap, point_size)
    axes[0].set_ylabel("x (m), forward ↑")
    figure.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=list(axes), label="reflectivity (0–1)",
                    shrink=0.85, pad=0.02)
    _save(figure, path)


# ------------------------------------------- Livox FOV coverage over time


def fov_coverage(directions, half_angles_deg, cell_deg: float = 0.5):
    """(covered cell mask, in-FOV cell mask, cell edges °) of rays on an azimuth × elevation grid of
    ``cell_deg`` cells over the elliptical FOV of ``half_angles_deg`` (horizontal, vertical) about +x."""
    d = np.asarray(directions, dtype=np.float64)
    azimuth = np.degrees(np.arctan2(d[:, 1], d[:, 0]))
    elevation = np.degrees(np.arcsin(np.clip(d[:, 2], -1.0, 1.0)))
    half_h, half_v = half_angles_deg
    reach = max(half_h, half_v) + cell_deg
    edges = np.arange(-reach, reach + cell_deg / 2, cell_deg)
    hits, _, _ = np.histogram2d(azimuth, elevation, [edges, edges])
    centre = (edges[:-1] + edges[1:]) / 2
    az, el = np.meshgrid(centre, centre, indexing="ij")
    return hits > 0, (az / half_h) ** 2 + (el / half_v) ** 2 <= 1.0, edges


def plot_livox_coverage(path, preset: str = "livox_mid70", times_s: Sequence[float] = (0.1, 0.5, 1.0),
                        cell_deg: float = 0.5) -> list[float]:
    """The cells of ``cell_deg`` a Livox preset's rays have hit after each integration time, one panel each
    (azimuth left ←, elevation up), to a PNG at ``path``; returns the covered fraction of the FOV per time."""
    from ..sensors import load_sensor

    sensor = load_sensor(preset)
    half_angles = sensor.spec["rosette"]["cone_half_angles_deg"]
    figure = _new_figure(4.0 * len(times_s), 4.3)
    axes = figure.subplots(1, len(times_s), sharex=True, sharey=True, squeeze=False)[0]
    fractions = []
    theta = np.linspace(0.0, 2.0 * np.pi, 361)
    for ax, time_s in zip(axes, times_s):
        rays = sensor.rays_between(0.0, time_s)
        assert rays is not None  # (a window shorter than one shot fires nothing)
        covered, inside, edges = fov_coverage(rays.directions, half_angles, cell_deg)
        fractions.append(float(covered[inside].mean()))
        image = np.where(inside, covered.astype(float), np.nan).T  # rows: elevation
        ax.imshow(image, origin="lower", extent=(edges[0], edges[-1], edges[0], edges[-1]), cmap="Blues",
                  vmin=-0.4, vmax=1.0, interpolation="nearest")
        ax.plot(half_angles[0] * np.cos(theta), half_angles[1] * np.sin(theta), color="black", linewidth=0.8)
        ax.set_title(f"{time_s:g} s: {len(rays):,} rays\n{100 * fractions[-1]:.0f} % of {cell_deg:g}° cells hit",
                     fontsize=10)
        ax.set_xlim(edges[-1], edges[0])  # left (+azimuth) to the left
        ax.set_aspect("equal")
        ax.set_xlabel("azimuth (°), left ←")
    axes[0].set_ylabel("elevation (°)")
    figure.suptitle(f"{preset}: field-of-view coverage of its non-repetitive scan", fontsize=11)
    _save(figure, path)
    return fractions


# ------------------------------------------- scan patterns and motion distortion


def plot_scan_patterns(path, patterns: Sequence[tuple[str, RayPattern]], azimuth_window_deg=(-3.0, 3.0)) -> None:
    """Ray directions of each ``(title, RayPattern)`` in an azimuth window, elevation against azimuth, one
    panel each, coloured by beam: how a unit's calibration (staggered beams, uneven elevations) departs from a
    datasheet's even grid."""
    figure = _new_figure(4.6 * len(patterns), 4.6)
    axes = figure.subplots(1, len(patterns), sharex=True, sharey=True, squeeze=False)[0]
    lo, hi = azimuth_window_deg
    for ax, (title, pattern) in zip(axes, patterns):
        azimuth = np.degrees(pattern.azimuth_rad)
        elevation = np.degrees(pattern.elevation_rad)
        shown = (azimuth >= lo) & (azimuth <= hi)
        ax.scatter(azimuth[shown], elevation[shown], c=pattern.beam_id[shown], cmap="viridis", s=1.0, linewidths=0,
                   rasterized=True)
        ax.set_title(f"{title}\n{pattern.rows} beams × {pattern.columns} columns", fontsize=10)
        ax.set_xlim(hi, lo)  # left (+azimuth) to the left
        ax.set_xlabel("azimuth (°), left ←")
        ax.grid(True, color="0.9", linewidth=0.6)
        ax.set_axisbelow(True)
    axes[0].set_ylabel("elevation (°)")
    _save(figure, path)


def plot_motion_distortion(path, clouds: Sequence[tuple[str, np.ndarray]], extent_m: float = 30.0) -> None:
    """Bird's-eye panels of ``(title, points)`` coloured by each point's firing ``time``: a frame seen from a
    moving car, with and without motion distortion."""
    figure = _new_figure(4.4 * len(clouds) + 1.0, 5.0)
    axes = figure.subplots(1, len(clouds), sharex=True, sharey=True, squeeze=False)[0]
    top = max(float(np.max(points["time"], initial=0.0)) for _, points in clouds) or 0.1
    norm = Normalize(vmin=0.0, vmax=1e3 * top)
    for ax, (title, points) in zip(axes, clouds):
        shown = (np.abs(points["x"]) <= extent_m) & (np.abs(points["y"]) <= extent_m)
        p = points[shown]
        order = np.argsort(p["z"], kind="stable")
        ax.scatter(p["y"][order], p["x"][order], c=1e3 * p["time"][order], cmap="turbo", norm=norm,
                   s=_auto_point_size(len(p)), linewidths=0, rasterized=True)
        ax.set_title(f"{title}\n{len(points):,} points", fontsize=10)
        _bev_axes(ax, extent_m)
    axes[0].set_ylabel("x (m), forward ↑")
    figure.colorbar(ScalarMappable(norm=norm, cmap=colormaps["turbo"]), ax=list(axes),
                    label="firing time after the frame start (ms)", shrink=0.85, pad=0.02)
    _save(figure, path)


# ------------------------------------------- noise, weather and detection probability


def plot_detection_probability(path, limit, reflectivities=(0.10, 0.80)) -> None:
    """P(detected) against range for targets of each reflectivity under ``limit`` (probabilistic detection,
    :mod:`lidar_fmu.physics.effects`), the threshold (P = 1 up to r_L) dashed beside it."""
    from ..physics.effects import detection_probability

    figure = _new_figure(7.0, 4.5)
    ax = figure.add_subplot()
    top = float(limit.max_range_m_for(max(reflectivities))) * 1.6
    ranges = np.linspace(0.1, top, 600)
    for refl, color in zip(reflectivities, ("#1f77b4", "#d62728")):
        r_l = float(limit.max_range_m_for(refl))
        p = [detection_probability(r / r_l) for r in ranges]
        ax.plot(ranges, p, color=color, linewidth=2.0, label=f"{100 * refl:.0f} % target (r_L = {r_l:.0f} m)")
        ax.plot([0, r_l, r_l, top], [1, 1, 0, 0], color=color, linewidth=1.0, linestyle="--")
        ax.plot([r_l], [0.9], marker="o", color=color)
    ax.axhline(0.9, color="0.6", linewidth=0.8)
    ax.set_xlim(0.0, top)
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlabel("range (m)")
    ax.set_ylabel("detection probability")
    ax.set_title("Probabilistic detection: P(r_L) = 0.9 (datasheet ranges), threshold dashed")
    ax.grid(True, color="0.88", linewidth=0.8)
    ax.legend(loc="upper right", fontsize=9)
    _save(figure, path)


# ------------------------------------------------ dual returns at object edges


def indoor_room_scene():
    """A furnished room around a sensor 1 m above the floor, for the comparison with the shared Ouster
    dual-return recording (``tests/data/ouster_os1_128_dual_returns.json``) → (scene, sensor pose).

    Laid out after what that recording shows, since it carries no geometry: behind the sensor (azimuth
    ≈ 135–177°, the sector the unit sent) a cabinet's face 0.45 m away fills most of the view, the room's walls
    1.5–3 m beyond; around the rest of the turn a table, two chairs, a sofa and a shelf. Room 5 × 4.5 × 2.6 m,
    0.1 m walls; instance ids: 1 walls, floor and ceiling, 2 cabinet, 3 table, 4–5 chairs, 6 sofa, 7 shelf.
    """
    from ..geometry.scene import Mesh, Scene, box_mesh, concatenate

    scene = Scene()
    floor_z, ceiling_z, x0, x1, y0, y1 = -1.0, 1.6, -2.2, 2.8, -2.0, 2.5

    def placed(lo, hi):
        """A box from corner ``lo`` to corner ``hi`` (m), as a mesh in place."""
        lo, hi = np.asarray(lo, float), np.asarray(hi, float)
        mesh = box_mesh(*(hi - lo))
        return Mesh(mesh.vertices + (lo + hi) / 2, mesh.faces, mesh.face_material, mesh.material_names, "box")

    def box(instance, lo, hi):
        scene.add_instance(instance, placed(lo, hi), np.eye(4))

    room = [((x0 - 0.1, y0, floor_z), (x0, y1, ceiling_z)), ((x1, y0, floor_z), (x1 + 0.1, y1, ceiling_z)),
            ((x0, y0 - 0.1, floor_z), (x1, y0, ceiling_z)), ((x0, y1, floor_z), (x1, y1 + 0.1, ceiling_z)),
            ((x0, y0, floor_z - 0.1), (x1, y1, floor_z)), ((x0, y0, ceiling_z), (x1, y1, ceiling_z + 0.1))]
    scene.add_instance(1, concatenate([placed(lo, hi) for lo, hi in room], "room"), np.eye(4))
    box(2, (-1.05, 0.02, floor_z), (-0.45, 0.45, 0.8))  # cabinet, its face 0.45 m behind the sensor
    box(3, (0.9, -0.9, -0.28), (2.1, -0.1, -0.25))  # table top, 0.75 m high
    box(4, (1.1, 0.3, floor_z), (1.55, 0.75, -0.55))  # chair seat block
    box(5, (0.2, -1.6, floor_z), (0.65, -1.15, -0.55))  # chair
    box(6, (-1.9, -1.9, floor_z), (-1.0, -0.2, -0.2))  # sofa
    box(7, (2.4, 0.8, floor_z), (2.8, 2.2, 0.9))  # shelf against the far wall
    return scene, np.eye(4)


def plot_dual_returns(path, panels: Sequence[tuple[str, PointCloud, float]]) -> None:
    """Dual returns at object edges, one bird's-eye panel per ``(title, cloud, extent_m)``.

    ``cloud``: a :class:`~lidar_fmu.pointcloud.PointCloud` scanned with ``returns: dual`` (it needs ``echo`` and
    ``ray_index``). Every return is a grey dot; where a ray gave two echoes its first (echo 0, at the edge of the
    nearer object) is blue and its second (echo 1, behind it) red, so the second echoes trace the objects'
    outlines on what lies behind them.
    """
    if not panels:
        raise ValueError("plot_dual_returns needs at least one (title, cloud, extent_m) panel")
    figure = _new_figure(5.0 * len(panels), 5.4)
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, cloud, extent_m) in zip(axes, panels):
        points, ray = cloud.points, np.asarray(cloud.ray_index)
        second = points["echo"] == 1
        paired = np.isin(ray, ray[second]) & ~second
        near = (np.abs(points["x"]) <= extent_m) & (np.abs(points["y"]) <= extent_m)
        for mask, colour, size, label in ((near & ~second & ~paired, "0.7", 0.4, "single echo"),
                                          (near & paired, "#1f5fbf", 3.0, "echo 0 of a ray with two"),
                                          (near & second, "#d62728", 3.0, "echo 1 (behind the edge)")):
            ax.scatter(points["y"][mask], points["x"][mask], c=colour, s=size, linewidths=0, rasterized=True,
                       label=f"{label} ({np.count_nonzero(mask):,})")
        ax.set_title(f"{title}\n{np.count_nonzero(second):,} second echoes of {len(np.unique(ray)):,} returning "
                     "rays", fontsize=10)
        _bev_axes(ax, extent_m)
        ax.legend(loc="lower left", fontsize=7, markerscale=3, framealpha=0.9)
    axes[0].set_ylabel("x (m), forward ↑")
    _save(figure, path)


def dual_return_panels(street_scene, street_pose, street_map) -> list:
    """The panels of ``dual_returns.png``: the OS1-128 in ``dual`` mode (8 sub-rays per beam) on the demo street
    (cars' and poles' edges, ±20 m) and in :func:`indoor_room_scene` (±3 m)."""
    from ..scan.lidar import Lidar

    spec = {"preset": "ouster_os1_128", "returns": "dual", "divergence_samples": 8}
    street = Lidar(street_scene, spec, materials=street_map, warn=lambda message: None).scan(street_pose)
    room, room_pose = indoor_room_scene()
    indoor = Lidar(room, spec | {"divergence_samples": 16}).scan(room_pose)
    return [("demo street, OS1-128 dual, 8 sub-rays per beam", street, 20.0),
            ("furnished room, OS1-128 dual, 16 sub-rays, 10 mm exit beam", indoor, 3.0)]
# ------------------------------------------------------------------------------ mirror ghosts


def _quad_mesh(centre, u, v, material: str):
    """A two-triangle square ``centre ± u ± v`` (m) of one visual material."""
    from ..geometry.scene import Mesh

    c, u, v = (np.asarray(a, np.float64) for a in (centre, u, v))
    return Mesh(np.array([c - u - v, c + u - v, c + u + v, c - u + v]), np.array([[0, 1, 2], [0, 2, 3]]),
                np.zeros(2, np.int32), (material,), material)


def plot_mirror_ghost(path) -> tuple[int, int]:
    """Bird's-eye view of a scan past a 45° mirror: the direct returns, and the ghosts the mirror makes (the
    side wall and a box seen in it), each on its own ray at the whole path length (BlenSor's ghost).
    → (ghosts, returns)."""
    from ..geometry.scene import Scene, box_mesh
    from ..geometry.transforms import pose_matrix
    from ..scan.lidar import Lidar

    half = 1.5 * np.sqrt(0.5)
    parts = {  # name: (centre, u, v, visual material); walls 4 m high
        "mirror": ((10.0, 0.0, 0.0), (half, half, 0.0), (0.0, 0.0, 1.5), "mirror"),
        "left wall": ((16.0, 10.0, 0.0), (14.0, 0.0, 0.0), (0.0, 0.0, 2.0), "wall"),
        "right wall": ((16.0, -10.0, 0.0), (14.0, 0.0, 0.0), (0.0, 0.0, 2.0), "wall"),
        "back wall": ((30.0, 0.0, 0.0), (0.0, 10.0, 0.0), (0.0, 0.0, 2.0), "wall"),
    }
    scene = Scene()
    for k, (centre, u, v, material) in enumerate(parts.values()):
        scene.add_instance(100 + k, _quad_mesh(centre, u, v, material), np.eye(4))
    box_at = (10.5, 6.0)
    scene.add_instance(42, box_mesh(1.5, 1.5, 1.5, material="box"), pose_matrix((box_at[0], box_at[1], 0.0)))
    sensor = {"horizontal_fov_deg": [-45, 45], "horizontal_resolution_deg": 0.2, "vertical_fov_deg": [-1, 1],
              "channels": 3, "max_range_m": 60.0, "motion_distortion": False}
    materials = {"default": "lambertian_50", "materials": {"mirror": "mirror", "wall": "lambertian_50", "box": "lambertian_50"}}
    lidar = Lidar(scene, sensor, materials=materials)
    cloud = lidar.scan(np.eye(4))
    # rays that came back by the mirror (a scene with a mirror: the cast keeps each ray's path gain)
    ghost = cast("np.ndarray", lidar.cast(np.eye(4)).path_gain)[cloud.ray_index] < 1.0
    p = cloud.points
    figure = _new_figure(7.5, 6.5)
    ax = figure.add_subplot()
    for name, (centre, u, _v, material) in parts.items():
        ends = np.array([np.subtract(centre, u), np.add(centre, u)])
        ax.plot(ends[:, 1], ends[:, 0], color="#1f77b4" if material == "mirror" else "0.55",
                linewidth=4 if material == "mirror" else 2, solid_capstyle="butt", zorder=1,
                label="mirror (45°)" if material == "mirror" else ("walls" if name == "left wall" else None))
    ax.add_patch(_box_patch(box_at, 1.5, "box (object 42)"))
    ax.scatter(p["y"][~ghost], p["x"][~ghost], s=3, color="black", linewidths=0, label="direct returns", zorder=3)
    ax.scatter(p["y"][ghost], p["x"][ghost], s=4, color="#d62728", linewidths=0, zorder=3,
               label="ghosts: on the original ray at the path length")
    # one ghost of the wall: the light's path (out to the mirror plane x − y = 10, off it along (sin a, cos a)
    # to the wall y = 10) and where the unit places the echo, on the original ray at the path length
    wall_ghost = ghost & (p["range"] > 19.0)
    k = int(np.argmin(np.where(wall_ghost, np.abs(p["y"] + 1.5) + np.abs(p["z"]), np.inf)))  # clear of the box
    a_rad = float(np.arctan2(p["y"][k], p["x"][k]))
    t1 = 10.0 / (np.cos(a_rad) - np.sin(a_rad))
    hit = t1 * np.array([np.cos(a_rad), np.sin(a_rad)])
    end = hit + (10.0 - hit[1]) / np.cos(a_rad) * np.array([np.sin(a_rad), np.cos(a_rad)])
    ax.plot([0.0, hit[1], end[1]], [0.0, hit[0], end[0]], color="#2ca02c", linewidth=1.4, zorder=2,
            label="the light's path (one ray)")
    ax.plot([hit[1], p["y"][k]], [hit[0], p["x"][k]], color="#d62728", linewidth=1.0, linestyle=":", zorder=2)
    ax.text(9.0, p["x"][k] + 0.7, f"the left wall in the mirror: {p['range'][k]:.1f} m of path",
            color="#d62728", fontsize=8, ha="left")
    box_ghost = ghost & (p["range"] < 19.0)
    if box_ghost.any():
        ax.text(9.0, float(p["x"][box_ghost].mean()) + 0.7, "the box in the mirror", color="#d62728", fontsize=8,
                ha="left")
    ax.plot([0.0], [0.0], marker="^", markersize=9, color="#e8402a", markeredgecolor="black", zorder=4)
    ax.set_xlim(13.0, -13.0)
    ax.set_ylim(-2.0, 32.0)
    ax.set_aspect("equal")
    ax.set_xlabel("y (m), left ←")
    ax.set_ylabel("x (m), forward ↑")
    ax.set_title(f"A mirror ghost (max_bounces 2): {int(ghost.sum())} of {len(p)} returns came by the mirror",
                 fontsize=10)
    ax.grid(True, color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(loc="center", bbox_to_anchor=(0.5, 0.84), fontsize=8)
    _save(figure, path)
    return int(ghost.sum()), len(p)


def _box_patch(centre_xy, size_m: float, label: str):
    """A square drawn in the bird's-eye axes (y across, x up) around ``centre_xy`` (x, y)."""
    from matplotlib.patches import Rectangle

    return Rectangle((centre_xy[1] - size_m / 2, centre_xy[0] - size_m / 2), size_m, size_m, facecolor="none",
                     edgecolor="#9467bd", linewidth=1.5, label=label, zorder=2)

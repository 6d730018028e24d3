"""``lidar-fmu validate``: a real recording against our simulation of the same unit, pixel by pixel.

For each frame of the recording (:mod:`.recording`; the unit's rays: :mod:`.units`): the scene rebuilt from its
even columns (:func:`mesh_from_pixels`), the unit simulated on that mesh firing exactly the recording's rays, and
the two compared ray for ray on the odd columns (:func:`compare_frame`, :func:`summarize`): which pixels return,
range differences, noise σ per range band, intensity rankings, the range limit. Every maker's recording is
compared the same way. The method, its figures and the results on the shared recordings: docs/validation.md.
"""
from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import numpy as np

from ..errors import LidarFmuError, UserError
from ..geometry.scene import Mesh, Scene, concatenate
from ..scan.lidar import Lidar
from ..sensors import load_sensor
from ..sensors.spec import Sensor
from .makers import open_recording
from .ouster import pixel_rays, sensor_spec, unit_metadata
from .recording import Recording, read_kitti_poses
from .registration import icp_poses
from .units import PixelRays, UnitGeometry

__all__ = ["PixelRays", "pixel_rays", "sensor_spec", "unit_metadata", "validate"]

#: relative range jump between neighbours above which they are not one surface (mesh edges, depth-edge mask)
MAX_JUMP = 0.05
#: range bands (m) of the noise and agreement tables
RANGE_BANDS_M = (0.0, 5.0, 10.0, 20.0, 40.0, 80.0, 1000.0)
#: reflectivity bands (unit REFLECTIVITY, percent) of the r_L table; above 100: retroreflectors
REFLECTIVITY_BANDS = (0, 5, 10, 20, 50, 101, 256)
#: fewest samples a band or beam needs for its figure to be reported
MIN_SAMPLES = 20


class ValidateError(LidarFmuError, ValueError):
    """A validation that cannot run on these inputs."""


def unit_points(rays: PixelRays, range_m: np.ndarray) -> np.ndarray:
    """(B, W, 3) sensor-frame points of a range image in the unit's convention (RANGE, m; NaN: none)."""
    return rays.origin + (range_m - rays.beam_origin_m)[..., None] * rays.direction


def ranges_agree(*ranges: np.ndarray, max_jump: float) -> np.ndarray:
    """bool, elementwise: all ``ranges`` are finite and lie within ``max_jump`` (largest / smallest − 1) of one
    another, so one surface."""
    stack = np.stack(ranges)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.all(np.isfinite(stack), axis=0) & (stack.max(axis=0) / stack.min(axis=0) - 1.0 < max_jump)


def _destaggered(image: np.ndarray, rays: PixelRays) -> np.ndarray:
    out = np.full_like(image, np.nan, dtype=np.float64)
    out[np.arange(image.shape[0])[:, None], rays.grid_column] = image
    return out


def mesh_from_pixels(rays: PixelRays, range_m: np.ndarray, reflectivity: np.ndarray, use: np.ndarray,
                     max_jump: float = MAX_JUMP, column_step: int = 2,
                     reflectivity_floor: float = 0.0) -> tuple[Mesh, np.ndarray] | None:
    """A mesh of the pixels ``use`` (B, W bool) whose ``range_m`` (unit convention, NaN: none) is valid.

    ``use`` must pick every ``column_step``-th column of the destaggered grid (2: e.g. the even measurement
    columns when the beams' column shifts are even; 1: every pixel). ``reflectivity_floor`` (percent): what a
    returning pixel's reported 0 is taken as (:data:`lidar_fmu.recordings.units.REFLECTIVITY_FLOOR_PERCENT`).
    Returns (mesh, each face's Lambertian ρ0 in 0–1), or None when no triangle is made. See the module's doc for
    the agreement rule.
    """
    B, W = range_m.shape
    valid = use & np.isfinite(range_m) & (range_m > 0)
    beam, column = np.nonzero(valid)
    if not len(beam):
        return None
    points = unit_points(rays, range_m)[beam, column]
    # grid of vertex ids: the used pixels fill every other destaggered column, so half as many grid columns
    K = (W + column_step - 1) // column_step
    grid = np.full((B, K), -1, np.int64)
    grid[beam, rays.grid_column[beam, column] // column_step] = np.arange(len(beam))
    r = np.append(range_m[beam, column], np.nan)  # id -1 → NaN
    a, b = grid[:-1, :], np.roll(grid, -1, axis=1)[:-1, :]  # (beam, k), (beam, k+1)
    c, d = grid[1:, :], np.roll(grid, -1, axis=1)[1:, :]  # (beam+1, k), (beam+1, k+1)
    ra, rb, rc, rd = r[a], r[b], r[c], r[d]
    abc, bdc = ranges_agree(ra, rb, rc, max_jump=max_jump), ranges_agree(rb, rd, rc, max_jump=max_jump)
    other = ~abc & ~bdc  # the other diagonal, only where the first split made nothing (no overlap)
    abd, adc = other & ranges_agree(ra, rb, rd, max_jump=max_jump), other & ranges_agree(ra, rd, rc, max_jump=max_jump)
    faces = np.concatenate([np.stack([a, b, c], -1)[abc], np.stack([b, d, c], -1)[bdc],
                            np.stack([a, b, d], -1)[abd], np.stack([a, d, c], -1)[adc]])
    if not len(faces):
        return None
    refl = np.clip(reflectivity[beam, column].astype(np.float64), reflectivity_floor, 100.0) / 100.0
    corners = points[faces]
    normal = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    centroid = corners.mean(axis=1)
    cos_incidence = np.abs(np.einsum("ij,ij->i", normal, centroid)) / (
        np.linalg.norm(normal, axis=1) * np.linalg.norm(centroid, axis=1) + 1e-30)
    rho0 = np.clip(refl[faces].mean(axis=1) / np.maximum(cos_incidence, 0.1), 0.0, 1.0)
    mesh = Mesh(points, faces, np.zeros(len(faces), np.int32), ("recording",), "recording",
                face_reflectance=rho0.astype(np.float32))  # each triangle's own ρ0, over any material
    return mesh, rho0


def _with_second_returns(made: tuple[Mesh, np.ndarray], rays: PixelRays, recording: Recording, frame: int,
                         range_m: np.ndarray, use: np.ndarray, max_jump: float,
                         reflectivity_floor: float = 0.0) -> tuple[Mesh, np.ndarray]:
    """A dual-return recording's mesh plus a layer from each mesh pixel's other return (RANGE2 where it has one,
    else RANGE; only the triangles that touch a RANGE2 pixel): first returns leave every depth edge open, the
    surface behind ending where they stop seeing it, so a footprint across the edge met one surface where the
    unit saw two."""
    images = recording.images
    second = images["range2_mm"][frame].astype(np.float64) * 1e-3
    has = (second > 0) & np.isfinite(range_m)
    layer_range = np.where(has, second, range_m)
    layer = mesh_from_pixels(rays, layer_range, np.where(has, images["reflectivity2"][frame],
                                                         images["reflectivity"][frame]), use, max_jump,
                             reflectivity_floor=reflectivity_floor)
    if layer is None:
        return made
    valid = use & np.isfinite(layer_range) & (layer_range > 0)  # the layer's vertices, as mesh_from_pixels numbers them
    keep = has[valid][layer[0].faces].any(axis=1)
    if not keep.any():
        return made
    mesh = Mesh(layer[0].vertices, layer[0].faces[keep], layer[0].face_material[keep], layer[0].material_names,
                "recording", face_reflectance=layer[1][keep].astype(np.float32))
    return concatenate([made[0], mesh], "recording"), np.concatenate([made[1], layer[1][keep]])


def _along_ray_m(rays: PixelRays, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Where each pixel's ray passes closest to the line through ``left`` and ``right`` (points), as the distance
    along the ray from its origin."""
    u = right - left
    d = rays.direction
    w0 = rays.origin - left  # closest points of ray (origin + t·d) and line (left + s·u)
    a_, b_, c_ = np.einsum("...i,...i", d, d), np.einsum("...i,...i", d, u), np.einsum("...i,...i", u, u)
    d_, e_ = np.einsum("...i,...i", d, w0), np.einsum("...i,...i", u, w0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (b_ * e_ - c_ * d_) / (a_ * c_ - b_ * b_)


def chord_residual_image(rays: PixelRays, range_m: np.ndarray, step: int,
                         max_jump: float) -> tuple[np.ndarray, np.ndarray]:
    """(residual, ok) images: every pixel's range against the line through its same-beam neighbours ``step``
    columns away, and where that counts.

    The residual is measured along the pixel's own ray: where that ray passes closest to the line through the
    neighbours' points, minus its range. Only triples of one surface (the ``max_jump`` rule) count.
    """
    points = unit_points(rays, range_m)
    left, right = np.roll(points, step, axis=1), np.roll(points, -step, axis=1)
    r_left, r_right = np.roll(range_m, step, axis=1), np.roll(range_m, -step, axis=1)
    ok = ranges_agree(r_left, range_m, r_right, max_jump=max_jump)
    residual = range_m - (_along_ray_m(rays, left, right) + rays.beam_origin_m)
    return residual, ok & np.isfinite(residual)


def _chord_residual(rays: PixelRays, range_m: np.ndarray, step: int, max_jump: float) -> tuple[np.ndarray, np.ndarray]:
    """(range, residual) of the pixels :func:`chord_residual_image` counts."""
    residual, ok = chord_residual_image(rays, range_m, step, max_jump)
    return range_m[ok], residual[ok]


def robust_sigma(residual: np.ndarray, variance_factor: float = 1.5) -> float:
    """σ of one pixel from residuals whose variance is ``variance_factor`` σ² (1.5: chord residuals):
    MAD · 1.4826 / √factor (NaN for too few)."""
    if len(residual) < MIN_SAMPLES:
        return float("nan")
    return float(1.4826 * np.median(np.abs(residual - np.median(residual))) / math.sqrt(variance_factor))


#: the least Spearman of a unit's REFLECTIVITY against its SIGNAL for its REFLECTIVITY to be taken as calibrated:
#: the calibrated units in tests/data/ouster read 0.57–0.93; the OS-2-32 on firmware 2.0.0-rc.2 reads −0.02 (its
#: REFLECTIVITY field holds no calibrated reflectivity)
MIN_REFLECTIVITY_SIGNAL_RANK = 0.3


#: ``--poses`` value that registers the frames instead of reading a pose file (:mod:`lidar_fmu.recordings.registration`)
ICP_POSES = "icp"


def reflectivity_signal_rank(recording: Recording) -> float | None:
    """Spearman of the unit's REFLECTIVITY against its SIGNAL over its first frame's diffuse returns (None: the
    profile has no SIGNAL). Both grow with the target's reflectance, so a REFLECTIVITY that does not follow its
    SIGNAL (below :data:`MIN_REFLECTIVITY_SIGNAL_RANK`) is no calibrated reflectivity."""
    if "signal" not in recording.images:
        return None
    refl = recording.images["reflectivity"][0]
    valid = recording.first_returns()[0] & (refl <= 100)  # retroreflectors saturate SIGNAL
    return spearman(refl[valid].astype(np.float64), recording.images["signal"][0][valid].astype(np.float64))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN for fewer than MIN_SAMPLES pairs."""
    if len(x) < MIN_SAMPLES:
        return float("nan")
    return rank_correlation(ranks(x), ranks(y))


def ranks(values: np.ndarray) -> np.ndarray:
    """(N,) float64 ranks of ``values`` from 0, ties given their average rank."""
    _, inverse, counts = np.unique(np.asarray(values, np.float64), return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts
    return (first + (counts - 1) / 2.0)[inverse]


def rank_correlation(rx: np.ndarray, ry: np.ndarray) -> float:
    """Pearson's correlation of two rank arrays (:func:`ranks`): Spearman's; NaN where one is constant."""
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _sim_images(cloud, rays: PixelRays, shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """Our returns as unit-order images: the strongest echo (the unit's first return) and the other one."""
    ray = np.asarray(cloud.ray_index, np.int64)
    flat_pixel = np.full(int(rays.ray_index.max()) + 1, -1, np.int64)
    valid_rays = rays.ray_index >= 0
    flat_pixel[rays.ray_index[valid_rays]] = np.flatnonzero(valid_rays.ravel())
    pixel = flat_pixel[ray]
    intensity = np.asarray(cloud.intensity_percent if cloud.intensity_percent is not None
                           else cloud.points["reflectivity"], np.float64)
    # per pixel, the strongest echo first (the unit's return_order default), ties to the nearer
    order = np.lexsort((cloud.points["range"], -intensity, pixel))
    pixel, first_of_pixel = pixel[order], np.ones(len(order), bool)
    first_of_pixel[1:] = pixel[1:] != pixel[:-1]
    out = {}
    for key, pick in (("", first_of_pixel), ("2", ~first_of_pixel)):
        rng = np.full(shape[0] * shape[1], np.nan)
        rng[pixel[pick]] = cloud.points["range"][order][pick]  # our range field: in the unit's convention
        out["range_m" + key] = rng.reshape(shape)
        if not key:
            for name, values in (("intensity", intensity), ("reflectivity", cloud.points["reflectivity"])):
                image = np.full(shape[0] * shape[1], np.nan)
                image[pixel[pick]] = np.asarray(values, np.float64)[order][pick]
                out[name] = image.reshape(shape)
    return out


def _edge_free(rays: PixelRays, range_m: np.ndarray, max_jump: float) -> np.ndarray:
    """(B, W) bool: the pixel and its 8 destaggered neighbours are valid and agree (the max_jump rule)."""
    grid = _destaggered(range_m, rays)
    padded = np.pad(grid, 1, constant_values=np.nan)
    padded[1:-1, 0], padded[1:-1, -1] = grid[:, -1], grid[:, 0]  # the turn closes on itself
    B, W = grid.shape
    neighbours = [padded[1 + db:1 + db + B, 1 + dc:1 + dc + W] for db in (-1, 0, 1) for dc in (-1, 0, 1)]
    ok_grid = ranges_agree(*neighbours, max_jump=max_jump)
    return ok_grid[np.arange(B)[:, None], rays.grid_column]


def inside_mesh(rays: PixelRays, range_m: np.ndarray, use: np.ndarray, max_jump: float = MAX_JUMP) -> np.ndarray:
    """(B, W) bool: where a held-out pixel's ray meets the mesh of the pixels ``use`` inside it, not on its rim.

    A held-out pixel of beam b lies between its beam's two mesh pixels (destaggered columns ± 1), on the edge they
    share; the mesh goes on beyond it only where the cell above (beams b − 1, b) and the cell below (b, b + 1)
    each have all four corners valid and agreeing (the ``max_jump`` rule). Where a neighbouring beam's mesh
    pixel is missing or at another range, the surface ends or breaks within one pixel spacing of the ray, and
    where it does the mesh cannot say. The first and last beams have no row beyond them, and nothing there says
    that the surface ends: their missing side counts as inside.
    """
    grid = _destaggered(np.where(use, range_m, np.nan), rays)
    B, W = grid.shape
    left, right = np.roll(grid, 1, axis=1), np.roll(grid, -1, axis=1)  # the turn closes on itself
    row = ranges_agree(left, right, max_jump=max_jump)
    pair = np.zeros((B, W), bool)  # cell (b, b + 1) of the two rows' four corners
    pair[:-1] = ranges_agree(left[:-1], right[:-1], left[1:], right[1:], max_jump=max_jump)
    above = np.ones((B, W), bool)
    above[1:] = pair[:-1]
    below = np.ones((B, W), bool)
    below[:-1] = pair[:-1]
    ok_grid = row & above & below
    return ok_grid[np.arange(B)[:, None], rays.grid_column]


def _geometry_image(lidar: Lidar, rays: PixelRays, pose: np.ndarray) -> np.ndarray:
    """(B, W) unit-convention range where each pixel's ray meets the scene, noise-free and unlimited (NaN: miss)."""
    hits = lidar.cast(pose)
    image = np.full(rays.ray_index.shape, np.nan)
    has_ray = rays.ray_index >= 0
    per_ray = np.where(np.asarray(hits.instance_index) >= 0, np.asarray(hits.range_m, np.float64)
                       + rays.beam_origin_m, np.nan)
    image[has_ray] = per_ray[rays.ray_index[has_ray]]
    return image


def _unit_lidar(mesh: Mesh, sensor: Sensor | dict, backend: str) -> Lidar:
    """The unit over ``mesh``: ``sensor`` loaded once by the caller (:func:`validate`), or a spec loaded here."""
    scene = Scene()
    scene.add_instance(0, mesh, np.eye(4))
    return Lidar(scene, sensor if isinstance(sensor, Sensor) else load_sensor(sensor), backend=backend,
                 warn=lambda message: None)


def _frame_image(recording: Recording, frame: int, rays: PixelRays) -> np.ndarray:
    """(B, W) the unit's RANGE in m, NaN where it has none or did not send the column."""
    image = recording.images["range_mm"][frame].astype(np.float64) * 1e-3
    image[image <= 0] = np.nan
    image[~recording.pixels_sent(frame)] = np.nan
    image[rays.ray_index < 0] = np.nan
    return image


def frame_to_frame_noise(recording: Recording, rays: PixelRays, spec: Sensor | dict, poses: np.ndarray,
                         backend: str = "auto", max_jump: float = MAX_JUMP,
                         geometry: UnitGeometry | None = None) -> dict[str, Any]:
    """Noise from frame to frame: each frame's pixels against the mesh of the frame before, after the poses
    (``poses[f]``: world_from_sensor of frame f, one per frame compared).

    The unit: frame f+1's rays, moved by ``inv(pose f) · pose f+1``, cast into the mesh of all of frame f's
    pixels; residual = RANGE − that range. Ours, the same way: frames f and f+1 simulated from those two poses in
    the mesh of the unit's frame f, frame f+1 against the mesh of our frame f. Both frames of a pair are swept
    the same way, so at one azimuth the motion during a sweep cancels (to ~1 mm at 10 m for 0.25 m per frame).
    Away from depth edges, σ = MAD · 1.4826 / √1.5 per range band: a point of a triangle carries on average half
    a vertex's noise variance (E[Σ wᵢ²] = 1/2 over a triangle's barycentric weights). For the unit this is an
    upper bound: surface shape between frame f's pixels and pose errors add to it.

    ``geometry``: a unit whose rays differ from frame to frame (azimuth bins); each frame is then cast with its
    own (``rays`` and ``spec`` serve every frame otherwise).
    """
    residuals: dict[str, list] = {"real": [], "sim": []}
    ranges: dict[str, list] = {"real": [], "sim": []}
    sensor = spec if isinstance(spec, Sensor) or geometry is None else load_sensor(spec)
    floor = 0.0 if geometry is None else geometry.reflectivity_floor_percent

    def frame_rays(frame: int) -> tuple[PixelRays, Sensor | dict]:
        if geometry is None:
            return rays, spec
        own = geometry.rays(recording, frame)
        return own, geometry.frame_sensor(sensor, own)  # type: ignore[arg-type]

    for f in range(len(poses) - 1):
        move = np.linalg.inv(poses[f]) @ poses[f + 1]
        (rays_f, spec_f), (rays_g, spec_g) = frame_rays(f), frame_rays(f + 1)
        before, after = _frame_image(recording, f, rays_f), _frame_image(recording, f + 1, rays_g)
        reflectivity = recording.images["reflectivity"][f]
        made = mesh_from_pixels(rays_f, before, reflectivity, np.isfinite(before), max_jump, column_step=1,
                                reflectivity_floor=floor)
        if made is None:
            continue
        lidar = _unit_lidar(made[0], spec_f, backend)
        lidar_g = lidar if spec_g is spec_f else _unit_lidar(made[0], spec_g, backend)
        shape = before.shape
        sim_before = _sim_images(lidar.scan(np.eye(4), frame=2 * f), rays_f, shape)["range_m"]
        sim_after = _sim_images(lidar_g.scan(move, frame=2 * f + 1), rays_g, shape)["range_m"]
        pairs = [("real", after, _geometry_image(lidar_g, rays_g, move))]
        made_sim = mesh_from_pixels(rays_f, sim_before, reflectivity, np.isfinite(sim_before), max_jump,
                                    column_step=1, reflectivity_floor=floor)
        if made_sim is not None:
            pairs.append(("sim", sim_after, _geometry_image(_unit_lidar(made_sim[0], spec_g, backend), rays_g, move)))
        for name, measured, mesh_range in pairs:
            ok = _edge_free(rays_g, measured, max_jump) & np.isfinite(mesh_range)
            ok &= ranges_agree(measured, mesh_range, max_jump=max_jump)  # what the mesh had not seen is no noise
            ranges[name].append(measured[ok])
            residuals[name].append((measured - mesh_range)[ok])
    bands = []
    for lo, hi in zip(RANGE_BANDS_M[:-1], RANGE_BANDS_M[1:]):
        row: dict[str, Any] = {"band_m": f"{lo:g}-{hi:g}"}
        for name in ("real", "sim"):
            rng = np.concatenate(ranges[name]) if ranges[name] else np.zeros(0)
            res = np.concatenate(residuals[name]) if residuals[name] else np.zeros(0)
            pick = (rng >= lo) & (rng < hi)
            row[f"{name}_sigma_m"] = robust_sigma(res[pick], 1.5)
            row[f"{name}_n"] = int(pick.sum())
        bands.append(row)
    return {"pairs": len(poses) - 1, "bands": bands}


def frame_scene(recording: Recording, frame: int, unit: UnitGeometry, rays: PixelRays,
                max_jump: float = MAX_JUMP) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[Mesh, np.ndarray] | None]:
    """(the unit's RANGE image, mesh pixels, held-out pixels, the mesh of the mesh pixels or None) of one frame:
    the scene rebuilt from its even measurement columns (with the second-return layer of a dual recording), to
    be compared on the odd ones."""
    real_range = _frame_image(recording, frame, rays)
    sent = recording.pixels_sent(frame) & (rays.ray_index >= 0)
    measurement = np.arange(unit.columns)[None, :]
    mesh_pixels = np.broadcast_to(sent & (measurement % 2 == 0), real_range.shape)
    held_out = np.broadcast_to(sent & (measurement % 2 == 1), real_range.shape)
    floor = float(unit.reflectivity_floor_percent)
    made = mesh_from_pixels(rays, real_range, recording.images["reflectivity"][frame], mesh_pixels, max_jump,
                            reflectivity_floor=floor)
    if made is not None and recording.dual:
        made = _with_second_returns(made, rays, recording, frame, real_range, mesh_pixels, max_jump, floor)
    return real_range, mesh_pixels, held_out, made


def held_out_chord_residuals(recording: Recording, frame: int, unit: UnitGeometry, rays: PixelRays,
                             spec: Sensor | dict, backend: str = "auto", max_jump: float = MAX_JUMP
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(ok, the unit's residual, the mesh's) images of validate's noise measure on one frame: every covered
    held-out pixel's chord residual (neighbours m ± 2) in the unit's RANGE and in the noise-free cast of the
    mesh, ``ok`` where both count. None when the frame makes no mesh."""
    real_range, _, held_out, made = frame_scene(recording, frame, unit, rays, max_jump)
    if made is None:
        return None
    truth = _geometry_image(_unit_lidar(made[0], spec, backend), rays, np.eye(4))
    covered = held_out & np.isfinite(truth)
    real, ok_real = chord_residual_image(rays, np.where(covered, real_range, np.nan), 2, max_jump)
    mesh, ok_mesh = chord_residual_image(rays, np.where(covered, truth, np.nan), 2, max_jump)
    return ok_real & ok_mesh, real, mesh


def compare_frame(recording: Recording, frame: int, unit: UnitGeometry, rays: PixelRays, spec: Sensor | dict,
                  backend: str = "auto", max_jump: float = MAX_JUMP) -> dict[str, Any]:
    """Pixel-level arrays of one frame's comparison (:func:`summarize` turns a list of them into figures)."""
    images = recording.images
    real_range, mesh_pixels, held_out, made = frame_scene(recording, frame, unit, rays, max_jump)
    if made is None:
        raise ValidateError(f"{recording.name} frame {recording.frame_id[frame]}: no two neighbouring pixels "
                            f"agree in range; nothing to rebuild the scene from")
    mesh, _ = made
    lidar = _unit_lidar(mesh, spec, backend)
    t0 = time.perf_counter()
    cloud = lidar.scan(np.eye(4), frame=frame)
    scan_s = time.perf_counter() - t0
    truth = _geometry_image(lidar, rays, np.eye(4))  # which held-out rays meet the mesh, and where
    sim = _sim_images(cloud, rays, real_range.shape)
    covered = held_out & np.isfinite(truth)
    real_valid, sim_valid = np.isfinite(real_range), np.isfinite(sim["range_m"])
    both = covered & real_valid & sim_valid
    edge_free = _edge_free(rays, real_range, max_jump)
    out: dict[str, Any] = {
        "covered": covered, "inside": covered & inside_mesh(rays, real_range, mesh_pixels, max_jump),
        "held_out": held_out, "real_valid": real_valid, "sim_valid": sim_valid,
        "delta_m": (sim["range_m"] - real_range)[both], "truth_delta_m": (truth - real_range)[both],
        "edge_free": edge_free[both], "real_range_m": real_range[both], "triangles": mesh.triangle_count,
        "scan_s": scan_s, "rays": len(lidar.sensor.pattern),
    }
    # noise: the same chord residual on real and simulated held-out pixels (odd columns: neighbours m ± 2)
    for name, image in (("real", real_range), ("sim", sim["range_m"]), ("mesh", truth)):
        only_held = np.where(covered, image, np.nan)
        out[f"noise_{name}"] = _chord_residual(rays, only_held, 2, max_jump)
    out["intensity_pairs"] = {
        "sim_intensity": sim["intensity"][both], "sim_reflectivity": sim["reflectivity"][both],
        "reflectivity": images["reflectivity"][frame][both].astype(np.float64),
        **({"signal": images["signal"][frame][both].astype(np.float64)} if "signal" in images else {}),
    }
    if recording.dual:
        real2 = images["range2_mm"][frame] > 0
        out["second"] = {"real_all": int((real2 & real_valid).sum()), "returning_all": int(real_valid.sum()),
                         "real": (real2 & covered & real_valid), "sim": np.isfinite(sim["range_m2"]) & covered,
                         "sim_returning": int((covered & sim_valid).sum()),
                         "real_returning": int((covered & real_valid).sum())}
    return out


def _quantiles(values: np.ndarray) -> dict[str, float | int | None]:
    if not len(values):
        return {"n": 0, "median_m": None, "p90_m": None}
    return {"n": int(len(values)), "median_m": float(np.median(values)), "p90_m": float(np.percentile(values, 90))}


def _fraction(a: int, b: int) -> float | None:
    return a / b if b else None


def _agreement(pixels: np.ndarray, real_valid: np.ndarray, sim_valid: np.ndarray) -> dict[str, Any]:
    """Which of ``pixels`` return, the unit's and ours."""
    both = int((pixels & real_valid & sim_valid).sum())
    only_real = int((pixels & real_valid & ~sim_valid).sum())
    only_sim = int((pixels & ~real_valid & sim_valid).sum())
    return {"both": both, "only_real": only_real, "only_sim": only_sim,
            "neither": int((pixels & ~real_valid & ~sim_valid).sum()),
            "real_returns_found": _fraction(both, both + only_real),
            "sim_returns_unit_lacks": _fraction(only_sim, both + only_sim)}


def unit_reflectivity(reflectivity_percent: np.ndarray) -> np.ndarray:
    """ρ (0–1) of the unit's REFLECTIVITY (whole percent): 0 is below 0.5 %, taken as 0.5 %; retroreflectors
    (above 100) as 1."""
    refl = np.asarray(reflectivity_percent, np.float64)
    return np.clip(np.maximum(refl, 0.5), 0.0, 100.0) / 100.0


def range_limit_table(recording: Recording, sensor) -> dict[str, Any]:
    """Real first returns beyond our r_L(ρ) per reflectivity band, and outside our min/max range (every sent
    pixel of every frame)."""
    valid = recording.first_returns()
    rng = recording.images["range_mm"][valid] * 1e-3
    refl = recording.images["reflectivity"][valid].astype(np.float64)
    limit = sensor.range_limit
    r_l = limit.max_range_m_for(unit_reflectivity(refl)) if limit is not None else np.full(len(rng), np.inf)
    bands = []
    for lo, hi in zip(REFLECTIVITY_BANDS[:-1], REFLECTIVITY_BANDS[1:]):
        band = (refl >= lo) & (refl < hi)
        beyond = int((band & (rng > r_l)).sum())
        bands.append({"reflectivity": f"{lo}-{hi - 1}", "returns": int(band.sum()), "beyond_r_L": beyond,
                      "fraction": _fraction(beyond, int(band.sum())),
                      "p99_range_m": float(np.percentile(rng[band], 99)) if band.any() else None})
    return {"bands": bands, "returns": int(len(rng)),
            "below_min_range": int((rng < sensor.min_range_m).sum()), "min_range_m": sensor.min_range_m,
            "above_max_range": int((rng > sensor.max_range_m).sum()), "max_range_m": sensor.max_range_m}


def summarize(frames: list[dict[str, Any]], recording: Recording, unit: UnitGeometry) -> dict[str, Any]:
    """The figures of a recording from its frames' pixel arrays."""
    def cat(key):
        return np.concatenate([f[key] for f in frames])

    covered, inside = np.stack([f["covered"] for f in frames]), np.stack([f["inside"] for f in frames])
    real_valid, sim_valid = np.stack([f["real_valid"] for f in frames]), np.stack([f["sim_valid"] for f in frames])
    held_out = int(np.stack([f["held_out"] for f in frames]).sum())
    per_beam_n = inside.sum(axis=(0, 2))
    real_beam = (inside & real_valid).sum(axis=(0, 2)) / np.maximum(per_beam_n, 1)
    sim_beam = (inside & sim_valid).sum(axis=(0, 2)) / np.maximum(per_beam_n, 1)
    counted = per_beam_n >= MIN_SAMPLES
    delta, truth_delta, edge_free = cat("delta_m"), cat("truth_delta_m"), cat("edge_free")
    real_range = cat("real_range_m")
    noise = []
    for name in ("real", "sim", "mesh"):
        rng = np.concatenate([f[f"noise_{name}"][0] for f in frames])
        res = np.concatenate([f[f"noise_{name}"][1] for f in frames])
        noise.append((rng, res))
    bands = []
    for lo, hi in zip(RANGE_BANDS_M[:-1], RANGE_BANDS_M[1:]):
        row: dict[str, Any] = {"band_m": f"{lo:g}-{hi:g}"}
        for name, (rng, res) in zip(("real", "sim", "mesh"), noise):
            pick = (rng >= lo) & (rng < hi)
            row[f"{name}_sigma_m"] = robust_sigma(res[pick])
            row[f"{name}_n"] = int(pick.sum())
        pick = (real_range >= lo) & (real_range < hi) & edge_free
        row["abs_delta_median_m"] = float(np.median(np.abs(delta[pick]))) if pick.sum() >= MIN_SAMPLES else None
        bands.append(row)
    pairs = {key: np.concatenate([f["intensity_pairs"][key] for f in frames]) for key in frames[0]["intensity_pairs"]}
    intensity = {"our_intensity_vs_reflectivity": spearman(pairs["sim_intensity"], pairs["reflectivity"]),
                 "our_reflectivity_vs_reflectivity": spearman(pairs["sim_reflectivity"], pairs["reflectivity"])}
    if "signal" in pairs:
        intensity |= {"our_intensity_vs_signal": spearman(pairs["sim_intensity"], pairs["signal"]),
                      "our_reflectivity_vs_signal": spearman(pairs["sim_reflectivity"], pairs["signal"]),
                      "unit_reflectivity_vs_signal": spearman(pairs["reflectivity"], pairs["signal"])}
    away = np.abs(delta[edge_free])
    result: dict[str, Any] = {
        "frames": [int(i) for i in recording.frame_id], "profile": recording.profile,
        "triangles": [f["triangles"] for f in frames], "rays_per_frame": frames[0]["rays"],
        "held_out_pixels": held_out, "covered_pixels": int(covered.sum()), "inside_pixels": int(inside.sum()),
        "agreement": _agreement(inside, real_valid, sim_valid),
        "agreement_rim": _agreement(covered & ~inside, real_valid, sim_valid),
        "per_beam_valid": {"real": real_beam.tolist(), "sim": sim_beam.tolist(), "inside": per_beam_n.tolist(),
                           "max_abs_difference_points": float(100 * np.max(np.abs(real_beam - sim_beam)[counted]))
                           if counted.any() else None},
        "abs_delta_all": _quantiles(np.abs(delta)), "abs_delta_away_from_edges": _quantiles(away),
        "range_bias_unit_convention_m": float(np.median(delta[edge_free])) if len(away) else None,
        "range_bias_noise_free_m": float(np.median(truth_delta[edge_free])) if len(away) else None,
        "beam_origin_mm": unit.beam_origin_mm,
        "noise_bands": bands, "intensity_spearman": intensity,
        "scan_s": [f["scan_s"] for f in frames],
    }
    if recording.dual:
        second = [f["second"] for f in frames]
        real2, sim2 = np.stack([s["real"] for s in second]), np.stack([s["sim"] for s in second])
        result["second_return"] = {
            "real_fraction_all_sent": _fraction(sum(s["real_all"] for s in second),
                                                sum(s["returning_all"] for s in second)),
            "real_fraction_covered": _fraction(int(real2.sum()), sum(s["real_returning"] for s in second)),
            "sim_fraction_covered": _fraction(int(sim2.sum()), sum(s["sim_returning"] for s in second)),
            "real_returning_covered": sum(s["real_returning"] for s in second),
            "both": int((real2 & sim2).sum()), "only_real": int((real2 & ~sim2).sum()),
            "only_sim": int((~real2 & sim2).sum())}
    result["_delta"] = delta  # for the figure; dropped from the JSON
    result["_edge_free"] = edge_free
    result["_noise"] = noise
    return result


def validate(recording_path: str, metadata_path: str, output: str | None = None, sensor: str | None = None,
             backend: str = "auto", frames: int | None = None, max_jump: float = MAX_JUMP,
             poses_path: str | None = None, echo=print) -> dict[str, Any]:
    """Run the comparison; print the table through ``echo``; write ``validation.json`` and ``validation.png``
    to ``output`` (when given). Returns the figures."""
    t0 = time.perf_counter()
    if output is not None:  # checked before any work: the folder (made if missing) must be writable
        existing = os.path.abspath(output)
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise UserError(f"output {output!r}: {existing} is a file, not a folder")
        if not os.access(existing, os.W_OK):
            raise UserError(f"output {output!r}: folder {existing} is not writable")
    if not (0 < max_jump < 1):
        raise UserError(f"--max-jump must lie in (0, 1), got {max_jump}")
    recording, geometry = open_recording(recording_path, metadata_path)
    spec = geometry.sensor_spec(sensor, recording.dual)
    unit = load_sensor(spec)
    poses: np.ndarray | None = None
    if poses_path == ICP_POSES:
        poses = icp_poses([unit_points(geometry.rays(recording, k), np.where(r > 0, r / 1000.0, np.nan))
                           for k, r in enumerate(recording.images["range_mm"].astype(np.float64))], unit.max_range_m)
    elif poses_path is not None:
        poses = read_kitti_poses(poses_path, recording.frames)
    count = recording.frames if frames is None else min(frames, recording.frames)
    per_frame = []
    for k in range(count):
        rays = geometry.rays(recording, k)
        per_frame.append(compare_frame(recording, k, geometry, rays, geometry.frame_sensor(unit, rays), backend,
                                       max_jump))
    result = summarize(per_frame, recording, geometry)
    result["frames"] = result["frames"][:count]
    result |= {"reflectivity_signal_rank": reflectivity_signal_rank(recording), "poses": poses_path,
               "recording": os.path.basename(os.path.normpath(recording_path)),
               "metadata": os.path.basename(metadata_path), "notes": list(recording.notes),
               "sensor": {k: v for k, v in spec.items() if k not in ("ouster_metadata", "description")},
               "max_jump": max_jump, "range_limit": range_limit_table(recording, unit),
               "run_s": 0.0}
    if poses is not None and count > 1:
        result["noise_frame_to_frame"] = frame_to_frame_noise(recording, geometry.rays(recording, 0), unit,
                                                              poses[:count], backend, max_jump,
                                                              geometry=None if recording.azimuth_rad is None
                                                              else geometry)
    result["run_s"] = time.perf_counter() - t0
    for line in table_lines(result):
        echo(line)
    if output is not None:
        os.makedirs(output, exist_ok=True)
        with open(os.path.join(output, "validation.json"), "w", encoding="utf-8") as f:
            json.dump(json_ready(result), f, indent=1)
        plot_validation(os.path.join(output, "validation.png"), result)
        echo(f"→ {os.path.join(output, 'validation.json')}, {os.path.join(output, 'validation.png')}")
    return result


def json_ready(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` as validation.json writes it (non-finite floats as null); drives' reports too."""
    def clean(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value
    return clean({k: v for k, v in result.items() if not k.startswith("_")})


def _pct(value) -> str:
    return "–" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{100 * value:.1f} %"


def _cm(value) -> str:
    return "–" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{100 * value:.2f} cm"


def figure_text(value) -> str:
    """A figure of a report's table, two decimals; "–" for none."""
    return "–" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.2f}"


_SPEARMAN_LABELS = {
    "our_intensity_vs_reflectivity": "our `intensity` against the unit's REFLECTIVITY",
    "our_reflectivity_vs_reflectivity": "our `reflectivity` against the unit's REFLECTIVITY",
    "our_intensity_vs_signal": "our `intensity` against the unit's SIGNAL",
    "our_reflectivity_vs_signal": "our `reflectivity` against the unit's SIGNAL",
    "unit_reflectivity_vs_signal": "the unit's REFLECTIVITY against its SIGNAL",
}


def _describe(spec: dict[str, Any]) -> str:
    """The spec keys that decide which pixels return and how, in one line."""
    keys = ("name", "min_range_m", "max_range_m", "range_reflectivity", "noise", "detection", "returns",
            "divergence_samples")
    return ", ".join(f"{k}: {json.dumps(spec[k])}" for k in keys if k in spec)


def _reflectivity_warning(r: dict[str, Any]) -> list[str]:
    """A line saying the unit's REFLECTIVITY is no calibrated reflectivity, where its SIGNAL shows that."""
    rank = r.get("reflectivity_signal_rank")
    if rank is None or not rank < MIN_REFLECTIVITY_SIGNAL_RANK:
        return []
    return [f"WARNING: the unit's REFLECTIVITY does not follow its SIGNAL (Spearman {rank:.2f}, calibrated units "
            f"≥ {MIN_REFLECTIVITY_SIGNAL_RANK:g}): the mesh's reflectance and every figure that depends on it "
            f"(which pixels return, r_L, intensity) say nothing about the model"]


def table_lines(r: dict[str, Any]) -> list[str]:
    """The human table of a result (markdown, so the docs can hold it as printed)."""
    a, rim = r["agreement"], r["agreement_rim"]
    lines = [f"{r['recording']} ({r['profile']}, {len(r['frames'])} frame(s), {r['covered_pixels']:,} of "
             f"{r['held_out_pixels']:,} held-out pixels covered by the mesh, {r['inside_pixels']:,} inside it)",
             f"simulated as {_describe(r['sensor'])}", *_reflectivity_warning(r),
             *(f"note: {note}" for note in r.get("notes", ())), "",
             "| figure | value |", "|---|---|",
             f"| pixels inside the mesh: both return / only real / only sim / neither | {a['both']:,} / "
             f"{a['only_real']:,} / {a['only_sim']:,} / {a['neither']:,} |",
             f"| real returns we find | {_pct(a['real_returns_found'])} |",
             f"| our returns the unit lacks | {_pct(a['sim_returns_unit_lacks'])} |",
             f"| on the mesh's rim: both / only real / only sim / neither; found, lacks | {rim['both']:,} / "
             f"{rim['only_real']:,} / {rim['only_sim']:,} / {rim['neither']:,}; {_pct(rim['real_returns_found'])}, "
             f"{_pct(rim['sim_returns_unit_lacks'])} |",
             f"| per-beam valid fraction, max abs difference | "
             f"{figure_text(r['per_beam_valid']['max_abs_difference_points'])} points |",
             f"| \\|Δr\\| median / p90, all | {_cm(r['abs_delta_all']['median_m'])} / {_cm(r['abs_delta_all']['p90_m'])} |",
             f"| \\|Δr\\| median / p90, away from depth edges | {_cm(r['abs_delta_away_from_edges']['median_m'])} / "
             f"{_cm(r['abs_delta_away_from_edges']['p90_m'])} |",
             f"| range bias: our `range` field − RANGE (both from the lidar origin), median | "
             f"{_cm(r['range_bias_unit_convention_m'])} |",
             f"| same, noise-free mesh range | {_cm(r['range_bias_noise_free_m'])} |"]
    for key, value in r["intensity_spearman"].items():
        lines.append(f"| Spearman, {_SPEARMAN_LABELS[key]} | {figure_text(value)} |")
    if "second_return" in r:
        s = r["second_return"]
        lines += [f"| second returns, real (all sent pixels / covered) | {_pct(s['real_fraction_all_sent'])} / "
                  f"{_pct(s['real_fraction_covered'])} |",
                  f"| second returns, ours (covered) | {_pct(s['sim_fraction_covered'])} |",
                  f"| second returns on the same pixels: both / only real / only ours | {s['both']:,} / "
                  f"{s['only_real']:,} / {s['only_sim']:,} |"]
    lim = r["range_limit"]
    lines += [f"| real first returns below our min range ({lim['min_range_m']:g} m) / above our max "
              f"({lim['max_range_m']:g} m) "
              f"| {lim['below_min_range']:,} / {lim['above_max_range']:,} of {lim['returns']:,} |",
              f"| run time (scan per frame) | {r['run_s']:.1f} s ({', '.join(f'{s:.2f}' for s in r['scan_s'])} s) |",
              "", "| range band | σ unit | σ ours | σ of the mesh alone | pixels unit / ours | "
              "\\|Δr\\| median (away from edges) |", "|---|---|---|---|---|---|"]
    for b in r["noise_bands"]:
        lines.append(f"| {b['band_m']} m | {_cm(b['real_sigma_m'])} | {_cm(b['sim_sigma_m'])} | "
                     f"{_cm(b['mesh_sigma_m'])} | {b['real_n']:,} / {b['sim_n']:,} | {_cm(b['abs_delta_median_m'])} |")
    if "noise_frame_to_frame" in r:
        lines += ["", f"| range band | σ unit, frame to frame | σ ours, frame to frame | pixels unit / ours "
                      f"({r['noise_frame_to_frame']['pairs']} pair(s) of frames, after the poses) |", "|---|---|---|---|"]
        for b in r["noise_frame_to_frame"]["bands"]:
            lines.append(f"| {b['band_m']} m | {_cm(b['real_sigma_m'])} | {_cm(b['sim_sigma_m'])} | {b['real_n']:,} / "
                         f"{b['sim_n']:,} |")
    lines += ["", "| REFLECTIVITY band | real first returns | beyond our r_L(ρ) | p99 range |", "|---|---|---|---|"]
    for b in lim["bands"]:
        p99 = "–" if b["p99_range_m"] is None else f"{b['p99_range_m']:.1f} m"
        lines.append(f"| {b['reflectivity']} | {b['returns']:,} | {b['beyond_r_L']:,} ({_pct(b['fraction'])}) | {p99} |")
    return lines


def plot_validation(path: str, r: dict[str, Any]) -> None:
    """Δr histogram, per-beam valid fraction real vs ours, noise σ per range band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    delta = r["_delta"]
    lim = 0.3
    bins = np.linspace(-lim, lim, 121)
    axes[0].hist(np.clip(delta, -lim, lim), bins=bins, color="0.6", label="all")
    axes[0].hist(np.clip(delta[r["_edge_free"]], -lim, lim), bins=bins, color="C0", label="away from depth edges")
    axes[0].set(xlabel="Δr = ours − unit (m, clipped to ±0.3)", ylabel="pixels", title="range difference")
    axes[0].legend()
    beams = np.arange(len(r["per_beam_valid"]["real"]))
    axes[1].plot(beams, 100 * np.asarray(r["per_beam_valid"]["real"]), label="unit", color="k")
    axes[1].plot(beams, 100 * np.asarray(r["per_beam_valid"]["sim"]), label="ours", color="C1")
    axes[1].set(xlabel="beam", ylabel="valid % of pixels inside the mesh", title="per-beam valid fraction", ylim=(0, 102))
    axes[1].legend()
    names = [b["band_m"] for b in r["noise_bands"]]
    x = np.arange(len(names))
    for k, (name, key) in enumerate((("unit", "real_sigma_m"), ("ours", "sim_sigma_m"),
                                     ("mesh alone (noise-free)", "mesh_sigma_m"))):
        values = [100 * b[key] if b[key] is not None and math.isfinite(b[key]) else np.nan for b in r["noise_bands"]]
        axes[2].bar(x + (k - 1) * 0.27, values, width=0.27, label=name, color=("k", "C1", "0.7")[k])
    if "noise_frame_to_frame" in r:
        for name, key, colour in (("unit, frame to frame", "real_sigma_m", "k"),
                                  ("ours, frame to frame", "sim_sigma_m", "C1")):
            values = [100 * b[key] if b[key] is not None and math.isfinite(b[key]) else np.nan
                      for b in r["noise_frame_to_frame"]["bands"]]
            axes[2].plot(x, values, "D--", color=colour, label=name)
    axes[2].set_xticks(x, names)
    axes[2].set(xlabel="range band (m)", ylabel="σ (cm)", title="noise σ (bars: chord residual)")
    axes[2].legend(loc="upper left")
    fig.suptitle(f"{r['recording']}: ours against the unit")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)

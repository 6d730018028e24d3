"""``lidar-fmu calibrate``: what a unit's datasheet does not say, fitted from its own recording(s).

From the inputs :mod:`.validate` takes (recordings of one unit and its calibration, or a preset) it fits min/max
range, the range–reflectivity limit r_L(ρ) (:func:`fit_range_limit`), the detection edge
(:func:`fit_detection_width`), the intensity law (:func:`fit_intensity_law`, where the recording has SIGNAL) and
range noise σ(r, ρ) on validate's own measure (:func:`fit_noise`), and writes them into the unit's own spec with
``noise: physical`` (:func:`calibrated_spec`). Each fit, what it cannot fit, and the results: docs/validation.md
("lidar-fmu calibrate").
"""
from __future__ import annotations

import contextlib
import math
import os
from typing import Any

import numpy as np

from ..errors import UserError
from ..physics.effects import (
    DETECTION_WIDTH,
    MAX_DETECTION_WIDTH,
    SHOT_NOISE_MIN_REFLECTIVITY,
    SHOT_NOISE_REFERENCE_RANGE_M,
)
from ..physics.range_limit import RangeReflectivityLimit
from ..sensors import load_sensor
from ..sensors.spec import FILE_KEYS
from .makers import open_recording
from .recording import Recording
from .units import UnitGeometry
from .validate import (
    MAX_JUMP,
    MIN_REFLECTIVITY_SIGNAL_RANK,
    MIN_SAMPLES,
    REFLECTIVITY_BANDS,
    held_out_chord_residuals,
    ranges_agree,
    rank_correlation,
    ranks,
    reflectivity_signal_rank,
    robust_sigma,
    unit_reflectivity,
)

#: fraction of a reflectivity band's returns the fitted r_L may leave beyond it (validate's target is 2 %)
BEYOND_FRACTION = 0.01
#: min/max range are the unit's extreme returns widened by this fraction
RANGE_MARGIN = 0.01
#: reflectivity bins (unit REFLECTIVITY, percent) the law's exponent is chosen on: below 20 %, where the limit binds
SHAPE_BINS = ((0, 2), (2, 3), (3, 5), (5, 7), (7, 10), (10, 15), (15, 20))
#: the exponents n of r_L ∝ ρ^(1/n) tried: extended, line and point targets (the range_reflectivity fits)
ROOT_FITS = {"root2": 2, "root3": 3, "root4": 4}
#: the lowest pair written: the unit's darkest whole percent halved (below it r_L follows the root-2 tail)
LOWEST_PAIR_REFLECTIVITY = SHOT_NOISE_MIN_REFLECTIVITY
#: widths of the logistic edge tried (log-spaced, 0.01 up to the widest the physics pass draws whole)
WIDTHS = np.geomspace(0.01, MAX_DETECTION_WIDTH, 60)
#: the intensity laws tried (:func:`fit_intensity_law`), and on how many returns at most
INTENSITY_REFERENCE_RANGES_M = (4.0, 6.0, 8.0, 10.0, 12.0, 15.0, 20.0, 25.0)
INTENSITY_EXPONENTS_NEAR = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
INTENSITY_EXPONENTS_FAR = (1.5, 2.0, 2.5, 3.0)
INTENSITY_SAMPLES = 20_000
#: bins of the signal proxy the noise is fitted on
NOISE_BINS = 12
#: variance of (unit's − mesh's chord residual) of one held-out pixel, in σ_u² of the unit's noise per pixel: the
#: unit's residual (m against m ± 2, all held-out pixels) carries 1.5 σ_u²; the mesh's, cast between its pixels
#: m ± 1 (the mean of the two), is (v₋₁ + v₊₁ − v₋₃ − v₊₃) / 4 of other pixels' noise, σ_u²/4. The surface shape
#: both follow cancels pixel by pixel.
DIFFERENCE_VARIANCE_FACTOR = 1.5 + 0.25
#: below this variance (1 mm²) a bin's weight stops growing: bins where the mesh explains all of the residual
NOISE_VAR_FLOOR_M2 = 1e-6


def _returns(recordings: list[Recording]) -> tuple[np.ndarray, np.ndarray]:
    """(RANGE m, REFLECTIVITY %) of every first return of every sent pixel."""
    ranges, refls = [], []
    for recording in recordings:
        valid = recording.first_returns()
        ranges.append(recording.images["range_mm"][valid] * 1e-3)
        refls.append(recording.images["reflectivity"].astype(np.float64)[valid])
    return np.concatenate(ranges), np.concatenate(refls)


def fit_range_limit(range_m: np.ndarray, reflectivity_percent: np.ndarray,
                    beyond: float = BEYOND_FRACTION) -> tuple[str, float]:
    """(fit, A) of r_L = A·ρ^(1/n) from real returns; ``beyond``: the fraction each band may leave beyond r_L.
    The fit: docs/validation.md#lidar-fmu-calibrate-what-the-datasheet-does-not-say-from-the-units-own-recording."""
    rho = unit_reflectivity(reflectivity_percent)
    best: tuple[float, str, float] | None = None
    for fit, n in ROOT_FITS.items():
        scaled = range_m / rho ** (1.0 / n)  # each return's A: the r_L law through it
        shape = [np.quantile(scaled[(reflectivity_percent >= lo) & (reflectivity_percent < hi)], 1.0 - beyond)
                 for lo, hi in SHAPE_BINS
                 if np.count_nonzero((reflectivity_percent >= lo) & (reflectivity_percent < hi)) >= MIN_SAMPLES]
        bands = [np.quantile(scaled[(reflectivity_percent >= lo) & (reflectivity_percent < hi)], 1.0 - beyond)
                 for lo, hi in zip(REFLECTIVITY_BANDS[:-2], REFLECTIVITY_BANDS[1:-1])  # retroreflectors apart
                 if np.count_nonzero((reflectivity_percent >= lo) & (reflectivity_percent < hi)) >= MIN_SAMPLES]
        if len(shape) < 2 or not bands:
            continue
        spread = float(np.std(np.log(shape)))
        if best is None or spread < best[0]:
            best = (spread, fit, float(max(bands)))
    if best is None:
        raise UserError("calibrate: too few returns per reflectivity band below 20 % to fit the range–reflectivity "
                        f"limit (each needs {MIN_SAMPLES})")
    return best[1], best[2]


def fit_noise(recordings: list[Recording], geometry: UnitGeometry, max_jump: float = MAX_JUMP,
              backend: str = "auto") -> tuple[float, float, list[dict[str, Any]]]:
    """(σ0 m, σ_shot m, the bins) of σ² = σ0² + σ_shot²·x, x = (r / 10 m)² / ρ
    (docs/validation.md#lidar-fmu-calibrate-what-the-datasheet-does-not-say-from-the-units-own-recording).

    Per bin of x, σ_u of validate's chord residual of the unit's held-out pixels less that of the noise-free mesh
    on the same pixels (:data:`DIFFERENCE_VARIANCE_FACTOR`): what the mesh follows is surface shape, not noise."""
    # casts the geometry only: the unit's rays are what count; loaded once for every frame
    sensor = load_sensor(geometry.sensor_spec(None, False))
    xs, unit, mesh = [], [], []
    for recording in recordings:
        for f in range(recording.frames):
            rays = geometry.rays(recording, f)
            residuals = held_out_chord_residuals(recording, f, geometry, rays, geometry.frame_sensor(sensor, rays),
                                                 backend, max_jump)
            if residuals is None:
                continue
            ok, real, noise_free = residuals
            image = recording.images["range_mm"][f].astype(np.float64) * 1e-3
            rho = unit_reflectivity(recording.images["reflectivity"][f])
            xs.append((image / SHOT_NOISE_REFERENCE_RANGE_M)[ok] ** 2 / np.maximum(rho[ok], SHOT_NOISE_MIN_REFLECTIVITY))
            unit.append(real[ok])
            mesh.append(noise_free[ok])
    x = np.concatenate(xs) if xs else np.zeros(0)
    if len(x) < NOISE_BINS * MIN_SAMPLES:
        raise UserError(f"calibrate: {len(x)} held-out pixels with both neighbours on one surface; the noise fit "
                        f"needs {NOISE_BINS * MIN_SAMPLES}")
    unit_residual, mesh_residual = np.concatenate(unit), np.concatenate(mesh)
    edges = np.quantile(x, np.linspace(0.0, 1.0, NOISE_BINS + 1))
    bins = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        pick = (x >= lo) & (x <= hi)
        sigma_unit, sigma_mesh = robust_sigma(unit_residual[pick]), robust_sigma(mesh_residual[pick])
        sigma = robust_sigma(unit_residual[pick] - mesh_residual[pick], DIFFERENCE_VARIANCE_FACTOR)
        bins.append({"x_median": float(np.median(x[pick])), "sigma_m": sigma, "unit_sigma_m": sigma_unit,
                     "mesh_sigma_m": sigma_mesh, "n": int(pick.sum())})
    bx = np.array([b["x_median"] for b in bins])
    var = np.array([b["sigma_m"] for b in bins]) ** 2
    weight = 1.0 / np.maximum(var, NOISE_VAR_FLOOR_M2)  # relative errors alike in every bin
    design = np.stack([np.ones_like(bx), bx], axis=1) * weight[:, None]
    (floor_var, shot_var), *_ = np.linalg.lstsq(design, var * weight, rcond=None)
    if shot_var < 0:
        floor_var, shot_var = float(np.sum(var * weight) / np.sum(weight)), 0.0
    elif floor_var < 0:
        floor_var, shot_var = 0.0, float(np.sum(var * bx * weight) / np.sum(bx * bx * weight))
    return math.sqrt(floor_var), math.sqrt(shot_var), bins


def fit_detection_width(recordings: list[Recording], unit: UnitGeometry,
                        limit: RangeReflectivityLimit,
                        max_jump: float = MAX_JUMP) -> tuple[float, dict[str, Any]]:
    """(w, figures) of the logistic edge P(x) = (1 − p₀) / (1 + 19·x^(1/w)), x = r / r_L(ρ), by maximum likelihood.

    Each odd-column pixel whose two same-beam neighbours (m ± 1) return and agree (the ``max_jump`` rule) looks at
    their surface: at their mean range and REFLECTIVITY. Whether it returned is one draw of P(x); p₀, the misses
    no range explains (edges, glints), is their rate well inside r_L (x < 0.5)."""
    xs, hits = [], []
    for recording in recordings:
        for f in range(recording.frames):
            image = recording.images["range_mm"][f].astype(np.float64) * 1e-3
            sent = recording.sent(f)
            image[(image <= 0) | ~recording.pixels_sent(f)] = np.nan
            refl = recording.images["reflectivity"][f].astype(np.float64)
            left, right = np.roll(image, 1, axis=1), np.roll(image, -1, axis=1)
            columns = np.arange(unit.columns)
            target = ((columns % 2 == 1) & sent & np.roll(sent, 1) & np.roll(sent, -1))[None, :] & ranges_agree(
                left, right, max_jump=max_jump)
            range_m = 0.5 * (left + right)[target]
            rho = unit_reflectivity(0.5 * (np.roll(refl, 1, axis=1) + np.roll(refl, -1, axis=1))[target])
            r_l = limit.max_range_m_for(rho)
            xs.append(range_m / np.maximum(r_l, 1e-9))
            hits.append(np.isfinite(image[target]))
    x, hit = np.concatenate(xs), np.concatenate(hits)
    inside = x < 0.5
    if inside.sum() < MIN_SAMPLES or (x >= 0.5).sum() < MIN_SAMPLES:
        return DETECTION_WIDTH, {"pixels": int(len(x)), "fitted": False}
    p0 = float(1.0 - hit[inside].mean())
    near = x >= 0.3  # where the edge can show; further in every w gives P ≈ 1 − p₀
    xn, hn = x[near], hit[near]
    best = (-np.inf, DETECTION_WIDTH)
    for w in WIDTHS:
        p = (1.0 - p0) / (1.0 + 19.0 * xn ** (1.0 / w))
        p = np.clip(p, 1e-9, 1 - 1e-9)
        log_likelihood = float(np.sum(np.where(hn, np.log(p), np.log1p(-p))))
        if log_likelihood > best[0]:
            best = (log_likelihood, float(w))
    return best[1], {"pixels": int(len(x)), "fitted": True, "miss_inside": p0}


def fit_intensity_law(recordings: list[Recording]) -> dict[str, Any] | None:
    """``intensity_law`` {r₀, a, b} whose intensity of the unit's own REFLECTIVITY and RANGE ranks its SIGNAL best
    (Spearman, on up to :data:`INTENSITY_SAMPLES` returns); None where no recording has SIGNAL."""
    ranges, refls, signals = [], [], []
    for recording in recordings:
        if "signal" not in recording.images:
            continue
        refl = recording.images["reflectivity"].astype(np.float64)
        valid = recording.first_returns() & (refl <= 100)  # retroreflectors saturate SIGNAL
        ranges.append(recording.images["range_mm"][valid] * 1e-3)
        refls.append(unit_reflectivity(refl[valid]))
        signals.append(recording.images["signal"].astype(np.float64)[valid])
    if not ranges or sum(len(r) for r in ranges) < MIN_SAMPLES:
        return None
    range_m, rho, signal = np.concatenate(ranges), np.concatenate(refls), np.concatenate(signals)
    if len(range_m) > INTENSITY_SAMPLES:
        pick = np.random.default_rng(0).choice(len(range_m), INTENSITY_SAMPLES, replace=False)
        range_m, rho, signal = range_m[pick], rho[pick], signal[pick]
    signal_ranks = ranks(signal)  # ranked once for every candidate law
    best: tuple[float, dict[str, Any]] = (-np.inf, {})
    for r0 in INTENSITY_REFERENCE_RANGES_M:
        x = range_m / r0
        for near in INTENSITY_EXPONENTS_NEAR:
            for far in INTENSITY_EXPONENTS_FAR:
                rank = rank_correlation(ranks(rho * np.where(x < 1.0, x ** near, x ** -far)), signal_ranks)
                if rank > best[0]:
                    best = (rank, {"reference_range_m": float(r0), "near_exponent": float(near),
                                   "far_exponent": float(far)})
    return best[1] | {"_spearman": best[0]}


def calibrated_spec(recordings: list[Recording], geometry: UnitGeometry,
                    max_jump: float = MAX_JUMP) -> dict[str, Any]:
    """The unit's spec with the fitted keys; ``_fit`` holds the figures behind them.
    The keys: docs/validation.md#lidar-fmu-calibrate-what-the-datasheet-does-not-say-from-the-units-own-recording."""
    range_m, refl = _returns(recordings)
    if len(range_m) < MIN_SAMPLES:
        raise UserError(f"calibrate: {len(range_m)} returns in the recording(s); too few to fit anything")
    fit, a = fit_range_limit(range_m, refl)
    sigma0, shot, bins = fit_noise(recordings, geometry, max_jump)
    n = ROOT_FITS[fit]
    spec = geometry.base_spec()
    names = ", ".join(r.name for r in recordings)
    # a scene smaller than the unit's reach bounds the returns, not the unit: the fit only widens the datasheet
    min_range = min(spec["min_range_m"], math.floor(float(range_m.min()) * (1 - RANGE_MARGIN) * 1000) / 1000)
    max_range = max(spec["max_range_m"], math.ceil(float(range_m.max()) * (1 + RANGE_MARGIN) * 10) / 10)
    sheet = geometry.datasheet_limit(max_range)  # a datasheet without a figure: the unit's maximum range
    reaches_sheet = a * 0.1 ** (1.0 / n) >= (float(sheet.max_range_m_for(0.1)) if sheet is not None else max_range)
    if reaches_sheet:
        pairs = [[LOWEST_PAIR_REFLECTIVITY, round(a * LOWEST_PAIR_REFLECTIVITY ** (1.0 / n), 3)], [1.0, round(a, 3)]]
        RangeReflectivityLimit(tuple(map(tuple, pairs)), fit, max_range)  # checks what is written
        spec["range_reflectivity"] = {"pairs": pairs, "fit": fit}
    figures = spec.get("range_reflectivity")
    limit = None if figures is None else RangeReflectivityLimit(tuple(map(tuple, figures["pairs"])), figures["fit"],
                                                                max_range)
    width, edge = fit_detection_width(recordings, geometry, limit, max_jump) if limit is not None else (
        DETECTION_WIDTH, {"pixels": 0, "fitted": False})
    law = fit_intensity_law(recordings)
    if law is not None:
        spec["intensity_law"] = {k: v for k, v in law.items() if not k.startswith("_")}
    spec |= {
        "description": f"{spec['description']}; min/max range, "
                       f"{'range_reflectivity, ' if reaches_sheet else ''}detection and range_noise "
                       f"fitted by lidar-fmu calibrate on {names}",
        "min_range_m": min_range, "max_range_m": max_range,
        # one frame too few near r_L to show the edge: the unit's resolved width stays
        "detection": "logistic",
        "detection_width": round(width, 4) if edge["fitted"] else spec.get("detection_width", DETECTION_WIDTH),
        "range_noise": {"range_sigma_m": round(sigma0, 5), "shot_sigma_m": round(shot, 6)},
        "noise": "physical",
    }
    spec["_fit"] = {"returns": int(len(range_m)), "noise_bins": bins, "r_L_A_m": a, "r_L_fit": fit,
                    "r_L_fitted": reaches_sheet, "edge": edge,
                    "intensity_spearman": None if law is None else law["_spearman"]}
    return spec


def calibrate(recording_paths: list[str], metadata_path: str, output: str, max_jump: float = MAX_JUMP,
              echo=print) -> dict[str, Any]:
    """Fit ``recording_paths`` (one unit's) and write the spec to ``output`` (YAML); returns it."""
    import yaml

    folder = os.path.dirname(os.path.abspath(output))  # checked before the fit, not after it
    if not os.path.isdir(folder):
        raise UserError(f"-o {output}: folder {folder} does not exist")
    if os.path.isdir(output):
        raise UserError(f"-o {output} is a folder; give the spec file's name (e.g. unit.yaml)")
    if not os.access(folder, os.W_OK):
        raise UserError(f"-o {output}: folder {folder} is not writable")
    opened = [open_recording(path, metadata_path) for path in recording_paths]
    recordings, geometry = [recording for recording, _ in opened], opened[0][1]
    for path, (_, unit) in zip(recording_paths, opened):
        if (unit.name, unit.beams, unit.columns) != (geometry.name, geometry.beams, geometry.columns):
            raise UserError(f"calibrate: {path} is a {unit.name} of {unit.beams} × {unit.columns} pixels, "
                            f"{recording_paths[0]} a {geometry.name} of {geometry.beams} × {geometry.columns}: "
                            "one unit's recordings at a time")
    for recording in recordings:  # every fit but min/max range weighs the unit's REFLECTIVITY
        rank = reflectivity_signal_rank(recording)
        if rank is not None and not rank >= MIN_REFLECTIVITY_SIGNAL_RANK:
            raise UserError(f"calibrate: {recording.name}: the unit's REFLECTIVITY does not follow its SIGNAL "
                            f"(Spearman {rank:.2f}, calibrated units ≥ {MIN_REFLECTIVITY_SIGNAL_RANK:g}), so it "
                            "holds no calibrated reflectivity (as on early firmware) and r_L, the detection edge, "
                            "the noise's signal term and the intensity law cannot be fitted from it")
    spec = calibrated_spec(recordings, geometry, max_jump)
    fitted = spec.pop("_fit")
    # the unit's files named from the spec's folder (load_sensor reads them from there): they move together
    for key in FILE_KEYS:
        if isinstance(spec.get(key), str) and os.path.isabs(spec[key]):
            with contextlib.suppress(ValueError):  # (no relative path between two Windows drives: it stays absolute)
                spec[key] = os.path.relpath(spec[key], folder)
    with open(output, "w", encoding="utf-8") as f:
        yaml.safe_dump(spec, f, sort_keys=False, allow_unicode=True)
    noise = spec["range_noise"]
    law = (f"r_L = {fitted['r_L_A_m']:.1f} m · ρ^(1/{ROOT_FITS[fitted['r_L_fit']]})" if fitted["r_L_fitted"] else
           "r_L: the unit's resolved one (the recording's returns do not reach the datasheet's 10 % range: the "
           "scene bounds them)")
    echo(f"{fitted['returns']:,} returns: range {spec['min_range_m']:g}–{spec['max_range_m']:g} m; {law}; noise σ0 "
         f"{noise['range_sigma_m'] * 100:.2f} cm, shot {noise['shot_sigma_m'] * 100:.3f} cm (ρ = 1 at 10 m); "
         f"detection edge width {spec['detection_width']:g}"
         f"{'' if fitted['edge']['fitted'] else ' (as resolved: too few pixels near r_L to fit it)'}")
    if "intensity_law" in spec and fitted["intensity_spearman"] is not None:
        law = spec["intensity_law"]
        echo(f"intensity: 100·ρ·(r/{law['reference_range_m']:g} m)^{law['near_exponent']:g} inside, "
             f"^−{law['far_exponent']:g} beyond (Spearman against SIGNAL {fitted['intensity_spearman']:.3f})")
    echo(f"→ {output}")
    return spec

"""Beam divergence and multiple echoes: a beam's footprint cast as sub-rays, their hits formed into echoes.

A real beam is a cone, not a line: at an object's edge part of the footprint lands on the object and part on what
lies behind, and a dual-return unit reports both. The spec keys ``beam_divergence_mrad``, ``divergence_samples``,
``beam_diameter_m``, ``returns``, ``return_order``, ``divergence_sampling`` and ``echo_separation_m``
(:func:`parse_footprint`) set it up; with the defaults a beam is one ray and gives one return.

* :func:`footprint_offsets`: the sub-rays on a sunflower spiral across the Gaussian beam's 1/e² ellipse, each
  with its cell's energy;
* :func:`first_pass_sub_rays`, :func:`refine_mask`: adaptive sampling, one sub-ray per beam first, then the other
  sub-rays of the beams near a range step;
* :func:`form_echoes` (one compiled pass after every backend): a beam's sub-ray hits split into echoes, and the
  mode (strongest, first, last, dual in its ``return_order``) picks one or two;
  :mod:`lidar_fmu.physics.effects` then acts on each echo.

The model, its sources (Siegman's TEM00 profile, HELIOS++, the Velodyne and Ouster return orders), the defaults'
reasons and the checks against a real dual-return recording: docs/physics.md, "Beam divergence and multiple echoes".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..errors import LidarFmuError
from ..geometry.pattern import RayPattern
from ..pointcloud import POINT_DTYPE, Returns, concatenate_returns, place_on_rays
from .ground_truth import truth_per_ray
from .range_limit import intensity_percent, limit_params, range_limit_m
from .weather import WEATHER_OBJECT_ID

RETURN_MODES = ("strongest", "first", "last", "dual")
RETURN_ORDERS = ("strongest_last", "strongest_to_weakest", "nearest_to_farthest", "farthest_to_nearest")
_ORDER_CODE = {name: code for code, name in enumerate(RETURN_ORDERS)}
_STRONGEST_LAST, _STRONGEST_TO_WEAKEST, _NEAREST_TO_FARTHEST, _FARTHEST_TO_NEAREST = range(4)
#: Ouster metadata ``config_params.return_order`` → ours (ouster-sdk sensor_config.h ``return_order_strings``; the
#: two deprecated test-firmware orders taken as their current equivalents)
OUSTER_RETURN_ORDERS = {"STRONGEST_TO_WEAKEST": "strongest_to_weakest", "NEAREST_TO_FARTHEST": "nearest_to_farthest",
                        "FARTHEST_TO_NEAREST": "farthest_to_nearest", "STRONGEST_RETURN_FIRST": "strongest_to_weakest",
                        "LAST_RETURN_FIRST": "farthest_to_nearest"}
SAMPLINGS = ("adaptive", "full")
#: sub-rays per beam of ``returns: dual`` when the spec names no ``divergence_samples``
DEFAULT_DUAL_SAMPLES = 16
_FIRST, _STRONGEST, _LAST, _DUAL = 0, 1, 2, 3
_MODE_CODE = {"first": _FIRST, "strongest": _STRONGEST, "last": _LAST, "dual": _DUAL}

#: Echoes closer than this merge (m). Measured: in the shared Ouster OS-1-128 dual-return recording
#: (``tests/data/ouster_os1_128_dual_returns.json``, ``scripts/ouster_dual_returns.py``) the smallest gap between
#: a pixel's two returns is 1.00 m (1st percentile 1.09 m) of 1,089 pairs; no datasheet states it. Taken for every
#: preset (assumed for the other units: their manuals give no figure).
DEFAULT_ECHO_SEPARATION_M = 1.0
#: Most sub-rays per beam (a frame of 131k beams at 64 sub-rays is 8.4 M rays).
MAX_DIVERGENCE_SAMPLES = 64
#: Lambertian-equivalent reflectivity a saturated (retroreflective) sub-ray counts with when echoes compete for
#: "strongest": far above any diffuse surface (the clutter model in :mod:`lidar_fmu.physics.effects` uses the same 1e3).
SATURATED_REFLECTIVITY = 1e3
_GOLDEN_ANGLE_RAD = math.pi * (3.0 - math.sqrt(5.0))
_FWHM_TO_1_OVER_E2 = 1.0 / math.sqrt(2.0 * math.log(2.0))  # half-width at 1/e² per FWHM (full width)


class FootprintError(LidarFmuError, ValueError):
    """A beam-divergence or return-mode spec value that cannot be used."""


@dataclass(frozen=True)
class Footprint:
    """How a sensor's beams spread and which echoes it reports (module doc); the default is one ray per beam."""

    divergence_rad: tuple = (0.0, 0.0)  # FWHM full angle, horizontal and vertical
    samples: int = 1
    mode: str = "strongest"
    separation_m: float = DEFAULT_ECHO_SEPARATION_M
    diameter_m: float = 0.0  # at the exit aperture (1/e²)
    order: str = "strongest_last"  # which two echoes dual reports, in which order (RETURN_ORDERS)
    sampling: str = "adaptive"  # sub-rays where a beam's footprint may straddle an edge, or on every beam

    @property
    def active(self) -> bool:
        """Are sub-rays cast (else one ray per beam, one echo, exactly as without this module)?"""
        return self.samples > 1

    @property
    def max_echoes(self) -> int:
        return 2 if self.mode == "dual" else 1


def parse_footprint(spec: dict) -> Footprint:
    """``beam_divergence_mrad``, ``divergence_samples``, ``returns`` and ``echo_separation_m`` of a resolved spec."""
    mode = spec.get("returns", "strongest")
    if mode not in RETURN_MODES:
        raise FootprintError(f"returns must be one of {', '.join(RETURN_MODES)}, got {mode!r}")
    order = spec.get("return_order", "strongest_last")
    if order not in RETURN_ORDERS:
        raise FootprintError(f"return_order must be one of {', '.join(RETURN_ORDERS)}, got {order!r}")
    sampling = spec.get("divergence_sampling", "adaptive")
    if sampling not in SAMPLINGS:
        raise FootprintError(f"divergence_sampling must be one of {', '.join(SAMPLINGS)}, got {sampling!r}")
    dual_default = mode == "dual" and bool(spec.get("beam_divergence_mrad"))
    samples = spec.get("divergence_samples", DEFAULT_DUAL_SAMPLES if dual_default else 1)
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) \
            or not 1 <= samples <= MAX_DIVERGENCE_SAMPLES:
        raise FootprintError(f"divergence_samples must be an integer in 1..{MAX_DIVERGENCE_SAMPLES}, got {samples!r}")
    divergence = spec.get("beam_divergence_mrad", [0.0, 0.0])
    if isinstance(divergence, (int, float)) and not isinstance(divergence, bool):
        divergence = [divergence, divergence]
    if (not isinstance(divergence, (list, tuple)) or len(divergence) != 2
            or not all(_finite_at_least(v, 0.0) for v in divergence)):
        raise FootprintError(f"beam_divergence_mrad must be [horizontal, vertical] mrad ≥ 0, got {divergence!r}")
    if samples > 1 and not any(divergence):
        raise FootprintError("divergence_samples > 1 needs a beam_divergence_mrad above 0")
    separation = spec.get("echo_separation_m", DEFAULT_ECHO_SEPARATION_M)
    if not _finite_at_least(separation, 0.0) or separation == 0:
        raise FootprintError(f"echo_separation_m must be a number > 0, got {separation!r}")
    diameter = spec.get("beam_diameter_m", 0.0)
    if not _finite_at_least(diameter, 0.0) or diameter > 1.0:
        raise FootprintError(f"beam_diameter_m must be a number in 0..1 m, got {diameter!r}")
    return Footprint((float(divergence[0]) * 1e-3, float(divergence[1]) * 1e-3), int(samples), mode,
                     float(separation), float(diameter), order, sampling)


def _finite_at_least(value, low: float) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
            and value >= low)


def footprint_offsets(footprint: Footprint) -> tuple[np.ndarray, np.ndarray]:
    """(S, 2) float64 angles (rad, horizontal and vertical) of the sub-rays off the beam axis, (S,) float64 energy
    weights summing to 1 (docs/physics.md#beam-divergence-and-multiple-echoes). One sample: the axis, weight 1."""
    unit, weights = _sunflower(footprint.samples)
    return unit * np.asarray(footprint.divergence_rad, np.float64) * _FWHM_TO_1_OVER_E2, weights


def _sunflower(samples: int) -> tuple[np.ndarray, np.ndarray]:
    """(S, 2) points filling the unit disc in equal areas (Vogel's spiral; the centre for one), (S,) Gaussian
    weights exp(−2ρ²) of a beam whose 1/e² radius is the disc's, summing to 1."""
    if samples == 1:
        return np.zeros((1, 2)), np.ones(1)
    k = np.arange(samples, dtype=np.float64)
    rho = np.sqrt((k + 0.5) / samples)
    angle = k * _GOLDEN_ANGLE_RAD
    weights = np.exp(-2.0 * rho * rho)
    return np.stack([rho * np.cos(angle), rho * np.sin(angle)], axis=1), weights / weights.sum()


def sub_ray_pattern(pattern, footprint: Footprint):
    """``pattern`` with every ray replaced by its footprint's S sub-rays, adjacent (ray ``i·S + k``).

    The result is a ``rows·S × columns`` pattern (sub-ray k of beam row r at row ``r·S + k``), each sub-ray with
    its beam's id, column, firing time and origin.
    """
    s = footprint.samples
    offsets, _ = footprint_offsets(footprint)
    d = pattern.directions.astype(np.float64)
    # the beam's horizontal axis (towards larger azimuth) and vertical axis (up), orthogonal to it
    horizontal = np.stack([-d[:, 1], d[:, 0], np.zeros(len(d))], axis=1)
    norm = np.linalg.norm(horizontal, axis=1, keepdims=True)
    polar = norm[:, 0] < 1e-9  # straight up or down: any horizontal axis will do
    horizontal[polar] = (0.0, 1.0, 0.0)
    horizontal /= np.where(polar[:, None], 1.0, norm)
    vertical = np.cross(d, horizontal)
    tan = np.tan(offsets)
    sub = (d[:, None, :] + tan[None, :, 0, None] * horizontal[:, None, :] + tan[None, :, 1, None] * vertical[:, None, :])
    sub /= np.linalg.norm(sub, axis=2, keepdims=True)
    origins = None if pattern.origins is None else np.repeat(pattern.origins, s, axis=0)
    if footprint.diameter_m > 0:  # across the exit aperture, each sub-ray at its own place in the footprint
        unit, _ = _sunflower(s)
        radius = 0.5 * footprint.diameter_m
        shift = radius * (unit[None, :, 0, None] * horizontal[:, None, :] + unit[None, :, 1, None] * vertical[:, None, :])
        base = np.zeros((len(d), 1, 3)) if pattern.origins is None else pattern.origins[:, None, :].astype(np.float64)
        origins = (base + shift).reshape(-1, 3)
    return RayPattern(np.ascontiguousarray(sub.reshape(-1, 3), np.float32), np.repeat(pattern.beam_id, s),
                      np.repeat(pattern.column, s), np.repeat(pattern.time_offset_s, s), pattern.rows * s,
                      pattern.columns, origins=None if origins is None else np.ascontiguousarray(origins, np.float32))


# The steps of _form_echoes are compiled into it (inline="always"), so its machine code is that of the one loop
# it was before they were split out (the same instructions, checked); left to LLVM, the sort stays a call per beam.
@njit(cache=True, nogil=True)
def _form_echoes(points, sub_ray, perm, samples, weights, one_ray, mode, order_code, separation_m, limit, out,
                 out_ray, out_intensity, out_pulse, out_source):
    """Echoes of every beam from its sub-rays' returns (``points``, read in sub-ray order: ``perm``, or as they come
    where that is empty; ``sub_ray`` their indices; ``one_ray``: per beam, was it cast as one sub-ray, whose
    returns then weigh 1 (empty: none was));
    writes the reported echoes into ``out`` (range, reflectivity, normal, beam, object, saturated, echo) and their
    beam, intensity, pulse width and strongest sub-ray return; returns how many. ``limit``: the range–reflectivity
    limit's :func:`~.range_limit.range_limit_m` parameters, which every echo but a saturated one must pass."""
    fit, fit_a, fit_b, fit_c, tail_refl, tail_m, limit_max = limit
    m = points.shape[0]
    order = np.empty(samples, np.int64)
    # per echo of one beam: range, reflectivity, power, pulse spread, strongest member, saturated
    e_range = np.empty(samples)
    e_refl = np.empty(samples)
    e_power = np.empty(samples)
    e_spread = np.empty(samples)
    e_best = np.empty(samples, np.int64)
    e_saturated = np.empty(samples, np.bool_)
    pick = np.empty(2, np.int64)
    count = 0
    end = 0
    while end < m:
        start, beam = end, sub_ray[perm[end] if perm.shape[0] else end] // samples
        while end < m and sub_ray[perm[end] if perm.shape[0] else end] // samples == beam:
            end += 1
        k = end - start
        one = perm[start] if perm.shape[0] else start
        single = one_ray.shape[0] > 0 and one_ray[beam]
        if k == 1 and (single or weights[sub_ray[one] - beam * samples] == 1.0):
            # a beam of one return at full weight (a beam cast as one ray): its echo is that return, exactly what
            # the merge below gives it (ρ·r / ρ is r to the bit: a float32 product is exact in float64)
            saturated = points[one].saturated != 0
            refl = np.float64(points[one].reflectivity)
            r_echo = np.float64(points[one].range)
            if not (saturated
                    or r_echo <= range_limit_m(fit, fit_a, fit_b, fit_c, tail_refl, tail_m, limit_max, refl)):
                continue
            e_range[0] = r_echo
            e_refl[0] = 1.0 if saturated else refl
            e_spread[0] = 0.0
            e_best[0] = one
            e_saturated[0] = saturated
            pick[0] = 0
            picked = 1
        else:
            _sort_by_range(points, perm, start, k, order)
            echoes = 0
            a = 0
            while a < k:  # an echo wherever neighbours lie separation_m or more apart
                b = a + 1
                while b < k and points[order[b]].range - points[order[b - 1]].range < separation_m:
                    b += 1
                r_echo, refl, power, best, saturated = _merged_echo(points, sub_ray, weights, single, beam * samples,
                                                                    order, a, b)
                if saturated or r_echo <= range_limit_m(fit, fit_a, fit_b, fit_c, tail_refl, tail_m, limit_max, refl):
                    e_range[echoes] = r_echo
                    e_refl[echoes] = 1.0 if saturated else refl
                    e_power[echoes] = power
                    e_spread[echoes] = points[order[b - 1]].range - points[order[a]].range
                    e_best[echoes] = best
                    e_saturated[echoes] = saturated
                    echoes += 1
                a = b
            if echoes == 0:
                continue
            picked = _pick(e_power, echoes, mode, order_code, pick)
        for n in range(picked):
            e = pick[n]
            src = points[e_best[e]]
            out[count].range = e_range[e]
            out[count].reflectivity = e_refl[e]
            out[count].normal_x = src.normal_x
            out[count].normal_y = src.normal_y
            out[count].normal_z = src.normal_z
            out[count].beam_id = src.beam_id
            out[count].object_id = src.object_id
            out[count].saturated = 1 if e_saturated[e] else 0
            out[count].time = 0.0
            out[count].echo = n
            out_ray[count] = beam
            out_intensity[count] = 100.0 if e_saturated[e] else intensity_percent(e_refl[e], e_range[e])
            out_pulse[count] = separation_m + e_spread[e]
            out_source[count] = e_best[e]
            count += 1
    return count


@njit(cache=True, nogil=True, inline="always")
def _sort_by_range(points, perm, start, k, order):
    """``order[:k]``: the returns ``start … start + k − 1`` (of ``perm`` where not empty) by range (an insertion
    sort: a beam has at most ``samples`` of them, mostly in order already)."""
    for a in range(k):
        i = perm[start + a] if perm.shape[0] else start + a
        b = a
        while b > 0 and points[order[b - 1]].range > points[i].range:
            order[b] = order[b - 1]
            b -= 1
        order[b] = i


@njit(cache=True, nogil=True, inline="always")
def _merged_echo(points, sub_ray, weights, single, first_sub_ray, order, a, b):
    """The echo of the returns ``order[a:b]`` (sub-ray k weighs wₖ, ``first_sub_ray``: the beam's first; each
    weighs 1 where the beam was cast as one sub-ray, ``single``) →
    (range: their mean weighted by wₖ ρₖ, by wₖ alone when that is 0; reflectivity Σ wₖ ρₖ; power Σ wₖ ρₖ / rₖ²;
    the strongest member; saturated). A saturated member counts at :data:`SATURATED_REFLECTIVITY` in the
    weights, its own reflectivity in the sum."""
    refl = 0.0
    power = 0.0
    weight = 0.0
    weighted_range = 0.0
    plain_weight = 0.0
    plain_range = 0.0
    best = order[a]
    best_share = -1.0
    saturated = False
    for t in range(a, b):
        i = order[t]
        w = 1.0 if single else weights[sub_ray[i] - first_sub_ray]
        r = np.float64(points[i].range)
        rho = np.float64(points[i].reflectivity)
        is_saturated = points[i].saturated != 0
        q = SATURATED_REFLECTIVITY if is_saturated else rho
        refl += w * rho
        power += w * q / (r * r)
        weight += w * q
        weighted_range += w * q * r
        plain_weight += w
        plain_range += w * r
        if w * q > best_share:
            best_share = w * q
            best = i
        saturated = saturated or is_saturated
    r_echo = weighted_range / weight if weight > 0.0 else plain_range / plain_weight
    return r_echo, refl, power, best, saturated


@njit(cache=True, nogil=True)
def _pick(power, echoes, mode, order_code, pick):
    """Which of a beam's ``echoes`` (in range order) the ``mode`` reports: their indices in ``pick``, in the
    ``order_code``'s order (by range for strongest_last); returns how many (1 or 2)."""
    if mode == _FIRST:
        pick[0] = 0
        return 1
    last = echoes - 1
    if mode == _LAST:
        pick[0] = last
        return 1
    strongest = 0
    for e in range(1, echoes):
        if power[e] > power[strongest]:
            strongest = e
    if mode == _STRONGEST or echoes == 1:
        pick[0] = strongest
        return 1
    if order_code == _STRONGEST_LAST:
        other = last
        if strongest == last:  # Velodyne: the last is the strongest, so the second strongest goes with it
            other = _second_strongest(power, echoes, strongest)
        pick[0] = min(other, strongest)
        pick[1] = max(strongest, other)
        return 2
    # Ouster: the two strongest, in the unit's order
    other = _second_strongest(power, echoes, strongest)
    if order_code == _STRONGEST_TO_WEAKEST:
        pick[0], pick[1] = strongest, other
    elif order_code == _NEAREST_TO_FARTHEST:
        pick[0], pick[1] = min(other, strongest), max(strongest, other)
    else:
        pick[0], pick[1] = max(strongest, other), min(other, strongest)
    return 2


@njit(cache=True, nogil=True, inline="always")
def _second_strongest(power, echoes, strongest):
    other = 0 if strongest != 0 else 1
    for e in range(echoes):
        if e != strongest and power[e] > power[other]:
            other = e
    return other


#: most grid cells a footprint's refinement window reaches on each side (a beam 0.3 m from a 10 mm exit aperture on
#: an OS1-128 spans about 3 columns each way)
MAX_REFINE_REACH = 8
#: neighbours are a discontinuity from this fraction of the echo separation on: a sub-ray may see the surface
#: behind an edge farther than the neighbouring centre ray does (measured on the demo street, OS1-128, 4 sub-rays,
#: no row marked across a step: 1.0 finds 94.2 % of full sampling's second echoes refining 23k beams, 0.5 finds
#: 95.1 % refining 35k; the rows across a thin object's step, :data:`THIN_ACROSS_REACH`, find more for fewer beams)
JUMP_FRACTION = 1.0


#: grid cells a step marks on each side across it (rows beside a step between columns, columns beside a step between
#: rows) where its nearer side is one cell wide along the step's axis: a thin object (a pole, a wire, a railing)
#: that the first cast met in that cell and not in the next row, whose footprints there it still crosses. Measured
#: on the demo street (OS1-128, adaptive against full sampling's second echoes; 4 / 16 sub-rays): no cells across
#: any step find 94.2 % / 89.4 % refining 23k beams; 2 across thin steps 99.7 % / 97.6 % refining 30k; 1 across
#: every step and 2 across thin ones 99.9 % / 97.8 % refining 34k / 33k; 2 across every step 100 % / 98.9 %
#: refining 38k / 37k.
THIN_ACROSS_REACH = 2


@dataclass(frozen=True)
class ScanGrid:
    """Where a pattern's beams sit on its scan grid, for :func:`refine_mask` (made once per pattern,
    :func:`scan_grid`): ``index[row, column]`` the beam there (−1: none), rows sorted by elevation so that
    neighbouring rows are neighbouring beams whatever the laser numbering; the typical angle between neighbours
    along a row and along a column (rad). None from :func:`scan_grid`: the pattern is no grid (a rosette)."""

    index: np.ndarray  # (rows, columns) int64
    pitch_h_rad: float
    pitch_v_rad: float


def scan_grid(pattern) -> ScanGrid | None:
    """The :class:`ScanGrid` of ``pattern``; None where its beams and columns do not make one."""
    n = len(pattern)
    beam = np.asarray(pattern.beam_id, np.int64)
    column = np.asarray(pattern.column, np.int64)
    rows, columns = pattern.rows, pattern.columns
    if rows * columns < 2 or beam.max() >= rows or column.max() >= columns:
        return None
    if np.bincount(beam * columns + column, minlength=rows * columns).max() > 1:
        return None
    elevation = np.full(rows, np.nan)
    elevation[beam] = pattern.elevation_rad
    row = np.argsort(np.argsort(elevation, kind="stable"), kind="stable")[beam]
    index = np.full((rows, columns), -1, np.int64)
    index[row, column] = np.arange(n)
    azimuth, by_row = np.full((rows, columns), np.nan), np.full((rows, columns), np.nan)
    azimuth[row, column], by_row[row, column] = pattern.azimuth_rad, pattern.elevation_rad
    return ScanGrid(index, _pitch(np.angle(np.exp(1j * np.diff(azimuth, axis=1)))),
                    _pitch(np.diff(by_row, axis=0)))


def refine_mask(grid: ScanGrid | None, range_m: np.ndarray, footprint: Footprint) -> np.ndarray:
    """(N,) bool: the beams whose footprint may straddle a range step, given each beam's first-cast range
    ``range_m`` (N,) (inf: no hit), so the only ones adaptive sampling casts as all their sub-rays.

    Two grid neighbours make a step where their ranges differ by ``separation_m`` or more (the least gap two
    echoes need) and not as the surface's slope runs on (:func:`_step`). A step marks the beams whose footprint
    can reach it: the 1/e² half-width plus the exit aperture's half-diameter seen at the nearer side's range, in
    grid steps of the pattern's own angular pitch on each axis (at least one: the neighbour; at most
    :data:`MAX_REFINE_REACH`). A pattern that is no grid (``grid`` None) is refined everywhere."""
    if grid is None:
        return np.ones(len(range_m), bool)
    index = grid.index
    grid_range = np.full(index.shape, np.inf)
    grid_range[index >= 0] = np.asarray(range_m, np.float64)[index[index >= 0]]
    half_rad = np.asarray(footprint.divergence_rad, np.float64) * _FWHM_TO_1_OVER_E2
    out = np.zeros(len(range_m), bool)
    _refine(grid_range, index, half_rad[0], half_rad[1], 0.5 * footprint.diameter_m, grid.pitch_h_rad,
            grid.pitch_v_rad, JUMP_FRACTION * footprint.separation_m, MAX_REFINE_REACH, THIN_ACROSS_REACH, out)
    return out


def _pitch(steps: np.ndarray) -> float:
    """The typical angle between grid neighbours (rad) from their differences; inf where there are none."""
    steps = np.abs(steps[np.isfinite(steps)])
    steps = steps[steps > 0]
    return float(np.median(steps)) if len(steps) else math.inf


@njit(cache=True, nogil=True)
def _refine(grid_range, index, half_h, half_v, aperture_radius_m, pitch_h, pitch_v, separation_m, max_reach,
            thin_reach, out):
    """:func:`refine_mask`'s pass over the grid: every discontinuity between grid neighbours marks the cells
    (``out[index[b, c]]``) whose footprints can reach it, the reach taken at the nearer side's range (a beam
    passing a near edge is widest there)."""
    rows, columns = grid_range.shape
    for b in range(rows):
        for c in range(columns):
            r = grid_range[b, c]
            for db, dc in ((0, 1), (1, 0)):
                b2, c2 = b + db, c + dc
                if b2 >= rows or c2 >= columns or not _step(grid_range, b, c, db, dc, separation_m):
                    continue
                near = min(r, grid_range[b2, c2])
                spread = aperture_radius_m / near if near > 0.0 else 0.0
                # along the pair: the cells within a footprint's reach of the step between them (at least the
                # two); across it: only where footprints are wider than the pitch (else that row's own step), or
                # where the step is a thin object's
                reach_h = int(math.floor((half_h + spread) / pitch_h))
                reach_v = int(math.floor((half_v + spread) / pitch_v))
                if dc == 1:
                    reach_h = int(math.ceil((half_h + spread) / pitch_h))
                else:
                    reach_v = int(math.ceil((half_v + spread) / pitch_v))
                # a thin object's step (its nearer side one cell wide along the axis): the rows (columns) beside
                # across it too, where the first cast may have missed it (THIN_ACROSS_REACH)
                if r < grid_range[b2, c2]:
                    nb, nc, ob, oc = b, c, b - db, c - dc
                else:
                    nb, nc, ob, oc = b2, c2, b2 + db, c2 + dc
                thin = (ob < 0 or oc < 0 or ob >= rows or oc >= columns
                        or grid_range[ob, oc] - grid_range[nb, nc] >= separation_m)
                across = thin_reach if thin else 0
                reach_h = min(max_reach, max(dc, across * db, reach_h))
                reach_v = min(max_reach, max(db, across * dc, reach_v))
                for bb in range(max(0, b2 - reach_v), min(rows, b + reach_v + 1)):
                    for cc in range(max(0, c2 - reach_h), min(columns, c + reach_h + 1)):
                        i = index[bb, cc]
                        if i >= 0:
                            out[i] = True


@njit(cache=True, nogil=True, inline="always")
def _step(grid_range, b, c, db, dc, separation_m):
    """Is there a step between cell (b, c) and the next one along (db, dc)? Their ranges differ by
    ``separation_m`` or more, and that difference is no continuation of the surface's slope: it differs by as much
    from the difference before or after it along the same axis (a ground seen at a grazing angle changes range
    steadily from beam to beam, without a second surface). A surface's edge against nothing is a step too: the
    footprints across it meet the surface with part of their sub-rays, which decides whether they return."""
    rows, columns = grid_range.shape
    a, z = grid_range[b, c], grid_range[b + db, c + dc]
    if a == np.inf or z == np.inf:
        return a != z
    if abs(z - a) < separation_m:
        return False
    before = grid_range[b - db, c - dc] if b - db >= 0 and c - dc >= 0 else np.inf
    after = grid_range[b + 2 * db, c + 2 * dc] if b + 2 * db < rows and c + 2 * dc < columns else np.inf
    return (before == np.inf or abs((z - a) - (a - before)) >= separation_m
            or after == np.inf or abs((after - z) - (z - a)) >= separation_m)


def sub_ray_stream(parts):
    """One :class:`~lidar_fmu.pointcloud.Returns` of several (``parts``) whose ``ray_index`` are sub-ray indices,
    each in sub-ray order, and the order that reads it in sub-ray order (a sub-ray's returns in their order; a
    sub-ray's returns all in one part), for :func:`form_echoes`."""
    keys = [np.asarray(part.ray_index, np.int64) for part in parts]
    order, merged = np.arange(len(keys[0]), dtype=np.int64), keys[0]
    offset = len(keys[0])
    for key in keys[1:]:  # the parts so far merged with the next: their indices into the concatenation
        at = merge_order(merged, key)
        order = np.concatenate([order, np.arange(offset, offset + len(key))])[at]
        merged = np.concatenate([merged, key])[at]
        offset += len(key)
    return concatenate_returns(parts)._replace(ray_index=np.concatenate(keys)), order


def first_pass_sub_rays(pattern, footprint: Footprint) -> np.ndarray:
    """(N,) int64: which sub-ray (index into :func:`sub_ray_pattern`'s rays) stands for each beam in adaptive
    sampling's first cast: sub-ray ``(beam + column) mod S``, so that along every row and every column of the grid
    the first cast cycles through the footprint's sub-rays. A thin pole or wire that only some sub-rays of a beam
    meet is met in the first cast every S-th beam along it, and shows as a discontinuity there (a centre ray
    alone passes between the columns)."""
    s = footprint.samples
    k = (np.asarray(pattern.beam_id, np.int64) + np.asarray(pattern.column, np.int64)) % s
    return np.arange(len(pattern), dtype=np.int64) * s + k


def nearest_range_m(returns, rays: int) -> np.ndarray:
    """(rays,) float64: each ray's nearest return's range (inf: none); a ray's returns come in range order."""
    range_m = np.full(rays, np.inf)
    _nearest_range_m(np.asarray(returns.ray_index), returns.points["range"], range_m)
    return range_m


@njit(cache=True, nogil=True)
def _nearest_range_m(ray_index, range_in, out):
    for k in range(ray_index.shape[0]):
        i = ray_index[k]
        if out[i] == np.inf:  # a ray's nearest return is its first
            out[i] = range_in[k]


def subset_pattern(pattern, rays: np.ndarray):
    """The rays ``rays`` (indices) of ``pattern`` as a pattern of their own (one column of ``len(rays)`` rows)."""
    # np.take: 5× faster than indexing an (N, 3) array with an index array
    return RayPattern(np.take(pattern.directions, rays, axis=0), np.take(pattern.beam_id, rays),
                      np.take(pattern.column, rays), np.take(pattern.time_offset_s, rays), len(rays), 1,
                      origins=None if pattern.origins is None else np.take(pattern.origins, rays, axis=0),
                      range_offset_m=pattern.range_offset_m)


def merge_order(first_key: np.ndarray, second_key: np.ndarray) -> np.ndarray:
    """(len(first) + len(second),) int64: the order that sorts two ascending key arrays into one, as indices into
    their concatenation; equal keys keep the first array's before the second's."""
    out = np.empty(len(first_key) + len(second_key), np.int64)
    _merge_order(np.ascontiguousarray(first_key, np.int64), np.ascontiguousarray(second_key, np.int64), out)
    return out


@njit(cache=True, nogil=True)
def _merge_order(a, b, out):
    i = j = 0
    for k in range(out.shape[0]):
        if j == b.shape[0] or (i < a.shape[0] and a[i] <= b[j]):
            out[k] = i
            i += 1
        else:
            out[k] = a.shape[0] + j
            j += 1


def form_echoes(returns, pattern, footprint: Footprint, limit, max_range_m: float,
                one_ray: np.ndarray | None = None, order: np.ndarray | None = None):
    """:class:`~lidar_fmu.pointcloud.Returns` of ``pattern``'s sub-rays (:func:`sub_ray_pattern`, cast without a
    range limit) → (the beams' reported echoes as ``Returns`` of ``pattern``, in ray order and by range within a
    ray; each echo's OSI pulse width (M,) float64, m). ``limit``: the range–reflectivity limit the echoes must
    pass (the sensor's, stretched under probabilistic detection). ``one_ray``: (N,) bool, the beams cast as one
    sub-ray (adaptive sampling), whose return weighs 1, not its sub-ray's footprint weight.
    ``order``: (M,) the returns in sub-ray order, as indices (default: as they come, sorted where they are not);
    the returns are read through it, not moved."""
    sub_ray = np.asarray(returns.ray_index, np.int64)
    points, material_id = np.ascontiguousarray(returns.points), returns.material_id
    one_ray = np.zeros(0, np.bool_) if one_ray is None else np.asarray(one_ray, np.bool_)
    if order is None and len(sub_ray) > 1 and np.any(sub_ray[1:] < sub_ray[:-1]):
        order = np.argsort(sub_ray, kind="stable")
    order = np.zeros(0, np.int64) if order is None else np.asarray(order, np.int64)
    _, weights = footprint_offsets(footprint)
    # a beam reports at most max_echoes echoes and an echo takes one return at least; every field is written
    n = min(len(pattern) * footprint.max_echoes, len(sub_ray))
    out = np.empty(n, POINT_DTYPE)
    out_ray = np.empty(n, np.int32)
    out_intensity = np.empty(n, np.float32)
    out_pulse = np.empty(n, np.float64)
    out_source = np.empty(n, np.int64)
    code, *fit = limit_params(limit, max_range_m)
    m = _form_echoes(points, sub_ray, order, footprint.samples, weights, one_ray,
                     _MODE_CODE[footprint.mode], _ORDER_CODE[footprint.order], footprint.separation_m,
                     (np.int64(code), *map(np.float64, fit)), out, out_ray, out_intensity, out_pulse, out_source)
    out, out_ray = out[:m], out_ray[:m]
    origins = np.zeros((1, 3), np.float32) if pattern.origins is None else pattern.origins
    place_on_rays(out, out_ray, pattern.directions, np.ascontiguousarray(origins, np.float32))
    # an echo's material (for ground truth) and semantic class are its strongest sub-ray's
    source = out_source[:m]
    material = None if material_id is None else material_id[source]
    semantic = None if returns.semantic is None else returns.semantic[source]
    return Returns(out, out_ray, out_intensity[:m], material, semantic), out_pulse[:m]


def pulse_widths_after(echoes, pulse_width_m: np.ndarray, kept, separation_m: float) -> np.ndarray:
    """Each of ``kept``'s returns' pulse width: that of the echo of ``echoes`` on the same ray with the same echo
    number (effects drop and move returns but keep their ray and echo); a weather echo's is the bare pulse."""
    out = np.empty(len(kept.ray_index))
    _pulse_widths_after(np.asarray(echoes.ray_index, np.int32), echoes.points["echo"], pulse_width_m,
                        np.asarray(kept.ray_index, np.int32), kept.points["echo"], kept.points["object_id"],
                        float(separation_m), out)
    return out


@njit(cache=True, nogil=True)
def _pulse_widths_after(ray, echo, pulse_width_m, kept_ray, kept_echo, kept_object, separation_m, out):
    """:func:`pulse_widths_after`'s pass: echoes and kept returns both keyed (ray, echo), the echoes in key order;
    the kept returns mostly so (effects keep the order), so each search starts where the last one ended."""
    n = ray.shape[0]
    j = 0
    for i in range(out.shape[0]):
        key = np.int64(kept_ray[i]) * 2 + kept_echo[i]
        if j > 0 and np.int64(ray[j - 1]) * 2 + echo[j - 1] >= key:
            j = 0  # out of order: from the start
        lo, hi = j, n  # the first echo whose key is not below this one: mostly a step or two on, else a search
        while lo < hi and lo < j + 4 and np.int64(ray[lo]) * 2 + echo[lo] < key:
            lo += 1
        if lo < hi and np.int64(ray[lo]) * 2 + echo[lo] >= key:
            hi = lo
        while lo < hi:
            mid = (lo + hi) // 2
            if np.int64(ray[mid]) * 2 + echo[mid] < key:
                lo = mid + 1
            else:
                hi = mid
        j = lo
        found = j < n and np.int64(ray[j]) * 2 + echo[j] == key and kept_object[i] != WEATHER_OBJECT_ID
        out[i] = pulse_width_m[j] if found else separation_m


def truth_per_echo(returns, pattern, max_echoes: int) -> np.ndarray:
    """(max_echoes, rays) :data:`~lidar_fmu.physics.ground_truth.GROUND_TRUTH_DTYPE`: per echo number, every ray's
    noise-free echo (:func:`~lidar_fmu.physics.ground_truth.truth_per_ray` of that echo's returns), so that a return after
    the effects finds its truth at ``[echo, ray]``. With one ray per beam, row 0 is the ray's return."""
    echo = returns.points["echo"]
    rows = []
    for e in range(max_echoes):
        mine = np.flatnonzero(echo == e)
        rows.append(truth_per_ray(type(returns)(returns.points[mine], returns.ray_index[mine],
                                                returns.intensity_percent[mine],
                                                None if returns.material_id is None else returns.material_id[mine]),
                                  pattern))
    return np.stack(rows)


def second_echo_stats(cloud, rays=None) -> dict:
    """How often and how far apart a cloud's rays give two echoes: of the rays that return (those of ``rays``, a
    mask or indices into the cloud's pattern, else all), the fraction with a second echo, and the gaps
    (|range of one − the other|, m) of those."""
    ray_index = np.asarray(cloud.ray_index, np.int64)
    wanted = np.ones(len(ray_index), bool)
    if rays is not None:
        mask = np.zeros(cloud.rows * cloud.columns, bool)
        mask[rays] = True
        wanted = mask[ray_index]
    echo = cloud.points["echo"][wanted]
    ray, range_m = ray_index[wanted], cloud.points["range"][wanted].astype(np.float64)
    returning = len(np.unique(ray))
    first_m = np.full(int(ray.max()) + 1 if len(ray) else 0, np.nan)  # each ray's echo-0 range, by ray
    first_m[ray[echo == 0]] = range_m[echo == 0]
    gaps = np.abs(range_m[echo == 1] - first_m[ray[echo == 1]])  # echo 1 is nearer where the order says so
    return {"returning_rays": returning, "second_echo_rays": len(gaps),
            "second_echo_fraction": len(gaps) / returning if returning else 0.0, "gap_m": gaps}


__all__ = ["DEFAULT_DUAL_SAMPLES", "DEFAULT_ECHO_SEPARATION_M", "Footprint", "FootprintError", "OUSTER_RETURN_ORDERS",
           "RETURN_MODES", "RETURN_ORDERS", "ScanGrid", "first_pass_sub_rays", "footprint_offsets",
           "form_echoes", "merge_order", "nearest_range_m", "parse_footprint", "pulse_widths_after", "refine_mask",
           "scan_grid", "second_echo_stats", "sub_ray_pattern", "sub_ray_stream", "subset_pattern", "truth_per_echo"]

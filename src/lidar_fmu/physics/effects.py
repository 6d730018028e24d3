"""What a real unit does to the returns the geometry gives: weather, detection probability, dropout, noise.

One compiled pass over a frame's returns (:func:`apply_effects`), after any backend's physics, in the same place
for every backend (the CUDA backend's returns come back to the host anyway), in this order:

0. **weather** (:mod:`lidar_fmu.physics.weather`): two-way extinction, and clutter that replaces a ray's return
   where it is the stronger echo;
1. **detection** (spec key ``detection``): ``threshold`` (r ≤ r_L), ``probabilistic``
   (:func:`detection_probability`, 90 % at r_L as datasheets quote) or ``logistic`` (the soft edge real units show,
   its width ``detection_width``); OSI ``existence_probability`` is P;
2. **dropout** (``noise.dropout``);
3. **noise** (spec key ``noise``, off when absent): range noise along the ray (:func:`range_sigma_m`: a floor and
   the echo's shot-noise-limited timing), a per-beam bias, angular noise; ``datasheet``, ``physical`` or ``true``
   pick the figures (:func:`parse_effects`).

Every random number is a hash of (seed, frame counter, ray index, draw), never the clock: the same inputs give the
same bytes (:func:`uniform`). The laws, their sources and what they were checked against: docs/physics.md, "Noise,
detection probability and weather".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from ..documents import refuse_unknown_keys, shown
from ..geometry.semantic import WEATHER
from ..pointcloud import POINT_DTYPE, Returns, point_on_ray, take_returns
from .range_limit import RangeReflectivityLimit, intensity_law_percent, intensity_percent, limit_params, range_limit_m
from .weather import (
    DEFAULT_BEAM_DIVERGENCE_RAD,
    DEFAULT_MIN_RANGE_M,
    DEFAULT_PULSE_LENGTH_M,
    OVERLAP_FULL_M,
    OVERLAP_START_M,
    WEATHER_OBJECT_ID,
    Weather,
    WeatherError,
    clutter_return,
    detection_floor_per_m2,
    parse_weather,
    two_way_transmission,
)

#: z such that Φ(z) = 0.9: datasheet ranges are quoted at 90 % detection probability
Z_90 = 1.2815515655446004
#: amplitude signal-to-noise ratio at r_L. Assumed (datasheets give none): 6 makes P fall from 0.9 to ~0.05
#: over 40 % more range, a soft edge a few metres wide at typical limits.
SNR_AT_LIMIT = 6.0
#: the physics pass keeps returns up to this many r_L under probabilistic detection: P(2) < 10⁻³
STRETCH = 2.0
#: widest logistic edge: P(STRETCH·r_L) = 1/(1 + 19·2^(1/w)) stays below 10⁻³ up to w ≈ 0.175, so the pass that
#: stops drawing at STRETCH·r_L cuts off no more than that
MAX_DETECTION_WIDTH = 0.17
DETECTION_MODES = ("threshold", "probabilistic", "logistic")
#: default width w of the logistic edge in log range: P = 0.5 at 19^(−w) = 0.73 r_L, where the pixels that flicker
#: between frames of the OS-1-128 recording lie (median 0.73 of r_L; docs/validation.md)
DETECTION_WIDTH = 0.107
#: ρ below which the shot-noise term stops growing: the darkest REFLECTIVITY a unit reports (1 %) halved
SHOT_NOISE_MIN_REFLECTIVITY = 0.005
#: range (m) at which ``shot_sigma_m`` is the shot-noise σ of a ρ = 1 surface
SHOT_NOISE_REFERENCE_RANGE_M = 10.0

#: draw numbers of echo e of a ray start at e × this (above every draw below)
_ECHO_DRAW_STRIDE = 16
# draws of one ray: distinct streams of the hash
_DRAW_DETECT, _DRAW_DROP, _DRAW_RANGE, _DRAW_ANGLE, _DRAW_BIAS, _DRAW_CLUTTER = 1, 2, 3, 5, 7, 11


class EffectsError(ValueError):
    """A noise / detection spec that cannot be used."""


@dataclass(frozen=True)
class Noise:
    """Measurement noise (m, degrees, probability); all zero: exact."""

    range_sigma_m: float = 0.0
    range_sigma_per_m: float = 0.0
    laser_bias_sigma_m: float = 0.0
    angle_sigma_deg: float = 0.0
    dropout: float = 0.0
    seed: int = 0
    shot_sigma_m: float = 0.0  # shot-noise σ of a ρ = 1 echo at 10 m (:func:`range_sigma_m`)


@dataclass(frozen=True)
class Effects:
    """A sensor's effects on its returns (see the module doc); ``Effects()`` changes nothing."""

    noise: Noise | None = None
    detection: str = "threshold"
    weather: Weather | None = None  # None: the spec sets none (the FMU then reads the SensorView's)
    detection_width: float = DETECTION_WIDTH  # w of the logistic edge (``detection: logistic``)
    #: (r₀ m, a, b) of :func:`~lidar_fmu.physics.range_limit.intensity_law_percent`; None: the physics pass's law
    intensity_law: tuple[float, float, float] | None = None

    @property
    def active(self) -> bool:
        return (self.noise is not None or self.detection != "threshold" or self.intensity_law is not None
                or (self.weather is not None and not self.weather.clear))

    @property
    def seed(self) -> int:
        return self.noise.seed if self.noise is not None else 0


_NOISE_KEYS = {"range_sigma_m", "range_sigma_per_m", "laser_bias_sigma_m", "angle_sigma_deg", "dropout", "seed",
               "shot_sigma_m"}
#: keys of a spec's ``range_noise`` (a unit's fitted noise figures, what ``noise: physical`` takes)
RANGE_NOISE_KEYS = ("range_sigma_m", "shot_sigma_m")


#: largest value of each noise key: a range σ of 10 m (as ``range_accuracy_m``'s bound) or 10 % of the range,
#: an angle σ of 10°, is no lidar's noise but a mistake in the spec (it would only scatter the points at random)
NOISE_BOUNDS = {"range_sigma_m": 10.0, "shot_sigma_m": 10.0, "laser_bias_sigma_m": 10.0, "range_sigma_per_m": 0.1,
                "angle_sigma_deg": 10.0, "dropout": 1.0}


def _noise_value(key: str, value, where: str) -> float:
    bound = NOISE_BOUNDS[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= bound:
        raise EffectsError(f"{where}{key} must be a number in 0 … {bound:g}, got {shown(value)}")
    return float(value)


def _physical_noise(spec: dict) -> dict:
    figures = spec.get("range_noise")
    if figures is None:
        raise EffectsError("noise: 'physical' needs the unit's fitted range_noise: {range_sigma_m, shot_sigma_m} "
                           "(an Ouster unit's metadata has them; lidar-fmu calibrate fits them)")
    if not isinstance(figures, dict):
        raise EffectsError(f"range_noise must be a mapping of {', '.join(RANGE_NOISE_KEYS)}, got {shown(figures)}")
    refuse_unknown_keys(figures, RANGE_NOISE_KEYS, "range_noise", EffectsError)
    return {key: _noise_value(key, value, "range_noise.") for key, value in figures.items()}


#: keys of a spec's ``intensity_law``
INTENSITY_LAW_KEYS = ("reference_range_m", "near_exponent", "far_exponent")


def _intensity_law(spec: dict) -> tuple[float, float, float] | None:
    law = spec.get("intensity_law")
    if law is None:
        return None
    if not isinstance(law, dict) or set(law) != set(INTENSITY_LAW_KEYS):
        raise EffectsError(f"intensity_law must be a mapping of {', '.join(INTENSITY_LAW_KEYS)}, got {shown(law)}")
    values = []
    for key, (lo, hi) in zip(INTENSITY_LAW_KEYS, ((0.01, 1000.0), (0.0, 6.0), (0.0, 6.0))):
        value = law[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
            raise EffectsError(f"intensity_law.{key} must be a number in {lo:g} … {hi:g}, got {shown(value)}")
        values.append(float(value))
    return values[0], values[1], values[2]


def parse_effects(spec: dict) -> Effects:
    """The ``noise`` and ``detection`` keys of a resolved sensor spec → :class:`Effects` (EffectsError naming
    the key on bad input)."""
    detection = spec.get("detection", "threshold")
    if detection not in DETECTION_MODES:
        raise EffectsError(f"detection must be one of {', '.join(DETECTION_MODES)}, got {shown(detection)}")
    width = spec.get("detection_width", DETECTION_WIDTH)
    if isinstance(width, bool) or not isinstance(width, (int, float)) or not 0.005 <= width <= MAX_DETECTION_WIDTH:
        raise EffectsError(f"detection_width is the logistic edge's width in log range, a number in 0.005 … "
                           f"{MAX_DETECTION_WIDTH:g}, got {shown(width)}")
    try:
        weather = parse_weather(spec.get("weather"))
    except WeatherError as exc:  # its messages name the weather key already
        raise EffectsError(str(exc) if str(exc).startswith("weather") else f"weather: {exc}") from None
    law = _intensity_law(spec)
    if spec.get("range_noise") is not None:  # checked where it is given, used or not
        _physical_noise(spec)
    noise = spec.get("noise")
    if noise is None or noise is False:
        return Effects(None, detection, weather, float(width), law)
    if noise is True:
        noise = "physical" if spec.get("range_noise") is not None else "datasheet"
    if noise == "physical":
        noise = _physical_noise(spec)
    elif noise == "datasheet":
        accuracy = spec.get("range_accuracy_m")
        if accuracy is None:
            raise EffectsError("noise: 'datasheet' needs the sensor's range_accuracy_m (a preset's datasheet value)")
        noise = {"range_sigma_m": accuracy}
    if not isinstance(noise, dict):
        raise EffectsError(f"noise must be 'physical', 'datasheet', true or a mapping of {', '.join(sorted(_NOISE_KEYS))}, "
                           f"got {shown(noise)}")
    refuse_unknown_keys(noise, _NOISE_KEYS, "noise", EffectsError)
    values = {key: _noise_value(key, noise.get(key, 0.0), "noise.") for key in _NOISE_KEYS - {"seed"}}
    seed = noise.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**63:
        raise EffectsError(f"noise.seed must be an integer in 0 … 2⁶³−1, got {shown(seed)}")
    return Effects(Noise(seed=int(seed), **values), detection, weather, float(width), law)


# ----------------------------------------------------------------------------- random numbers


@register_jitable(inline="always")
def _mix(z):
    """SplitMix64's finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mix, good avalanche."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


_GOLDEN = 0x9E3779B97F4A7C15  # 2⁶⁴/φ, SplitMix64's increment: spreads consecutive counters over the 64 bits


@register_jitable(inline="always")
def frame_key(seed, frame):
    """The key of one frame's random numbers: a mix of (seed, frame counter), computed once per frame."""
    return _mix(np.uint64(seed) * np.uint64(_GOLDEN) + np.uint64(frame))


@register_jitable(inline="always")
def draw_uniform(key, ray, draw):
    """A uniform number in (0, 1) from a frame's :func:`frame_key`, a ray and a draw number: one mix."""
    z = _mix(key ^ (np.uint64(ray) * np.uint64(_GOLDEN) + np.uint64(draw)))
    return ((z >> np.uint64(11)) + np.uint64(1)) * (1.0 / 9007199254740994.0)  # 53 bits, never 0 or 1


# Acklam's rational approximation of the inverse normal CDF (P. J. Acklam, "An algorithm for computing the
# inverse normal cumulative distribution function", 2003; relative error < 1.15e-9): a standard normal number
# from ONE uniform with no transcendental function for 95 % of draws (a log and a square root in the tails).
# Box–Muller's log + cos on every draw cost ~3× as much here (libm calls, not vectorised).
_ACKLAM_A = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
             -3.066479806614716e01, 2.506628277459239e00)
_ACKLAM_B = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
             -1.328068155288572e01)
_ACKLAM_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
             4.374664141464968e00, 2.938163982698783e00)
_ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
_ACKLAM_P_LOW = 0.02425


@register_jitable(inline="always")
def _acklam_tail(p):
    """Φ⁻¹(p) for p < 0.02425 (the lower tail)."""
    c, d = _ACKLAM_C, _ACKLAM_D
    q = math.sqrt(-2.0 * math.log(p))
    return ((((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
            / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0))


@register_jitable(inline="always")
def inverse_normal_cdf(p):
    """Φ⁻¹(p) for p in (0, 1), Acklam's approximation (above)."""
    if p < _ACKLAM_P_LOW:
        return _acklam_tail(p)
    if p > 1.0 - _ACKLAM_P_LOW:
        return -_acklam_tail(1.0 - p)
    a, b = _ACKLAM_A, _ACKLAM_B
    q = p - 0.5
    r = q * q
    return (((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q)
            / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0))


@register_jitable(inline="always")
def draw_normal(key, ray, draw):
    """A standard normal number from a frame's :func:`frame_key`, a ray and a draw number (one uniform)."""
    return inverse_normal_cdf(draw_uniform(key, ray, draw))


@register_jitable(inline="always")
def uniform(seed, frame, ray, draw):
    """A uniform number in (0, 1) from (seed, frame, ray, draw) alone: counter-based, no state, no clock."""
    return draw_uniform(frame_key(seed, frame), ray, draw)


@register_jitable(inline="always")
def detection_probability(x):
    """P(detected) of a return at x = r / r_L: 0.9 at x = 1, → 1 inside, → 0 beyond
    (docs/physics.md#noise-detection-probability-and-weather)."""
    if x <= 0.0:
        return 1.0
    z = SNR_AT_LIMIT / (x * x) - SNR_AT_LIMIT + Z_90
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


@register_jitable(inline="always")
def logistic_detection_probability(x, width):
    """P(detected) of a return at x = r / r_L under the logistic edge: 0.05 at x = 1, 0.5 at x = 19^(−width),
    → 1 inside (docs/physics.md#noise-detection-probability-and-weather)."""
    if x <= 0.0:
        return 1.0
    z = math.log(x) / width + math.log(19.0)
    if z > 700.0:  # exp overflows; P is 0 to double precision
        return 0.0
    return 1.0 / (1.0 + math.exp(z))


@register_jitable(inline="always")
def range_sigma_m(range_sigma, range_sigma_per_m, shot_sigma, range_m, reflectivity):
    """Range noise σ (m) of one echo: a floor (``range_sigma + range_sigma_per_m · r``, the unit's timing jitter
    and calibration) and the shot-noise-limited timing of the echo, added in quadrature.

    A peak or threshold detector times an echo of rise time τ to σ_t ≈ τ / √SNR (Skolnik, *Introduction to Radar
    Systems*, 3rd ed., 2001, §6.3: δT = 1 / (B √(2E/N₀))), so σ_r = c·σ_t/2 ∝ 1/√SNR; shot-noise limited, SNR is
    the echo's photo-electron count, ∝ ρ·cos θ / r² for an extended Lambertian target (the range equation, as
    :mod:`lidar_fmu.physics.range_limit` models it). Hence σ_shot = ``shot_sigma`` · (r / 10 m) / √ρ, ρ the echo's
    Lambertian-equivalent reflectivity (ρ0·cos θ), floored at :data:`SHOT_NOISE_MIN_REFLECTIVITY`."""
    floor = range_sigma + range_sigma_per_m * range_m
    if shot_sigma <= 0.0:
        return floor
    rho = max(SHOT_NOISE_MIN_REFLECTIVITY, reflectivity)
    shot = shot_sigma * (range_m / SHOT_NOISE_REFERENCE_RANGE_M) / math.sqrt(rho)
    return math.sqrt(floor * floor + shot * shot)


def laser_bias_m(noise: Noise, beams: int) -> np.ndarray:
    """(beams,) float64 per-beam range bias, drawn once from the seed (frame-independent, as a unit's)."""
    return _laser_bias(np.uint64(noise.seed), beams, noise.laser_bias_sigma_m)


@njit(cache=True, nogil=True)
def _laser_bias(seed, beams, sigma):
    key = frame_key(seed, np.uint64(0xB1A5))  # a stream of its own, the same every frame
    out = np.zeros(beams)
    for b in range(beams):
        out[b] = sigma * draw_normal(key, b, _DRAW_BIAS)
    return out


# ----------------------------------------------------------------------------- the pass


@njit(cache=True, nogil=True, parallel=True)
def _apply(points, ray_index, intensity, origins, directions, key, detection_code, detection_width, limit_code,
           limit_a, limit_b, limit_c, limit_tail_refl, limit_tail_m, limit_max, alpha_per_m, dropout, range_sigma,
           range_sigma_per_m, shot_sigma, bias, angle_sigma_rad, weather_id, intensity_law, keep, existence):
    """Decide and perturb every return in place; ``keep[k]``: it survives, ``existence[k]``: its P.

    ``key``: the frame's :func:`frame_key`; ``detection_code``: the index of :data:`DETECTION_MODES`;
    ``intensity_law``: (r₀, a, b) of the unit's intensity law, r₀ = 0 for none. Weather echoes (``object_id == weather_id``) come with their
    extinction and detection decided (:func:`~lidar_fmu.physics.weather.clutter_return`): they meet only dropout and
    noise here."""
    probabilistic = detection_code != 0
    for k in prange(points.shape[0]):  # each return's draws depend on its ray alone: any order, same bytes
        ray = ray_index[k]
        # a ray's second echo draws numbers of its own (its first draws as a single-echo sensor's would)
        echo_draws = _ECHO_DRAW_STRIDE * np.int64(points[k]["echo"])
        existence[k] = 1.0
        keep[k] = True
        r = points[k]["range"]
        saturated = points[k]["saturated"] != 0 or points[k]["object_id"] == weather_id
        if alpha_per_m > 0.0 and not saturated:
            transmission = two_way_transmission(alpha_per_m, r)
            intensity[k] = intensity[k] * transmission
            rho = points[k]["reflectivity"] * transmission
            if not probabilistic and r > range_limit_m(limit_code, limit_a, limit_b, limit_c, limit_tail_refl,
                                                        limit_tail_m, limit_max, rho):
                keep[k] = False
                continue
        else:
            rho = points[k]["reflectivity"]
        if intensity_law[0] > 0.0 and not saturated:
            intensity[k] = intensity_law_percent(rho, r, intensity_law[0], intensity_law[1], intensity_law[2])
        if probabilistic and not saturated:  # a saturated retroreflector is never a marginal echo
            limit = range_limit_m(limit_code, limit_a, limit_b, limit_c, limit_tail_refl, limit_tail_m, limit_max,
                                  rho)
            if limit <= 0.0:
                p = 0.0
            elif detection_code == 2:
                p = logistic_detection_probability(r / limit, detection_width)
            else:
                p = detection_probability(r / limit)
            existence[k] = p
            if draw_uniform(key, ray, _DRAW_DETECT + echo_draws) >= p:
                keep[k] = False
                continue
        if dropout > 0.0 and draw_uniform(key, ray, _DRAW_DROP + echo_draws) < dropout:
            keep[k] = False
            continue
        sigma = range_sigma_m(range_sigma, range_sigma_per_m, shot_sigma, r, rho)
        dr = bias[points[k]["beam_id"]] if bias.shape[0] > points[k]["beam_id"] else 0.0
        if sigma > 0.0:
            dr += sigma * draw_normal(key, ray, _DRAW_RANGE + echo_draws)
        if dr == 0.0 and angle_sigma_rad == 0.0:
            continue
        new_r = r + dr
        if new_r <= 0.0:
            keep[k] = False  # noise cannot put a return behind its own emitter
            continue
        dx, dy, dz = directions[ray, 0], directions[ray, 1], directions[ray, 2]
        if angle_sigma_rad > 0.0:
            # two unit vectors orthogonal to the ray, turned by a Gaussian angle in each
            if abs(dz) < 0.9:
                ax, ay, az = -dy, dx, 0.0
            else:
                ax, ay, az = 0.0, -dz, dy
            norm = math.sqrt(ax * ax + ay * ay + az * az)
            ax, ay, az = ax / norm, ay / norm, az / norm
            bx, by, bz = dy * az - dz * ay, dz * ax - dx * az, dx * ay - dy * ax
            ta = angle_sigma_rad * draw_normal(key, ray, _DRAW_ANGLE + echo_draws)
            tb = angle_sigma_rad * draw_normal(key, ray, _DRAW_ANGLE + 1 + echo_draws)
            dx, dy, dz = dx + ta * ax + tb * bx, dy + ta * ay + tb * by, dz + ta * az + tb * bz
            norm = math.sqrt(dx * dx + dy * dy + dz * dz)
            dx, dy, dz = dx / norm, dy / norm, dz / norm
        points[k]["x"], points[k]["y"], points[k]["z"] = point_on_ray(origins, ray, new_r, dx, dy, dz)
        points[k]["range"] = new_r
    return keep


@njit(cache=True, nogil=True, parallel=True)
def _clutter(points, ray_index, rays, key, clutter_params, fog_table, pulse_length_m, overlap_start_m, overlap_full_m,
             min_range_m, beam_divergence_rad, min_power_per_m2, has, range_m, reflectivity):
    """The weather echo of every ray (``has[ray]``, at ``range_m[ray]`` with ``reflectivity[ray]``): the
    stronger echo of a strongest-return sensor, against the ray's return in ``points`` (ray order)."""
    alpha, backscatter, particles = clutter_params[0], clutter_params[1], clutter_params[2]
    d_min, d_scale = clutter_params[3], clutter_params[4]
    target_range = np.full(rays, np.inf)
    target_reflectivity = np.zeros(rays)
    for k in range(points.shape[0]):
        target_range[ray_index[k]] = points[k]["range"]
        # a saturated retroreflector outshines any weather echo
        target_reflectivity[ray_index[k]] = 1e3 if points[k]["saturated"] != 0 else points[k]["reflectivity"]
    for ray in prange(rays):
        # only the draws the weather uses: drops/flakes take two, fog one
        u1 = draw_uniform(key, ray, _DRAW_CLUTTER) if particles > 0.0 else 0.5
        u2 = draw_uniform(key, ray, _DRAW_CLUTTER + 1) if particles > 0.0 else 0.5
        u3 = draw_uniform(key, ray, _DRAW_CLUTTER + 2) if backscatter > 0.0 else 0.5
        has[ray], range_m[ray], reflectivity[ray] = clutter_return(
            alpha, backscatter, particles, d_min, d_scale, pulse_length_m, overlap_start_m, overlap_full_m, min_range_m,
            beam_divergence_rad, min_power_per_m2, True, target_range[ray], target_reflectivity[ray], fog_table, u1, u2,
            u3)


@njit(cache=True, nogil=True)
def _merge_slots(ray_index, has):
    """Where each return and each ray's weather echo go in the merged returns (ray order; a ray's echo replaces
    its returns): (return slot or −1, echo slot per ray or −1, count)."""
    return_slot = np.full(ray_index.shape[0], -1, np.int64)
    echo_slot = np.full(has.shape[0], -1, np.int64)
    j = 0
    k = 0
    for ray in range(has.shape[0]):
        if has[ray]:
            echo_slot[ray] = j
            j += 1
        while k < ray_index.shape[0] and ray_index[k] == ray:
            if not has[ray]:
                return_slot[k] = j
                j += 1
            k += 1
    return return_slot, echo_slot, j


@njit(cache=True, nogil=True, parallel=True)
def _merge(points, intensity, semantic, return_slot, echo_slot, range_m, reflectivity, beam_id, origins, directions,
           weather_id, out, out_ray, out_intensity, out_semantic):
    """Write the merged returns: kept returns copied, weather echoes made on their rays (semantic class WEATHER)."""
    for k in prange(points.shape[0]):
        j = return_slot[k]
        if j >= 0:
            out[j] = points[k]
            out_intensity[j] = intensity[k]
            out_semantic[j] = semantic[k]
    for ray in prange(echo_slot.shape[0]):
        j = echo_slot[ray]
        if j < 0:
            continue
        out_ray[j] = ray
        r = range_m[ray]
        out[j]["x"], out[j]["y"], out[j]["z"] = point_on_ray(origins, ray, r, directions[ray, 0], directions[ray, 1],
                                                             directions[ray, 2])
        out[j]["range"] = r
        out[j]["reflectivity"] = reflectivity[ray]
        out[j]["normal_x"], out[j]["normal_y"], out[j]["normal_z"] = 0.0, 0.0, 0.0
        out[j]["beam_id"] = beam_id[ray]
        out[j]["object_id"] = weather_id
        out[j]["saturated"] = 0
        out[j]["time"] = 0.0
        out[j]["echo"] = 0  # the ray's one return now (lidar_fmu.physics.echoes)
        out_intensity[j] = intensity_percent(reflectivity[ray], r)
        out_semantic[j] = WEATHER


def _with_clutter(returns, pattern, weather: Weather, sensor, key):
    """``returns`` with the weather's clutter echoes in: replacing a ray's return where they are the stronger
    echo, else on rays that returned nothing; in ray order."""
    if np.any(returns.ray_index[1:] < returns.ray_index[:-1]):  # the merge walks rays and returns in step
        returns = take_returns(returns, np.argsort(returns.ray_index, kind="stable"))
    rays = len(pattern)
    limit = sensor.range_limit
    # the weakest power ρ/r² the unit resolves: its datasheet pairs, else (no pairs) 10 % at its maximum range
    # (assumed: the common datasheet quote for units that give none)
    floor = detection_floor_per_m2(limit) if limit is not None else 0.10 / sensor.max_range_m**2
    has = np.empty(rays, np.bool_)
    range_m, reflectivity = np.empty(rays), np.empty(rays)
    # the unit reports nothing nearer than its minimum range: the overlap starts there at the earliest
    overlap_start = max(float(sensor.min_range_m), OVERLAP_START_M)
    overlap_full = max(overlap_start, OVERLAP_FULL_M)
    _clutter(returns.points, returns.ray_index, rays, key, np.asarray(weather.clutter_params(), np.float64),
             weather.fog_table(DEFAULT_PULSE_LENGTH_M, overlap_start, overlap_full), DEFAULT_PULSE_LENGTH_M,
             overlap_start, overlap_full,
             max(float(sensor.min_range_m), DEFAULT_MIN_RANGE_M), DEFAULT_BEAM_DIVERGENCE_RAD, floor, has, range_m,
             reflectivity)
    return_slot, echo_slot, count = _merge_slots(returns.ray_index, has)
    if count == len(returns.points) and not has.any():
        return returns
    out = np.empty(count, POINT_DTYPE)
    out_ray = np.empty(count, np.int32)
    out_ray[return_slot[return_slot >= 0]] = returns.ray_index[return_slot >= 0]
    out_intensity = np.empty(count, np.float32)
    out_semantic = np.empty(count, np.uint8)
    _merge(returns.points, returns.intensity_percent, _semantic_of(returns), return_slot, echo_slot, range_m,
           reflectivity, pattern.beam_id, _origins(pattern), pattern.directions, WEATHER_OBJECT_ID, out, out_ray,
           out_intensity, out_semantic)
    return Returns(out, out_ray, out_intensity, semantic=out_semantic)


def _semantic_of(returns) -> np.ndarray:
    """The returns' semantic classes, all UNLABELLED where they carry none (a caller's own returns)."""
    return np.zeros(len(returns.points), np.uint8) if returns.semantic is None else returns.semantic


@njit(cache=True, nogil=True, parallel=True)
def _compact(points, ray_index, intensity, semantic, existence, keep, out, out_ray, out_intensity, out_semantic,
             out_existence):
    """Copy the kept returns (``keep``), in order, into the ``out`` arrays: one prefix sum, then a parallel copy
    (numpy's boolean indexing of the records is single-threaded and ~3× slower)."""
    slot = np.empty(keep.shape[0], np.int64)
    j = 0
    for k in range(keep.shape[0]):
        slot[k] = j
        j += keep[k]
    for k in prange(keep.shape[0]):
        if keep[k]:
            out[slot[k]] = points[k]
            out_ray[slot[k]] = ray_index[k]
            out_intensity[slot[k]] = intensity[k]
            out_semantic[slot[k]] = semantic[k]
            out_existence[slot[k]] = existence[k]


@njit(cache=True, nogil=True)
def _frame_key_of(seed, frame):
    return frame_key(seed, frame)


def _origins(pattern) -> np.ndarray:
    """The pattern's ray origins, (1, 3) zeros when every ray leaves the sensor origin."""
    return np.zeros((1, 3), np.float32) if pattern.origins is None else pattern.origins


def stretched_limit(limit):
    """The range–reflectivity limit at :data:`STRETCH` times its ranges: what the physics pass keeps under
    probabilistic detection (every fit's r_L scales with its pairs' ranges)."""
    return RangeReflectivityLimit(tuple((refl, range_m * STRETCH) for refl, range_m in limit.pairs), limit.fit,
                                  limit.max_range_m)


def apply_effects(returns, pattern, sensor, frame: int, weather: Weather | None = None):
    """``returns`` (:class:`~lidar_fmu.pointcloud.Returns` in the sensor frame, ray order) after ``sensor.effects``
    in frame ``frame`` → (returns kept, their existence probability (M,) float64). ``weather`` stands in for the
    spec's when it sets none (the FMU's SensorView). ``returns.points`` is changed in place."""
    effects = sensor.effects
    weather = effects.weather if effects.weather is not None else weather
    foul = weather is not None and not weather.clear
    if foul and weather is not None:
        weather = weather.at_wavelength(sensor.wavelength_nm)
    n = len(returns.points)
    if not (effects.active or foul):
        return returns, np.ones(n)
    noise = effects.noise or Noise()
    key = np.uint64(_frame_key_of(np.uint64(noise.seed), np.uint64(frame)))  # numba returns a Python int
    if foul:  # clutter first: its echoes then meet the same detection, dropout and noise as any return
        assert weather is not None  # (foul says so)
        returns = _with_clutter(returns, pattern, weather, sensor, key)
        n = len(returns.points)
    code, a, b, c, tail_refl, tail_m, limit_max = limit_params(sensor.range_limit, sensor.max_range_m)
    points = returns.points  # in place: a frame's returns are fresh arrays no one else holds
    keep = np.empty(n, np.bool_)
    existence = np.empty(n)
    bias = laser_bias_m(noise, int(pattern.beam_id.max()) + 1) if noise.laser_bias_sigma_m > 0 else np.zeros(0)
    alpha = weather.extinction_per_m if foul and weather is not None else 0.0  # (foul says weather is not None)
    _apply(points, returns.ray_index, returns.intensity_percent, _origins(pattern), pattern.directions, key,
           np.int64(DETECTION_MODES.index(effects.detection)), np.float64(effects.detection_width),
           np.int64(code), np.float64(a), np.float64(b), np.float64(c),
           np.float64(tail_refl), np.float64(tail_m), np.float64(limit_max), alpha, noise.dropout,
           noise.range_sigma_m, noise.range_sigma_per_m, noise.shot_sigma_m, bias, math.radians(noise.angle_sigma_deg),
           WEATHER_OBJECT_ID, np.asarray(effects.intensity_law or (0.0, 1.0, 2.0), np.float64), keep, existence)
    if keep.all():
        return Returns(points, returns.ray_index, returns.intensity_percent, semantic=returns.semantic), existence
    kept = int(np.count_nonzero(keep))
    out, out_ray, out_intensity, out_semantic, out_existence = (
        np.empty(kept, points.dtype), np.empty(kept, np.int32), np.empty(kept, np.float32), np.empty(kept, np.uint8),
        np.empty(kept))
    _compact(points, returns.ray_index, returns.intensity_percent, _semantic_of(returns), existence, keep, out, out_ray,
             out_intensity, out_semantic, out_existence)
    return Returns(out, out_ray, out_intensity, semantic=None if returns.semantic is None else out_semantic), out_existence


__all__ = ["Effects", "EffectsError", "Noise", "apply_effects", "detection_probability", "draw_normal",
           "logistic_detection_probability", "range_sigma_m",
           "draw_uniform", "inverse_normal_cdf", "frame_key", "parse_effects", "stretched_limit", "uniform"]

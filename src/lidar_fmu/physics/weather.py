"""Weather: extinction of the lidar signal and clutter echoes from fog, rain and snow.

A sensor spec may set ``weather: {fog_visibility_m, rain_mm_h, snow_mm_h, clutter}`` (:func:`parse_weather`);
without it the FMU takes the SensorView's OSI ``environmental_conditions``
(:func:`lidar_fmu.osi.decode.from_osi_environment`). Either gives a :class:`Weather`, whose numbers feed two
compiled, scalar pieces of physics that a per-return pass calls inline:

* **extinction**: a return at range r keeps ``exp(−2αr)`` of its power, and the range–reflectivity limit applies
  to the attenuated reflectivity (:func:`detectable_in_weather`);
* **clutter**: :func:`clutter_return` decides, from uniforms the caller draws, whether a weather echo (fog as a
  soft target, :func:`fog_echo`; or the nearest rain drop or snow flake in the beam) comes back before the hard
  target, at what range and with what reflectivity; such returns carry :data:`WEATHER_OBJECT_ID`.

The laws, their sources and why they were chosen, the clutter models and their departures from the papers, and
the model set against the fog chamber: docs/physics.md, "Noise, detection probability and weather". Each
constant's source is cited beside it below.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..documents import refuse_unknown_keys, shown
from ..errors import LidarFmuError
from .range_limit import range_limit_m

#: object_id of weather returns (fog, rain, snow echoes): 2⁶⁴ − 2, neither a scene instance's id (< 2⁶³) nor the
#: environment's NO_OBJECT_ID (2⁶⁴ − 1), so clutter is told apart by the id alone
WEATHER_OBJECT_ID = np.uint64(2**64 - 2)

#: Keys of the spec's ``weather`` mapping.
WEATHER_KEYS = ("fog_visibility_m", "rain_mm_h", "snow_mm_h")

#: ln(1/0.02): Koschmieder's constant, α = 3.912 / V for visibility V at 2 % contrast.
KOSCHMIEDER_CONSTANT = 3.912
#: ln(1/0.05): the meteorological optical range (MOR, 5 % transmission), α = 2.996 / MOR.
#: OSI's fog classes and Hahner et al.'s β are given in MOR.
MOR_CONSTANT = math.log(20.0)
#: dB/km → 1/m for a power attenuation: ln(10) / 10 / 1000.
_DB_PER_KM_TO_PER_M = math.log(10.0) / 1.0e4

#: Lidar wavelength (nm) the laws below are written for: 905 nm, the usual automotive diode. A sensor of another
#: wavelength gets its fog scaled by Kim et al.'s law and its snow by ITU-R P.1817's (:meth:`Weather.at_wavelength`).
WAVELENGTH_NM = 905.0
#: Rain: γ = 1.076·R^0.67 dB/km, R in mm/h (Carbonneau & Wisely 1998, SPIE 3232, "Opportunities and
#: challenges for optical wireless", as quoted by Al Naboulsi, Sizun & de Fornel 2005, URSI GA F01P.7).
RAIN_DB_PER_KM_COEFF = 1.076
RAIN_EXPONENT = 0.67


def snow_db_per_km_coeff(wavelength_nm: float) -> float:
    """Dry snow's coefficient a = 5.42e-5·λ_nm + 5.4958776 of γ = a·S^b dB/km at ``wavelength_nm`` (ITU-R P.1817-1,
    below): one law for the 905 nm constant and for a sensor of another wavelength."""
    return 5.42e-5 * wavelength_nm + 5.4958776


#: Dry snow: γ = a·S^b dB/km, a = 5.42e-5·λ_nm + 5.4958776, b = 1.38, S in mm/h
#: (ITU-R Rec. P.1817-1, 2012, "Propagation data required for the design of terrestrial
#: free-space optical links", Table 2).
SNOW_DB_PER_KM_COEFF = snow_db_per_km_coeff(WAVELENGTH_NM)
SNOW_EXPONENT = 1.38
#: Fog and haze at other wavelengths: α(λ) = (3.91/V)·(λ/550 nm)^−q with q = 1.6 (V > 50 km), 1.3 (6–50 km),
#: 0.16·V + 0.34 (1–6 km), V − 0.5 (0.5–1 km), 0 (V < 0.5 km), V in km (Kim, McArthur & Korevaar 2001, "Comparison
#: of laser beam propagation at 785 nm and 1550 nm in fog and haze for optical wireless communications", Proc. SPIE
#: 4214, eq. 3): dense fog's droplets are large against either wavelength, haze's are not. Our fog law is
#: Koschmieder's at 905 nm; another wavelength scales it by (λ/905 nm)^−q.
KIM_VISIBILITY_KM = (0.5, 1.0, 6.0, 50.0)

#: Fog backscattering coefficient β = 0.046 / MOR, 1/(m·sr) with MOR in m (Hahner et al. 2021,
#: "Fog simulation on real LiDAR point clouds...", the default of their ParameterSet; range 0.023–0.092).
FOG_BACKSCATTER_TIMES_MOR_PER_SR = 0.046

#: Marshall & Palmer 1948 ("The distribution of raindrops with size", J. Meteor. 5:165–166):
#: N(D) = N0·exp(−Λ·D), N0 = 8000 m⁻³ mm⁻¹, Λ = 4.1·R^−0.21 mm⁻¹ (R in mm/h); as used by LISA.
MP_N0_PER_M3_MM = 8000.0
MP_LAMBDA_COEFF_PER_MM = 4.1
MP_LAMBDA_EXPONENT = -0.21
#: Gunn & Marshall 1958 snow ("The distribution with size of aggregate snowflakes", J. Meteor. 15),
#: with the coefficients Kilic et al. 2021 (LISA) implement: N0 = 7.6e3·S^−0.87 m⁻³ mm⁻¹,
#: Λ = 2.55·S^−0.48 mm⁻¹, S the water-equivalent rate in mm/h (the 1958 paper itself not read here).
GM_N0_COEFF_PER_M3_MM = 7.6e3
GM_N0_EXPONENT = -0.87
GM_LAMBDA_COEFF_PER_MM = 2.55
GM_LAMBDA_EXPONENT = -0.48
#: Smallest particle diameter drawn (m): LISA's ``dst`` = 0.05 mm; smaller ones never echo detectably.
PARTICLE_MIN_DIAMETER_M = 0.05e-3
#: Reflectance of a particle filling the beam: Fresnel at normal incidence for water at 905 nm,
#: ((n−1)/(n+1))², n = 1.328 (LISA's default). Used for snow too (ice n ≈ 1.31 gives 0.018).
PARTICLE_REFLECTANCE = ((1.328 - 1.0) / (1.328 + 1.0)) ** 2

#: Defaults for the sensor optics the clutter model needs, where a spec gives none.
#: Speed of light in vacuum (m/s).
SPEED_OF_LIGHT_M_S = 299_792_458.0
#: Half-power pulse width τ_H (s): Hahner et al. 2021's 20 ns (their ParameterSet ``tau_h``; slider 5–80 ns).
#: The fog echo grows about linearly with τ_H; Velodyne quotes "typically 4 nanoseconds" for the HDL-64E
#: (velodyne.com/lidar/technology/concept.aspx).
DEFAULT_PULSE_HALF_POWER_S = 20e-9
#: Pulse half-power length c·τ_H/2 (m): the depth of fog whose echo overlaps one pulse at half power or more.
DEFAULT_PULSE_LENGTH_M = SPEED_OF_LIGHT_M_S * DEFAULT_PULSE_HALF_POWER_S / 2.0
#: Biaxial optics of Hahner et al. 2021's ParameterSet: transmitter–receiver displacement D (m), aperture
#: radii ρ_T, ρ_R (m) and full fields of view γ_T, γ_R (rad) of transmitter and receiver.
OPTICS_DISPLACEMENT_M = 0.1
OPTICS_TRANSMITTER_RADIUS_M = 0.01
OPTICS_RECEIVER_RADIUS_M = 0.01
OPTICS_TRANSMITTER_FOV_RAD = math.radians(2.0)
OPTICS_RECEIVER_FOV_RAD = math.radians(3.5)
#: Transmitter/receiver overlap ξ(R) (Hahner et al. 2021, Fig. 2 and eqs. 11–12, after Rasshofer, Spies &
#: Spies 2011, Adv. Radio Sci. 9, "Influences of weather phenomena on automotive laser radar systems"):
#: 0 up to R_1, where the receiver's field of view starts to cover the beam, rising linearly (their
#: ``linear_xsi``) to 1 at R_2, from where it covers it fully:
#: R_1 = (D − ρ_T − ρ_R) / (tan(γ_T/2) + tan(γ_R/2)) = 1.67 m, R_2 = (D − ρ_R + ρ_T) / (tan(γ_R/2) − tan(γ_T/2))
#: = 7.63 m with the optics above ("R_2 < 10 m in most sensor systems", their code). Their code's sliders
#: default to r_1 = 0.9 m, r_2 = 1.0 m instead; docs/physics.md shows what each gives against the chamber.
OVERLAP_START_M = (OPTICS_DISPLACEMENT_M - OPTICS_TRANSMITTER_RADIUS_M - OPTICS_RECEIVER_RADIUS_M) / (
    math.tan(OPTICS_TRANSMITTER_FOV_RAD / 2.0) + math.tan(OPTICS_RECEIVER_FOV_RAD / 2.0))
OVERLAP_FULL_M = (OPTICS_DISPLACEMENT_M - OPTICS_RECEIVER_RADIUS_M + OPTICS_TRANSMITTER_RADIUS_M) / (
    math.tan(OPTICS_RECEIVER_FOV_RAD / 2.0) - math.tan(OPTICS_TRANSMITTER_FOV_RAD / 2.0))
#: Nearest range of a rain drop / snow flake echo (m): Hahner et al. 2021's r_2 = 1.0 m (full overlap).
DEFAULT_MIN_RANGE_M = 1.0
#: Full beam divergence (rad): LISA's default ``bdiv`` = 3 mrad.
DEFAULT_BEAM_DIVERGENCE_RAD = 3e-3
#: Nearest overlap start the soft-target integral accepts (m): ξ/R² is not integrable at R = 0.
_MIN_OVERLAP_START_M = 0.05
#: Grid of the soft-target integral: receive positions, and points per pulse window (midpoint rule, within 2 % of
#: a 1 mm reference)
_FOG_RECEIVE_STEPS = 64
_FOG_PULSE_STEPS = 32
#: Step (m) of the hard target's range in :func:`fog_echo_table`.
FOG_TABLE_STEP_M = 0.05


def kim_exponent(visibility_m: float) -> float:
    """Kim et al. 2001's size-distribution exponent q for a visibility (m): how fast fog's extinction falls with
    wavelength (``KIM_VISIBILITY_KM``)."""
    v_km = visibility_m / 1000.0
    if v_km < KIM_VISIBILITY_KM[0]:
        return 0.0
    if v_km < KIM_VISIBILITY_KM[1]:
        return v_km - 0.5
    if v_km < KIM_VISIBILITY_KM[2]:
        return 0.16 * v_km + 0.34
    return 1.3 if v_km < KIM_VISIBILITY_KM[3] else 1.6


class WeatherError(LidarFmuError, ValueError):
    """A ``weather`` spec value that cannot be used: unknown key, non-number, out of range."""


# ------------------------------------------------------------ scalar physics


@njit(cache=True, nogil=True, inline="always")
def fog_extinction_per_m(visibility_m):
    """Koschmieder: α = 3.912 / V (1/m) for visibility V (m) at 2 % contrast; 0 for V = inf."""
    if visibility_m == np.inf:
        return 0.0
    return KOSCHMIEDER_CONSTANT / visibility_m


@njit(cache=True, nogil=True, inline="always")
def rain_extinction_per_m(rain_mm_h):
    """Rain, Carbonneau & Wisely 1998: 1.076·R^0.67 dB/km → 1/m (R in mm/h)."""
    if rain_mm_h <= 0.0:
        return 0.0
    return RAIN_DB_PER_KM_COEFF * rain_mm_h**RAIN_EXPONENT * _DB_PER_KM_TO_PER_M


@njit(cache=True, nogil=True, inline="always")
def snow_extinction_per_m(snow_mm_h):
    """Dry snow, ITU-R P.1817-1 Table 2 at 905 nm: 5.545·S^1.38 dB/km → 1/m (S in mm/h)."""
    if snow_mm_h <= 0.0:
        return 0.0
    return SNOW_DB_PER_KM_COEFF * snow_mm_h**SNOW_EXPONENT * _DB_PER_KM_TO_PER_M


@njit(cache=True, nogil=True, inline="always")
def two_way_transmission(alpha_per_m, range_m):
    """exp(−2·α·r): the fraction of a return's power left after the way out and back.

    α one-way extinction (1/m), r range (m). Clear air (α = 0) gives 1 even
    for r = inf; a miss (r = inf) in any weather gives 0.
    """
    if alpha_per_m <= 0.0:
        return 1.0
    return math.exp(-2.0 * alpha_per_m * range_m)


@njit(cache=True, nogil=True, inline="always")
def detectable_in_weather(code, a, b, c, tail_reflectivity, tail_range_m, max_range_m, alpha_per_m, reflectivity,
                          range_m):
    """Whether a hard return survives: ``range_m <= r_L(reflectivity · T(range_m))``.

    ``code … max_range_m`` are ``RangeReflectivityLimit.kernel_params()``.
    """
    attenuated = reflectivity * two_way_transmission(alpha_per_m, range_m)
    return range_m <= range_limit_m(code, a, b, c, tail_reflectivity, tail_range_m, max_range_m, attenuated)


@njit(cache=True, nogil=True, inline="always")
def overlap_fraction(range_m, overlap_start_m, overlap_full_m):
    """ξ(R): the share of the beam the receiver sees at range R, linear from 0 at R_1 to 1 at R_2 (Hahner et al.)."""
    if range_m >= overlap_full_m:
        return 1.0
    if range_m <= overlap_start_m:
        return 0.0
    return (range_m - overlap_start_m) / (overlap_full_m - overlap_start_m)


@njit(cache=True, nogil=True)
def fog_echo(alpha_per_m, backscatter_per_m_sr, pulse_length_m, overlap_start_m, overlap_full_m, target_range_m):
    """The fog's own echo before a hard target at ``target_range_m`` (``inf``: none), as a soft target.

    → ``(range_m, power_per_m2, range_lo_m, range_hi_m)``: the range and power of the peak of the received
    fog signal, and the ranges between which it stays above half that peak. Power is in the units of a
    Lambertian hard target's ``ρ·ξ·T(r)/r²`` (the same system constants; :func:`clutter_return`):
    Hahner et al. 2021's soft-target term with the pulse sin²(π·t/(2τ_H)) on 0 ≤ t ≤ 2τ_H,

        P(R) = π·β·∫ sin²(π·(R − R')/(2L)) · ξ(R') · exp(−2αR') / R'² dR',  R − 2L ≤ R' ≤ min(R, r_target),

    L = c·τ_H/2 the pulse's half-power length (``pulse_length_m``), R the receive position of the
    pulse's leading edge; a return's range is that of the pulse centre, R − L (their shift by c·τ_H/2).
    Integrated by the midpoint rule on a fixed grid; ``(inf, 0.0, inf, inf)`` when there is no fog.
    """
    if backscatter_per_m_sr <= 0.0 or pulse_length_m <= 0.0:
        return np.inf, 0.0, np.inf, np.inf
    start = max(overlap_start_m, _MIN_OVERLAP_START_M)
    full = max(overlap_full_m, start)
    window = 2.0 * pulse_length_m
    # Beyond full overlap the integrand only falls, so the peak's leading edge lies before full + window; the
    # echo's centre must lie before the target (beyond it the hard echo is there).
    end = min(full + window, target_range_m + pulse_length_m)
    if end <= start or target_range_m <= start:
        return np.inf, 0.0, np.inf, np.inf
    step = (end - start) / _FOG_RECEIVE_STEPS
    power = np.empty(_FOG_RECEIVE_STEPS)
    best = 0
    for i in range(_FOG_RECEIVE_STEPS):
        receive = start + (i + 0.5) * step
        lo = max(start, receive - window)
        hi = min(receive, target_range_m)
        total = 0.0
        if hi > lo:
            dr = (hi - lo) / _FOG_PULSE_STEPS
            for j in range(_FOG_PULSE_STEPS):
                r = lo + (j + 0.5) * dr
                shape = math.sin(math.pi * (receive - r) / window)
                total += (shape * shape * overlap_fraction(r, start, full) * two_way_transmission(alpha_per_m, r)
                          / (r * r))
            total *= dr
        power[i] = math.pi * backscatter_per_m_sr * total
        if power[i] > power[best]:
            best = i
    if power[best] <= 0.0:
        return np.inf, 0.0, np.inf, np.inf
    first = best
    while first > 0 and power[first - 1] >= 0.5 * power[best]:
        first -= 1
    last = best
    while last < _FOG_RECEIVE_STEPS - 1 and power[last + 1] >= 0.5 * power[best]:
        last += 1
    centre = start + 0.5 * step - pulse_length_m  # receive position of grid point 0, as a pulse-centre range
    # (receive ≤ end − step/2 keeps every centre before the target)
    return (max(centre + best * step, start), power[best], max(centre + first * step, start),
            max(centre + last * step, start))


@njit(cache=True, nogil=True)
def fog_echo_table(alpha_per_m, backscatter_per_m_sr, pulse_length_m, overlap_start_m, overlap_full_m, step_m):
    """:func:`fog_echo` against the hard target's range, tabulated for :func:`clutter_return`.

    Rows ``(target_range_m, range_m, power_per_m2, range_lo_m, range_hi_m)``: row k for a target at
    ``overlap_start_m + k·step_m``, up to where a target no longer cuts the echo window (the free echo's
    half-power end plus one pulse length); the last row is the free echo (target ``inf``). A target between
    two rows takes the nearer one's (the fog up to at most ``step_m`` less: a slightly weaker echo).
    """
    free = fog_echo(alpha_per_m, backscatter_per_m_sr, pulse_length_m, overlap_start_m, overlap_full_m, np.inf)
    start = max(overlap_start_m, _MIN_OVERLAP_START_M)
    rows = 1
    if free[1] > 0.0:
        rows += int(math.ceil((free[3] + pulse_length_m - start) / step_m)) + 1
    table = np.empty((rows, 5))
    for k in range(rows - 1):
        target = start + k * step_m
        echo = fog_echo(alpha_per_m, backscatter_per_m_sr, pulse_length_m, overlap_start_m, overlap_full_m, target)
        table[k, 0] = target
        table[k, 1], table[k, 2], table[k, 3], table[k, 4] = echo
    table[rows - 1, 0] = np.inf
    table[rows - 1, 1], table[rows - 1, 2], table[rows - 1, 3], table[rows - 1, 4] = free
    return table


@njit(cache=True, nogil=True, inline="always")
def _fog_row(fog_table, target_range_m):
    """The row of :func:`fog_echo_table` for a hard target at ``target_range_m``."""
    last = fog_table.shape[0] - 1
    if last == 0 or target_range_m >= fog_table[last - 1, 0]:
        return last
    if target_range_m < fog_table[0, 0]:
        return -1
    return int((target_range_m - fog_table[0, 0]) / (fog_table[1, 0] - fog_table[0, 0]))


@njit(cache=True, nogil=True, inline="always")  # inlined: the frame's constants (tan θ, …) leave the ray loop
def clutter_return(
    alpha_per_m,
    fog_backscatter_per_m_sr,
    particles_per_m3,
    particle_min_diameter_m,
    particle_diameter_scale_m,
    pulse_length_m,
    overlap_start_m,
    overlap_full_m,
    min_range_m,
    beam_divergence_rad,
    min_power_per_m2,
    strongest_return,
    target_range_m,
    target_reflectivity,
    fog_table,
    u1,
    u2,
    u3,
):
    """A weather echo before the hard target: ``(has_clutter, range_m, reflectivity)``.

    The first five arguments are :meth:`Weather.clutter_params`; the next six the sensor's pulse half-power
    length c·τ_H/2 (m), the overlap ξ's start R_1 and full range R_2 (m), the nearest range of a drop echo (m),
    the full beam divergence (rad) and the power floor (1/m², :func:`detection_floor_per_m2`).
    ``strongest_return``: True for a sensor that reports only the strongest echo (clutter then replaces the
    hard return and is reported only if it outshines it), False for one that reports every echo.
    ``target_range_m`` is the hard hit's range (``inf`` for a miss) and ``target_reflectivity`` its
    reflectivity before extinction. ``fog_table`` is :func:`fog_echo_table` of the same fog and optics
    (:meth:`Weather.fog_table`: computed once per weather, not per ray).
    ``u1``, ``u2``, ``u3`` are uniforms in [0, 1) from the caller's stream: u1 places the nearest particle,
    u2 sizes it, u3 places the fog echo within its half-power width. The result depends on nothing else.

    ``range_m`` is below ``target_range_m``; ``reflectivity`` is the echo's Lambertian-equivalent
    reflectivity at that range as the sensor reports it (power · r²), two-way extinction included (do not
    attenuate it again, nor apply the range–reflectivity limit: detection is decided here). Without clutter
    the result is ``(False, inf, 0.0)``. Model: docs/physics.md, "Weather: extinction laws, drop echoes, detection".
    """
    best_power = 0.0
    best_range = np.inf
    # Fog as a soft target (Hahner et al. 2021): the peak of the received fog signal.
    row = _fog_row(fog_table, target_range_m) if fog_backscatter_per_m_sr > 0.0 else -1
    if row >= 0 and fog_table[row, 2] > 0.0:
        r = fog_table[row, 3] + u3 * (fog_table[row, 4] - fog_table[row, 3])
        if r < target_range_m:
            best_power = fog_table[row, 2]
            best_range = r
    # The nearest rain drop / snow flake in the beam cone (LISA, Kilic et al. 2021). Particles within
    # range r of the apex of a cone of diameter r·tanθ: N·(π/12)·tan²θ·r³; beyond min_range_m they
    # arrive as a Poisson process in r³, so the first lies at r³ = min³ + E/k, E ~ Exp(1) = −ln(u1).
    tan_div = math.tan(beam_divergence_rad)
    if particles_per_m3 > 0.0 and tan_div > 0.0:
        k = particles_per_m3 * math.pi * tan_div * tan_div / 12.0
        r3 = min_range_m**3 - math.log(u1) / k
        diameter = particle_min_diameter_m - particle_diameter_scale_m * math.log(u2)
        # Exact rejections before the cube root (most drops are too faint): the echo power R·fill·T/r² is
        # at most R/r² (fill, T ≤ 1) and at most R·D²/(r⁴·tan²θ) (fill ≤ (D / r·tanθ)²); if either is below
        # the floor, or the drop lies behind the target, no echo. Compared as powers of r³, no root taken.
        a = PARTICLE_REFLECTANCE / min_power_per_m2 if min_power_per_m2 > 0.0 else np.inf
        b = a * (diameter / tan_div) ** 2
        if r3 * r3 <= a * a * a and r3**4 <= b * b * b and r3 < target_range_m**3:
            r = r3 ** (1.0 / 3.0)
            beam = r * tan_div
            fill = min(1.0, (diameter / beam) ** 2)
            power = PARTICLE_REFLECTANCE * fill * two_way_transmission(alpha_per_m, r) / (r * r)
            if r > 0.0 and power > best_power:
                best_power = power
                best_range = r
    if best_power <= 0.0 or best_power < min_power_per_m2:
        return False, np.inf, 0.0
    if strongest_return and target_range_m < np.inf and target_reflectivity > 0.0:
        # the hard echo's peak with the same constants: ρ·ξ(r)·T(r)/r² (Hahner et al.'s hard-target term)
        target_power = (target_reflectivity * overlap_fraction(target_range_m, overlap_start_m, overlap_full_m)
                        * two_way_transmission(alpha_per_m, target_range_m) / (target_range_m * target_range_m))
        if target_power >= best_power:
            return False, np.inf, 0.0
    return True, best_range, best_power * best_range * best_range


def detection_floor_per_m2(limit) -> float:
    """The weakest received power ρ/r² (1/m²) the sensor resolves, from its datasheet pairs.

    ``limit`` is a :class:`~lidar_fmu.physics.range_limit.RangeReflectivityLimit`; the
    floor is min over its pairs (R_i, r_i) of R_i / r_i² (lidar equation for a
    Lambertian target), e.g. 0.80 / 120² = 5.6e-5 for [[0.10, 40], [0.80, 120]].
    """
    return float(min(refl / (rng * rng) for refl, rng in limit.pairs))


# ------------------------------------------------------------ the weather


def _exponential_dsd(n0_per_m3_mm: float, lambda_per_mm: float) -> tuple[float, float]:
    """(particles per m³ with D ≥ the minimum, diameter scale 1/Λ in m) of N0·exp(−Λ·D)."""
    d_min_mm = PARTICLE_MIN_DIAMETER_M * 1e3
    return n0_per_m3_mm / lambda_per_mm * math.exp(-lambda_per_mm * d_min_mm), 1e-3 / lambda_per_mm


@dataclass(frozen=True)
class Weather:
    """Fog visibility (m, Koschmieder, 2 % contrast; inf: no fog) and rain / snow rates (mm/h).

    Snow is the water-equivalent precipitation rate. The default is clear air. ``clutter=False`` keeps the
    extinction and drops the weather's own echoes (fog, drops, flakes).
    """

    fog_visibility_m: float = math.inf
    rain_mm_h: float = 0.0
    snow_mm_h: float = 0.0
    clutter: bool = True
    #: the sensor's wavelength the extinction is evaluated at (:meth:`at_wavelength`); rain does not depend on it
    wavelength_nm: float = WAVELENGTH_NM

    def __post_init__(self):
        for key in WEATHER_KEYS:
            object.__setattr__(self, key, _check_value(key, getattr(self, key)))
        if not isinstance(self.clutter, (bool, np.bool_)):
            raise WeatherError(f"weather: clutter must be true or false, got {shown(self.clutter)}")
        object.__setattr__(self, "clutter", bool(self.clutter))

    @property
    def clear(self) -> bool:
        """No fog, rain or snow: no extinction and no clutter."""
        return self.fog_visibility_m == math.inf and self.rain_mm_h == 0.0 and self.snow_mm_h == 0.0

    def at_wavelength(self, wavelength_nm: float) -> Weather:
        """This weather seen by a sensor of ``wavelength_nm``."""
        return dataclasses.replace(self, wavelength_nm=float(wavelength_nm))

    @property
    def fog_extinction_per_m(self) -> float:
        alpha = float(fog_extinction_per_m(self.fog_visibility_m))
        if alpha == 0.0 or self.wavelength_nm == WAVELENGTH_NM:
            return alpha
        return alpha * (self.wavelength_nm / WAVELENGTH_NM) ** -kim_exponent(self.fog_visibility_m)

    @property
    def rain_extinction_per_m(self) -> float:
        return float(rain_extinction_per_m(self.rain_mm_h))

    @property
    def snow_extinction_per_m(self) -> float:
        at_905 = float(snow_extinction_per_m(self.snow_mm_h))
        return at_905 * snow_db_per_km_coeff(self.wavelength_nm) / SNOW_DB_PER_KM_COEFF

    @property
    def extinction_per_m(self) -> float:
        """One-way extinction coefficient α (1/m): fog + rain + snow."""
        return self.fog_extinction_per_m + self.rain_extinction_per_m + self.snow_extinction_per_m

    @property
    def fog_backscatter_per_m_sr(self) -> float:
        """Fog's backscattering coefficient β = 0.046 / MOR (1/(m·sr)), MOR = ln(20)/α_fog (Hahner et al.)."""
        return FOG_BACKSCATTER_TIMES_MOR_PER_SR * self.fog_extinction_per_m / MOR_CONSTANT

    def particle_population(self) -> tuple[float, float]:
        """(rain drops + snow flakes per m³ of diameter ≥ 0.05 mm, mean excess diameter in m).

        Rain: Marshall–Palmer; snow: Gunn–Marshall (constants above). The two
        exponential size laws are merged into one with the number-weighted
        scale, which is exact for either alone.
        """
        count, scale_sum = 0.0, 0.0
        if self.rain_mm_h > 0.0:
            n, s = _exponential_dsd(MP_N0_PER_M3_MM, MP_LAMBDA_COEFF_PER_MM * self.rain_mm_h**MP_LAMBDA_EXPONENT)
            count, scale_sum = count + n, scale_sum + n * s
        if self.snow_mm_h > 0.0:
            n, s = _exponential_dsd(
                GM_N0_COEFF_PER_M3_MM * self.snow_mm_h**GM_N0_EXPONENT,
                GM_LAMBDA_COEFF_PER_MM * self.snow_mm_h**GM_LAMBDA_EXPONENT,
            )
            count, scale_sum = count + n, scale_sum + n * s
        return count, (scale_sum / count if count > 0.0 else 0.0)

    def clutter_params(self) -> tuple[float, float, float, float, float]:
        """The weather's arguments of :func:`clutter_return`, in order:

        (α 1/m, fog β 1/(m·sr), particles per m³, minimum particle diameter m, diameter scale m);
        β and the particle count are 0 when ``clutter`` is off.
        """
        if not self.clutter:
            return self.extinction_per_m, 0.0, 0.0, PARTICLE_MIN_DIAMETER_M, 0.0
        count, scale_m = self.particle_population()
        return self.extinction_per_m, self.fog_backscatter_per_m_sr, count, PARTICLE_MIN_DIAMETER_M, scale_m

    def fog_table(self, pulse_length_m: float = DEFAULT_PULSE_LENGTH_M, overlap_start_m: float = OVERLAP_START_M,
                  overlap_full_m: float = OVERLAP_FULL_M) -> np.ndarray:
        """:func:`fog_echo_table` of this weather and optics (``clutter_return``'s ``fog_table``), cached."""
        alpha, beta = self.clutter_params()[:2]
        return _fog_table(alpha, beta, float(pulse_length_m), float(overlap_start_m), float(overlap_full_m))

    def free_fog_echo(self, pulse_length_m: float = DEFAULT_PULSE_LENGTH_M, overlap_start_m: float = OVERLAP_START_M,
                      overlap_full_m: float = OVERLAP_FULL_M) -> tuple[float, float, float, float]:
        """(range m, power 1/m², half-power range lo, hi m) of the fog's echo with nothing in the beam."""
        row = self.fog_table(pulse_length_m, overlap_start_m, overlap_full_m)[-1]
        return float(row[1]), float(row[2]), float(row[3]), float(row[4])


@functools.lru_cache(maxsize=64)
def _fog_table(alpha: float, beta: float, pulse_length_m: float, overlap_start_m: float,
               overlap_full_m: float) -> np.ndarray:
    table = fog_echo_table(alpha, beta, pulse_length_m, overlap_start_m, overlap_full_m, FOG_TABLE_STEP_M)
    table.setflags(write=False)  # shared by every frame of this weather
    return table


def _check_value(key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise WeatherError(f"weather: {key} must be a number, got {shown(value)}")
    number = float(value)
    if math.isnan(number):
        raise WeatherError(f"weather: {key} must be a number, got {shown(value)}")
    if key == "fog_visibility_m":
        if number <= 0.0:
            raise WeatherError(f"weather: {key} must be > 0 m (inf for no fog), got {shown(value)}")
    elif number < 0.0 or number == math.inf:
        raise WeatherError(f"weather: {key} must be a finite rate >= 0 mm/h, got {shown(value)}")
    return number


def parse_weather(value) -> Weather | None:
    """The spec's ``weather`` value as a :class:`Weather`; None when it is None (not set).

    A mapping with any of ``fog_visibility_m`` (m, > 0, inf for none),
    ``rain_mm_h`` and ``snow_mm_h`` (mm/h, >= 0); absent keys mean no fog,
    rain or snow, so ``{}`` is clear air; ``clutter`` (true or false, default
    true) switches the weather's own echoes. Anything else raises
    :class:`WeatherError` (a ``ValueError``) with one line naming the key.
    """
    if value is None:
        return None
    if isinstance(value, Weather):
        return value
    if not isinstance(value, Mapping):
        raise WeatherError(f"weather must be a mapping with keys {', '.join(WEATHER_KEYS)}, got {shown(value)}")
    known = (*WEATHER_KEYS, "clutter")
    refuse_unknown_keys(value, known, "weather", WeatherError)
    return Weather(**{key: value[key] for key in known if key in value})


__all__ = [
    "DEFAULT_BEAM_DIVERGENCE_RAD",
    "DEFAULT_MIN_RANGE_M",
    "DEFAULT_PULSE_LENGTH_M",
    "OVERLAP_FULL_M",
    "OVERLAP_START_M",
    "WEATHER_KEYS",
    "WEATHER_OBJECT_ID",
    "Weather",
    "WeatherError",
    "clutter_return",
    "detectable_in_weather",
    "detection_floor_per_m2",
    "fog_echo",
    "fog_echo_table",
    "fog_extinction_per_m",
    "overlap_fraction",
    "parse_weather",
    "rain_extinction_per_m",
    "snow_extinction_per_m",
    "two_way_transmission",
]

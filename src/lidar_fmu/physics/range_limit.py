"""Range–reflectivity limit: how far a surface of reflectivity R can be seen.

Datasheets give the maximum range for a few Lambertian targets, e.g. ``[10 %, 60 m]`` and ``[80 %, 120 m]``.
LiMOX (Rott et al., Fig. 7) extends such pairs to every reflectivity with a curve fit r_L(R); a return at range d
off a surface of reflectivity R is kept iff ``d <= r_L(R)``. In a sensor spec::

    range_reflectivity: {pairs: [[0.10, 60.0], [0.80, 120.0]], fit: log}

:func:`fit_range_limit` fits ``linear``, ``root2``/``root3``/``root4``, ``log``, ``blensor`` or ``constant``
into a :class:`RangeReflectivityLimit`; below the lowest pair every fitted law follows the root-2 law of an
extended Lambertian target (the lidar range equation). :func:`range_limit_m` is the same r_L for one return,
compiled with Numba so that physics kernels call it inline with ``*limit.kernel_params()``.

The fits' closed forms, the root-2 tail's reason and source, BlenSor's convention and ours beside it:
docs/physics.md, "Range limit".
"""
from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numba import njit
from numba.extending import register_jitable

from ..documents import refuse_unknown_keys
from ..errors import LidarFmuError

#: range–reflectivity fits (``range_reflectivity.fit`` in a sensor spec), in code order
RANGE_LIMIT_FITS = ("linear", "root2", "root3", "root4", "log", "blensor", "constant")
FIT_LINEAR, FIT_ROOT2, FIT_ROOT3, FIT_ROOT4, FIT_LOG, FIT_BLENSOR, FIT_CONSTANT = range(len(RANGE_LIMIT_FITS))

FITS = RANGE_LIMIT_FITS
#: n of the root-n fits, by fit code.
_ROOT_N = {FIT_ROOT2: 2, FIT_ROOT3: 3, FIT_ROOT4: 4}
#: Fits whose two parameters come from at least two pairs, and need r rising with R.
_TWO_PAIR_FITS = frozenset({"linear", "log", "blensor"})
#: Fits that keep their own convention below the lowest pair instead of the root-2 tail.
_NO_TAIL_FITS = frozenset({"blensor", "constant"})
#: Above 1 a surface is brighter than a perfect Lambertian one (retroreflective);
#: datasheets never go past that, so anything larger is almost surely a percentage.
MAX_PAIR_REFLECTIVITY = 1.5


# ---------------------------------------------------------------- validation


class RangeLimitError(LidarFmuError, ValueError):
    """A range–reflectivity spec (fit name, pairs, max range) that cannot be used."""


def _check_fit(fit) -> str:
    if not isinstance(fit, str):
        raise RangeLimitError(f"range-reflectivity fit must be a string, one of {', '.join(FITS)}; got {fit!r}")
    name = fit.strip().lower()
    if name in FITS:
        return name
    # Prefixes catch 'logarithmic' → log and 'root' → root2/3/4, which difflib misses.
    close = [f for f in FITS if name and (f.startswith(name) or name.startswith(f))]
    close += [f for f in difflib.get_close_matches(name, FITS, n=3, cutoff=0.6) if f not in close]
    hint = f"; did you mean {' or '.join(repr(f) for f in close)}?" if close else ""
    raise RangeLimitError(f"unknown range-reflectivity fit {fit!r}: expected one of {', '.join(FITS)}{hint}")


def _as_number(value, what: str) -> float:
    # bool is an int subclass: 'true' in a spec is a typo, not 1.0.
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise RangeLimitError(f"{what} must be a number, got {value!r}")
    return float(value)


def _check_pairs(pairs, fit: str) -> tuple[tuple[float, float], ...]:
    """Pairs as sorted ((reflectivity, range_m), ...) after checking each value."""
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, (Sequence, np.ndarray)):
        raise RangeLimitError(f"range-reflectivity pairs must be a list of [reflectivity, range_m], got {pairs!r}")
    checked = []
    for i, pair in enumerate(pairs):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, (Sequence, np.ndarray)) or len(pair) != 2:
            raise RangeLimitError(f"range-reflectivity pair {i} must be [reflectivity, range_m], got {pair!r}")
        refl = _as_number(pair[0], f"reflectivity of pair {i}")
        range_m = _as_number(pair[1], f"range of pair {i}")
        if not 0.0 < refl <= MAX_PAIR_REFLECTIVITY:
            hint = " (reflectivity is a fraction: 10 % is 0.10)" if refl > MAX_PAIR_REFLECTIVITY else ""
            raise RangeLimitError(
                f"reflectivity of pair {i} is {refl:g}, outside (0, {MAX_PAIR_REFLECTIVITY:g}]{hint}"
            )
        if not (range_m > 0.0 and math.isfinite(range_m)):
            raise RangeLimitError(f"range of pair {i} is {range_m:g} m; it must be positive and finite")
        checked.append((refl, range_m))

    needed = 2 if fit in _TWO_PAIR_FITS else 1
    if len(checked) < needed:
        raise RangeLimitError(
            f"range-reflectivity fit {fit!r} needs at least {needed} pair{'s' if needed > 1 else ''} "
            f"[reflectivity, range_m], got {len(checked)}"
        )
    checked.sort()
    if fit in _TWO_PAIR_FITS:
        _check_rising(checked, fit)
    return tuple(checked)


def _check_rising(pairs, fit: str) -> None:
    # A curve with two free parameters through falling or flat pairs would make
    # brighter surfaces vanish sooner, and r_L would have no inverse.
    for (r0, d0), (r1, d1) in zip(pairs, pairs[1:]):
        if not (r1 > r0 and d1 > d0):
            raise RangeLimitError(
                f"range-reflectivity fit {fit!r} needs ranges that rise strictly with reflectivity; "
                f"pairs [{r0:g}, {d0:g} m] and [{r1:g}, {d1:g} m] are not monotonic"
            )


def _check_max_range(max_range_m) -> float:
    value = _as_number(max_range_m, "max_range_m")
    if not value > 0.0:  # also rejects NaN
        raise RangeLimitError(f"max_range_m must be positive (np.inf for none), got {value:g}")
    return value


# ----------------------------------------------------------------- fitting


def _least_squares_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(a, b) of y ≈ a + b·x; exact through two points."""
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b)


def _fit_coefficients(fit: str, pairs) -> tuple[float, float, float]:
    refl = np.array([p[0] for p in pairs])
    range_m = np.array([p[1] for p in pairs])
    code = FITS.index(fit)
    if fit == "linear":
        return (*_least_squares_line(refl, range_m), 0.0)
    if fit == "log":
        return (*_least_squares_line(np.log(refl), range_m), 0.0)
    if code in _ROOT_N:
        # Least squares of r ≈ a·R^(1/n) in linear space (not in log space), so
        # the metres a datasheet quotes are what is matched.
        root = refl ** (1.0 / _ROOT_N[code])
        return float(np.sum(range_m * root) / np.sum(root * root)), 0.0, 0.0
    if fit == "blensor":
        (r1, d1), (r2, d2) = pairs[0], pairs[-1]
        b = (d2 - d1) / (r2 - r1)
        return d1 - b * r1, b, d1
    return 0.0, 0.0, 0.0  # constant


def _own_law(code: int, coefficients, max_range_m: float, refl: np.ndarray) -> np.ndarray:
    """clip(max(c, f(R)), 0, max_range_m) for R > 0: the fit's own law, no tail."""
    a, b, c = coefficients
    if code == FIT_LINEAR or code == FIT_BLENSOR:
        limit = a + b * refl
    elif code in _ROOT_N:
        limit = a * refl ** (1.0 / _ROOT_N[code])
    elif code == FIT_LOG:
        limit = a + b * np.log(refl)
    else:
        limit = np.full_like(refl, max_range_m)
    return np.clip(np.maximum(limit, c), 0.0, max_range_m)


def _tail(fit: str, pairs, coefficients, max_range_m: float) -> tuple[float, float]:
    """(R_lo, r_lo) of the root-2 tail below the lowest pair; (0, 0) for the fits without one."""
    if fit in _NO_TAIL_FITS:
        return 0.0, 0.0
    refl_lo = pairs[0][0]
    return refl_lo, float(_own_law(FITS.index(fit), coefficients, max_range_m, np.array(refl_lo)))


# ------------------------------------------------------------ the limit


@dataclass(frozen=True)
class RangeReflectivityLimit:
    """r_L(R): the largest range (m) at which reflectivity R is detected.

    ``RangeReflectivityLimit(pairs, fit, max_range_m)`` checks its input and
    fits ``coefficients`` = (a, b, c) of the closed forms in docs/physics.md, "Range limit".
    """

    pairs: tuple[tuple[float, float], ...]  # (reflectivity, range_m), sorted by reflectivity
    fit: str = "log"
    max_range_m: float = np.inf  # the sensor's max range: r_L never exceeds it
    coefficients: tuple[float, float, float] = field(init=False)
    #: (R_lo, r_lo): below reflectivity R_lo, r_L = r_lo·√(R/R_lo); (0, 0) for blensor and constant
    tail: tuple[float, float] = field(init=False)

    def __post_init__(self):
        fit = _check_fit(self.fit)
        object.__setattr__(self, "fit", fit)
        object.__setattr__(self, "pairs", _check_pairs(self.pairs, fit))
        object.__setattr__(self, "max_range_m", _check_max_range(self.max_range_m))
        object.__setattr__(self, "coefficients", _fit_coefficients(fit, self.pairs))
        object.__setattr__(self, "tail", _tail(fit, self.pairs, self.coefficients, self.max_range_m))

    @property
    def code(self) -> int:
        """Index of the fit in :data:`FITS`, as :func:`range_limit_m` takes it."""
        return FITS.index(self.fit)

    def max_range_m_for(self, reflectivity) -> np.ndarray:
        """r_L (m) for each reflectivity (0–1), clipped to [0, max_range_m]; R <= 0 or NaN → 0."""
        refl = np.asarray(reflectivity, dtype=np.float64)
        positive = refl > 0.0
        safe = np.where(positive, refl, 1.0)  # keeps log and roots quiet where R <= 0
        limit = _own_law(self.code, self.coefficients, self.max_range_m, safe)
        refl_lo, range_lo = self.tail
        if refl_lo > 0.0:  # root-2 below the lowest pair (r_lo <= max_range_m already)
            limit = np.where(safe < refl_lo, range_lo * np.sqrt(safe / refl_lo), limit)
        return np.where(positive, limit, 0.0)

    def detectable(self, reflectivity, range_m) -> np.ndarray:
        """Whether a return at ``range_m`` (m) off reflectivity R is kept: range <= r_L(R)."""
        return np.asarray(range_m, dtype=np.float64) <= self.max_range_m_for(reflectivity)

    def min_reflectivity_for(self, range_m) -> np.ndarray:
        """Smallest reflectivity detectable at ``range_m`` (m): the inverse of r_L.

        0 where every R > 0 is seen (at or below the curve's floor), np.inf
        beyond ``max_range_m`` (or NaN range), where nothing is. Up to r_lo
        the root-2 tail's inverse R_lo·(d/r_lo)².
        """
        d = np.asarray(range_m, dtype=np.float64)
        a, b, c = self.coefficients
        code = self.code
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            if code == FIT_LINEAR or code == FIT_BLENSOR:
                refl = (d - a) / b
            elif code in _ROOT_N:
                refl = (np.maximum(d, 0.0) / a) ** _ROOT_N[code]
            elif code == FIT_LOG:
                refl = np.exp((d - a) / b)
            else:
                refl = np.zeros_like(d)
            refl_lo, range_lo = self.tail
            if refl_lo > 0.0 and range_lo > 0.0:
                refl = np.where(d <= range_lo, refl_lo * (d / range_lo) ** 2, refl)
        refl = np.where(d <= max(c, 0.0), 0.0, np.maximum(refl, 0.0))
        return np.where(d <= self.max_range_m, refl, np.inf)

    def kernel_params(self) -> tuple[int, float, float, float, float, float, float]:
        """(fit code, a, b, c, R_lo, r_lo, max_range_m): ``range_limit_m(*params, reflectivity)``."""
        a, b, c = self.coefficients
        return self.code, a, b, c, *self.tail, self.max_range_m


def fit_range_limit(pairs, fit: str = "log", max_range_m: float = np.inf) -> RangeReflectivityLimit:
    """Fit r_L(R) to datasheet ``pairs`` [(reflectivity 0–1, range m), ...].

    Raises ValueError on an unknown fit, too few pairs, reflectivity outside
    (0, 1.5], non-positive ranges, or (linear/log/blensor) pairs whose range
    does not rise strictly with reflectivity.
    """
    return RangeReflectivityLimit(pairs, fit, max_range_m)


#: Keys of a spec's ``range_reflectivity`` mapping.
SPEC_KEYS = ("pairs", "fit")


def parse_range_reflectivity(value, max_range_m: float) -> RangeReflectivityLimit:
    """The limit from a spec's ``range_reflectivity: {pairs: [[R, m], ...], fit: ...}``.

    ``fit`` defaults to ``log`` (LiMOX's Fig. 8/9 choice). Errors name the key.
    """
    if not isinstance(value, Mapping):
        raise RangeLimitError(
            f"range_reflectivity must be a mapping {{pairs: [[reflectivity, range_m], ...], fit: ...}}, "
            f"got {value!r}"
        )
    refuse_unknown_keys(value, SPEC_KEYS, "range_reflectivity", RangeLimitError)
    if "pairs" not in value:
        raise RangeLimitError("range_reflectivity.pairs is missing: give [[reflectivity, range_m], ...]")
    fit = value.get("fit", "log")
    try:
        fit = _check_fit(fit)
    except ValueError as error:
        raise RangeLimitError(f"range_reflectivity.fit: {error}") from None
    try:
        return RangeReflectivityLimit(value["pairs"], fit, max_range_m)
    except ValueError as error:
        key = "max_range_m" if str(error).startswith("max_range_m") else "pairs"
        raise RangeLimitError(f"range_reflectivity.{key}: {error}") from None


# ------------------------------------------------------- compiled r_L


@njit(cache=True, nogil=True, inline="always")
def range_limit_m(code, a, b, c, tail_reflectivity, tail_range_m, max_range_m, reflectivity):
    """r_L (m) for one return; the same as :meth:`RangeReflectivityLimit.max_range_m_for`.

    ``code, a, b, c, tail_reflectivity, tail_range_m, max_range_m`` come from
    ``kernel_params()`` (the tail is (R_lo, r_lo), (0, 0) for none). An
    unknown code gives 0 (nothing detected) rather than a silent pass.
    """
    if not reflectivity > 0.0:  # also NaN
        return 0.0
    if reflectivity < tail_reflectivity:  # root-2 below the lowest pair; r_lo <= max_range_m already
        return tail_range_m * math.sqrt(reflectivity / tail_reflectivity)
    if code == FIT_LINEAR or code == FIT_BLENSOR:
        limit = a + b * reflectivity
    elif code == FIT_ROOT2:
        limit = a * reflectivity ** (1.0 / 2.0)
    elif code == FIT_ROOT3:
        limit = a * reflectivity ** (1.0 / 3.0)
    elif code == FIT_ROOT4:
        limit = a * reflectivity ** (1.0 / 4.0)
    elif code == FIT_LOG:
        limit = a + b * math.log(reflectivity)
    elif code == FIT_CONSTANT:
        limit = max_range_m
    else:
        return 0.0
    limit = max(limit, c)
    return min(max(limit, 0.0), max_range_m)


def limit_params(limit, max_range_m: float) -> tuple:
    """:func:`range_limit_m`'s parameters for ``limit`` (a :class:`RangeReflectivityLimit`), or for none: every
    reflectivity reaches ``max_range_m``."""
    if limit is not None:
        return limit.kernel_params()
    return FIT_CONSTANT, 0.0, 0.0, 0.0, 0.0, 0.0, float(max_range_m)


#: range (m) at which a perfect Lambertian reflector facing the sensor reads 100 % intensity
INTENSITY_REFERENCE_RANGE_M = 10.0


@njit(cache=True, nogil=True, inline="always")
def intensity_percent(reflectivity, range_m):
    """OSI ``intensity`` (%) of an echo off an extended Lambertian target: the lidar equation's ρ/r², 100 % for
    ρ = 1 at :data:`INTENSITY_REFERENCE_RANGE_M` and nearer, clipped to 100 %."""
    # (no min/max builtins: the CUDA kernels compile this body too)
    scale = INTENSITY_REFERENCE_RANGE_M / (range_m if range_m > INTENSITY_REFERENCE_RANGE_M  # noqa: FURB136
                                           else INTENSITY_REFERENCE_RANGE_M)
    percent = 100.0 * (reflectivity * scale * scale)
    return percent if percent < 100.0 else 100.0  # noqa: FURB136


@register_jitable(inline="always")
def intensity_law_percent(reflectivity, range_m, reference_range_m, near_exponent, far_exponent):
    """OSI ``intensity`` (%) under a unit's fitted law (spec key ``intensity_law``): 100·ρ·(r / r₀)^a inside the
    reference range r₀, 100·ρ·(r₀ / r)^b beyond, clipped to 100 %.

    Beyond r₀ the range equation's ρ/r² (b = 2 for an extended target); inside it a real unit's SIGNAL still rises
    with range (a > 0), as the near-field overlap of a bistatic receiver lets less of a near echo in (the overlap
    function of e.g. Hahner et al. 2021, the fog model's). :func:`intensity_percent` is the case r₀ = 10 m,
    a = 0, b = 2."""
    x = range_m / reference_range_m
    if x <= 0.0:
        return 100.0 * reflectivity if reflectivity < 1.0 else 100.0
    percent = 100.0 * reflectivity * (x ** near_exponent if x < 1.0 else x ** -far_exponent)
    return percent if percent < 100.0 else 100.0  # noqa: FURB136


@register_jitable(inline="always")
def relative_power_db(reflectivity, range_m):
    """Received power (dB) of an echo off an extended Lambertian target, relative to a perfect one (ρ = 1) facing
    the sensor at :data:`INTENSITY_REFERENCE_RANGE_M`: ``10·log10(ρ·(r₀/r)²)``, the lidar equation
    :func:`intensity_percent` clips at 100 %, unclipped (OSI reflections' ``signal_strength``); −∞ for ρ = 0."""
    if not reflectivity > 0.0:
        return -math.inf
    # (a return lies beyond the unit's min range; the millimetre floor only keeps a zero range finite)
    scale = INTENSITY_REFERENCE_RANGE_M / max(range_m, 1e-3)
    return 10.0 * math.log10(reflectivity * scale * scale)


def detection_floor_db(limit: RangeReflectivityLimit | None) -> float | None:
    """The faintest echo the unit detects, in :func:`relative_power_db`'s dB: its datasheet's lowest-reflectivity
    pair (R, r), the weakest target it is rated to see at that range; what an echo's SNR is counted from (OSI
    ``snr`` = its relative power less this). None: a unit without a range–reflectivity limit."""
    if limit is None:
        return None
    reflectivity, range_m = limit.pairs[0]
    return float(relative_power_db(reflectivity, range_m))

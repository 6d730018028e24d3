"""Range–reflectivity limit r_L(R): closed forms, inverse, clipping, Numba twin, errors, LiMOX."""
import math
import re

import numpy as np
import pytest
from numba import njit

from lidar_fmu.physics.range_limit import (
    FITS,
    RangeReflectivityLimit,
    fit_range_limit,
    parse_range_reflectivity,
    range_limit_m,
)

LIMOX = ((0.10, 60.0), (0.80, 120.0))  # LiMOX Fig. 7–9 datasheet pairs
HDL64 = ((0.10, 50.0), (0.80, 120.0))  # HDL-64E datasheet = BlenSor defaults
OS1_GEN1 = ((0.10, 40.0), (0.80, 120.0))
R_GRID = np.array([0.01, 0.05, 0.1, 0.2, 0.35, 0.5, 0.8, 0.95, 1.0, 1.3])


def limit(fit, pairs=LIMOX, max_range_m=np.inf):
    return fit_range_limit(pairs, fit, max_range_m)


def with_tail(own, refl, refl_lo):
    """A fit's own law ``own(R)`` with the root-2 tail below the lowest pair's ``refl_lo``, written out."""
    refl = np.asarray(refl, np.float64)
    return np.where(refl < refl_lo, own(refl_lo) * np.sqrt(refl / refl_lo), own(refl))


# ------------------------------------------------------------- closed forms


@pytest.mark.parametrize("pairs", [LIMOX, HDL64, OS1_GEN1])
def test_linear_and_log_are_exact_through_two_pairs(pairs):
    (r1, d1), (r2, d2) = pairs
    for fit in ("linear", "log"):
        got = limit(fit, pairs).max_range_m_for([r1, r2])
        np.testing.assert_allclose(got, [d1, d2], rtol=1e-12)


def test_linear_closed_form():
    lim = limit("linear")
    a, b, c = lim.coefficients
    assert b == pytest.approx(60.0 / 0.7) and a == pytest.approx(60.0 - 0.1 * 60.0 / 0.7) and c == 0.0
    expected = with_tail(lambda r: 60.0 + (r - 0.1) * 60.0 / 0.7, R_GRID, 0.1)
    np.testing.assert_allclose(lim.max_range_m_for(R_GRID), expected, rtol=1e-12)


def test_log_closed_form():
    lim = limit("log")
    expected = with_tail(lambda r: 60.0 + 60.0 * np.log(r / 0.1) / np.log(8.0), R_GRID, 0.1)
    np.testing.assert_allclose(lim.max_range_m_for(R_GRID), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fit", ["linear", "log"])
def test_two_parameter_fits_are_least_squares(fit):
    pairs = ((0.05, 35.0), (0.10, 62.0), (0.40, 95.0), (0.80, 118.0))
    refl, range_m = np.array(pairs).T
    x = refl if fit == "linear" else np.log(refl)
    (a, b), *_ = np.linalg.lstsq(np.stack([np.ones_like(x), x], 1), range_m, rcond=None)
    lim = limit(fit, pairs)
    np.testing.assert_allclose(lim.coefficients[:2], (a, b), rtol=1e-10)
    own = (lambda r: a + b * r) if fit == "linear" else (lambda r: a + b * np.log(r))
    np.testing.assert_allclose(lim.max_range_m_for(R_GRID), with_tail(own, R_GRID, 0.05), rtol=1e-10, atol=1e-9)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_root_n_closed_form(n):
    lim = limit(f"root{n}")
    refl, range_m = np.array(LIMOX).T
    a = np.sum(range_m * refl ** (1 / n)) / np.sum(refl ** (2 / n))
    assert lim.coefficients == pytest.approx((a, 0.0, 0.0))
    expected = with_tail(lambda r: a * r ** (1 / n), R_GRID, 0.1)
    np.testing.assert_allclose(lim.max_range_m_for(R_GRID), expected, rtol=1e-12)


def test_root3_is_exact_through_the_limox_pairs():
    # 0.8 / 0.1 = 8 = 2³ and 120 / 60 = 2: the line-target law meets both pairs.
    np.testing.assert_allclose(limit("root3").max_range_m_for([0.1, 0.8]), [60.0, 120.0], rtol=1e-12)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_root_n_is_exact_through_one_pair(n):
    lim = limit(f"root{n}", [(0.10, 50.0)])
    assert lim.max_range_m_for(0.10) == pytest.approx(50.0)
    assert lim.max_range_m_for(0.10 * 2**n) == pytest.approx(100.0)  # doubling the range needs 2^n × R


def _blensor_detects(refl, dist, ref_distance=50.0, ref_limit=0.1, ref_slope=0.01):
    """BlenSor's own rule (blensor_calculate_reflectivity_limit and `reflectivity > min_reflectivity`)."""
    min_reflectivity = np.where(dist >= ref_distance, ref_limit + ref_slope * (dist - ref_distance), -1.0)
    return refl > min_reflectivity


def test_blensor_matches_blensor_rule_with_its_defaults():
    lim = limit("blensor", HDL64, max_range_m=1000.0)  # (50 m, 10 %), (120 m, 80 %): slope 0.01 /m
    refl, dist = np.meshgrid(np.linspace(0.003, 1.2, 301), np.linspace(0.5, 200.0, 401))
    ours = lim.detectable(refl, dist)
    theirs = _blensor_detects(refl, dist)
    # Only the boundary itself (d == r_L) may differ: ours keeps it, BlenSor's '>' drops it.
    boundary = np.isclose(dist, lim.max_range_m_for(refl), atol=1e-9)
    assert np.array_equal(ours[~boundary], theirs[~boundary])


def test_blensor_closed_form():
    lim = limit("blensor", HDL64)
    a, b, c = lim.coefficients
    assert (a, b, c) == pytest.approx((40.0, 100.0, 50.0))
    # Held at the first pair's range below its reflectivity, the line above, extrapolated past the last pair.
    np.testing.assert_allclose(lim.max_range_m_for([0.01, 0.05, 0.1, 0.3, 0.8, 1.2]), [50, 50, 50, 70, 120, 160])


def test_blensor_uses_first_and_last_pair():
    lim = limit("blensor", ((0.1, 50.0), (0.5, 70.0), (0.8, 120.0)))
    assert lim.max_range_m_for(0.8) == pytest.approx(120.0)
    assert lim.max_range_m_for(0.5) == pytest.approx(50.0 + 70.0 * 0.4 / 0.7)


def test_constant_is_max_range_for_any_positive_reflectivity():
    lim = limit("constant", max_range_m=150.0)
    np.testing.assert_array_equal(lim.max_range_m_for([0.0, 1e-6, 0.1, 1.0, 1.5]), [0.0, 150, 150, 150, 150])
    assert limit("constant").max_range_m_for(0.3) == np.inf  # no max range: no limit


@pytest.mark.parametrize("fit", FITS)
def test_limit_rises_with_reflectivity(fit):
    values = limit(fit, max_range_m=150.0).max_range_m_for(np.linspace(1e-4, 1.5, 500))
    assert np.all(np.diff(values) >= 0.0)


# ------------------------------------------------------------- inverse


@pytest.mark.parametrize("fit", FITS)
def test_inverse_is_consistent(fit):
    lim = limit(fit, max_range_m=150.0)
    refl = np.linspace(0.02, 1.5, 200)
    r_l = lim.max_range_m_for(refl)
    floor = lim.coefficients[2]
    inside = (r_l > max(floor, 0.0)) & (r_l < lim.max_range_m)  # where r_L is strictly increasing
    if fit == "constant":
        assert not inside.any()
    else:
        assert inside.sum() > 20
    np.testing.assert_allclose(lim.min_reflectivity_for(r_l[inside]), refl[inside], rtol=1e-10)


@pytest.mark.parametrize("fit", FITS)
def test_inverse_gives_the_detection_threshold(fit):
    lim = limit(fit, max_range_m=150.0)
    d = np.linspace(1.0, 150.0, 150)
    r_min = lim.min_reflectivity_for(d)
    assert np.all(np.isfinite(r_min)) and np.all(r_min >= 0.0)
    positive = r_min > 0.0
    assert np.all(lim.max_range_m_for(r_min[positive] * (1 + 1e-9)) >= d[positive] * (1 - 1e-12))
    assert np.all(lim.max_range_m_for(r_min[positive] * (1 - 1e-6)) < d[positive])


def test_inverse_edges():
    lim = limit("log", max_range_m=150.0)
    np.testing.assert_array_equal(lim.min_reflectivity_for([-5.0, 0.0, 150.5, np.inf, np.nan]),
                                  [0.0, 0.0, np.inf, np.inf, np.inf])
    np.testing.assert_allclose(lim.min_reflectivity_for([60.0, 120.0]), [0.1, 0.8], rtol=1e-12)
    blensor = limit("blensor", HDL64, max_range_m=150.0)
    np.testing.assert_allclose(blensor.min_reflectivity_for([10.0, 50.0, 85.0, 120.0]), [0.0, 0.0, 0.45, 0.8])


# ------------------------------------------------------------- clipping


@pytest.mark.parametrize("fit", FITS)
def test_clipped_to_zero_and_max_range(fit):
    lim = limit(fit, max_range_m=100.0)
    values = lim.max_range_m_for(np.concatenate([R_GRID, [1e-9, 5.0]]))
    assert np.all(values >= 0.0) and np.all(values <= 100.0)
    np.testing.assert_array_equal(lim.max_range_m_for([0.0, -0.3, np.nan, -np.inf]), 0.0)


def test_log_no_longer_clips_to_zero_for_dark_targets():
    # Issue 13: the OS1 log fit's own law reaches 0 m at R = exp(-a/b) ≈ 3.5 %; the root-2 tail below
    # the lowest pair (10 %) keeps r_L > 0 for every R > 0.
    lim = limit("log", OS1_GEN1)
    r_zero = math.exp(-lim.coefficients[0] / lim.coefficients[1])  # where a + b ln R = 0
    assert 0.03 < r_zero < 0.04
    np.testing.assert_allclose(lim.max_range_m_for(0.5 * r_zero), 40.0 * math.sqrt(0.5 * r_zero / 0.10))


def test_max_range_for_keeps_shape_and_accepts_float32():
    lim = limit("root2")
    refl = np.full((3, 4), 0.5, dtype=np.float32)
    out = lim.max_range_m_for(refl)
    assert out.shape == (3, 4) and out.dtype == np.float64
    assert np.ndim(lim.max_range_m_for(0.5)) == 0


# ------------------------------------------------------------- Numba twin


@pytest.mark.parametrize("fit", FITS)
@pytest.mark.parametrize("max_range_m", [100.0, np.inf])
def test_numba_equals_python(fit, max_range_m):
    lim = limit(fit, max_range_m=max_range_m)
    grid = np.concatenate([np.linspace(-0.2, 1.5, 341), [0.0, 1e-12, 1e-4, np.nan, np.inf]])
    params = lim.kernel_params()
    compiled = np.array([range_limit_m(*params, r) for r in grid])
    np.testing.assert_allclose(compiled, lim.max_range_m_for(grid), rtol=1e-13, atol=0.0)


@njit
def _keep_mask(reflectivity, range_m, code, a, b, c, tail_reflectivity, tail_range_m, max_range_m):
    keep = np.empty(reflectivity.shape[0], dtype=np.bool_)
    for i in range(reflectivity.shape[0]):
        keep[i] = range_m[i] <= range_limit_m(code, a, b, c, tail_reflectivity, tail_range_m, max_range_m,
                                              reflectivity[i])
    return keep


def test_numba_inside_another_kernel():
    lim = limit("log", max_range_m=150.0)
    rng = np.random.default_rng(1)
    refl = rng.uniform(0, 1, 2000).astype(np.float32)
    dist = rng.uniform(0, 160, 2000).astype(np.float32)
    np.testing.assert_array_equal(_keep_mask(refl, dist, *lim.kernel_params()), lim.detectable(refl, dist))


def test_kernel_params():
    lim = limit("blensor", HDL64, max_range_m=120.0)
    assert lim.kernel_params() == (FITS.index("blensor"), *lim.coefficients, 0.0, 0.0, 120.0)  # no tail
    assert isinstance(lim.kernel_params()[0], int)
    log = limit("log", OS1_GEN1, max_range_m=120.0)
    assert log.kernel_params() == (FITS.index("log"), *log.coefficients, 0.10, pytest.approx(40.0), 120.0)


# ------------------------------------------------- outside the pairs

TAIL_FITS = [f for f in FITS if f not in ("blensor", "constant")]


@pytest.mark.parametrize("fit", TAIL_FITS)
@pytest.mark.parametrize("pairs", [LIMOX, OS1_GEN1, ((0.2, 50.0), (0.5, 70.0), (0.9, 100.0))])
def test_continuous_at_the_lowest_pair(fit, pairs):
    lim = limit(fit, pairs, max_range_m=150.0)
    refl_lo = pairs[0][0]
    below, at, above = lim.max_range_m_for([refl_lo * (1 - 1e-12), refl_lo, refl_lo * (1 + 1e-12)])
    assert lim.tail == (refl_lo, at)
    assert abs(below - at) < 1e-9 and abs(above - at) < 1e-9
    if fit in ("linear", "log"):  # exact through two pairs: the tail starts at the datasheet range
        assert len(pairs) > 2 or at == pytest.approx(pairs[0][1], rel=1e-12)


@pytest.mark.parametrize("fit", TAIL_FITS)
@pytest.mark.parametrize("pairs", [LIMOX, OS1_GEN1])
def test_root2_below_the_lowest_pair(fit, pairs):
    lim = limit(fit, pairs, max_range_m=150.0)
    refl_lo, range_lo = lim.tail
    refl = refl_lo * np.array([1e-6, 0.01, 0.1, 0.25, 0.5, 0.9])
    r_l = lim.max_range_m_for(refl)
    np.testing.assert_allclose(r_l / np.sqrt(refl), range_lo / math.sqrt(refl_lo), rtol=1e-12)  # r_L ∝ √R
    np.testing.assert_allclose(lim.max_range_m_for(refl / 4.0), r_l / 2.0, rtol=1e-12)  # a quarter: half
    np.testing.assert_allclose(lim.min_reflectivity_for(r_l), refl, rtol=1e-10)


def test_single_pair_root2_is_its_own_tail():
    lim = limit("root2", ((0.10, 40.0),), max_range_m=150.0)
    refl = np.array([0.001, 0.02, 0.1, 0.5, 1.0])
    np.testing.assert_allclose(lim.max_range_m_for(refl), np.minimum(lim.coefficients[0] * np.sqrt(refl), 150.0),
                               rtol=1e-14)


@pytest.mark.parametrize("fit", ["blensor", "constant"])
def test_blensor_and_constant_keep_their_own_law_below_the_pairs(fit):
    lim = limit(fit, HDL64, max_range_m=150.0)
    assert lim.tail == (0.0, 0.0)
    expected = 50.0 if fit == "blensor" else 150.0  # BlenSor's floor r_1; constant: no limit
    np.testing.assert_array_equal(lim.max_range_m_for([1e-4, 0.01, 0.05]), expected)


@pytest.mark.parametrize("fit", TAIL_FITS)
def test_above_the_highest_pair_the_fit_keeps_its_law(fit):
    lim = limit(fit, OS1_GEN1)  # no max range: nothing clips
    a, b, _ = lim.coefficients
    refl = np.array([0.9, 1.2, 1.5])
    own = {"linear": a + b * refl, "log": a + b * np.log(refl), "root2": a * refl ** 0.5,
           "root3": a * refl ** (1 / 3), "root4": a * refl ** 0.25}[fit]
    np.testing.assert_allclose(lim.max_range_m_for(refl), own, rtol=1e-13)
    np.testing.assert_allclose(limit(fit, OS1_GEN1, max_range_m=110.0).max_range_m_for(refl), np.minimum(own, 110.0),
                               rtol=1e-13)


def test_tail_clipped_by_a_short_max_range():
    lim = limit("log", OS1_GEN1, max_range_m=30.0)  # below the 10 % pair's 40 m: r_lo = 30 m
    assert lim.tail == (0.10, 30.0)
    np.testing.assert_allclose(lim.max_range_m_for([0.025, 0.10, 0.5]), [15.0, 30.0, 30.0])
    np.testing.assert_allclose(lim.min_reflectivity_for([15.0, 30.0]), [0.025, 0.10])


# ------------------------------------------------------------- LiMOX


def test_limox_log_fit():
    lim = limit("log", LIMOX, max_range_m=1000.0)  # Fig. 8: log fit through [10 %, 60 m], [80 %, 120 m]
    assert not lim.detectable(0.10, 70.0)
    assert lim.detectable(0.10, 50.0)
    assert lim.max_range_m_for(0.50) >= lim.max_range_m_for(0.10)
    # Fig. 9: the 50 % cloud contains the 10 % cloud (same geometry, every range).
    d = np.linspace(0.0, 200.0, 2001)
    assert np.all(lim.detectable(0.50, d) >= lim.detectable(0.10, d))


# ------------------------------------------------------------- input


def test_pairs_are_sorted_and_fit_normalised():
    lim = RangeReflectivityLimit([[0.8, 120], [0.1, 60]], " Log ", 150)
    assert lim.pairs == ((0.1, 60.0), (0.8, 120.0))
    assert lim.fit == "log" and lim.max_range_m == 150.0
    with pytest.raises(AttributeError):
        lim.fit = "linear"  # frozen


def test_root_n_accepts_non_monotonic_pairs():
    # One parameter fits any pairs: a noisy datasheet is still usable.
    lim = limit("root2", ((0.1, 60.0), (0.5, 55.0), (0.8, 120.0)))
    assert lim.max_range_m_for(0.5) > 0


@pytest.mark.parametrize(
    "pairs, fit, message",
    [
        (LIMOX, "logarithmic", "did you mean 'log'"),
        (LIMOX, "root", "'root2' or 'root3' or 'root4'"),
        (LIMOX, "lineer", "did you mean 'linear'"),
        (LIMOX, "spline", "expected one of linear, root2"),
        (LIMOX, 3, "must be a string"),
        (((0.1, 60.0),), "log", "needs at least 2 pairs"),
        (((0.1, 60.0),), "blensor", "needs at least 2 pairs"),
        ((), "root2", "needs at least 1 pair"),
        ((), "constant", "needs at least 1 pair"),
        (((10, 60.0), (80, 120.0)), "log", "10 % is 0.10"),
        (((0.0, 60.0), (0.8, 120.0)), "log", "outside (0, 1.5]"),
        (((-0.1, 60.0),), "root2", "outside (0, 1.5]"),
        (((0.1, 0.0), (0.8, 120.0)), "log", "must be positive"),
        (((0.1, -60.0),), "root3", "must be positive"),
        (((0.1, np.inf),), "root3", "must be positive and finite"),
        (((0.1, 60.0), (0.8, 50.0)), "linear", "not monotonic"),
        (((0.1, 60.0), (0.8, 60.0)), "log", "not monotonic"),
        (((0.1, 60.0), (0.1, 80.0)), "blensor", "not monotonic"),
        (((0.1, 60.0, 1.0),), "root2", "must be [reflectivity, range_m]"),
        (((0.1, "60"),), "root2", "must be a number"),
        (((True, 60.0),), "root2", "must be a number"),
        ("0.1, 60", "root2", "must be a list"),
    ],
)
def test_fit_errors(pairs, fit, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        fit_range_limit(pairs, fit)


@pytest.mark.parametrize("max_range_m", [0.0, -5.0, np.nan, "100"])
def test_bad_max_range(max_range_m):
    with pytest.raises(ValueError, match="max_range_m"):
        fit_range_limit(LIMOX, "log", max_range_m)


def test_parse_range_reflectivity():
    lim = parse_range_reflectivity({"pairs": [[0.10, 60.0], [0.80, 120.0]], "fit": "linear"}, 100.0)
    assert lim == fit_range_limit(LIMOX, "linear", 100.0)
    assert parse_range_reflectivity({"pairs": [[0.10, 60.0], [0.80, 120.0]]}, 100.0).fit == "log"


@pytest.mark.parametrize(
    "value, message",
    [
        ([[0.1, 60.0], [0.8, 120.0]], "range_reflectivity must be a mapping"),
        ({"fit": "log"}, "range_reflectivity.pairs is missing"),
        ({"pairs": [[0.1, 60.0]], "fit": "log"}, "range_reflectivity.pairs: "),
        ({"pairs": [[0.1, 60.0], [0.8, 120.0]], "fit": "lgo"}, "range_reflectivity.fit: "),
        ({"pairs": [[0.1, 60.0], [0.8, 120.0]], "fits": "log"},
         "range_reflectivity: unknown key 'fits' (did you mean 'fit'?)"),
        ({"pairs": 60.0}, "range_reflectivity.pairs: "),
    ],
)
def test_parse_errors_name_the_key(value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_range_reflectivity(value, 100.0)


def test_parse_bad_max_range_names_it():
    with pytest.raises(ValueError, match=r"range_reflectivity\.max_range_m"):
        parse_range_reflectivity({"pairs": [[0.1, 60.0], [0.8, 120.0]]}, -1.0)

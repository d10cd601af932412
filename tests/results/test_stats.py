"""Statistics: percentiles, the 95% t table and confidence intervals."""

import math

import pytest

from mn_harness.results.stats import describe, mean_ci95, percentile, t_critical_95


def test_t_table():
    assert t_critical_95(1) == 12.706
    assert t_critical_95(2) == 4.303
    assert t_critical_95(30) == 2.042
    assert t_critical_95(35) == 2.042
    assert t_critical_95(45) == 2.021
    assert t_critical_95(10_000) == 1.980
    with pytest.raises(ValueError):
        t_critical_95(0)


def test_mean_ci95_by_hand():
    m, s, h = mean_ci95([1.0, 1.2, 1.4])
    assert m == pytest.approx(1.2)
    assert s == pytest.approx(0.2)
    assert h == pytest.approx(4.303 * 0.2 / math.sqrt(3))
    assert mean_ci95([5.0]) == (5.0, None, None)


def test_percentile_linear_interpolation():
    assert percentile([1, 2], 50) == 1.5
    assert percentile([3, 1, 2, 4, 5], 50) == 3
    assert percentile(list(range(101)), 99) == pytest.approx(99)
    assert percentile([1, 2, 3, 4], 99) == pytest.approx(3.97)
    with pytest.raises(ValueError):
        percentile([], 50)
    assert math.isnan(describe([])["p99"])


def test_describe():
    d = describe([1.0, 2.0, 3.0, 10.0])
    assert d["n"] == 4 and d["mean"] == 4.0 and d["max"] == 10.0
    assert d["p50"] == 2.5


def test_wilson_interval_and_median_with_never():
    from mn_harness.results.stats import median_with_never, wilson_ci95

    assert wilson_ci95(5, 5) == pytest.approx((0.5655, 1.0), abs=1e-3)
    assert wilson_ci95(0, 5) == pytest.approx((0.0, 0.4345), abs=1e-3)
    lo, hi = wilson_ci95(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-3) and hi == pytest.approx(0.9433, abs=1e-3)
    assert median_with_never([3, 5, None]) == 5
    assert median_with_never([3, None, None]) is None
    assert median_with_never([2, 4, None, None]) is None  # the upper middle never happened
    assert median_with_never([2, 4, 6, None]) == 5
    assert median_with_never([1, 2]) == 1.5

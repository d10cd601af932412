"""Small statistics for iteration times, without numpy: the harness must summarise even a
killed run's partial rows, and the report package uses the same definitions.

Percentiles use linear interpolation between closest ranks (numpy's default, Hyndman-Fan
type 7), so p50 of [1, 2] is 1.5 and p99 of a short list lies near its maximum."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], p: float) -> float:
    """Percentile p (0..100); raises ValueError on an empty sequence."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} outside 0..100")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * p / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; raises ValueError on an empty sequence."""
    if not values:
        raise ValueError("mean of an empty sequence")
    return sum(values) / len(values)


def describe(values: Sequence[float]) -> dict[str, float]:
    """n, mean, p50, p99, max; NaN for each statistic of an empty sequence."""
    if not values:
        return {"n": 0, "mean": math.nan, "p50": math.nan, "p99": math.nan, "max": math.nan}
    return {"n": len(values), "mean": mean(values), "p50": percentile(values, 50),
            "p99": percentile(values, 99), "max": max(values)}


# Two-sided 95% Student t quantiles t_{0.975, df}, df = 1..30.
T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
# Beyond 30: the value at the largest tabulated df not above the real one (conservative).
T95_LARGE = ((120, 1.980), (60, 2.000), (40, 2.021), (30, 2.042))

def t_critical_95(df: int) -> float:
    """Two-sided 95% Student t quantile for df ≥ 1."""
    if df < 1:
        raise ValueError(f"t quantile needs df >= 1, got {df}")
    if df <= 30:
        return T95[df - 1]
    for threshold, value in T95_LARGE:
        if df >= threshold:
            return value
    raise AssertionError("unreachable")


def mean_ci95(values: Sequence[float]) -> tuple[float, float | None, float | None]:
    """(mean, sample standard deviation, CI half-width t_{0.975,n-1}·s/√n); None for n = 1."""
    if not values:
        raise ValueError("no values")
    n = len(values)
    m = sum(values) / n
    if n == 1:
        return m, None, None
    s = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    return m, s, t_critical_95(n - 1) * s / math.sqrt(n)


Z95 = 1.959964  # two-sided 95% normal quantile


def wilson_ci95(successes: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a proportion successes/n (sensible at 0/n and n/n, unlike
    the normal approximation: 5 of 5 gives [0.57, 1], not [1, 1])."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, n >= 1; got {successes}/{n}")
    p = successes / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def median_with_never(values: Sequence[float | None]) -> float | None:
    """Median (type 7) where None means "never happened" and sorts above every number; None when
    the median itself is "never" (more than half never)."""
    if not values:
        raise ValueError("median of an empty sequence")
    ordered = sorted(math.inf if v is None else v for v in values)
    m = percentile(ordered, 50) if all(math.isfinite(v) for v in ordered) else _median_inf(ordered)
    return None if math.isinf(m) else m


def _median_inf(ordered: Sequence[float]) -> float:
    n = len(ordered)
    lo, hi = ordered[(n - 1) // 2], ordered[n // 2]
    return math.inf if math.isinf(hi) else (lo + hi) / 2

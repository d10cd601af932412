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

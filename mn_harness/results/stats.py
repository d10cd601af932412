"""Small statistics for iteration times, without numpy: the harness must summarise even a
killed run's partial rows.

Percentiles use linear interpolation between closest ranks (numpy's default, method
'linear'), so p50 of [1, 2] is 1.5 and p99 of a short list lies near its maximum."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside [0, 100]")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def describe(values: Sequence[float]) -> dict[str, float]:
    return {"n": len(values), "mean": mean(values), "p50": percentile(values, 50),
            "p99": percentile(values, 99), "max": max(values) if values else math.nan}

"""Jain fairness and the per-job throughput series it is computed over.

Why a module of its own: the per-bin byte series of a job (its ranks' sending sockets summed on
the worker's bin grid) is read by the metrics (Jain's index per iteration window of a link's
reference job, report.metrics) and by the plots (throughput over time, report.plots); the
index itself is the textbook one. Pure functions, no I/O."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from mn_harness.results.schema import ThroughputRow


def jain_index(values: Sequence[float]) -> float | None:
    """Jain's fairness index (Σx)²/(n Σx²): 1 when equal, 1/n when one takes all.

    None when there are no values or all are zero (nothing was shared)."""
    if not values:
        return None
    squares = sum(v * v for v in values)
    if squares == 0:
        return None
    return sum(values) ** 2 / (len(values) * squares)


def bin_index(t: float, bin_s: float) -> int:
    """Index of the bin holding t on the grid k * bin_s (the worker's bins start at T0 + k *
    bin_s); the epsilon absorbs float noise such as 0.30000000000000004 / 0.1."""
    return math.floor(t / bin_s + 1e-6)


def job_throughput(
    rows: Iterable[ThroughputRow], ranks: Mapping[str, set[int]] | None = None
) -> dict[str, list[tuple[float, float, int]]]:
    """Per job: sorted (t, bin_s, bytes) with the ranks' bins at the same t summed; with
    `ranks`, only those ranks of each job (the sockets crossing one link).

    Bins are matched on `bin_index` so float noise in t does not split a bin."""
    acc: dict[str, dict[int, list[float]]] = defaultdict(dict)
    for r in rows:
        if r.bin_s <= 0:
            continue
        if ranks is not None and r.rank not in ranks.get(r.job, ()):
            continue
        key = bin_index(r.t, r.bin_s)
        slot = acc[r.job].get(key)
        if slot is None:
            acc[r.job][key] = [r.t, r.bin_s, r.bytes]
        else:
            slot[2] += r.bytes
    return {job: [(t, b, int(n)) for t, b, n in (bins[k] for k in sorted(bins))] for job, bins in acc.items()}


def bytes_in_window(series: Sequence[tuple[float, float, int]], w0: float, w1: float) -> int:
    """Bytes of bins whose start t lies in [w0, w1)."""
    return sum(n for t, _, n in series if w0 <= t < w1)

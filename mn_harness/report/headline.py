"""A run's headline figures, beside its per-job metrics: whether its jobs stood apart within the
first APART_WITHIN iterations ("apart by 10"), and its slowdowns over the last LAST_ITERATIONS
iterations ("last 20").

Why these two: the question a run answers is whether the jobs' communication phases drift
apart and what that costs. Convergence asks that they stay apart to the end, so one relapse
late in a long run hides that they separated early; "apart by 10" is the target's "interleaved
within 10 iterations" (report.metrics.separation: the first iteration at which every job with a
rival overlapped by at most the convergence threshold, and the later relapses). The whole-run
slowdowns mix the iterations before the jobs separated with those after; the last 20 are where
interleaving, if it comes, has come. `mn-harness report` prints them per run, `compare` (and
bench/repro_table.py) over repetitions; docs/results.md defines them for users."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from mn_harness.report.metrics import RunMetrics, Separation, separation
from mn_harness.results.stats import median_with_never, percentile, wilson_ci95

APART_WITHIN = 10  # the target: interleaved within 10 iterations (in >= 80% of runs)
LAST_ITERATIONS = 20


@dataclass(frozen=True)
class SpanStats:
    """Over a span of every job's measured iterations, the mean over jobs of their mean and p99
    iteration time, in seconds and over each job's baseline."""

    mean_s: float
    p99_s: float
    slowdown: float
    slowdown_p99: float


def span_stats(metrics: RunMetrics, *, last: int | None = None, first: int | None = None) -> SpanStats | None:
    """One run's SpanStats, warm-up left out; None when a job has no such iteration or no
    baseline.

    Neither: the whole run. last=N: the run's last N iterations. first=N: the iterations before
    N of the job that did the fewest (the others in proportion: the same stretch of time), what
    a run of N iterations would have measured. A p99 is a tail only with enough samples: over 48
    iterations it falls between the two largest, so a short run's p99 is its slowest iteration
    and says how the run began."""
    fewest = min((job.n_iterations for job in metrics.jobs.values()), default=0)
    per_job = []
    for job in metrics.jobs.values():
        rows = [p for p in job.per_iteration if p["iter_time"] is not None and not p.get("warmup")]
        if first is not None:
            rows = [p for p in rows if p["iteration"] < round(first * job.n_iterations / fewest)]
        times = [p["iter_time"] for p in rows][-last:] if last else [p["iter_time"] for p in rows]
        if not times or not job.baseline_iter_s:
            return None
        per_job.append((statistics.mean(times), percentile(times, 99), job.baseline_iter_s))
    if not per_job:
        return None
    return SpanStats(mean_s=statistics.mean(m for m, _, _ in per_job),
                     p99_s=statistics.mean(p for _, p, _ in per_job),
                     slowdown=statistics.mean(m / b for m, _, b in per_job),
                     slowdown_p99=statistics.mean(p / b for _, p, b in per_job))


def apart_by(sep: Separation | None, within: int = APART_WITHIN) -> bool | None:
    """Did the jobs first stand apart by iteration `within`? None without a rival."""
    return None if sep is None else sep.first is not None and sep.first <= within


@dataclass(frozen=True)
class Headline:
    separation: Separation | None  # None: no job had a rival
    last: SpanStats | None  # over the last LAST_ITERATIONS iterations

    @property
    def apart(self) -> bool | None:
        return apart_by(self.separation)


def headline(metrics: RunMetrics) -> Headline:
    return Headline(separation(metrics), span_stats(metrics, last=LAST_ITERATIONS))


HEADERS = [f"apart by {APART_WITHIN}", "first apart", "relapses",
           f"last {LAST_ITERATIONS}: slowdown", f"last {LAST_ITERATIONS}: p99 slowdown"]


def headline_row(h: Headline) -> list[str]:
    """The report's headline table row ("n/a": no job has a rival; "never": never apart)."""
    sep = h.separation
    first = "n/a" if sep is None else ("never" if sep.first is None else str(sep.first))
    return ["n/a" if h.apart is None else ("yes" if h.apart else "no"), first,
            "-" if sep is None or sep.first is None else str(sep.relapses),
            "-" if h.last is None else f"{h.last.slowdown:.2f}",
            "-" if h.last is None else f"{h.last.slowdown_p99:.2f}"]


def apart_early(seps: Sequence[Separation]) -> int:
    """How many runs' jobs first stood apart by iteration APART_WITHIN."""
    return sum(1 for s in seps if apart_by(s))


def apart_text(seps: Sequence[Separation]) -> str:
    """Over runs: those whose jobs first stood apart by iteration APART_WITHIN, with the Wilson
    95% interval; the median first-apart iteration over all runs (a run never apart counting as
    later than any); the median number of later iterations in which they fell back."""
    if not seps:
        return "-"
    early = apart_early(seps)
    lo, hi = wilson_ci95(early, len(seps))
    first = median_with_never([s.first for s in seps])
    apart = [s.relapses for s in seps if s.first is not None]
    relapses = "-" if not apart else f"{statistics.median(apart):g}"
    return (f"{early} of {len(seps)} [{lo * 100:.0f}–{hi * 100:.0f}]; first "
            f"{'never' if first is None else f'{first:g}'}; relapses {relapses}")

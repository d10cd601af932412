"""Interleave metrics: what a researcher reads off an MLTCP-style experiment.

The question every run answers is whether the jobs' communication phases drift apart, how fast,
and what that does to mean and tail iteration time. These are pure functions over the loaders'
dataclasses (no I/O) so every definition can be unit-tested on hand-built timelines. The
definitions (for users in docs/results.md, "Metric definitions"):

* **Job iteration**, complete iterations, missing rows, the statistics and the slowdown are
  results.iterations' (one implementation, shared with the runner's summary.json).
* **Rivals** of J: every other job listed with J on some link in `link_jobs`.
* **Overlap** of J's iteration i = |I ∩ U| / |I| where I is the iteration's communication
  interval and U the union of all rivals' communication intervals (all their iterations).
  None for a zero-length I.
* **Contended** iteration: I intersects the active span [first t_start, last t_comm_end] of at
  least one rival. Iterations before a late rival starts or after it finished are not
  contended; they are reported but left out of the overlap mean and of convergence, or a run
  where one job simply finishes first would look "converged". The overlap mean also leaves
  the warm-up iterations out (like the iteration statistics); convergence counts from
  iteration 0, warm-up included, since how fast the phases separate is the question.
* **Convergence iteration**: over contended complete iterations in order, the first iteration k
  with overlap ≤ threshold (10%) at k and at every later one; None if the last one is above the
  threshold, or if there is no contended iteration (a job alone).
* **Jain fairness** on a link shared by n ≥ 2 jobs, per window: J = (Σx)² / (n Σx²) with x_j
  the bytes of job j (summed over its ranks' sending sockets) in throughput bins whose start t
  lies in the window [w0, w1). Windows are the job-level iterations [t_start, t_comm_end] of the
  link's *reference job* — the one with the longest median iteration time, so every window
  holds about one phase of each other job — restricted to windows lying inside every link
  job's active span (all jobs were running). A window where no job sent anything has no index.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mn_harness.report.fairness import bytes_in_window, jain_index, job_throughput
from mn_harness.results.iterations import Interval, JobIteration, job_iterations, job_stats, ratio
from mn_harness.results.schema import IterationRow, RunSummary, ThroughputRow
from mn_harness.results.stats import mean, percentile

DEFAULT_CONVERGENCE_THRESHOLD = 0.10
# The interleaved stretch that counts as converged: at least this fraction of the contended
# iterations, and at least 2. Why: with "every later overlap <= threshold" alone, one lucky last
# iteration made a run "converged at 49" of 50 (bench/reproduce.py: 7 of 20 three-job runs had
# a job "converged" at iteration 47-49 whose mean overlap was 56-89%).
CONVERGENCE_MIN_STRETCH_FRACTION = 0.10
CONVERGENCE_MIN_STRETCH = 2


# --------------------------------------------------------------------------- statistics


# --------------------------------------------------------------------------- intervals


def union_intervals(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint union of closed intervals; empty or inverted intervals are dropped."""
    items = sorted((s, e) for s, e in intervals if e > s)
    out: list[Interval] = []
    for s, e in items:
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def covered_length(interval: Interval, union: Sequence[Interval]) -> float:
    """Length of `interval` covered by a disjoint union of intervals."""
    s, e = interval
    total = 0.0
    for us, ue in union:
        lo, hi = max(s, us), min(e, ue)
        if hi > lo:
            total += hi - lo
    return total


def overlap_fraction(interval: Interval, others: Iterable[Interval]) -> float | None:
    """Fraction of `interval` during which at least one of `others` is active."""
    s, e = interval
    if e <= s:
        return None
    return covered_length(interval, union_intervals(others)) / (e - s)


# --------------------------------------------------------------------------- job spans


def active_span(iters: Sequence[JobIteration]) -> Interval | None:
    """[first start, last end of communication] of a job; None without iterations."""
    if not iters:
        return None
    return (min(i.t_start for i in iters), max(i.t_comm_end for i in iters))


def rivals(link_jobs: Mapping[str, Sequence[str]], job: str) -> list[str]:
    """Jobs sharing at least one link with `job`, in first-seen order."""
    out: list[str] = []
    for jobs in link_jobs.values():
        if job in jobs:
            for other in jobs:
                if other != job and other not in out:
                    out.append(other)
    return out


# --------------------------------------------------------------------------- overlap


@dataclass(frozen=True)
class IterationOverlap:
    iteration: int
    overlap: float | None
    contended: bool


def iteration_overlaps(
    job: str,
    iters: Mapping[str, Sequence[JobIteration]],
    job_rivals: Sequence[str],
) -> list[IterationOverlap]:
    """Overlap and contention of each complete iteration of `job` against `job_rivals`."""
    rival_intervals = [i.comm_interval for r in job_rivals for i in iters.get(r, ())]
    union = union_intervals(rival_intervals)
    spans = [s for r in job_rivals if (s := active_span(iters.get(r, ()))) is not None]
    out: list[IterationOverlap] = []
    for it in iters.get(job, ()):
        if not it.complete:
            continue
        c0, c1 = it.comm_interval
        contended = any(max(c0, a) < min(c1, b) for a, b in spans)
        frac = None if c1 <= c0 else covered_length((c0, c1), union) / (c1 - c0)
        out.append(IterationOverlap(it.iteration, frac, contended))
    return out


def convergence_iteration(
    overlaps: Sequence[tuple[int, float | None]],
    threshold: float = DEFAULT_CONVERGENCE_THRESHOLD,
) -> int | None:
    """First iteration from which every later overlap is ≤ threshold; None if never, or if
    that stretch is shorter than CONVERGENCE_MIN_STRETCH_FRACTION of the pairs (at least
    CONVERGENCE_MIN_STRETCH): an interleaving that began in the run's last iterations is not
    shown to hold.

    `overlaps` are (iteration, overlap) pairs — pass only contended iterations; pairs with a
    None overlap are ignored. None also when nothing remains."""
    pairs = sorted((it, ov) for it, ov in overlaps if ov is not None)
    result: int | None = None
    stretch = 0
    for it, ov in reversed(pairs):
        if ov > threshold:
            break
        result, stretch = it, stretch + 1
    needed = max(CONVERGENCE_MIN_STRETCH, math.ceil(CONVERGENCE_MIN_STRETCH_FRACTION * len(pairs)))
    return result if stretch >= needed else None


@dataclass(frozen=True)
class Separation:
    """When a run's jobs first stood apart, and how often they fell back: `first` is the first
    iteration k at which every job with a rival had its iteration k contended and overlapping
    rivals by at most the threshold (None: never); `relapses` counts the later iterations at
    which some such job overlapped by more. Iterations are matched by number, so this reads
    jobs of one period (the suite's compatible sets); an iteration some job did not complete
    or ran alone counts neither way. Why beside convergence: convergence asks that the jobs
    stay apart to the end, so one relapse in iteration 45 of 50 makes a run that separated at
    7 "not converged"; the target "interleaved within 10 iterations" asks when they first
    separate, and the relapses say how well it held."""

    first: int | None
    relapses: int


def separation(metrics: RunMetrics, threshold: float | None = None) -> Separation | None:
    """The run's Separation; None when no job had a rival to be apart from."""
    limit = metrics.convergence_threshold if threshold is None else threshold
    contended = [jm for jm in metrics.jobs.values() if jm.rivals and jm.contended_iterations]
    if not contended:
        return None
    per_job = [{p["iteration"]: p["overlap"] for p in jm.per_iteration
                if p["contended"] and p["overlap"] is not None} for jm in contended]
    first: int | None = None
    relapses = 0
    for k in sorted(set().union(*per_job)):
        if not all(k in job for job in per_job):
            continue
        apart = all(job[k] <= limit for job in per_job)
        if first is None:
            if apart:
                first = k
        elif not apart:
            relapses += 1
    return Separation(first, relapses)


# --------------------------------------------------------------------------- results


@dataclass
class JobMetrics:
    job: str
    cc: str | None
    n_iterations: int
    incomplete_iterations: int
    missing_rows: int
    mean_iter_s: float | None
    p50_iter_s: float | None
    p99_iter_s: float | None
    baseline_iter_s: float | None
    baseline: str | None
    slowdown_mean: float | None
    slowdown_p99: float | None
    rivals: list[str]
    contended_iterations: int
    overlap_mean: float | None
    convergence_iteration: int | None
    per_iteration: list[dict[str, Any]] = field(default_factory=list)
    warmup: int = 0
    warmup_iterations: int = 0
    warmup_mean_iter_s: float | None = None
    predicted_slowdown: float | None = None  # CASSINI at the best shifts (jobs.cassini)
    predicted_aligned_slowdown: float | None = None  # CASSINI with the phases aligned


@dataclass
class LinkMetrics:
    link: str
    jobs: list[str]
    reference_job: str | None
    windows: int
    jain_mean: float | None
    jain_min: float | None
    jain: list[float]
    overlap_mean: float | None


@dataclass
class RunMetrics:
    jobs: dict[str, JobMetrics]
    links: dict[str, LinkMetrics]
    missing_rows_total: int
    convergence_threshold: float
    notes: list[str] = field(default_factory=list)
    # summary.json fidelity.verdict (faithful, unfaithful, unchecked), None for runs without it:
    # carried for compare and load(), not stored again in summary.json's metrics
    fidelity: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["fidelity"]
        return out


def _link_fairness(
    jobs: Sequence[str],
    iters: Mapping[str, Sequence[JobIteration]],
    series: Mapping[str, Sequence[tuple[float, float, int]]],
) -> tuple[str | None, list[float]]:
    candidates = [j for j in jobs if iters.get(j)]
    if len(candidates) < len(jobs) or not series:
        return None, []
    reference = max(
        candidates,
        key=lambda j: (percentile([i.iter_time for i in iters[j]], 50), -jobs.index(j)),
    )
    spans = [active_span(iters[j]) for j in jobs]
    values: list[float] = []
    for it in iters[reference]:
        w0, w1 = it.t_start, it.t_comm_end
        if w1 <= w0:
            continue
        if not all(sp is not None and sp[0] <= w0 and w1 <= sp[1] for sp in spans):
            continue
        j = jain_index([bytes_in_window(series.get(job, ()), w0, w1) for job in jobs])
        if j is not None:
            values.append(j)
    return reference, values


def compute_metrics(
    summary: RunSummary,
    iterations: Sequence[IterationRow],
    throughput: Sequence[ThroughputRow] = (),
    threshold: float = DEFAULT_CONVERGENCE_THRESHOLD,
    malformed_rows: Mapping[str, int] | None = None,
) -> RunMetrics:
    """All metrics of one run. Never raises on missing data: gaps become None and notes."""
    order = list(summary.jobs)
    for row in iterations:
        if row.job not in order:
            order.append(row.job)
    expected = {j: len(info.hosts) for j, info in summary.jobs.items() if info.hosts}
    iters = job_iterations(iterations, expected)
    notes: list[str] = []
    if summary.time_scale not in (None, 1):
        notes.append(f"time scale {summary.time_scale:g}: the emulation ran {summary.time_scale:g} times slower; "
                     "every time and rate here is the experiment's (nominal)")
    for name, bad in (malformed_rows or {}).items():
        if bad:
            notes.append(f"{name}: {bad} malformed row(s) skipped")

    jobs_out: dict[str, JobMetrics] = {}
    missing_total = 0
    for job in order:
        info = summary.jobs.get(job)
        all_iters = iters.get(job, [])
        n_ranks = len(info.hosts) if info and info.hosts else None
        if n_ranks is None:
            n_ranks = len({r.rank for r in iterations if r.job == job})
        seen_iter = max((i.iteration for i in all_iters), default=-1) + 1
        n_iter = info.iterations_planned if info and info.iterations_planned else None
        if n_iter is None:
            n_iter = max(seen_iter, (info.iterations or 0) if info else 0)
        warmup = info.warmup if info else 0
        stats = job_stats(all_iters, iterations, job, n_ranks, n_iter, warmup)
        missing_total += stats.missing_rows
        if stats.missing_rows:
            notes.append(f"{job}: {stats.missing_rows} missing row(s) of {n_ranks * n_iter} expected")
        baseline = info.baseline_iter_s if info else None
        baseline_kind = None
        if baseline:
            baseline_kind = "isolated" if info and info.isolated_iter_s else "ideal"
        job_rivals = rivals(summary.link_jobs, job)
        ovs = iteration_overlaps(job, iters, job_rivals)
        contended = [(o.iteration, o.overlap) for o in ovs if o.contended]
        contended_vals = [ov for it, ov in contended if ov is not None and it >= warmup]
        by_it = {o.iteration: o for o in ovs}
        predicted, aligned = summary.predicted(job)
        jobs_out[job] = JobMetrics(
            job=job,
            cc=summary.cc.get(job),
            n_iterations=stats.n_iterations,
            incomplete_iterations=stats.incomplete_iterations,
            missing_rows=stats.missing_rows,
            mean_iter_s=stats.mean_iter_s,
            p50_iter_s=stats.p50_iter_s,
            p99_iter_s=stats.p99_iter_s,
            baseline_iter_s=baseline,
            baseline=baseline_kind,
            slowdown_mean=ratio(stats.mean_iter_s, baseline),
            slowdown_p99=ratio(stats.p99_iter_s, baseline),
            rivals=job_rivals,
            contended_iterations=len(contended),
            overlap_mean=mean(contended_vals) if contended_vals else None,
            convergence_iteration=convergence_iteration(contended, threshold),
            per_iteration=[
                {
                    "iteration": i.iteration,
                    "iter_time": i.iter_time,
                    "comm_time": i.comm_time,
                    "overlap": by_it[i.iteration].overlap if i.iteration in by_it else None,
                    "contended": by_it[i.iteration].contended if i.iteration in by_it else False,
                    "warmup": i.iteration < warmup,
                }
                for i in stats.complete
            ],
            warmup=warmup,
            warmup_iterations=stats.warmup_iterations,
            warmup_mean_iter_s=stats.warmup_mean_iter_s,
            predicted_slowdown=predicted,
            predicted_aligned_slowdown=aligned,
        )

    series = job_throughput(throughput)
    links_out: dict[str, LinkMetrics] = {}
    for link, link_jobs in summary.link_jobs.items():
        jobs = list(dict.fromkeys(link_jobs))
        if len(jobs) < 2:
            continue
        on_link = summary.ranks_on(link)
        link_series = series if on_link is None else job_throughput(throughput, on_link)
        reference, jains = _link_fairness(jobs, iters, link_series)
        link_ovs = [
            o.overlap
            for job in jobs
            for o in iteration_overlaps(job, iters, [j for j in jobs if j != job])
            if o.contended and o.overlap is not None
        ]
        links_out[link] = LinkMetrics(
            link=link,
            jobs=jobs,
            reference_job=reference,
            windows=len(jains),
            jain_mean=mean(jains) if jains else None,
            jain_min=min(jains) if jains else None,
            jain=jains,
            overlap_mean=mean(link_ovs) if link_ovs else None,
        )
    if summary.link_jobs and not throughput:
        notes.append("no throughput rows: Jain fairness not computed")
    return RunMetrics(
        jobs=jobs_out,
        links=links_out,
        missing_rows_total=missing_total,
        convergence_threshold=threshold,
        notes=notes,
        fidelity=summary.fidelity.verdict if summary.fidelity else None,
    )

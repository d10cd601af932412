"""The job-level data model of a run: one implementation, used by summary.json and the report.

Workers write one row per (job, rank, iteration). A synchronous training job advances at its
slowest worker, so the definitions (docs/results.md is their description for users) are:

* **Job iteration** i of job J aggregates the rows of every rank r that reported i (a rank's
  row counts once even if it appears twice):
  ``iter_time = max_r (t_end_r - t_start_r)`` (the row's iter_time; t_end = t_comm_end unless
  a compute phase follows the last collective); communication interval
  ``[min_r t_comm_start, max_r t_comm_end]``; span ``[min_r t_start, max_r t_comm_end]``.
* **Complete** iteration: every one of the job's n ranks has a row. Only complete iterations
  enter the statistics (a partial one would understate the time); incomplete ones are counted.
* **Missing rows**: the (rank, iteration) pairs in range(n) × range(planned iterations) that
  have no row (duplicates and out-of-range rows do not hide a missing one).
* **Warm-up**: the first `warmup` iterations (run.warmup, default 2, as nccl-tests' -w; index <
  warmup) are left out of the statistics and reported on their own (their mean), because the
  first iterations ramp connections up and start from an arbitrary phase offset.
* **Statistics**: mean, p50, p99 (type-7 percentiles, results.stats) over the complete
  iterations after the warm-up ("measured").
* **Slowdown** = mean (or p99) iteration time / baseline; the baseline is the measured isolated
  iteration time when the run has one, else the ideal iteration time (jobs.ideal)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from mn_harness.results.schema import IterationRow
from mn_harness.results.stats import mean, percentile

Interval = tuple[float, float]


@dataclass(frozen=True)
class JobIteration:
    """One iteration of a whole job, aggregated over the ranks that reported it."""

    job: str
    iteration: int
    t_start: float
    t_comm_start: float
    t_comm_end: float
    ranks: int
    complete: bool
    iter_time: float

    @property
    def comm_time(self) -> float:
        return self.t_comm_end - self.t_comm_start

    @property
    def comm_interval(self) -> Interval:
        return (self.t_comm_start, self.t_comm_end)


def job_iterations(
    rows: Iterable[IterationRow], expected_ranks: Mapping[str, int] | None = None
) -> dict[str, list[JobIteration]]:
    """Aggregate rank rows into job iterations, sorted by iteration.

    `expected_ranks[job]` is the job's worker count; for a job not in it, the number of
    distinct ranks seen in any of its rows. Duplicate (rank, iteration) rows count once."""
    by_job: dict[str, dict[int, dict[int, IterationRow]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        by_job[row.job][row.iteration].setdefault(row.rank, row)
    out: dict[str, list[JobIteration]] = {}
    for job, iters in by_job.items():
        seen_ranks = {rank for ranks in iters.values() for rank in ranks}
        need = (expected_ranks or {}).get(job) or len(seen_ranks)
        out[job] = [
            JobIteration(
                job=job,
                iteration=it,
                t_start=min(r.t_start for r in ranks.values()),
                t_comm_start=min(r.t_comm_start for r in ranks.values()),
                t_comm_end=max(r.t_comm_end for r in ranks.values()),
                ranks=len(ranks),
                complete=len(ranks) >= need,
                iter_time=max(r.iter_time for r in ranks.values()),
            )
            for it, ranks in sorted(iters.items())
        ]
    return out


def count_missing_rows(rows: Iterable[IterationRow], job: str, n_ranks: int, n_iterations: int) -> int:
    """(rank, iteration) pairs of `job` in range(n_ranks) × range(n_iterations) with no row."""
    present = {
        (r.rank, r.iteration)
        for r in rows
        if r.job == job and 0 <= r.rank < n_ranks and 0 <= r.iteration < n_iterations
    }
    return n_ranks * n_iterations - len(present)


def ratio(value: float | None, baseline: float | None) -> float | None:
    """value / baseline (a slowdown), None when either is unknown or the baseline is 0."""
    if value is None or not baseline:
        return None
    return value / baseline


@dataclass(frozen=True)
class JobStats:
    """A job's iteration statistics over its measured iterations: complete and after the
    warm-up (None: none)."""

    n_iterations: int  # complete iterations, warm-up included
    incomplete_iterations: int
    missing_rows: int
    mean_iter_s: float | None
    p50_iter_s: float | None
    p99_iter_s: float | None
    complete: tuple[JobIteration, ...]
    warmup: int = 0  # iterations with index < warmup are warm-up
    warmup_iterations: int = 0  # complete warm-up iterations
    warmup_mean_iter_s: float | None = None

    @property
    def measured(self) -> tuple[JobIteration, ...]:
        """The complete iterations the statistics are over."""
        return tuple(i for i in self.complete if i.iteration >= self.warmup)

    @property
    def measured_iterations(self) -> int:
        return self.n_iterations - self.warmup_iterations

    def slowdown_mean(self, baseline: float | None) -> float | None:
        return ratio(self.mean_iter_s, baseline)

    def slowdown_p99(self, baseline: float | None) -> float | None:
        return ratio(self.p99_iter_s, baseline)


def job_stats(iters: Sequence[JobIteration], rows: Iterable[IterationRow], job: str,
              n_ranks: int, n_iterations: int, warmup: int = 0) -> JobStats:
    """Statistics of one job from its aggregated iterations (job_iterations()[job]) and the
    raw rows (for the missing-row count against n_ranks × n_iterations planned), leaving the
    first `warmup` iterations out."""
    complete = tuple(i for i in iters if i.complete)
    times = [i.iter_time for i in complete if i.iteration >= warmup]
    warm = [i.iter_time for i in complete if i.iteration < warmup]
    return JobStats(
        n_iterations=len(complete),
        incomplete_iterations=len(iters) - len(complete),
        missing_rows=count_missing_rows(rows, job, n_ranks, n_iterations),
        mean_iter_s=mean(times) if times else None,
        p50_iter_s=percentile(times, 50) if times else None,
        p99_iter_s=percentile(times, 99) if times else None,
        complete=complete,
        warmup=warmup,
        warmup_iterations=len(warm),
        warmup_mean_iter_s=mean(warm) if warm else None,
    )


def worker_cpu(rows: Iterable[IterationRow], job: str, warmup: int = 0) -> dict[str, float | None] | None:
    """A job's workers' CPU use over its measured iterations: `per_iteration_s`, the mean CPU
    time of one worker's iteration (user + system, all its threads), and `share`, that CPU
    time over the iterations' wall time (1.0 = one core busy the whole iteration). None where
    the rows do not record it (runs from before cpu_s)."""
    mine = [(r.cpu_s, r.iter_time) for r in rows if r.job == job and r.iteration >= warmup and r.cpu_s is not None]
    if not mine:
        return None
    cpu, wall = sum(c for c, _ in mine), sum(w for _, w in mine)
    return {"per_iteration_s": round(cpu / len(mine), 6), "share": round(cpu / wall, 4) if wall > 0 else None}

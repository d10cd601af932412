"""Repeated runs of one experiment → one row per label × scope × metric with mean ± 95% CI.

Emulated runs are noisy (CPU scheduling, start jitter), and whether two jobs interleave can
depend on chance offsets, so a single run per congestion control proves little. This module
recomputes each run's metrics from its folder (report.metrics), flattens them into scopes (each
job, each shared link, `all` across jobs) and aggregates them per label with Student-t
confidence intervals (results.stats). Writing the comparison (CSV, Markdown, plots) is
report.compare's; the sweep that produced the runs is mn_harness.sweep's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mn_harness.report.headline import APART_WITHIN, LAST_ITERATIONS, headline
from mn_harness.report.metrics import RunMetrics, compute_metrics
from mn_harness.results.loaders import load_run
from mn_harness.results.stats import mean_ci95, median_with_never, wilson_ci95

ALL_SCOPE = "all"
JOB_METRICS = (
    "mean_iter_s",
    "p50_iter_s",
    "p99_iter_s",
    "slowdown_mean",
    "slowdown_p99",
    "overlap_mean",
    "convergence_iteration",
    "converged",
)
LINK_METRICS = ("jain_mean", "jain_min", "overlap_mean")
ALL_METRICS = tuple(m for m in JOB_METRICS if m != "p50_iter_s")  # plotted by report.plots
CONVERGED = "converged"  # 1 = converged, 0 = never, None = no rival: runs that could converge
APART = f"apart_by_{APART_WITHIN}"  # 1 = apart by then, 0 = not, None = no rival
LAST = f"last_{LAST_ITERATIONS}"
HEADLINE_METRICS = (APART, "first_apart", "relapses", f"{LAST}_slowdown_mean", f"{LAST}_slowdown_p99")
FAITHFUL = "faithful"  # 1 = the run's fidelity verdict was faithful, 0 = unfaithful, None = unchecked
# a share of the runs (its Wilson interval) -> the iteration whose median over runs goes with it
# (a run that never got there counting as later than any)
SHARES = {CONVERGED: "convergence_iteration", APART: "first_apart"}
SHARE_METRICS = (*SHARES, FAITHFUL)  # shares of the runs: their Wilson interval


def flatten_metrics(metrics: RunMetrics) -> dict[tuple[str, str], float | None]:
    """{(scope, metric): value}: per job, per shared link ("link:<name>"), and across jobs.

    Across jobs ("all"): mean over jobs of mean/p99 iteration time, mean/p99 slowdown and overlap;
    convergence_iteration is the latest convergence among jobs that have a rival (the run has
    converged when every such job has), None if any of them never converged or none has one.
    `converged` is 1.0 or 0.0 where the job (the run) had rivals to interleave with, else None.
    The headline figures (report.headline), across jobs: `apart_by_10` (1.0 or 0.0; None
    without a rival), `first_apart` and `relapses` (None when never apart), and the mean and
    p99 slowdown over the last 20 iterations."""
    out: dict[tuple[str, str], float | None] = {}
    for job, jm in metrics.jobs.items():
        for name in JOB_METRICS:
            if name == CONVERGED:
                out[(job, name)] = _converged(jm)
                continue
            value = getattr(jm, name)
            out[(job, name)] = None if value is None else float(value)
    for link, lm in metrics.links.items():
        for name in LINK_METRICS:
            value = getattr(lm, name)
            out[(f"link:{link}", name)] = None if value is None else float(value)
    jobs = list(metrics.jobs.values())
    for name in ("mean_iter_s", "p99_iter_s", "slowdown_mean", "slowdown_p99", "overlap_mean"):
        vals = [getattr(j, name) for j in jobs if getattr(j, name) is not None]
        out[(ALL_SCOPE, name)] = sum(vals) / len(vals) if vals else None
    contended = [j for j in jobs if j.contended_iterations > 0]
    conv = [j.convergence_iteration for j in contended]
    out[(ALL_SCOPE, "convergence_iteration")] = (
        float(max(c for c in conv if c is not None)) if contended and all(c is not None for c in conv) else None
    )
    out[(ALL_SCOPE, CONVERGED)] = float(all(c is not None for c in conv)) if contended else None
    head = headline(metrics)
    sep, apart = head.separation, head.apart
    first = None if sep is None or sep.first is None else sep.first
    values = (None if apart is None else float(apart), first, None if first is None or sep is None else sep.relapses,
              None if head.last is None else head.last.slowdown, None if head.last is None else head.last.slowdown_p99)
    for name, value in zip(HEADLINE_METRICS, values, strict=True):
        out[(ALL_SCOPE, name)] = None if value is None else float(value)
    out[(ALL_SCOPE, FAITHFUL)] = {"faithful": 1.0, "unfaithful": 0.0}.get(metrics.fidelity or "")
    return out


def _converged(jm) -> float | None:
    if not jm.rivals or jm.contended_iterations == 0:
        return None
    return 0.0 if jm.convergence_iteration is None else 1.0


@dataclass(frozen=True)
class RunRef:
    label: str
    repetition: int
    results_dir: Path


@dataclass
class CompareRow:
    """One label × scope × metric: statistics over the runs where the metric had a value.

    `converged` (`apart_by_10`): mean = the fraction of the runs (that had rivals) that
    converged (stood apart by then), with its Wilson interval in `interval`.
    `convergence_iteration` (`first_apart`): `median` over every such run, one that never got
    there counting as later than any (None: the median run never did); `mean` and its CI are
    over the runs that got there only."""

    label: str
    scope: str
    metric: str
    runs: int
    n: int
    mean: float | None
    std: float | None
    ci95_half: float | None
    values: list[float] = field(default_factory=list)
    median: float | None = None
    interval: tuple[float, float] | None = None  # a CI that is not mean ± half (a proportion)
    of: int = 0  # convergence_iteration: the runs the median is over (converged or never)

    @property
    def ci95_low(self) -> float | None:
        if self.interval is not None:
            return self.interval[0]
        return None if self.mean is None or self.ci95_half is None else self.mean - self.ci95_half

    @property
    def ci95_high(self) -> float | None:
        if self.interval is not None:
            return self.interval[1]
        return None if self.mean is None or self.ci95_half is None else self.mean + self.ci95_half


def _refs(runs: Sequence[tuple[str, int, Path | str] | RunRef]) -> list[RunRef]:
    return [r if isinstance(r, RunRef) else RunRef(r[0], int(r[1]), Path(r[2])) for r in runs]


def collect(
    runs: Sequence[tuple[str, int, Path | str] | RunRef],
) -> tuple[list[tuple[RunRef, RunMetrics]], list[str]]:
    """Metrics of every run folder, recomputed from its CSVs; unreadable folders are listed
    as errors (a crashed repetition must not hide the others)."""
    done: list[tuple[RunRef, RunMetrics]] = []
    errors: list[str] = []
    for ref in _refs(runs):
        try:
            run = load_run(ref.results_dir)
        except (OSError, ValueError) as exc:
            errors.append(f"{ref.label} #{ref.repetition} ({ref.results_dir}): {exc}")
            continue
        done.append(
            (
                ref,
                compute_metrics(run.summary, run.iterations, run.throughput, malformed_rows=run.malformed_rows),
            )
        )
    return done, errors


def aggregate_metrics(results: Sequence[tuple[RunRef, RunMetrics]]) -> list[CompareRow]:
    """CompareRows in label order of first appearance, then scope/metric order."""
    labels: list[str] = []
    keys: list[tuple[str, str]] = []
    values: dict[tuple[str, str, str], list[float]] = {}
    # convergence (apart) over every run that could converge: its iteration, or None for never
    reached: dict[tuple[str, str, str], list[float | None]] = {}
    runs_per_label: dict[str, int] = {}
    for ref, metrics in results:
        if ref.label not in labels:
            labels.append(ref.label)
        runs_per_label[ref.label] = runs_per_label.get(ref.label, 0) + 1
        flat = flatten_metrics(metrics)
        for (scope, name), value in flat.items():
            if (scope, name) not in keys:
                keys.append((scope, name))
            bucket = values.setdefault((ref.label, scope, name), [])
            if value is not None:
                bucket.append(value)
            if name in SHARES and value is not None:
                reached.setdefault((ref.label, scope, SHARES[name]), []).append(
                    flat.get((scope, SHARES[name])) if value else None)
    keys.sort(key=lambda k: (k[0] != ALL_SCOPE, k[0].startswith("link:")))
    rows: list[CompareRow] = []
    for label in labels:
        for scope, name in keys:
            vals = values.get((label, scope, name), [])
            m, s, h = mean_ci95(vals) if vals else (None, None, None)
            row = CompareRow(label, scope, name, runs_per_label[label], len(vals), m, s, h, list(vals))
            if name in SHARE_METRICS and vals:
                row.ci95_half, row.interval = None, wilson_ci95(round(sum(vals)), len(vals))
            if reached.get((label, scope, name)):
                row.median = median_with_never(reached[(label, scope, name)])
                row.of = len(reached[(label, scope, name)])
            rows.append(row)
    return rows


def aggregate(runs: Sequence[tuple[str, int, Path | str] | RunRef]) -> list[CompareRow]:
    """Collect and aggregate in one call (errors dropped; use `collect` to see them)."""
    results, _ = collect(runs)
    return aggregate_metrics(results)


def metric_title(metric: str) -> str:
    if metric.endswith("_s"):
        return metric[:-2] + " (ms)"
    if metric == "overlap_mean" or metric in SHARE_METRICS:
        return f"{metric} (%)"
    if metric in SHARES.values():
        return f"{metric} (median)"
    return metric

"""Aggregate repeated runs into one comparison: mean ± 95% CI per metric and label.

Emulated runs are noisy (CPU scheduling, start jitter), and whether two jobs interleave can
depend on chance offsets, so a single run per congestion control proves little. `mn-harness
compare` repeats each variant (a CC, or a `--set` value of the config) and this module turns the
runs' metrics into a table with Student-t confidence intervals, `compare.csv` (long format, one
row per label × scope × metric, pandas-readable), `compare.md`, and side-by-side plots.

The run loop (launching, resuming) is the CLI's; this module only reads finished results folders,
and provides the `--set path=v1,v2` parsing and path application the sweep needs. scipy is not a
dependency: the two-sided 95% t quantiles are tabulated.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mn_harness.report.loaders import load_run
from mn_harness.report.markdown import markdown_table, text_table
from mn_harness.report.metrics import RunMetrics, compute_metrics

# Two-sided 95% Student t quantiles t_{0.975, df}, df = 1..30.
T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
# Beyond 30: the value at the largest tabulated df not above the real one (conservative).
T95_LARGE = ((120, 1.980), (60, 2.000), (40, 2.021), (30, 2.042))

ALL_SCOPE = "all"
JOB_METRICS = (
    "mean_iter_s",
    "p50_iter_s",
    "p99_iter_s",
    "slowdown_mean",
    "slowdown_p99",
    "overlap_mean",
    "convergence_iteration",
)
LINK_METRICS = ("jain_mean", "jain_min", "overlap_mean")
ALL_METRICS = (
    "mean_iter_s",
    "p99_iter_s",
    "slowdown_mean",
    "overlap_mean",
    "convergence_iteration",
)


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


def flatten_metrics(metrics: RunMetrics) -> dict[tuple[str, str], float | None]:
    """{(scope, metric): value}: per job, per shared link ("link:<name>"), and across jobs.

    Across jobs ("all"): mean over jobs of mean/p99 iteration time, slowdown and overlap;
    convergence_iteration is the latest convergence among jobs that have a rival (the run has
    converged when every such job has), None if any of them never converged or none has one."""
    out: dict[tuple[str, str], float | None] = {}
    for job, jm in metrics.jobs.items():
        for name in JOB_METRICS:
            value = getattr(jm, name)
            out[(job, name)] = None if value is None else float(value)
    for link, lm in metrics.links.items():
        for name in LINK_METRICS:
            value = getattr(lm, name)
            out[(f"link:{link}", name)] = None if value is None else float(value)
    jobs = list(metrics.jobs.values())
    for name in ("mean_iter_s", "p99_iter_s", "slowdown_mean", "overlap_mean"):
        vals = [getattr(j, name) for j in jobs if getattr(j, name) is not None]
        out[(ALL_SCOPE, name)] = sum(vals) / len(vals) if vals else None
    contended = [j for j in jobs if j.contended_iterations > 0]
    conv = [j.convergence_iteration for j in contended]
    out[(ALL_SCOPE, "convergence_iteration")] = (
        float(max(c for c in conv if c is not None)) if contended and all(c is not None for c in conv) else None
    )
    return out


@dataclass(frozen=True)
class RunRef:
    label: str
    repetition: int
    results_dir: Path


@dataclass
class CompareRow:
    """One label × scope × metric: statistics over the runs where the metric had a value."""

    label: str
    scope: str
    metric: str
    runs: int
    n: int
    mean: float | None
    std: float | None
    ci95_half: float | None
    values: list[float] = field(default_factory=list)

    @property
    def ci95_low(self) -> float | None:
        return None if self.mean is None or self.ci95_half is None else self.mean - self.ci95_half

    @property
    def ci95_high(self) -> float | None:
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
    runs_per_label: dict[str, int] = {}
    for ref, metrics in results:
        if ref.label not in labels:
            labels.append(ref.label)
        runs_per_label[ref.label] = runs_per_label.get(ref.label, 0) + 1
        for (scope, name), value in flatten_metrics(metrics).items():
            if (scope, name) not in keys:
                keys.append((scope, name))
            bucket = values.setdefault((ref.label, scope, name), [])
            if value is not None:
                bucket.append(value)
    keys.sort(key=lambda k: (k[0] != ALL_SCOPE, k[0].startswith("link:")))
    rows: list[CompareRow] = []
    for label in labels:
        for scope, name in keys:
            vals = values.get((label, scope, name), [])
            m, s, h = mean_ci95(vals) if vals else (None, None, None)
            rows.append(CompareRow(label, scope, name, runs_per_label[label], len(vals), m, s, h, list(vals)))
    return rows


def aggregate(runs: Sequence[tuple[str, int, Path | str] | RunRef]) -> list[CompareRow]:
    """Collect and aggregate in one call (errors dropped; use `collect` to see them)."""
    results, _ = collect(runs)
    return aggregate_metrics(results)


CSV_COLUMNS = (
    "label",
    "scope",
    "metric",
    "runs",
    "n",
    "mean",
    "std",
    "ci95_half",
    "ci95_low",
    "ci95_high",
    "values",
)


def write_compare_csv(rows: Sequence[CompareRow], path: Path) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for r in rows:
            cells = [r.mean, r.std, r.ci95_half, r.ci95_low, r.ci95_high]
            w.writerow(
                [
                    r.label,
                    r.scope,
                    r.metric,
                    r.runs,
                    r.n,
                    *("" if c is None else repr(c) for c in cells),
                    json.dumps(r.values),
                ]
            )
    return path


def _cell(r: CompareRow) -> str:
    if r.mean is None:
        return f"- (n=0/{r.runs})"
    scale, digits = (1e3, 1) if r.metric.endswith("_s") else (1.0, 3)
    if r.metric == "convergence_iteration":
        digits = 1
    if r.metric == "overlap_mean":
        scale, digits = 100.0, 1
    text = f"{r.mean * scale:.{digits}f}"
    if r.ci95_half is not None:
        text += f" ± {r.ci95_half * scale:.{digits}f}"
    return f"{text} (n={r.n}/{r.runs})"


def _metric_title(metric: str) -> str:
    if metric.endswith("_s"):
        return metric[:-2] + " (ms)"
    if metric == "overlap_mean":
        return "overlap_mean (%)"
    return metric


def _grid(rows: Sequence[CompareRow]) -> tuple[list[str], dict[str, list[list[str]]]]:
    labels = list(dict.fromkeys(r.label for r in rows))
    by_scope: dict[str, dict[str, dict[str, CompareRow]]] = {}
    for r in rows:
        by_scope.setdefault(r.scope, {}).setdefault(r.metric, {})[r.label] = r
    tables: dict[str, list[list[str]]] = {}
    for scope, metrics in by_scope.items():
        tables[scope] = [
            [_metric_title(metric), *(_cell(cells[lab]) if lab in cells else "-" for lab in labels)]
            for metric, cells in metrics.items()
        ]
    return labels, tables


def format_compare_table(rows: Sequence[CompareRow]) -> str:
    """Terminal tables: per scope, metrics × labels, cells "mean ± CI half-width (n=k/runs)"."""
    labels, tables = _grid(rows)
    return "\n\n".join(f"[{scope}]\n" + text_table(["metric", *labels], body) for scope, body in tables.items())


def render_compare_md(
    rows: Sequence[CompareRow], plots: Sequence[Path], out_dir: Path, errors: Sequence[str] = ()
) -> str:
    labels, tables = _grid(rows)
    lines = ["# Comparison", ""]
    lines.append(
        "Each cell: mean ± half-width of the 95% Student-t confidence interval over repetitions "
        "(n = runs where the metric had a value / runs). Times in ms, overlap in %. Scope "
        "`all`: mean over jobs (convergence: latest among jobs with a rival)."
    )
    for scope, body in tables.items():
        lines += ["", f"## {scope}", "", markdown_table(["metric", *labels], body)]
    if errors:
        lines += ["", "## Runs that could not be read", ""]
        lines += [f"- {e}" for e in errors]
    if plots:
        lines += ["", "## Plots"]
        for p in plots:
            lines += ["", f"![{p.stem}]({p.relative_to(out_dir).as_posix()})"]
    return "\n".join(lines) + "\n"


def plot_compare_metrics(rows: Sequence[CompareRow], path: Path) -> Path | None:
    """Bars with 95% CI error bars for the across-jobs metrics, one panel per metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wanted = [m for m in ALL_METRICS if any(r.scope == ALL_SCOPE and r.metric == m for r in rows)]
    if not wanted:
        return None
    labels = list(dict.fromkeys(r.label for r in rows))
    cmap = plt.get_cmap("viridis")
    colours = [cmap(i / max(1, len(labels) - 1) * 0.85) for i in range(len(labels))]
    fig, axes = plt.subplots(1, len(wanted), figsize=(3.2 * len(wanted), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], wanted, strict=True):
        cells = {r.label: r for r in rows if r.scope == ALL_SCOPE and r.metric == metric}
        scale = 1e3 if metric.endswith("_s") else (100.0 if metric == "overlap_mean" else 1.0)
        means = [(cells[lab].mean or 0.0) * scale if lab in cells else 0.0 for lab in labels]
        errs = [(cells[lab].ci95_half or 0.0) * scale if lab in cells else 0.0 for lab in labels]
        ax.bar(range(len(labels)), means, yerr=errs, capsize=4, color=colours)
        for x, lab in enumerate(labels):
            if lab not in cells or cells[lab].mean is None:
                ax.annotate("n/a", (x, 0), ha="center", va="bottom", fontsize="small")
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize="small")
        ax.set_title(_metric_title(metric), fontsize="small")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("mean ± 95% CI over repetitions (all jobs)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_compare_throughput(refs: Sequence[RunRef], path: Path) -> Path | None:
    """One throughput timeline per label (its lowest repetition), stacked for side-by-side."""
    from mn_harness.report.plots import (
        bottleneck_bps,
        draw_throughput,
        job_colors,
        plt,
        throughput_series,
    )

    first: dict[str, RunRef] = {}
    for ref in sorted(refs, key=lambda r: r.repetition):
        first.setdefault(ref.label, ref)
    panels = []
    for label, ref in first.items():
        try:
            run = load_run(ref.results_dir)
        except (OSError, ValueError):
            continue
        series = throughput_series(run)
        if series:
            panels.append((label, ref, run, series))
    if not panels:
        return None
    order: list[str] = []
    for _, _, run, _ in panels:
        order += [j for j in run.job_order() if j not in order]
    colors = job_colors(order)
    fig, axes = plt.subplots(len(panels), 1, sharex=True, figsize=(11, 2.6 * len(panels)), squeeze=False)
    for ax, (label, ref, run, series) in zip(axes[:, 0], panels, strict=True):
        draw_throughput(ax, series, colors, bottleneck_bps(run))
        ax.set_title(f"{label} (repetition {ref.repetition})", fontsize="small")
        ax.legend(loc="upper right", fontsize="x-small")
    axes[-1, 0].set_xlabel("time since experiment start (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_compare(
    runs: Sequence[tuple[str, int, Path | str] | RunRef],
    out_dir: Path | str,
    plots: bool = True,
) -> Path:
    """Write compare.csv, compare.md and (unless plots=False) compare_*.png; returns compare.md."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results, errors = collect(runs)
    rows = aggregate_metrics(results)
    write_compare_csv(rows, out / "compare.csv")
    written: list[Path] = []
    if plots and rows:
        for p in (
            plot_compare_metrics(rows, out / "compare_metrics.png"),
            plot_compare_throughput([ref for ref, _ in results], out / "compare_throughput.png"),
        ):
            if p is not None:
                written.append(p)
    md = out / "compare.md"
    md.write_text(render_compare_md(rows, written, out, errors))
    return md

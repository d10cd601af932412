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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mn_harness.report.markdown import markdown_table, text_table
from mn_harness.report.metrics import RunMetrics, compute_metrics
from mn_harness.results.loaders import load_run
from mn_harness.results.stats import mean_ci95

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


def metric_title(metric: str) -> str:
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
            [metric_title(metric), *(_cell(cells[lab]) if lab in cells else "-" for lab in labels)]
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
        from mn_harness.report.plots import plot_compare_metrics, plot_compare_throughput

        for p in (
            plot_compare_metrics(rows, out / "compare_metrics.png"),
            plot_compare_throughput([ref for ref, _ in results], out / "compare_throughput.png"),
        ):
            if p is not None:
                written.append(p)
    md = out / "compare.md"
    md.write_text(render_compare_md(rows, written, out, errors))
    return md

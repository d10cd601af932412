"""A comparison written out: `compare.csv` (long format, one row per label × scope × metric,
pandas-readable), `compare.md` (metrics × labels per scope, "mean ± CI half-width (n=k/runs)")
and side-by-side plots (report.plots). The numbers are report.aggregate's."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mn_harness.report.aggregate import (
    APART,
    SHARE_METRICS,
    CompareRow,
    RunRef,
    aggregate_metrics,
    collect,
    metric_title,
)
from mn_harness.report.headline import APART_WITHIN, LAST_ITERATIONS
from mn_harness.report.markdown import markdown_table, text_table
from mn_harness.report.metrics import RunMetrics
from mn_harness.results.schema_fidelity import FAITHFUL

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
    "median",
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
                    "" if r.median is None else repr(r.median),
                    json.dumps(r.values),
                ]
            )
    return path


REACHED = {"convergence_iteration": "converged", "first_apart": "apart"}  # aggregate.SHARES' iterations


def _cell(r: CompareRow) -> str:
    if r.metric in REACHED and r.of:
        median = "never" if r.median is None else f"{r.median:.1f}"
        return f"{median} ({r.n}/{r.of} {REACHED[r.metric]})"
    if r.metric in SHARE_METRICS and r.mean is not None and r.interval is not None:
        return f"{r.mean * 100:.0f}% [{r.interval[0] * 100:.0f}–{r.interval[1] * 100:.0f}] (n={r.n}/{r.runs})"
    if r.mean is None:
        return f"- (n=0/{r.runs})"
    scale, digits = (1e3, 1) if r.metric.endswith("_s") else (1.0, 3)
    if r.metric in REACHED or r.metric == "relapses":
        digits = 1
    if r.metric == "overlap_mean":
        scale, digits = 100.0, 1
    text = f"{r.mean * scale:.{digits}f}"
    if r.ci95_half is not None:
        text += f" ± {r.ci95_half * scale:.{digits}f}"
    return f"{text} (n={r.n}/{r.runs})"


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
    rows: Sequence[CompareRow], plots: Sequence[Path], out_dir: Path, errors: Sequence[str] = (),
    left_out: Sequence[str] = (),
) -> str:
    labels, tables = _grid(rows)
    lines = ["# Comparison", ""]
    if left_out:
        lines += [f"Faithful runs only: {len(left_out)} run(s) left out, their emulation not faithful "
                  "(docs/fidelity.md#does-the-run-check-itself):", "", *(f"- {x}" for x in left_out), ""]
    lines.append(
        "Each cell: mean ± half-width of the 95% Student-t confidence interval over repetitions "
        "(n = runs where the metric had a value / runs). Times in ms, overlap in %. Scope "
        "`all`: mean over jobs (convergence: latest among jobs with a rival). Convergence: the "
        "median convergence iteration over every run that had rivals, a run that never converged "
        "counting as later than any (\"never\": the median run never did), and how many converged; "
        "`converged`: that fraction with its 95% Wilson interval. Scope `all` also has the headline "
        f"figures: `{APART}`, the fraction of runs whose jobs first stood apart by iteration {APART_WITHIN}, "
        "with its Wilson interval; `first_apart`, the median over runs of that first iteration (as for "
        "convergence); `relapses`, later iterations in which they overlapped again (runs that stood "
        f"apart); the mean and p99 slowdown over each run's last {LAST_ITERATIONS} iterations. "
        "`faithful`: the fraction of runs whose emulation kept its invariants (summary.json `fidelity`), "
        "with its Wilson interval (n: the runs that were checked)."
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


def faithful_only(results: Sequence[tuple[RunRef, RunMetrics]]) -> tuple[list[tuple[RunRef, RunMetrics]], list[str]]:
    """The runs whose fidelity verdict is `faithful`, and one line for each run left out."""
    kept, left_out = [], []
    for ref, metrics in results:
        if metrics.fidelity == FAITHFUL:
            kept.append((ref, metrics))
        else:
            verdict = metrics.fidelity or "not checked"
            left_out.append(f"{ref.label} #{ref.repetition} ({ref.results_dir.name}): {verdict}")
    return kept, left_out


@dataclass(frozen=True)
class Comparison:
    md: Path  # compare.md
    rows: list[CompareRow]
    left_out: list[str]  # with only_faithful: a line per run whose emulation was not faithful


def write_compare(
    runs: Sequence[tuple[str, int, Path | str] | RunRef],
    out_dir: Path | str,
    plots: bool = True,
    only_faithful: bool = False,
) -> Comparison:
    """Write compare.csv, compare.md and (unless plots=False) compare_*.png."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results, errors = collect(runs)
    left_out: list[str] = []
    if only_faithful:
        results, left_out = faithful_only(results)
    rows = aggregate_metrics(results)
    write_compare_csv(rows, out / "compare.csv")
    written: list[Path] = []
    if plots and rows:
        from mn_harness.report.plots import plot_compare_metrics, plot_compare_throughput  # matplotlib

        for p in (
            plot_compare_metrics(rows, out / "compare_metrics.png"),
            plot_compare_throughput([ref for ref, _ in results], out / "compare_throughput.png"),
        ):
            if p is not None:
                written.append(p)
    md = out / "compare.md"
    md.write_text(render_compare_md(rows, written, out, errors, left_out))
    return Comparison(md, rows, left_out)

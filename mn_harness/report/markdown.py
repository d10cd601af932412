"""One shareable report per run: metrics into summary.json, plots, and report.md.

A run folder should be something a person can hand over as-is: `report.md` embeds the plots by
relative path and carries the tables, so the folder renders on any Markdown viewer (GitHub,
an editor) with no tool installed. The same numbers go into `summary.json` under "metrics" for
scripts and for `mn-harness compare`, and `format_table` prints them in a terminal at the end of
a run. `write_report` is the single entry point the CLI calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from mn_harness.report import headline as headlines
from mn_harness.report.fidelity import fidelity_lines
from mn_harness.report.metrics import (
    DEFAULT_CONVERGENCE_THRESHOLD,
    JobMetrics,
    RunMetrics,
    compute_metrics,
)
from mn_harness.results.loaders import RunData, load_run
from mn_harness.results.schema import RunSummary
from mn_harness.results.summary import update_summary

PLOTS_DIR = "plots"
PLOT_CAPTIONS = {
    "throughput": "Per-job throughput over time (sum over ranks' sending sockets) and communication phases",
    "iteration_times": "Iteration time per iteration (dotted: baseline)",
    "iteration_cdf": "CDF of iteration times",
    "queue": "Egress queue depth over time",
}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _prediction(jm: JobMetrics) -> str:
    """CASSINI's slowdown at the best shifts, and with the phases aligned in brackets."""
    if jm.predicted_slowdown is None:
        return "-"
    aligned = "" if jm.predicted_aligned_slowdown is None else f" ({jm.predicted_aligned_slowdown:.2f})"
    return f"{jm.predicted_slowdown:.2f}{aligned}"


def cassini_lines(summary: RunSummary) -> list[str]:
    """report.md's CASSINI section: the links' scores and shifts, the loops."""
    pred = summary.cassini
    if not isinstance(pred, dict) or not pred.get("links"):
        return []
    rows = [[link, ", ".join(lp["jobs"]), f"{lp['score']:.3f}", f"{lp['joint_score']:.3f}",
             f"{lp['aligned_score']:.3f}", ", ".join(f"{j} {s * 1e3:.0f} ms" for j, s in lp["shifts_s"].items())]
            for link, lp in pred["links"].items()]
    lines = ["", "## CASSINI prediction", "",
             markdown_table(["link", "jobs", "score", "joint score", "aligned score", "best shifts"], rows), "",
             "Compatibility score on the unified circle (1 = the phases can be rotated apart), at the best "
             "rotation for the link alone, at one rotation per job for all its links (joint), and with "
             "the phases aligned; predicted slowdown = 2 − score (the job table's CASSINI column: joint, "
             "aligned in brackets). Model and definitions: docs/results.md."]
    for loop in pred.get("loops") or []:
        lines.append(f"- circular dependency: {' – '.join(loop)}")
    return lines


PHASE_HEADERS = ["job", "phase", "kind", "collective", "mean ms", "busbw Gbit/s", "mean delay ms"]


def phase_rows(summary: RunSummary) -> list[list[str]]:
    """summary.json's per-phase statistics (results.phases), for jobs with more than the
    short form's two phases or with a collective other than ring all-reduce."""
    rows = []
    for job, info in summary.jobs.items():
        stats = info.phase_stats
        if len(stats) <= 2 and all(p.get("collective") in (None, "ring_allreduce") for p in stats):
            continue
        for p in stats:
            bus = p.get("busbw_Bps")
            rows.append([job, str(p.get("name")), str(p.get("kind")), p.get("collective") or "-",
                         _ms(p.get("mean_s")), "-" if bus is None else f"{bus * 8 / 1e9:.3f}",
                         _ms(p.get("mean_delay_s"))])
    return rows


def convergence_text(jm: JobMetrics) -> str:
    """Iteration number; "n/a" without a rival to interleave with; "never" otherwise."""
    if jm.convergence_iteration is not None:
        return str(jm.convergence_iteration)
    return "n/a" if not jm.rivals or jm.contended_iterations == 0 else "never"


JOB_HEADERS = [
    "job",
    "cc",
    "iters",
    "missing",
    "warm-up ms",
    "mean ms",
    "p50 ms",
    "p99 ms",
    "baseline ms",
    "slowdown",
    "p99 slowdown",
    "CASSINI",
    "overlap",
    "converged at",
]
LINK_HEADERS = ["link", "jobs", "windows", "Jain mean", "Jain min", "overlap"]


def job_rows(metrics: RunMetrics) -> list[list[str]]:
    return [
        [
            jm.job,
            jm.cc or "-",
            str(jm.n_iterations - jm.warmup_iterations),
            str(jm.missing_rows),
            _ms(jm.warmup_mean_iter_s) + (f" ({jm.warmup_iterations})" if jm.warmup_iterations else ""),
            _ms(jm.mean_iter_s),
            _ms(jm.p50_iter_s),
            _ms(jm.p99_iter_s),
            _ms(jm.baseline_iter_s) + (f" ({jm.baseline})" if jm.baseline else ""),
            _num(jm.slowdown_mean),
            _num(jm.slowdown_p99),
            _prediction(jm),
            _pct(jm.overlap_mean),
            convergence_text(jm),
        ]
        for jm in metrics.jobs.values()
    ]


def link_rows(metrics: RunMetrics) -> list[list[str]]:
    return [
        [
            lm.link,
            ",".join(lm.jobs),
            str(lm.windows),
            _num(lm.jain_mean, 3),
            _num(lm.jain_min, 3),
            _pct(lm.overlap_mean),
        ]
        for lm in metrics.links.values()
    ]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|")

    lines = ["| " + " | ".join(esc(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def format_table(metrics: RunMetrics) -> str:
    """Plain-text tables of a run's metrics for the terminal."""
    parts = [text_table(JOB_HEADERS, job_rows(metrics))]
    if metrics.links:
        parts.append(text_table(LINK_HEADERS, link_rows(metrics)))
    parts.append(text_table(headlines.HEADERS, [headlines.headline_row(headlines.headline(metrics))]))
    notes = [*metrics.notes, *([f"fidelity: {metrics.fidelity}"] if metrics.fidelity else [])]
    if notes:
        parts.append("\n".join(f"note: {n}" for n in notes))
    return "\n\n".join(parts)


def render_report(run: RunData, metrics: RunMetrics, plots: dict[str, Path]) -> str:
    """report.md text; plot paths are written relative to the results folder."""
    s = run.summary
    lines = [f"# Run report: {s.experiment or run.results_dir.name}", ""]
    lines.append(f"Results folder: `{run.results_dir.name}`")
    if s.cc:
        lines.append("")
        lines.append("Congestion control: " + ", ".join(f"{j} = `{c}`" for j, c in s.cc.items()))
    lines += ["", "## Jobs", "", markdown_table(JOB_HEADERS, job_rows(metrics)), ""]
    warm = max((jm.warmup for jm in metrics.jobs.values()), default=0)
    lines.append(
        f"Iteration time = the slowest rank's iteration end − t_start (complete iterations "
        f"only; the first {warm} are warm-up, shown on their own (mean and count) and left out of "
        f"iters, mean, percentiles and overlap); percentiles by linear interpolation; overlap = mean over contended "
        f"iterations of the fraction of the job's communication time during which a job sharing "
        f"a link also communicated; converged at = first iteration from which overlap stays "
        f"≤ {metrics.convergence_threshold:.0%}."
    )
    lines += ["", "## Headline", "", markdown_table(headlines.HEADERS, [headlines.headline_row(
        headlines.headline(metrics))]), ""]
    lines.append(
        f"Apart by {headlines.APART_WITHIN}: whether, by iteration {headlines.APART_WITHIN}, there was an "
        f"iteration in which every job sharing a link overlapped the others by at most "
        f"{metrics.convergence_threshold:.0%} (first apart: the first such iteration; relapses: later "
        f"iterations in which one overlapped more; n/a: no job shares a link). Last "
        f"{headlines.LAST_ITERATIONS}: mean over jobs of their mean and p99 iteration time over their last "
        f"{headlines.LAST_ITERATIONS} iterations, over the baseline.")
    lines += fidelity_lines(s.fidelity, markdown_table)
    lines += cassini_lines(s)
    phases = phase_rows(s)
    if phases:
        lines += ["", "## Phases", "", markdown_table(PHASE_HEADERS, phases), ""]
        lines.append("Per phase (each DDP bucket separately): the job's phase from its first rank's start to "
                     "its last rank's end, mean over complete iterations; bus bandwidth by the nccl-tests "
                     "conventions; delay = jitter and stragglers applied (docs/results.md).")
    if metrics.links:
        lines += ["", "## Shared links", "", markdown_table(LINK_HEADERS, link_rows(metrics)), ""]
        lines.append(
            "Jain fairness of each job's bytes (all ranks) over each iteration of the link's "
            "reference job (longest median iteration), in windows where all the link's jobs ran."
        )
    if metrics.notes:
        lines += ["", "## Data problems", ""]
        lines += [f"- {n}" for n in metrics.notes]
    if plots:
        lines += ["", "## Plots", "", "Each plot is also in `plots/` as PDF (same name)."]
        for name, path in plots.items():
            rel = path.relative_to(run.results_dir).as_posix()
            caption = PLOT_CAPTIONS.get(name, name)
            lines += ["", f"### {caption}", "", f"![{caption}]({rel})"]
    return "\n".join(lines) + "\n"


def write_report(
    results_dir: Path | str,
    plots: bool = True,
    threshold: float = DEFAULT_CONVERGENCE_THRESHOLD,
    window: tuple[float, float] | None = None,
) -> Path:
    """Compute metrics, store them in summary.json, write plots/*.png (and .pdf) and report.md.

    Returns the path of report.md. `plots=False` is the CLI's --no-plots; `window` (seconds
    since the experiment start) restricts the throughput timeline (--window)."""
    return report_run(results_dir, plots, threshold, window)[0]


def report_run(
    results_dir: Path | str,
    plots: bool = True,
    threshold: float = DEFAULT_CONVERGENCE_THRESHOLD,
    window: tuple[float, float] | None = None,
) -> tuple[Path, RunMetrics]:
    """write_report, also returning the metrics so the CLI can print them without recomputing."""
    root = Path(results_dir)
    run = load_run(root)
    metrics = compute_metrics(run.summary, run.iterations, run.throughput, threshold, run.malformed_rows)
    update_summary(root, lambda summary: replace(summary, metrics=metrics.to_dict()))
    written: dict[str, Path] = {}
    if plots:
        from mn_harness.report.plots import write_plots  # matplotlib only when plotting

        written = write_plots(run, metrics, root / PLOTS_DIR, window)
    report = root / "report.md"
    report.write_text(render_report(run, metrics, written))
    return report, metrics

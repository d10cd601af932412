"""PNG plots of one run, in the forms a congestion-control-for-ML paper shows.

The throughput timeline is the central picture: with an unmodified CC two compatible jobs' phases
sit on top of each other, with MLTCP they drift apart until they alternate — visible at a glance
and nowhere in a mean. Under it a phase chart draws each job's communication intervals, so the
interleaving can be read even when throughput curves are noisy.

Every plot colours a job the same way (`job_colors`: tab10 by job order, the order of the
summary's `jobs`), so figures of one run and of a comparison can be read side by side. The Agg
backend is forced: runs happen on headless machines and inside network namespaces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from mn_harness.report.aggregate import ALL_METRICS, ALL_SCOPE, CompareRow, RunRef, metric_title  # noqa: E402
from mn_harness.report.fairness import bin_index, job_throughput  # noqa: E402
from mn_harness.report.metrics import RunMetrics  # noqa: E402
from mn_harness.results.iterations import JobIteration, job_iterations  # noqa: E402
from mn_harness.results.loaders import RunData, load_run  # noqa: E402
from mn_harness.results.schema import QueueRow  # noqa: E402

PALETTE = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
]

PLOT_FILES = {
    "throughput": "throughput.png",
    "iteration_times": "iteration_times.png",
    "iteration_cdf": "iteration_cdf.png",
    "queue": "queue.png",
}


def job_colors(jobs: Sequence[str]) -> dict[str, str]:
    """Stable job -> colour mapping: the i-th job gets the i-th tab10 colour (cycling)."""
    return {job: PALETTE[i % len(PALETTE)] for i, job in enumerate(jobs)}


def caption(run: RunData) -> str:
    """The line under every plot of a run: which scenario, congestion controls, data plane."""
    s = run.summary
    ccs = sorted(set(s.cc.values()))
    cc = ccs[0] if len(ccs) == 1 else ", ".join(f"{job}={c}" for job, c in s.cc.items())
    dataplane = s.dataplane or "?"
    label = s.label
    return (f"scenario: {s.experiment}" + (f" ({label})" if label else "") + f" · CC: {cc or '?'}"
            f" · data plane: {dataplane} · {run.results_dir.name}")


def _save(fig, path: Path, caption: str | None = None) -> Path:
    """PNG (for report.md) and PDF (for papers) of the figure, with its caption line."""
    if caption:
        fig.text(0.01, 0.005, caption, fontsize="small", ha="left", va="bottom", color="#333333")
        fig.tight_layout(rect=(0, 0.045, 1, 1))
    else:
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    fig.savefig(path.with_suffix(".pdf"))
    plt.close(fig)
    return path


def in_window(ts: Sequence[float], ys: Sequence[float], window: tuple[float, float] | None
              ) -> tuple[list[float], list[float]]:
    """The (t, y) points with window[0] <= t < window[1] (all without a window)."""
    if window is None:
        return list(ts), list(ys)
    lo, hi = window
    kept = [(t, y) for t, y in zip(ts, ys, strict=True) if lo <= t < hi]
    return [t for t, _ in kept], [y for _, y in kept]


def rate_unit(max_bps: float) -> tuple[str, float]:
    """("Gbit/s", 1e9) for fast links, ("Mbit/s", 1e6) below 1 Gbit/s (emulated links)."""
    return ("Gbit/s", 1e9) if max_bps >= 1e9 else ("Mbit/s", 1e6)


def throughput_series(
    run: RunData, link: str | None = None
) -> dict[str, tuple[list[float], list[float]]]:
    """Per job: bin start times (s) and rate (bit/s) summed over the ranks whose sockets cross
    `link` (all ranks when the summary does not say); empty bins filled 0."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    ranks = run.summary.ranks_on(link) if link else None
    for job, bins in job_throughput(run.throughput, ranks).items():
        if not bins:
            continue
        width = bins[0][1]
        by_idx = {bin_index(t, width): n for t, _, n in bins}
        lo, hi = min(by_idx), max(by_idx)
        ts = [k * width for k in range(lo, hi + 1)]
        rates = [by_idx.get(k, 0) * 8 / width for k in range(lo, hi + 1)]
        out[job] = (ts, rates)
    return out


def bottleneck_bps(run: RunData, link: str | None = None) -> float | None:
    if link and link in run.summary.link_bps:
        return run.summary.link_bps[link]
    values = [j.bottleneck_bps for j in run.summary.jobs.values() if j.bottleneck_bps]
    return min(values) if values else None


def draw_throughput(
    ax: Axes,
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    colors: Mapping[str, str],
    capacity_bps: float | None = None,
) -> None:
    """Per-job rate over time on one axes, with the bottleneck capacity as a dashed line."""
    peak = max([max(r, default=0.0) for _, r in series.values()] + [capacity_bps or 0.0])
    unit, scale = rate_unit(peak)
    for job, (ts, rates) in series.items():
        ys = [r / scale for r in rates]
        ax.step(ts, ys, where="post", color=colors.get(job), label=job, linewidth=0.9)
        ax.fill_between(ts, ys, step="post", color=colors.get(job), alpha=0.25)
    if capacity_bps:
        ax.axhline(capacity_bps / scale, color="black", linestyle="--", linewidth=0.8, label="bottleneck")
    ax.set_ylabel(f"throughput ({unit})")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)


def draw_phases(
    ax: Axes,
    iters: Mapping[str, Sequence[JobIteration]],
    order: Sequence[str],
    colors: Mapping[str, str],
) -> None:
    """One row per job, a bar for each communication interval (partial iterations hatched)."""
    for row, job in enumerate(order):
        its = iters.get(job, ())
        full = [(i.t_comm_start, i.comm_time) for i in its if i.complete]
        part = [(i.t_comm_start, i.comm_time) for i in its if not i.complete]
        ax.broken_barh(full, (row - 0.4, 0.8), facecolors=colors.get(job))
        if part:
            ax.broken_barh(part, (row - 0.4, 0.8), facecolors="none", edgecolors=colors.get(job), hatch="//")
    ax.set_yticks(range(len(order)), list(order))
    ax.set_ylim(-0.6, len(order) - 0.4)
    ax.set_xlabel("time since experiment start (s)")
    ax.grid(axis="x", alpha=0.3)


def plot_throughput(run: RunData, path: Path, colors: Mapping[str, str],
                    window: tuple[float, float] | None = None) -> Path | None:
    """Throughput timeline and phases; `window` (start, end) in seconds since the experiment
    start zooms into part of the run."""
    order = run.job_order()
    link = run.summary.busiest_link() if run.summary.link_ranks else None
    series = {job: in_window(ts, rates, window) for job, (ts, rates) in throughput_series(run, link).items()}
    series = {job: pts for job, pts in series.items() if pts[0]}
    iters = job_iterations(
        run.iterations,
        {j: len(i.hosts) for j, i in run.summary.jobs.items() if i.hosts},
    )
    if not series and not iters:
        return None
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(11, 5.5), gridspec_kw={"height_ratios": [3, 1]})
    if series:
        draw_throughput(top, {j: series[j] for j in order if j in series}, colors, bottleneck_bps(run, link))
        top.legend(loc="upper right", fontsize="small")
    else:
        top.text(0.5, 0.5, "no throughput.csv rows", ha="center", transform=top.transAxes)
    where = f"on link {link}" if link else "(sum over ranks' sockets)"
    top.set_title(f"{run.summary.experiment}: per-job throughput {where}")
    draw_phases(bottom, iters, order, colors)
    bottom.set_title("communication phases", fontsize="small")
    if window is not None:
        bottom.set_xlim(*window)
    return _save(fig, path, caption(run))


def plot_iteration_times(run: RunData, metrics: RunMetrics, path: Path, colors: Mapping[str, str]) -> Path | None:
    fig, ax = plt.subplots(figsize=(9, 4))
    drawn = False
    for job, jm in metrics.jobs.items():
        pts = [(p["iteration"], p["iter_time"] * 1e3) for p in jm.per_iteration]
        if not pts:
            continue
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker="o",
            markersize=3,
            color=colors.get(job),
            label=job,
        )
        if jm.baseline_iter_s:
            ax.axhline(
                jm.baseline_iter_s * 1e3,
                color=colors.get(job),
                linestyle=":",
                linewidth=1,
                label=f"{job} {jm.baseline}",
            )
        drawn = True
    return _per_job_plot(fig, ax, drawn, run, path, "iteration", "iteration time (ms)", "iteration time per iteration")


def plot_iteration_cdf(run: RunData, metrics: RunMetrics, path: Path, colors: Mapping[str, str]) -> Path | None:
    fig, ax = plt.subplots(figsize=(7, 4))
    drawn = False
    for job, jm in metrics.jobs.items():
        xs = sorted(p["iter_time"] * 1e3 for p in jm.per_iteration)
        if not xs:
            continue
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(xs, ys, where="post", color=colors.get(job), label=job)
        drawn = True
    ax.set_ylim(0, 1.02)
    return _per_job_plot(fig, ax, drawn, run, path, "iteration time (ms)", "fraction of iterations ≤ x",
                         "CDF of iteration times")


def _per_job_plot(fig, ax, drawn: bool, run: RunData, path: Path, xlabel: str, ylabel: str,
                  title: str) -> Path | None:
    """A run's plot of one line per job finished and saved; None (and no file) when no job had
    anything to draw."""
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{run.summary.experiment}: {title}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _save(fig, path, caption(run))


def plot_queue(rows: Sequence[QueueRow], path: Path, title: str = "", caption: str | None = None) -> Path | None:
    """Queue depth (packets) over time, one line per switch:port."""
    if not rows:
        return None
    by_port: dict[str, list[QueueRow]] = {}
    for r in rows:
        by_port.setdefault(f"{r.switch}:{r.port}", []).append(r)
    fig, ax = plt.subplots(figsize=(11, 3.5))
    for name, pts in by_port.items():
        pts.sort(key=lambda r: r.t)
        ax.plot([r.t for r in pts], [r.depth for r in pts], linewidth=0.8, label=name)
    ax.set_xlabel("time since experiment start (s)")
    ax.set_ylabel("queue depth (packets)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{title}: egress queue depth" if title else "egress queue depth")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _save(fig, path, caption)


def write_plots(run: RunData, metrics: RunMetrics, out_dir: Path,
                window: tuple[float, float] | None = None) -> dict[str, Path]:
    """Write every plot the data allows into out_dir (PNG, and PDF beside it); returns
    {plot name: PNG path}. `window` restricts the throughput timeline."""
    out_dir.mkdir(parents=True, exist_ok=True)
    colors = job_colors(run.job_order())
    made: dict[str, Path | None] = {
        "throughput": plot_throughput(run, out_dir / PLOT_FILES["throughput"], colors, window),
        "iteration_times": plot_iteration_times(run, metrics, out_dir / PLOT_FILES["iteration_times"], colors),
        "iteration_cdf": plot_iteration_cdf(run, metrics, out_dir / PLOT_FILES["iteration_cdf"], colors),
        "queue": plot_queue(run.queue or [], out_dir / PLOT_FILES["queue"], run.summary.experiment,
                            caption(run)),
    }
    return {name: p for name, p in made.items() if p is not None}


# --------------------------------------------------------------------------- comparisons


def plot_compare_metrics(rows: Sequence[CompareRow], path: Path) -> Path | None:
    """Bars with 95% CI error bars for the across-jobs metrics, one panel per metric."""
    wanted = [m for m in ALL_METRICS if any(r.scope == ALL_SCOPE and r.metric == m for r in rows)]
    if not wanted:
        return None
    labels = list(dict.fromkeys(r.label for r in rows))
    cmap = plt.get_cmap("viridis")
    colours = [cmap(i / max(1, len(labels) - 1) * 0.85) for i in range(len(labels))]
    fig, axes = plt.subplots(1, len(wanted), figsize=(3.2 * len(wanted), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], wanted, strict=True):
        cells = {r.label: r for r in rows if r.scope == ALL_SCOPE and r.metric == metric}
        scale = 1e3 if metric.endswith("_s") else (100.0 if metric in ("overlap_mean", "converged") else 1.0)
        if metric == "convergence_iteration":  # the median over all runs, never counted as never
            values = [cells[lab].median if lab in cells else None for lab in labels]
            lows = highs = [0.0] * len(labels)
        else:
            values = [cells[lab].mean if lab in cells else None for lab in labels]
            lows, highs = [], []
            for lab, v in zip(labels, values, strict=True):
                lo, hi = (cells[lab].ci95_low, cells[lab].ci95_high) if lab in cells else (None, None)
                lows.append(0.0 if v is None or lo is None else (v - lo) * scale)
                highs.append(0.0 if v is None or hi is None else (hi - v) * scale)
        ax.bar(range(len(labels)), [(v or 0.0) * scale for v in values], yerr=[lows, highs], capsize=4,
               color=colours)
        for x, (lab, v) in enumerate(zip(labels, values, strict=True)):
            if v is None:
                text = "never" if metric == "convergence_iteration" and lab in cells and cells[lab].of else "n/a"
                ax.annotate(text, (x, 0), ha="center", va="bottom", fontsize="small")
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize="small")
        ax.set_title(metric_title(metric), fontsize="small")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("mean ± 95% CI over repetitions (all jobs; convergence: median over runs)",
                 fontsize="medium")
    return _save(fig, path)


def plot_compare_throughput(refs: Sequence[RunRef], path: Path) -> Path | None:
    """One throughput timeline per label (its lowest repetition), stacked for side-by-side."""
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
    return _save(fig, path)

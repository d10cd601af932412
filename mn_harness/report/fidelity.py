"""report.md's Fidelity section: the run's verdict and what its monitors measured
(summary.json `fidelity`, mn_harness.fidelity)."""

from __future__ import annotations

from mn_harness.results.schema_fidelity import Fidelity

LINK_HEADERS = ("link", "judged", "within", "late", "early", "p99 excess (µs)", "rate")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def fidelity_lines(block: Fidelity | None, table) -> list[str]:
    """The section's lines; `table(headers, rows)` renders a table (report.markdown's)."""
    if block is None:
        return ["", "## Fidelity", "", "Not recorded (a run from before the checks)."]
    lines = ["", "## Fidelity", "", f"**{block.verdict}**" + (f": {block.reason}" if block.reason else "")]
    for v in block.violations[1:]:
        lines.append(f"- {v.text}")
    judged = {name: link for name, link in block.links.items() if link.gaps or link.intervals}
    if judged:
        rows = [[name, f"{link.gaps or link.intervals}{'' if link.gaps else ' intervals'}",
                 _pct(link.within_share), _pct(link.late_share), _pct(link.early_share),
                 "-" if link.p99_excess_us is None else f"{link.p99_excess_us:g}",
                 "-" if link.rate_ratio is None else f"{link.rate_ratio:.3f}"] for name, link in judged.items()]
        lines += ["", table(LINK_HEADERS, rows)]
    host, workers, t = block.host, block.workers, block.thresholds
    if host is not None:
        lines += ["", f"Host: every core saturated in {_pct(host.all_saturated_share)} of the intervals, "
                      f"steal {_pct(host.steal_mean)}, softirq {_pct(host.softirq_mean)}, run queue "
                      f"{host.run_queue_mean if host.run_queue_mean is not None else '-'} on average."]
    if workers is not None and workers.compute_phases:
        lines.append(f"Workers: compute phases overslept by {workers.compute_overshoot_p99_ms} ms at the p99 "
                     f"(max {workers.compute_overshoot_max_ms} ms).")
    if t:
        lines.append(f"Judged: a link needs ≥ {t.get('link_within', 0):.0%} of its backlogged gaps within "
                     f"±{t.get('link_tolerance', 0):.0%} of their serialisation time (links with fewer than "
                     f"{t.get('link_min_gaps')} gaps are shown, not judged); the link monitor: "
                     f"{block.link_monitor}. Thresholds: `run.fidelity`; what each invariant means: "
                     "docs/fidelity.md.")
    return lines

"""A run's fidelity verdict: every invariant measured against run.fidelity's thresholds
(mn_harness/config/fidelity.py), and the summary.json `fidelity` block that carries it.

`faithful`: every invariant that was checked held and the link invariant was checked;
`unfaithful`: at least one broke (each violation says which, where and by how much);
`unchecked`: the checks were off, or the link monitor could not run here and nothing else broke."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mn_harness.config.fidelity import FidelityThresholds
from mn_harness.fidelity.bmv2_rate import MIN_INTERVALS, PortRate
from mn_harness.fidelity.link import LinkGaps

FAITHFUL, UNFAITHFUL, UNCHECKED = "faithful", "unfaithful", "unchecked"


@dataclass(frozen=True)
class Violation:
    invariant: str  # link | host | workers
    where: str  # a directed link, a core, a job, "all cores"
    measured: float
    threshold: float
    text: str  # one line for a person

    def as_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "where": self.where, "measured": self.measured,
                "threshold": self.threshold, "text": self.text}


def link_entry(gaps: LinkGaps) -> dict[str, Any]:
    """summary.json fidelity.links[<link>]."""
    share = gaps.within_share
    excess = gaps.excess_quantile_ns(0.99)
    return {"dequeues": gaps.dequeues, "bytes": gaps.bytes_dequeued, "gaps": gaps.gaps,
            "within_share": None if share is None else round(share, 4),
            "late_share": round(gaps.late / gaps.gaps, 4) if gaps.gaps else None,
            "early_share": round(gaps.early / gaps.gaps, 4) if gaps.gaps else None,
            "p99_excess_us": None if excess is None else round(excess / 1000, 1),
            "rate_ratio": None if gaps.rate_ratio is None else round(gaps.rate_ratio, 4),
            # the gaps by the frames dequeued before each (16: 16 or more): [gaps, share within]
            "by_frames": {str(k): [n, round(w / n, 4)] for k, (n, w) in
                          enumerate(zip(gaps.size_gaps, gaps.size_within, strict=True)) if n}}


def link_violations(links: Mapping[str, LinkGaps], t: FidelityThresholds) -> list[Violation]:
    out = []
    for name, gaps in sorted(links.items()):
        share = gaps.within_share
        if gaps.gaps < t.link_min_gaps or share is None or share >= t.link_within:
            continue
        e = link_entry(gaps)
        out.append(Violation(
            "link", name, round(share, 4), t.link_within,
            f"link {name}: {share:.1%} of {gaps.gaps} backlogged gaps within ±{t.link_tolerance:.0%} of "
            f"the serialisation time (needs ≥ {t.link_within:.0%}; {e['late_share']:.1%} late, "
            f"{e['early_share']:.1%} early, p99 excess {e['p99_excess_us']:g} µs)"))
    return out


def port_rate_violations(ports: Mapping[str, PortRate], t: FidelityThresholds) -> list[Violation]:
    out = []
    for name, port in sorted(ports.items()):
        share = port.within_share(t.link_tolerance)
        if len(port.ratios) < MIN_INTERVALS or share is None or share >= t.link_within:
            continue
        ratio = port.entry(t.link_tolerance)["rate_ratio"]
        out.append(Violation(
            "link", name, round(share, 4), t.link_within,
            f"link {name} (BMv2): sent within ±{t.link_tolerance:.0%} of its rate in {share:.1%} of "
            f"{len(port.ratios)} backlogged intervals (needs ≥ {t.link_within:.0%}; {ratio:.2f} of the "
            "rate over them)"))
    return out


def host_violations(host: Mapping[str, Any], t: FidelityThresholds) -> list[Violation]:
    out = []
    saturated = host.get("all_saturated_share")
    if saturated is not None and saturated > t.host_saturated:
        out.append(Violation("host", "all cores", saturated, t.host_saturated,
                             f"host: every core saturated in {saturated:.1%} of the intervals "
                             f"(at most {t.host_saturated:.0%})"))
    steal = host.get("steal_mean")
    if steal is not None and steal > t.host_steal:
        out.append(Violation("host", "all cores", steal, t.host_steal,
                             f"host: the VM's host took {steal:.1%} of the cores' time (steal; at most "
                             f"{t.host_steal:.0%})"))
    return out


def worker_violations(workers: Mapping[str, Any], t: FidelityThresholds) -> list[Violation]:
    out = []
    limit_ms = t.compute_overshoot_s * 1000
    for job, stats in (workers.get("jobs") or {}).items():
        p99 = stats.get("compute_overshoot_p99_ms")
        if p99 is not None and p99 > limit_ms:
            out.append(Violation("workers", job, p99, limit_ms,
                                 f"workers of {job}: compute phases overslept by {p99:g} ms at the p99 "
                                 f"(at most {limit_ms:g} ms)"))
    return out


def fidelity_block(t: FidelityThresholds, links: Mapping[str, LinkGaps] | None, link_unavailable: str | None,
                   host: Mapping[str, Any] | None, workers: Mapping[str, Any] | None,
                   monitor_cpu_s: float | None = None,
                   switch_ports: Mapping[str, PortRate] | None = None,
                   monitor_kernel_s: float | None = None) -> dict[str, Any]:
    """summary.json `fidelity`. `links`: the kernel monitor's counts per shaped egress;
    `switch_ports`: BMv2 ports' rates while backlogged (bmv2_rate.py)."""
    if not t.enabled:
        return {"verdict": UNCHECKED, "reason": "run.fidelity is off", "violations": [],
                "thresholds": t.as_dict()}
    violations = [*link_violations(links or {}, t), *port_rate_violations(switch_ports or {}, t),
                  *host_violations(host or {}, t), *worker_violations(workers or {}, t)]
    if violations:
        verdict, reason = UNFAITHFUL, violations[0].text
    elif link_unavailable is not None or links is None:
        verdict, reason = UNCHECKED, f"link monitor unavailable: {link_unavailable or 'not run'}"
    else:
        verdict, reason = FAITHFUL, None
    return {"verdict": verdict, "reason": reason, "violations": [v.as_dict() for v in violations],
            "thresholds": t.as_dict(),
            "links": {**{name: link_entry(g) for name, g in sorted((links or {}).items())},
                      **{name: p.entry(t.link_tolerance) for name, p in sorted((switch_ports or {}).items())}},
            "link_monitor": "on" if link_unavailable is None and links is not None
            else f"unavailable: {link_unavailable or 'not run'}",
            "host": dict(host or {}), "workers": dict(workers or {}),
            "monitor_cpu_s": None if monitor_cpu_s is None else round(monitor_cpu_s, 4),
            "monitor_kernel_s": None if monitor_kernel_s is None else round(monitor_kernel_s, 4)}


def one_line(block: Mapping[str, Any]) -> str:
    """The verdict for the run's log and the progress line."""
    verdict = block.get("verdict", UNCHECKED)
    n = len(block.get("violations") or [])
    more = f" (+{n - 1} more)" if n > 1 else ""
    return f"fidelity: {verdict}" + (f": {block['reason']}{more}" if block.get("reason") else "")

"""A run's fidelity verdict: every invariant measured against run.fidelity's thresholds
(mn_harness/config/fidelity.py), as summary.json's typed `fidelity` block
(mn_harness/results/schema_fidelity.py).

`faithful`: every invariant that was checked held and the link invariant was checked;
`unfaithful`: at least one broke (each violation says which, where and by how much);
`unchecked`: the checks were off, or the link monitor could not run here and nothing else broke."""

from __future__ import annotations

import math
from collections.abc import Mapping

from mn_harness.config.fidelity import FidelityThresholds
from mn_harness.dataplane.port_rates import MIN_INTERVALS, PortRate
from mn_harness.fidelity.link import LinkGaps
from mn_harness.results.schema_fidelity import (
    FAITHFUL,
    UNCHECKED,
    UNFAITHFUL,
    Fidelity,
    FidelityHost,
    FidelityLink,
    FidelityViolation,
    FidelityWorkers,
)


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def link_record(gaps: LinkGaps) -> FidelityLink:
    """fidelity.links[<link>] of a shaped egress."""
    n = gaps.gaps
    excess = gaps.excess_quantile_ns(0.99)
    return FidelityLink(
        kind="qdisc", dequeues=gaps.dequeues, bytes=gaps.bytes_dequeued, gaps=n,
        within_share=_r(gaps.within_share), late_share=_r(gaps.late / n) if n else None,
        early_share=_r(gaps.early / n) if n else None,
        p99_excess_us=None if excess is None else round(excess / 1000, 1), rate_ratio=_r(gaps.rate_ratio),
        by_frames={str(k): [c, round(w / c, 4)] for k, (c, w) in
                   enumerate(zip(gaps.size_gaps, gaps.size_within, strict=True)) if c})


def port_record(port: PortRate, tolerance: float) -> FidelityLink:
    """fidelity.links[<link>] of a BMv2 port."""
    return FidelityLink(kind="bmv2 port", intervals=len(port.ratios), within_share=_r(port.within_share(tolerance)),
                        rate_ratio=_r(port.rate_ratio))


def link_violations(links: Mapping[str, LinkGaps], t: FidelityThresholds) -> list[FidelityViolation]:
    out = []
    for name, gaps in sorted(links.items()):
        share = gaps.within_share
        if gaps.gaps < t.link_min_gaps or share is None or share >= t.link_within:
            continue
        e = link_record(gaps)
        out.append(FidelityViolation(
            "link", name, round(share, 4), t.link_within,
            f"link {name}: {share:.1%} of {gaps.gaps} backlogged gaps within ±{t.link_tolerance:.0%} of "
            f"the serialisation time (needs ≥ {t.link_within:.0%}; {e.late_share:.1%} late, "
            f"{e.early_share:.1%} early, p99 excess {e.p99_excess_us:g} µs)"))
    return out


def port_rate_violations(ports: Mapping[str, PortRate], t: FidelityThresholds) -> list[FidelityViolation]:
    out = []
    for name, port in sorted(ports.items()):
        share = port.within_share(t.link_tolerance)
        if len(port.ratios) < MIN_INTERVALS or share is None or share >= t.link_within:
            continue
        out.append(FidelityViolation(
            "link", name, round(share, 4), t.link_within,
            f"link {name} (BMv2): sent within ±{t.link_tolerance:.0%} of its rate in {share:.1%} of "
            f"{len(port.ratios)} backlogged intervals (needs ≥ {t.link_within:.0%}; {port.rate_ratio:.2f} of "
            "the rate over them)"))
    return out


def host_violations(host: FidelityHost | None, t: FidelityThresholds) -> list[FidelityViolation]:
    out: list[FidelityViolation] = []
    if host is None:
        return out
    saturated = host.all_saturated_share
    if saturated is not None and saturated > t.host_saturated:
        out.append(FidelityViolation("host", "all cores", saturated, t.host_saturated,
                                     f"host: every core saturated in {saturated:.1%} of the intervals "
                                     f"(at most {t.host_saturated:.0%})"))
    steal = host.steal_mean
    if steal is not None and steal > t.host_steal:
        out.append(FidelityViolation("host", "all cores", steal, t.host_steal,
                                     f"host: the VM's host took {steal:.1%} of the cores' time (steal; at "
                                     f"most {t.host_steal:.0%})"))
    return out


def worker_violations(workers: FidelityWorkers | None, t: FidelityThresholds) -> list[FidelityViolation]:
    out: list[FidelityViolation] = []
    over_ms, lag_ms = t.compute_overshoot_s * 1000, t.send_lag_s * 1000
    for job, stats in (workers.jobs if workers is not None else {}).items():
        p99 = stats.compute_overshoot_p99_ms
        if p99 is not None and p99 > over_ms:
            out.append(FidelityViolation("workers", job, p99, over_ms,
                                         f"workers of {job}: compute phases overslept by {p99:g} ms at the p99 "
                                         f"(at most {over_ms:g} ms)"))
        lag = stats.send_lag_p99_ms
        if lag is not None and lag > lag_ms:
            out.append(FidelityViolation("workers", job, lag, lag_ms,
                                         f"workers of {job}: a send that could go waited {lag:g} ms to be written "
                                         f"(p99 over iterations of the longest wait; at most {lag_ms:g} ms)"))
    return out


def fidelity_block(t: FidelityThresholds, links: Mapping[str, LinkGaps] | None, link_unavailable: str | None,
                   host: FidelityHost | None, workers: FidelityWorkers | None,
                   monitor_cpu_s: float | None = None, switch_ports: Mapping[str, PortRate] | None = None,
                   monitor_kernel_s: float | None = None) -> Fidelity:
    """summary.json `fidelity`. `links`: the kernel monitor's counts per shaped egress (None: it
    did not run, `link_unavailable` says why); `switch_ports`: BMv2 ports' rates while backlogged."""
    if not t.enabled:
        return Fidelity(verdict=UNCHECKED, reason="run.fidelity is off", thresholds=t.as_dict())
    violations = [*link_violations(links or {}, t), *port_rate_violations(switch_ports or {}, t),
                  *host_violations(host, t), *worker_violations(workers, t)]
    monitored = link_unavailable is None and links is not None
    if violations:
        verdict, reason = UNFAITHFUL, violations[0].text
    elif not monitored:
        verdict, reason = UNCHECKED, f"link monitor unavailable: {link_unavailable or 'not run'}"
    else:
        verdict, reason = FAITHFUL, None
    records = {name: link_record(g) for name, g in sorted((links or {}).items())}
    records.update({name: port_record(p, t.link_tolerance) for name, p in sorted((switch_ports or {}).items())})
    return Fidelity(verdict=verdict, reason=reason, violations=violations, thresholds=t.as_dict(),
                    links=records, link_monitor="on" if monitored else f"unavailable: {link_unavailable or 'not run'}",
                    host=host, workers=workers, monitor_cpu_s=_r(monitor_cpu_s),
                    monitor_kernel_s=_r(monitor_kernel_s))


# The fastest shaped link the reference machine (the project's 2-core VM, kernel 6.18) kept
# faithful: runs whose links the machine ran at 100 Mbit/s were faithful and at 200 Mbit/s not
# (docs/fidelity.md#time-dilation). A faster machine keeps faster links; this one is the
# advice's yardstick, not a limit.
FAITHFUL_LINK_BPS = 100e6


def suggested_time_scale(time_scale: float, machine_bps: float) -> int:
    """The whole time scale that runs a link the machine now runs at `machine_bps` at
    FAITHFUL_LINK_BPS; twice the present one where the link is already that slow."""
    wanted = time_scale * machine_bps / FAITHFUL_LINK_BPS
    return math.ceil(wanted if wanted > time_scale else 2 * time_scale)


def time_scale_advice(block: Fidelity | None, time_scale: float, link_bps: Mapping[str, float]) -> str | None:
    """One line for a run whose shaped links lost time while the host kept up: the machine's
    timers (not its CPU) limit it, and running the experiment slower is what helps, by the time
    scale that brings the fastest such link (its machine rate in `link_bps`) to
    FAITHFUL_LINK_BPS. A busy host gets no advice here: its own violation says what to fix
    first."""
    if block is None or block.verdict != UNFAITHFUL:
        return None
    kinds = {v.invariant for v in block.violations}
    slow_links = [v.where or "?" for v in block.violations if v.invariant == "link"
                  and (block.links.get(v.where or "") or FidelityLink()).kind == "qdisc"]
    if not slow_links or "host" in kinds:
        return None
    fastest = max((link_bps.get(name, 0.0) for name in slow_links), default=0.0)
    scale = f"e.g. {suggested_time_scale(time_scale, fastest)}" if fastest > 0 else "e.g. 5"
    return (f"fidelity: {', '.join(slow_links[:3])}{' ...' if len(slow_links) > 3 else ''} kept worse time than "
            f"this machine's timers allow at these rates{f' (time scale {time_scale:g})' if time_scale != 1 else ''}: "
            f"run slower with run.emulation.time_scale, {scale} (docs/fidelity.md#time-dilation)")

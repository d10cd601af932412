"""summary.json `fidelity`: the records of the emulation's checks (mn_harness.fidelity), part of
summary.json's schema (results.schema.RunFacts.fidelity) and documented with it. Why each
invariant and threshold: docs/fidelity.md#does-the-run-check-itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mn_harness.results.records import entry

FAITHFUL, UNFAITHFUL, UNCHECKED = "faithful", "unfaithful", "unchecked"


@dataclass(frozen=True)
class FidelityViolation:
    """One invariant that broke."""

    invariant: str | None = entry("`link`, `host`, `workers` or (across servers) `clock`")
    where: str | None = entry("the directed link (`s1->s2`), `all cores`, the job, or the server")
    measured: float | None = entry("what was measured: a share (link, host) or milliseconds (workers)")
    threshold: float | None = entry("the `run.fidelity` threshold it broke")
    text: str | None = entry("the violation in one line")


@dataclass(frozen=True)
class FidelityLink:
    """One directed link's invariant: on a shaped egress (`qdisc`: the kernel program counts
    every dequeue of its HTB qdisc) or a BMv2 port (`bmv2 port`: its rate in telemetry intervals)."""

    kind: str | None = entry("`qdisc` or `bmv2 port`")
    dequeues: int | None = entry("qdisc: dequeues counted", optional=True)
    bytes: int | None = entry("qdisc: bytes dequeued (as HTB charges them: GSO segments with their headers)",
                              optional=True)
    gaps: int | None = entry("qdisc: gaps judged: after a dequeue of at least one full frame of the link "
                             "(1514 bytes at MTU 1500) that left packets queued behind it", optional=True)
    intervals: int | None = entry("bmv2 port: telemetry intervals judged: the queue backlogged (mean depth "
                                  ">= 2 packets)", optional=True)
    within_share: float | None = entry("share of the judged gaps (intervals) within `run.fidelity."
                                       "link_tolerance` of the serialisation time (configured rate)")
    late_share: float | None = entry("qdisc: share of gaps longer than that", optional=True)
    early_share: float | None = entry("qdisc: share of gaps shorter than that (a burst)", optional=True)
    p99_excess_us: float | None = entry("qdisc: 99th percentile of how far a gap exceeded its serialisation "
                                        "time (0 when not late), to 12.5%", optional=True)
    rate_ratio: float | None = entry("serialisation time over gap time while backlogged (bmv2: packets sent "
                                     "over packets due): the achieved share of the configured rate")
    by_frames: dict[str, list[float]] | None = entry(
        "qdisc: the gaps by the frames dequeued before each (`16`: 16 or more): [gaps, share within]",
        optional=True, keys="frames")


@dataclass(frozen=True)
class FidelityCore:
    busy_mean: float | None = entry("share of the core's time not idle (steal included)")
    softirq_mean: float | None = entry("share in softirq: packet processing (veth, HTB, TCP), timers")
    steal_mean: float | None = entry("share the VM's host took")
    saturated_share: float | None = entry("share of intervals the core was at least 95% busy")


@dataclass(frozen=True)
class FidelityHost:
    """The host invariant, from /proc/stat every 100 ms while the jobs ran."""

    intervals: int | None = entry("intervals read")
    cores: list[FidelityCore] = entry("per core, in order", factory=list)
    all_saturated_share: float | None = entry("share of intervals in which every core was at least 95% busy")
    steal_mean: float | None = entry("share of all cores' time the VM's host took")
    softirq_mean: float | None = entry("share of all cores' time in softirq")
    run_queue_mean: float | None = entry("mean runnable tasks (procs_running, the reader included)")
    run_queue_p99: float | None = entry("their 99th percentile")
    run_queue_over_cores_share: float | None = entry("share of reads with more runnable tasks than cores")


@dataclass(frozen=True)
class WorkerTiming:
    compute_phases: int | None = entry("compute phase rows (phases.csv), warm-up included")
    compute_overshoot_mean_ms: float | None = entry("mean of how much longer a compute phase slept than asked")
    compute_overshoot_p99_ms: float | None = entry("its 99th percentile")
    compute_overshoot_max_ms: float | None = entry("its maximum")
    send_lag_mean_ms: float | None = entry("mean over iterations of the mean time a send waited to be written "
                                           "once it could be (iterations.csv send_lag_mean_s; null: not "
                                           "measured, torch workers)")
    send_lag_p99_ms: float | None = entry("99th percentile over iterations of the longest such wait")
    send_lag_max_ms: float | None = entry("the longest such wait")


@dataclass(frozen=True)
class FidelityWorkers(WorkerTiming):
    """The workers' invariant: an emulated GPU computes for exactly as long as asked, and a
    worker sends what it may send at once."""

    jobs: dict[str, WorkerTiming] = entry("per job", factory=dict, keys="job")


@dataclass(frozen=True)
class FidelityClock:
    """A server's clock against the head's over a run spread over servers (docs/cluster.md#clocks)."""

    offset_before_ms: float | None = entry("its offset (its clock minus the head's) before the jobs started, "
                                           "applied to its start time")
    error_before_ms: float | None = entry("that estimate's error bound (half the shortest probe round trip)")
    offset_after_ms: float | None = entry("its offset after the jobs ended")
    error_after_ms: float | None = entry("that estimate's error bound")
    drift_ppm: float | None = entry("how fast the offset moved (µs per s); its workers' times were corrected "
                                    "for it")
    error_ms: float | None = entry("the bound on its corrected times: the larger of the two bounds")
    limit_ms: float | None = entry("`run.fidelity.clock_error` of the shortest mean iteration: a larger "
                                   "`error_ms` breaks the clock invariant")


@dataclass(frozen=True)
class FidelityServer:
    """One server of a run spread over servers: its part of the checks."""

    link_monitor: str | None = entry("`on`, or `unavailable: <why>`, on that server")
    links: list[str] = entry("the directed links whose egress is there", factory=list)
    host: FidelityHost | None = entry("its host invariant")
    clock: FidelityClock | None = entry("its clock invariant")


@dataclass(frozen=True)
class Fidelity:
    """Whether the emulation kept Mininet-HiFi's invariants while the jobs ran."""

    verdict: str | None = entry("`faithful` (every invariant checked held, the link invariant among them), "
                                "`unfaithful` (one broke: `violations`) or `unchecked` (`run.fidelity: false`, "
                                "or the link monitor could not run and nothing else broke)")
    reason: str | None = entry("the first violation, or why unchecked; null when faithful")
    violations: list[FidelityViolation] = entry("every invariant that broke", factory=list)
    thresholds: dict[str, Any] = entry("`run.fidelity` as the run used it", factory=dict)
    links: dict[str, FidelityLink] = entry("per directed link", factory=dict, keys="link")
    link_monitor: str | None = entry("`on`, or `unavailable: <why>`")
    host: FidelityHost | None = entry("the host invariant")
    workers: FidelityWorkers | None = entry("the workers' invariant")
    monitor_cpu_s: float | None = entry("this harness's CPU seconds loading and reading the link monitor")
    monitor_kernel_s: float | None = entry("the kernel program's own seconds (only with "
                                           "`kernel.bpf_stats_enabled=1`; else null)")
    servers: dict[str, FidelityServer] | None = entry(
        "a run spread over servers (`servers:`): each server's checks, its clock among them; `host` is then "
        "the busiest server's", optional=True, keys="server")

    @property
    def faithful(self) -> bool:
        return self.verdict == FAITHFUL

    def line(self) -> str:
        """The verdict in one line (the run's log, report.md)."""
        n = len(self.violations)
        more = f" (+{n - 1} more)" if n > 1 else ""
        return f"fidelity: {self.verdict}" + (f": {self.reason}{more}" if self.reason else "")

"""The host invariant: the machine kept CPU to spare for everything it emulates.

In a real cluster every worker has its own cores and every switch its own ASIC; here they all
share a few cores, and a late softirq (the HTB timer, veth, TCP) is a late packet. Measured from
the reads of mn_harness.fidelity.cpu_load's sampler (every 100 ms while the jobs run): per core, the share
of time busy, in softirq and taken by the VM's host (steal), and how often it was saturated;
the run queue (procs_running, which counts the reader itself); and the share of intervals in
which every core was saturated, the one a waiting task could not escape."""

from __future__ import annotations

from collections.abc import Sequence

from mn_harness.fidelity.cpu_load import SATURATED, StatSample
from mn_harness.results.schema_fidelity import FidelityCore, FidelityHost
from mn_harness.results.stats import percentile


def host_summary(samples: Sequence[tuple[float, StatSample]]) -> FidelityHost:
    """summary.json fidelity.host from the sampler's reads (time, sample)."""
    cores_n = len(samples[0][1].cores) if samples else 0
    per_core: list[dict[str, list[float]]] = [{"busy": [], "softirq": [], "steal": []} for _ in range(cores_n)]
    all_saturated = 0
    intervals = 0
    for (_, a), (_, b) in zip(samples, samples[1:], strict=False):
        if len(a.cores) != cores_n or len(b.cores) != cores_n:
            continue
        busy_cores = 0
        counted = False
        for i, (c0, c1) in enumerate(zip(a.cores, b.cores, strict=True)):
            total = c1.total - c0.total
            if total <= 0:
                continue
            counted = True
            busy = 1.0 - (c1.idle - c0.idle) / total
            per_core[i]["busy"].append(busy)
            per_core[i]["softirq"].append((c1.softirq - c0.softirq) / total)
            per_core[i]["steal"].append((c1.steal - c0.steal) / total)
            busy_cores += busy >= SATURATED
        if counted:
            intervals += 1
            all_saturated += busy_cores == cores_n
    running = [s.running for _, s in samples]
    cores = []
    for series in per_core:
        n = len(series["busy"])
        cores.append(FidelityCore(
            busy_mean=_mean(series["busy"]), softirq_mean=_mean(series["softirq"]),
            steal_mean=_mean(series["steal"]),
            saturated_share=round(sum(b >= SATURATED for b in series["busy"]) / n, 4) if n else None))
    return FidelityHost(
        intervals=intervals,
        cores=cores,
        all_saturated_share=round(all_saturated / intervals, 4) if intervals else None,
        steal_mean=_mean([s for c in per_core for s in c["steal"]]),
        softirq_mean=_mean([s for c in per_core for s in c["softirq"]]),
        run_queue_mean=_mean([float(r) for r in running]),
        run_queue_p99=round(percentile(sorted(running), 99), 2) if running else None,
        run_queue_over_cores_share=round(sum(r > cores_n for r in running) / len(running), 4)
        if running and cores_n else None,
    )


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None

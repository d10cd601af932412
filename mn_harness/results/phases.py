"""Per-phase rows (phases.csv) and their job-level statistics in summary.json.

A job's phase instance in iteration i is the union of its ranks' rows with the same phase
index and name (a DDP bucket is its own instance): [min t_start, max t_end]; its duration is
what the job waited for that phase. Statistics over complete iterations (every rank that takes
part in the phase reported it): mean and p50 duration; for collectives algbw = S / mean
duration and busbw = algbw * the nccl-tests factor (collectives.bandwidth), with S the
collective's size and n the ranks that took part (minus a parameter server's servers); for
compute phases the mean delay applied (jitter and stragglers). docs/results.md defines them
for users."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from mn_harness import collectives
from mn_harness.results.schema import PhaseRow, ThroughputRow
from mn_harness.results.stats import mean, percentile


def phase_stats(rows: Iterable[PhaseRow], job: str, servers: int = 0,
                complete: set[int] | None = None) -> list[dict[str, Any]]:
    """One entry per (phase, name) of `job`, in phase order. `complete`: the iterations to
    count (None: all with every participating rank)."""
    by_key: dict[tuple[int, str], dict[int, list[PhaseRow]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.job == job:
            by_key[(r.phase, r.name)][r.iteration].append(r)
    out = []
    for (phase, name), iters in sorted(by_key.items()):
        ranks = {r.rank for rs in iters.values() for r in rs}
        use = {i: rs for i, rs in iters.items() if len({r.rank for r in rs}) == len(ranks)
               and (complete is None or i in complete)}
        first = next(iter(iters.values()))[0]
        entry: dict[str, Any] = {"phase": phase, "name": name, "kind": first.kind,
                                 "collective": first.collective or None, "ranks": len(ranks),
                                 "iterations": len(use), "mean_s": None, "p50_s": None}
        durations = [max(r.t_end for r in rs) - min(r.t_start for r in rs) for rs in use.values()]
        if durations:
            entry.update(mean_s=mean(durations), p50_s=percentile(durations, 50))
        if first.kind == "compute":
            delays = [r.delay_s for rs in use.values() for r in rs if r.delay_s is not None]
            entry["mean_delay_s"] = mean(delays) if delays else None
        elif first.bytes and entry["mean_s"]:
            record = collectives.find(first.collective)  # None: a name this version does not know
            n = len(ranks) - (servers if record is not None and record.uses_servers else 0)
            entry["bytes"] = first.bytes
            entry["algbw_Bps"] = collectives.algbw(first.bytes, entry["mean_s"])
            if record is not None and record.has_busbw:
                entry["busbw_Bps"] = collectives.busbw(first.collective, first.bytes, max(n, 2), entry["mean_s"])
        out.append(entry)
    return out


def bytes_acked_per_rank(throughput: Iterable[ThroughputRow], job: str) -> dict[int, int]:
    """Total bytes the rank's sockets had acknowledged by the end (throughput.csv bins)."""
    total: dict[int, int] = defaultdict(int)
    for row in throughput:
        if row.job == job:
            total[row.rank] += row.bytes
    return dict(sorted(total.items()))

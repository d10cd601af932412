"""The kernel's own count of what TCP did in each emulated host over a run: segments sent,
retransmitted, retransmission timeouts, tail-loss probes, lost retransmissions ...

Why: a communication phase that waits for a retransmission timeout (Linux's minimum RTO is
200 ms, as long as a whole phase here) sets the p99 of a run, and whether a loss ends in fast
recovery or in a timeout depends on the traffic's shape, not only on how many packets the
queue dropped. The throughput bins can only guess a timeout from a gap; these counters are
the kernel's, per network namespace (/proc/net/snmp and /proc/net/netstat inside the host),
so a run records them for every host and for every job (a host runs one job's workers).
They count every TCP socket of the namespace, the job's control connections (gloo's
rendezvous store) included; those carry a few hundred bytes.

summary.json `tcp_counters`: {"hosts": {host: {counter: delta}}, "jobs": {job: {counter:
sum over its workers' hosts}}}, deltas from just before the workers start to just after they
end (COUNTERS below)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mn_harness.config import Experiment

# what a run keeps (name as `nstat` prints it: table prefix + field), and what it counts
COUNTERS: dict[str, str] = {
    "TcpOutSegs": "segments sent, retransmissions included",
    "TcpRetransSegs": "segments retransmitted",
    "TcpExtTCPFastRetrans": "retransmissions in fast recovery (SACK/RACK)",
    "TcpExtTCPSlowStartRetrans": "retransmissions in the slow start after a timeout",
    "TcpExtTCPTimeouts": "retransmission timeouts (RTO fired)",
    "TcpExtTCPLossProbes": "tail-loss probes sent (TLP)",
    "TcpExtTCPLossProbeRecovery": "losses a tail-loss probe recovered without a timeout",
    "TcpExtTCPLostRetransmit": "retransmissions found lost again (RACK)",
    "TcpExtTCPSackRecovery": "fast-recovery episodes",
    "TcpExtTCPDSACKRecv": "duplicate-SACKs received: retransmissions that were not needed",
    "TcpExtTCPSpuriousRTOs": "timeouts found spurious (F-RTO)",
    "TcpExtTCPOFODrop": "out-of-order segments dropped by a full receive buffer",
    "TcpExtTCPRcvQDrop": "segments dropped by a full receive queue",
    "TcpExtPruneCalled": "receive buffers pruned under memory pressure",
}
FILES = ("/proc/net/snmp", "/proc/net/netstat")


def parse(text: str) -> dict[str, int]:
    """Counters of /proc/net/snmp or /proc/net/netstat text: each table is a header line
    ("Tcp: RtoAlgorithm ...") followed by a value line with the same prefix."""
    out: dict[str, int] = {}
    lines = [line.split() for line in text.splitlines() if line.strip()]
    i = 0
    while i + 1 < len(lines):
        head, values = lines[i], lines[i + 1]
        if not head[0].endswith(":") or head[0] != values[0]:
            i += 1
            continue
        for name, value in zip(head[1:], values[1:], strict=False):
            try:
                out[head[0][:-1] + name] = int(value)
            except ValueError:
                pass
        i += 2
    return out


def delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """What the run added, for the kept counters (a counter the kernel lacks: left out)."""
    return {name: after[name] - before.get(name, 0) for name in COUNTERS if name in after}


def summary(experiment: Experiment, before: Mapping[str, Mapping[str, int]],
            after: Mapping[str, Mapping[str, int]]) -> dict:
    """summary.json's `tcp_counters` from two reads {host: counters}: per host, and per job
    summed over its workers' hosts (a host runs one job's workers at most: config rule)."""
    hosts = {h: delta(before[h], after[h]) for h in after if h in before}
    jobs = {job.name: {name: sum(hosts[h].get(name, 0) for h in job.workers if h in hosts)
                       for name in COUNTERS if any(name in hosts.get(h, {}) for h in job.workers)}
            for job in experiment.jobs}
    return {"hosts": hosts, "jobs": jobs}


def timeouts_per_iteration(counters: Mapping | None, iterations: Iterable[int | None]) -> float | None:
    """A run's retransmission timeouts (every job's hosts, the whole run, warm-up included) per
    job iteration, from summary.json's `tcp_counters` and its jobs' `iterations`; None for a run
    from before the counters, or one where a job's hosts could not be read."""
    jobs = (counters or {}).get("jobs")
    total = sum(n or 0 for n in iterations)
    if not jobs or any("TcpExtTCPTimeouts" not in c for c in jobs.values()) or not total:
        return None
    return sum(c["TcpExtTCPTimeouts"] for c in jobs.values()) / total

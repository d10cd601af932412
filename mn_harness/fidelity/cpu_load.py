"""How busy the machine's CPUs were while the jobs ran: summary.json `cpu_load`.

Why: every worker of every job shares this machine's few cores (2 on the project's VMs), while
in a real cluster each worker has its own. A run whose cores were saturated measured, in part,
how workers waited for a CPU: a slower iteration there is the machine's, not the network's, and
it can push jobs' phases apart or together by itself. The workers' own CPU time per iteration
is in iterations.csv (`cpu_s`); the kernel's packet processing (softirq: veth, HTB, TCP) is
charged to whichever process or core it lands on, so the whole machine is read too: /proc/stat
(every core's time, the same in every network namespace) every `interval_s`.

On a VM the host's hypervisor may run something else while this machine's cores want to run:
that time is /proc/stat's `steal`. It is lost to the workers and the emulated links alike (the
routers' HTB dequeues, the hosts' TCP), so a phase slows with nothing in its way; it is counted
in `busy` (not idle) and reported on its own, so a slow interval can be told apart: the jobs'
own load, or the host taking the CPU.

`cpu_load`: {"cores", "interval_s", "samples", "busy_mean" (share of all cores' time not idle),
"saturated_share" (share of intervals in which the cores were at least SATURATED busy),
"steal_mean" (share of all cores' time the hypervisor took)}; the timeline, one row per
interval with times since T0 like the other CSVs, is cpu.csv. Every read also keeps each
core's times and the run queue (procs_running), from which mn_harness.fidelity.host judges the
host invariant."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import NamedTuple

from mn_harness.results.schema import CPU_COLUMNS, CPU_CSV, write_csv

STAT = "/proc/stat"
SATURATED = 0.95  # an interval this busy left no core free for a worker that woke up
WARN_SHARE = 0.05  # the run says so in one line when at least this share of intervals was saturated
WARN_STEAL = 0.05  # ... or when the hypervisor took at least this share of the cores' time


class CpuTimes(NamedTuple):
    """Jiffies of all cores together since boot."""

    total: int
    idle: int  # idle + iowait: a core waiting for I/O could run a worker
    steal: int  # the hypervisor ran something else while a core wanted to run (0 off a VM)


class CoreTimes(NamedTuple):
    """Jiffies of one core since boot."""

    total: int
    idle: int
    steal: int
    softirq: int  # packet processing (veth, HTB, TCP) that ran as a softirq on this core


class StatSample(NamedTuple):
    all: CpuTimes
    cores: tuple[CoreTimes, ...]
    running: int  # procs_running: runnable tasks at the moment of the read (this reader included)


def _times(fields: list[str]) -> tuple[int, int, int, int]:
    """(total, idle, steal, softirq) of one cpu line: user nice system idle iowait irq softirq
    steal (guest and guest_nice, already inside user and nice, are not added twice)."""
    values = [int(v) for v in fields[1:]] + [0] * 8
    return sum(values[:8]), values[3] + values[4], values[7], values[6]


def read_stat(path: str = STAT) -> StatSample:
    """Every cpu line of /proc/stat and procs_running."""
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or lines[0].split()[:1] != ["cpu"]:
        raise ValueError(f"{path}: the first line is not the all-cores 'cpu' line")
    total, idle, steal, _ = _times(lines[0].split())
    cores, running = [], 0
    for line in lines[1:]:
        fields = line.split()
        if fields and fields[0].startswith("cpu"):
            cores.append(CoreTimes(*_times(fields)))
        elif fields[:1] == ["procs_running"]:
            running = int(fields[1])
    return StatSample(CpuTimes(total, idle, steal), tuple(cores), running)


def read_times(path: str = STAT) -> CpuTimes:
    """The all-cores line of /proc/stat."""
    return read_stat(path).all


class Interval(NamedTuple):
    t: float  # its end, monotonic like the reads
    length: float
    busy: float  # share of all cores' time not idle (steal included)
    steal: float  # share of all cores' time the hypervisor took


def busy_shares(times: list[tuple[float, CpuTimes]]) -> list[Interval]:
    """Each interval between consecutive reads (t, times) (an interval in which the counters did
    not move is left out)."""
    out = []
    for (s0, c0), (s1, c1) in zip(times, times[1:], strict=False):
        total = c1.total - c0.total
        if total > 0:
            out.append(Interval(s1, s1 - s0, 1.0 - (c1.idle - c0.idle) / total, (c1.steal - c0.steal) / total))
    return out


def summarise(intervals: list[Interval], interval_s: float, cores: int | None) -> dict:
    if not intervals:
        return {"cores": cores, "interval_s": interval_s, "samples": 0, "busy_mean": None,
                "saturated_share": None, "steal_mean": None}
    n = len(intervals)
    return {"cores": cores, "interval_s": interval_s, "samples": n,
            "busy_mean": round(sum(i.busy for i in intervals) / n, 4),
            "saturated_share": round(sum(i.busy >= SATURATED for i in intervals) / n, 4),
            "steal_mean": round(sum(i.steal for i in intervals) / n, 4)}


def warning(load: dict) -> str | None:
    """The run's one line when the machine was saturated, or its host took its CPU, often
    enough to matter."""
    lines = []
    share = load.get("saturated_share")
    if share is not None and share >= WARN_SHARE:
        lines.append(f"the machine's {load.get('cores')} cores were saturated in {share:.0%} of the "
                     f"jobs' {load['interval_s'] * 1000:.0f} ms intervals (busy {load['busy_mean']:.0%} on "
                     f"average): iteration times include waiting for a CPU, not only the network "
                     f"(docs/troubleshooting.md#the-cpus-were-saturated)")
    steal = load.get("steal_mean")
    if steal is not None and steal >= WARN_STEAL:
        lines.append(f"the VM's host took {steal:.0%} of its cores' time (steal) while the jobs ran: "
                     f"hosts and links ran slower by moments, with nothing in the network's way "
                     f"(docs/troubleshooting.md#the-vms-host-took-its-cpu)")
    return "cpu: " + "; ".join(lines) if lines else None


class CpuLoadSampler:
    """A daemon thread reading /proc/stat every `interval_s` from start() to stop()."""

    def __init__(self, interval_s: float = 0.1):
        self.interval_s = interval_s
        self._samples: list[tuple[float, StatSample]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-load", daemon=True)

    def _sample(self) -> None:
        self._samples.append((time.monotonic(), read_stat()))

    @property
    def samples(self) -> list[tuple[float, StatSample]]:
        """Every read so far (monotonic time, what it read)."""
        return list(self._samples)

    def start(self) -> CpuLoadSampler:
        self._sample()
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def stop(self, results_dir: Path | None = None, t0: float = 0.0) -> dict:
        """summary.json's `cpu_load`, and cpu.csv in `results_dir` (times since `t0`); once,
        after start()."""
        self._stop.set()
        self._thread.join()
        self._sample()
        intervals = busy_shares([(t, sample.all) for t, sample in self._samples])
        if results_dir is not None:
            write_csv(results_dir / CPU_CSV, CPU_COLUMNS,
                      ({"t": round(i.t - t0, 4), "interval_s": round(i.length, 4), "busy": round(i.busy, 4),
                        "steal": round(i.steal, 4)} for i in intervals))
        return summarise(intervals, self.interval_s, os.cpu_count())

"""How busy the machine's CPUs were while the jobs ran: summary.json `cpu_load`.

Why: every worker of every job shares this machine's few cores (2 on the project's VMs), while
in a real cluster each worker has its own. A run whose cores were saturated measured, in part,
how workers waited for a CPU: a slower iteration there is the machine's, not the network's, and
it can push jobs' phases apart or together by itself. The workers' own CPU time per iteration
is in iterations.csv (`cpu_s`); the kernel's packet processing (softirq: veth, HTB, TCP) is
charged to whichever process or core it lands on, so the whole machine is read too: /proc/stat
(every core's time, the same in every network namespace) every `interval_s`.

`cpu_load`: {"cores", "interval_s", "samples", "busy_mean" (share of all cores' time not idle),
"saturated_share" (share of intervals in which the cores were at least SATURATED busy)}; the
timeline, one row per interval with times since T0 like the other CSVs, is cpu.csv."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from mn_harness.results.schema import CPU_COLUMNS, CPU_CSV, write_csv

STAT = "/proc/stat"
SATURATED = 0.95  # an interval this busy left no core free for a worker that woke up
WARN_SHARE = 0.05  # the run says so in one line when at least this share of intervals was saturated


def read_times(path: str = STAT) -> tuple[int, int]:
    """(total, idle) jiffies of all cores together: the first line of /proc/stat, idle = idle +
    iowait (a core waiting for I/O could run a worker)."""
    with open(path) as f:
        fields = f.readline().split()
    if not fields or fields[0] != "cpu":
        raise ValueError(f"{path}: the first line is not the all-cores 'cpu' line")
    values = [int(v) for v in fields[1:]]
    return sum(values[:8]), values[3] + (values[4] if len(values) > 4 else 0)


def busy_shares(times: list[tuple[float, int, int]]) -> list[tuple[float, float, float]]:
    """(t, interval, busy share) of each interval between consecutive reads (t, total, idle)
    (an interval in which the counters did not move is left out)."""
    out = []
    for (s0, t0, i0), (s1, t1, i1) in zip(times, times[1:], strict=False):
        if t1 > t0:
            out.append((s1, s1 - s0, 1.0 - (i1 - i0) / (t1 - t0)))
    return out


def summarise(shares: list[float], interval_s: float, cores: int | None) -> dict:
    if not shares:
        return {"cores": cores, "interval_s": interval_s, "samples": 0, "busy_mean": None,
                "saturated_share": None}
    return {"cores": cores, "interval_s": interval_s, "samples": len(shares),
            "busy_mean": round(sum(shares) / len(shares), 4),
            "saturated_share": round(sum(s >= SATURATED for s in shares) / len(shares), 4)}


def warning(load: dict) -> str | None:
    """The run's one line when the machine was saturated often enough to matter."""
    share = load.get("saturated_share")
    if share is None or share < WARN_SHARE:
        return None
    return (f"cpu: the machine's {load.get('cores')} cores were saturated in {share:.0%} of the "
            f"jobs' {load['interval_s'] * 1000:.0f} ms intervals (busy {load['busy_mean']:.0%} on "
            f"average): iteration times include waiting for a CPU, not only the network "
            f"(docs/troubleshooting.md#the-cpus-were-saturated)")


class CpuLoadSampler:
    """A daemon thread reading /proc/stat every `interval_s` from start() to stop()."""

    def __init__(self, interval_s: float = 0.1):
        self.interval_s = interval_s
        self._times: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-load", daemon=True)

    def _sample(self) -> None:
        self._times.append((time.monotonic(), *read_times()))

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
        intervals = busy_shares(self._times)
        if results_dir is not None:
            write_csv(results_dir / CPU_CSV, CPU_COLUMNS,
                      ({"t": round(t - t0, 4), "interval_s": round(dt, 4), "busy": round(b, 4)}
                       for t, dt, b in intervals))
        return summarise([b for _, _, b in intervals], self.interval_s, os.cpu_count())

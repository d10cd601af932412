"""The worker's threads as the kernel sees them: OS names, so a CPU profile (bench/profile.py,
`perf`, `top -H`) tells a connection's sender from its receiver, the throughput sampler and the
communication stream (Python 3.11 leaves every thread with its process's name), and the main
thread's scheduling class (`run.emulation.worker_main_thread`).

Why a real-time main thread: a synthetic worker's main thread sleeps through each compute phase
and starts the next step when it wakes. With many jobs on few cores, a wake in the kernel's fair
class can wait milliseconds on a run queue behind other workers' threads, so a compute phase
lasts longer than the model says; in SCHED_FIFO it runs at once. The threads that move bytes
stay in the fair class: real-time senders would compete with the compute wakes at the same
priority and with the network's own softirq work. Standard library only."""

from __future__ import annotations

import os
import threading

SEND, RECV, BINS, STREAM = "mnh-send", "mnh-recv", "mnh-bins", "mnh-stream"
REALTIME_PRIORITY = 1  # the lowest SCHED_FIFO priority: above every fair thread, below the kernel's own


def name_thread(name: str) -> None:
    """Give the calling thread `name` (at most 15 bytes: the kernel's limit) and keep it in the
    fair class (a thread inherits its creator's class: one started by a real-time main thread
    leaves it here); a kernel without /proc/thread-self leaves it unnamed."""
    try:
        with open("/proc/thread-self/comm", "w") as f:
            f.write(name[:15])
    except OSError:
        pass
    stay_fair()


def enter_realtime() -> str | None:
    """Put the calling thread in SCHED_FIFO at REALTIME_PRIORITY; the reason if the kernel
    refused (no CAP_SYS_NICE, an RLIMIT_RTPRIO of 0, a cgroup without real-time time)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def stay_fair() -> None:
    """Return the calling thread to SCHED_OTHER if it inherited a real-time class."""
    try:
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except OSError:
        pass


def realtime_refused() -> str | None:
    """Would the kernel refuse this process a real-time thread? Tried on a thread that ends at
    once, so the caller's own threads keep their class; the reason, or None."""
    outcome: list[str | None] = []
    probe = threading.Thread(target=lambda: outcome.append(enter_realtime()), name="mnh-rt-probe")
    probe.start()
    probe.join()
    return outcome[0] if outcome else "the probe thread failed"

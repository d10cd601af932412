"""The worker's threads as the kernel sees them: OS names, so a CPU profile (bench/profile.py,
`perf`, `top -H`) tells a connection's sender from its receiver, the throughput sampler and the
communication stream (Python 3.11 leaves every thread with its process's name), and the class
the main thread wakes from a compute phase in (`run.emulation.worker_main_thread`).

Why the real-time class: a worker's main thread sleeps through each compute phase and starts
the next step when it wakes. With many jobs on few cores, a wake in the kernel's fair class can
wait milliseconds on a run queue behind other workers' threads, so a compute phase lasts longer
than the model says; in SCHED_FIFO it runs at once. A synthetic worker's main thread only
sleeps, waits and posts work, so it stays real-time for the whole run (its wake when a
collective ends is on time too); a torch or in-network aggregation worker's runs the collective
itself, so it is real-time only while it sleeps (ComputeSleep). The threads that move bytes stay
in the fair class: real-time senders would compete with the compute wakes at the same priority
and with the network's own softirq work. Standard library only."""

from __future__ import annotations

import os
import sys
import threading
import time

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


class ComputeSleep:
    """How a torch or in-network aggregation worker sleeps through a compute phase: with
    `realtime`, in SCHED_FIFO, back in the fair class once awake, because its main thread then
    runs the collective itself (gloo reduces the tensors on the CPU, inc sends every chunk) and
    at real-time priority that work would starve the network's. A refusal is said once, on
    stderr (harness.log), and the worker sleeps fair from then on."""

    def __init__(self, realtime: bool, who: str):
        self.realtime = realtime
        self.who = who

    def __call__(self, seconds: float) -> None:
        if not self.realtime:
            time.sleep(seconds)
            return
        refused = enter_realtime()
        time.sleep(seconds)
        if refused is None:
            stay_fair()
            return
        self.realtime = False
        print(f"worker: {self.who}: compute phases wake in the fair class (SCHED_FIFO refused: {refused})",
              file=sys.stderr, flush=True)

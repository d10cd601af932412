"""OS names for the worker's threads, so a CPU profile (bench/profile.py, `perf`, `top -H`) tells
a connection's sender from its receiver, the throughput sampler and the communication stream:
Python 3.11 leaves every thread with its process's name. Standard library only."""

from __future__ import annotations

SEND, RECV, BINS, STREAM = "mnh-send", "mnh-recv", "mnh-bins", "mnh-stream"


def name_thread(name: str) -> None:
    """Give the calling thread `name` (at most 15 bytes: the kernel's limit); a kernel without
    /proc/thread-self leaves it unnamed."""
    try:
        with open("/proc/thread-self/comm", "w") as f:
            f.write(name[:15])
    except OSError:
        pass

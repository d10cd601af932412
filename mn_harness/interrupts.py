"""SIGTERM and SIGHUP turned into KeyboardInterrupt, so every `finally` and exit callback tears
down as on Ctrl-C.

Its own module because signal handling is the process's, not one network's: handlers may only
be set from the main thread, they stay installed across bring-up, the run and teardown of a
session (mn_harness/session.py enters terminate_as_interrupt() first, so it is left last), and a
caller running sessions from another thread keeps its own handling."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Interrupted(KeyboardInterrupt):
    """SIGTERM/SIGHUP are turned into this so `finally` blocks tear down as on Ctrl-C."""


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Only the main thread may set signal handlers; a caller running experiments from another
    thread keeps its own signal handling."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Interrupted(f"signal {signum}")

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)

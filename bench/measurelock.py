"""The shared machine's measurement lock, taken per run by the benches that sweep (so others'
measurements never overlap ours, and theirs get a turn between our runs).

    with measurement_lock("/tmp/mn-harness-measure.lock", gap_s=3):
        run_experiment(...)

A bench that takes it per run must not itself be wrapped in `flock` on the same file (flock
locks per open file: the inner request would wait for the outer one forever)."""

from __future__ import annotations

import contextlib
import fcntl
import time

DEFAULT_LOCK = "/tmp/mn-harness-measure.lock"


@contextlib.contextmanager
def measurement_lock(path: str | None, gap_s: float = 3.0):
    """flock(path) around the block; after releasing, wait `gap_s` so that a waiting colleague
    gets it before we ask again. `path` None or '': no lock."""
    if not path:
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
    time.sleep(gap_s)

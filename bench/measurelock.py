"""The shared machine's measurement lock, taken by the benches that sweep, so others'
measurements never overlap ours: held for chunks of runs of at most `chunk_s` (the machine's
rule: at most ~30 minutes at a time), then released for `gap_s` so that a waiting colleague
gets it.

    lock = ChunkedLock("/tmp/mn-harness-measure.lock", chunk_s=20 * 60)
    with lock.run():           # takes the lock if not held; after the run, releases it when
        run_experiment(...)    # the chunk is over
    lock.release()

A bench that takes it itself must not be wrapped in `flock` on the same file (flock locks per
open file: the inner request would wait for the outer one forever)."""

from __future__ import annotations

import contextlib
import fcntl
import time
from typing import IO

DEFAULT_LOCK = "/tmp/mn-harness-measure.lock"


class ChunkedLock:
    def __init__(self, path: str | None, chunk_s: float = 20 * 60, gap_s: float = 5.0):
        self.path, self.chunk_s, self.gap_s = path, chunk_s, gap_s
        self._fh: IO[str] | None = None
        self._since = 0.0

    @contextlib.contextmanager
    def run(self):
        """Around one run: hold the lock during it; give it up after it if the chunk is over."""
        if self.path and self._fh is None:
            self._fh = open(self.path, "a")  # noqa: SIM115 - held across runs, closed in release()
            fcntl.flock(self._fh, fcntl.LOCK_EX)
            self._since = time.monotonic()
        try:
            yield
        finally:
            if self._fh is not None and time.monotonic() - self._since > self.chunk_s:
                self.release()
                time.sleep(self.gap_s)

    @property
    def held(self) -> bool:
        return self._fh is not None

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None

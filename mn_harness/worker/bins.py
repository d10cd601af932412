"""Throughput bins from a byte counter sampled once per bin, in a thread of the worker.

Bins are aligned to the experiment's common start time t0 (bin k covers t0 + k*bin_s ..
t0 + (k+1)*bin_s), so every worker's bins line up. One read per bin, no per-packet work: the
counter is a getsockopt or one sock_diag dump, cheap next to a 10 ms bin."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class BinSampler(threading.Thread):
    """Samples `read()` (a monotonically growing byte count) every bin; take() hands over the
    bins collected since the last call."""

    def __init__(self, read: Callable[[], int], t0: float, bin_s: float):
        super().__init__(daemon=True)
        self.read, self.t0, self.bin_s = read, t0, bin_s
        self.bins: list[tuple[float, int]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            last = self.read()
        except OSError:
            return
        k = max(0, int((time.monotonic() - self.t0) / self.bin_s))
        while not self.stop.is_set():
            k += 1
            delay = self.t0 + k * self.bin_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                now = self.read()
            except OSError:
                return
            if now != last:
                with self.lock:
                    self.bins.append((round((k - 1) * self.bin_s, 6), now - last))
            last = now

    def take(self) -> list[tuple[float, int]]:
        with self.lock:
            bins, self.bins = self.bins, []
        return bins

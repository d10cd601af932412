"""Throughput bins: from a sender's tcp_info sampled once per bin, in a thread of the worker
(BinSampler), or from bytes counted as they are sent (SendBins).

The one sampler of the TCP workers: the synthetic worker reads bytes acked on its own sockets
(getsockopt TCP_INFO, worker/main.py), the torch worker on gloo's (sock_diag lookups,
worker/torch_worker.py). Bins are aligned to the experiment's common start time t0 (bin k
covers t0 + k*bin_s .. t0 + (k+1)*bin_s), so every worker's bins line up. One read per bin, no
per-packet work: the counter is a getsockopt or one sock_diag lookup, cheap next to a 10 ms bin.
A sampled bin is (t, bytes, cwnd, srtt_us, busy_us, rwnd_limited_us, sndbuf_limited_us): the
bytes acknowledged and the chrono times during the bin, the window and RTT at its end
(tcpinfo.SenderState says why). throughput_line() is the one writer of the rows of
<job>-r<rank>.throughput.jsonl (read by mn_harness/results/collect.py). The in-network
aggregation worker (worker/inc.py) sends every UDP packet itself and counts its bytes as it
goes (SendBins, bins of (t, bytes)): no counter to sample."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

from mn_harness.worker.spec import WorkerSpec
from mn_harness.worker.tcpinfo import SenderState
from mn_harness.worker.threads import BINS, name_thread

Bin = tuple  # (t, bytes) or (t, bytes, cwnd, srtt_us, busy_us, rwnd_limited_us, sndbuf_limited_us)


def throughput_line(spec: WorkerSpec, iteration: int, bins: list[Bin]) -> str:
    """One JSON line of throughput.jsonl: the bins (start t since t0, bytes) taken after
    `iteration` (iteration == spec.iterations for the bins left at the end)."""
    return json.dumps({"job": spec.job, "rank": spec.rank, "iteration": iteration,
                       "bin_s": spec.bin_s, "bins": bins}) + "\n"


def bin_start(k: int, bin_s: float) -> float:
    """Start of bin k in seconds since t0, as written to throughput.jsonl."""
    return round(k * bin_s, 6)


class SendBins:
    """Bytes sent per bin (time since t0), counted by the sender as it sends."""

    def __init__(self, t0: float, bin_s: float):
        self.t0, self.bin_s = t0, bin_s
        self.bins: dict[int, int] = {}

    def add(self, now: float, nbytes: int) -> None:
        k = int((now - self.t0) / self.bin_s)
        self.bins[k] = self.bins.get(k, 0) + nbytes

    def take(self) -> list[tuple[float, int]]:
        out = [(bin_start(k, self.bin_s), v) for k, v in sorted(self.bins.items())]
        self.bins = {}
        return out


class BinSampler(threading.Thread):
    """Samples `read()` (the sender's state, its counters monotonically growing) every bin;
    take() hands over the bins collected since the last call. A read that raises OSError (a
    socket gone) ends the sampling; the bins collected so far stay."""

    def __init__(self, read: Callable[[], SenderState], t0: float, bin_s: float):
        super().__init__(daemon=True)
        self.read, self.t0, self.bin_s = read, t0, bin_s
        self.bins: list[Bin] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.last: SenderState | None = None  # the state at the last sample; None before the first
        self.k = 0  # the bin closed by the next sample is k - 1

    def run(self) -> None:
        try:
            self.last = self.read()  # the baseline first: bytes acked from here on are binned
        except OSError:
            return
        name_thread(BINS)
        self.k = max(0, int((time.monotonic() - self.t0) / self.bin_s))
        while not self.stop.is_set():
            self.k += 1
            delay = self.t0 + self.k * self.bin_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                self._close_bin()
            except OSError:
                return

    def _close_bin(self) -> None:
        """Bin k - 1 gets what the counter grew by since the last sample (empty bins are left out)."""
        now, last = self.read(), self.last
        if last is not None and now.bytes_acked != last.bytes_acked:
            with self.lock:
                self.bins.append((bin_start(self.k - 1, self.bin_s), now.bytes_acked - last.bytes_acked,
                                  now.cwnd, now.srtt_us, now.busy_us - last.busy_us,
                                  now.rwnd_limited_us - last.rwnd_limited_us,
                                  now.sndbuf_limited_us - last.sndbuf_limited_us))
        self.last = now

    def flush(self) -> None:
        """After stop and join: one more sample into the bin after the last one closed, so every
        byte the counter reached by now (e.g. acknowledged while the connections finished) is in
        the timeline. Nothing when the thread never read the counter."""
        if self.last is None:
            return
        self.k += 1
        self._close_bin()

    def take(self) -> list[Bin]:
        with self.lock:
            bins, self.bins = self.bins, []
        return bins

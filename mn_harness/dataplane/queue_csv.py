"""queue.csv for both data planes: one sampling thread that writes the rows and the summary.

A data plane hands over a `sample` function returning one `QueueSample` per sampled egress port
for the interval since its previous call (BMv2: P4Runtime counters; Linux: the egress program's
counters). The collector calls it once as a baseline, then `sample_hz` times a second on a fixed
schedule (it never bursts to catch up after falling behind), writes the rows (columns:
mn_harness/results/schema.py), flushes every FLUSH_EVERY_S so an interrupted run keeps them,
and accumulates summary.json's `queue`, `ecn_marks` and `telemetry` (mn_harness/results/queue.py).
An exception from `sample` (a switch that died) ends sampling, not the run; it is reported in
`telemetry.error`."""

from __future__ import annotations

import csv
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mn_harness.results.queue import QueueSummary
from mn_harness.results.schema import queue_columns

SAMPLE_HZ_ENV = "MN_HARNESS_QUEUE_SAMPLE_HZ"
DEFAULT_SAMPLE_HZ = 100.0
FLUSH_EVERY_S = 0.2


def sample_hz_from_env(*names: str) -> float:
    """The first of the environment variables `names` (then MN_HARNESS_QUEUE_SAMPLE_HZ) that is
    set, else DEFAULT_SAMPLE_HZ."""
    for name in (*names, SAMPLE_HZ_ENV):
        if value := os.environ.get(name):
            return float(value)
    return DEFAULT_SAMPLE_HZ


@dataclass(frozen=True)
class QueueSample:
    """One egress port over one sampling interval; depths in packets."""

    switch: str
    port: int | str
    link: str
    depth: float                 # mean depth the interval's packets joined (0 when none came)
    depth_max: float
    packets: int
    marks: int
    drops: int | None            # None: the data plane cannot see drops
    job_bytes: dict[str, int] = field(default_factory=dict)
    job_marks: dict[str, int] = field(default_factory=dict)


class QueueCollector(threading.Thread):
    def __init__(self, path: Path, job_names: Sequence[str], sample: Callable[[], list[QueueSample]],
                 t0: float, sample_hz: float, name: str = "queue-telemetry"):
        super().__init__(name=name, daemon=True)
        self.path = Path(path)
        self.job_names = list(job_names)
        self.sample = sample
        self.t0 = t0
        self.period = 1.0 / sample_hz
        self._halt = threading.Event()
        self.acc = QueueSummary(self.job_names)
        self.error: str | None = None
        self.busy_s = 0.0  # time spent sampling and writing (its cost, for the benchmark)

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=10)

    def summary(self) -> dict:
        out = self.acc.result()
        out["telemetry"]["busy_s"] = round(self.busy_s, 3)
        if self.error:
            out["telemetry"]["error"] = self.error
        return out

    def run(self) -> None:
        try:
            fh = open(self.path, "w", newline="")
        except OSError as exc:
            self.error = f"cannot write {self.path}: {exc.strerror}"
            return
        with fh:
            writer = csv.writer(fh)
            writer.writerow(queue_columns(self.job_names))
            try:
                self.sample()  # baseline
            except Exception as exc:  # noqa: BLE001 - telemetry never ends the run
                self.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                return
            last_flush = time.monotonic()
            next_t = time.monotonic() + self.period
            while not self._halt.is_set():
                delay = next_t - time.monotonic()
                if delay > 0 and self._halt.wait(delay):
                    break
                next_t += self.period
                if next_t < time.monotonic():  # fell behind: do not burst to catch up
                    next_t = time.monotonic() + self.period
                started = time.monotonic()
                t = started - self.t0
                try:
                    samples = self.sample()
                except Exception as exc:  # noqa: BLE001 - a dying switch ends sampling, not the run
                    self.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    break
                self.acc.add_tick(t)
                for s in samples:
                    self.acc.add_row(s.switch, s.port, s.link, s.depth, s.depth_max, s.packets,
                                     s.marks, s.job_marks, s.drops)
                    writer.writerow([f"{t:.4f}", s.switch, s.port, s.link, f"{s.depth:.2f}",
                                     f"{s.depth_max:g}", s.packets, s.marks,
                                     "" if s.drops is None else s.drops,
                                     *[s.job_bytes.get(j, 0) for j in self.job_names]])
                if time.monotonic() - last_flush >= FLUSH_EVERY_S:
                    fh.flush()
                    last_flush = time.monotonic()
                self.busy_s += time.monotonic() - started

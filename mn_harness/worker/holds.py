"""The harness's holds: delays of an iteration's start that keep a job on its CASSINI shift
(`run.shifts`, mn_harness/jobs/shifts.py).

After `GO <t0>` the harness may send a worker `DELAY <iteration> <seconds>` lines on stdin; every
rank of the job gets the same ones. The worker sleeps that long at the start of that iteration,
or, if the line came after the iteration began, of the first one after: inside the iteration, so
its time counts the hold (the iteration line's `hold_s`). A reader thread keeps them until then;
stdin's end (the harness stops the workers) ends it."""

from __future__ import annotations

import threading
from typing import IO


class Holds:
    def __init__(self, stream: IO[str]):
        self._stream = stream
        self._lock = threading.Lock()
        self._pending: dict[int, float] = {}
        self._thread = threading.Thread(target=self._read, name="holds", daemon=True)

    def start(self) -> Holds:
        self._thread.start()
        return self

    def add(self, line: str) -> None:
        """One line from the harness; anything but a well-formed DELAY is ignored."""
        parts = line.split()
        if len(parts) != 3 or parts[0] != "DELAY":
            return
        try:
            iteration, seconds = int(parts[1]), float(parts[2])
        except ValueError:
            return
        if seconds > 0:
            with self._lock:
                self._pending[iteration] = self._pending.get(iteration, 0.0) + seconds

    def take(self, iteration: int) -> float:
        """Seconds to hold at the start of `iteration`: every hold due by then, taken once."""
        with self._lock:
            due = [i for i in self._pending if i <= iteration]
            return sum(self._pending.pop(i) for i in due)

    def _read(self) -> None:
        for line in self._stream:
            self.add(line)

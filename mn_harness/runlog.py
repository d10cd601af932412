"""harness.log: everything a run printed, the workers' stderr and the switches' logs, in the
results folder, so a run that went wrong can be understood from its folder alone.

The run's messages go to the terminal as before and, each with the wall-clock time, into
harness.log. Messages from before the results folder exists (the data-plane choice) are kept and
written once it does. At the end of the run the workers' stderr files and the data plane's
switch logs are appended as sections, and so is the run's outcome."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

HARNESS_LOG = "harness.log"


class RunLog:
    def __init__(self, sink: Callable[[str], None] | None = print):
        self.sink = sink
        self.path: Path | None = None
        self._pending: list[str] = []
        self._file: IO[str] | None = None

    def __call__(self, message: object = "") -> None:
        text = str(message)
        if self.sink is not None:
            self.sink(text)
        self._write("".join(f"{time.strftime('%H:%M:%S')} {line}\n" for line in text.splitlines() or [""]))

    def _write(self, text: str) -> None:
        if self._file is None:
            self._pending.append(text)
            return
        self._file.write(text)
        self._file.flush()

    def attach(self, results_dir: Path) -> None:
        """Start writing results_dir/harness.log (with the messages logged so far)."""
        self.path = Path(results_dir) / HARNESS_LOG
        self._file = open(self.path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed in close()
        pending, self._pending = self._pending, []
        for text in pending:
            self._write(text)

    def section(self, title: str, text: str) -> None:
        """A block of text that was not printed (a worker's stderr, a switch log)."""
        body = text if text.endswith("\n") else text + "\n"
        if not text:
            body = "(empty)\n"
        self._write(f"\n===== {title} =====\n{body}")

    def append_file(self, title: str, path: Path, max_bytes: int = 1 << 20) -> None:
        """A file's text as a section (its last max_bytes: a chatty switch log stays bounded)."""
        try:
            data = path.read_bytes()
        except OSError:
            return
        cut = len(data) > max_bytes
        text = data[-max_bytes:].decode(errors="replace")
        self.section(title + (f" (last {max_bytes} bytes)" if cut else ""), text)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def append_to_log(results_dir: Path, text: str) -> None:
    """Add text printed after the run (the CLI's table) to a finished run's harness.log."""
    path = Path(results_dir) / HARNESS_LOG
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
    except OSError:
        pass

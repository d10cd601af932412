"""Read a results folder into plain dataclasses.

The runner's workers write their CSVs line by line while they run, and a worker can be killed
mid-line; a report is most needed exactly when a run went wrong. So this module never raises on a
bad row: it skips it and counts it (`RunData.malformed_rows`; a NUL byte, a bad encoding or a
field too large for the csv module included), and a missing optional file (`throughput.csv`,
`queue.csv`) is an empty list / None rather than an error. Only a results folder without a
readable `iterations.csv` or a well-formed `summary.json` is refused, with a ConfigError naming
the file (one line, exit 2 in the CLI), since nothing can be said then.

Everything downstream (metrics, plots, markdown) works on these dataclasses, never on raw CSV;
the columns are results.schema's, shared with the writers.
"""

from __future__ import annotations

import csv
import io
import math
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mn_harness.config.loader import read_json_file
from mn_harness.errors import ConfigError, shown
from mn_harness.results.records import from_json
from mn_harness.results.schema import (
    CC_TELEMETRY_CSV,
    ITERATIONS_CSV,
    PHASES_CSV,
    QUEUE_CSV,
    QUEUE_JOB_PREFIX,
    SUMMARY_JSON,
    THROUGHPUT_CSV,
    THROUGHPUT_SENDER_COLUMNS,
    CCTelemetryRow,
    IterationRow,
    PhaseRow,
    QueueRow,
    RunSummary,
    ThroughputRow,
)

R = TypeVar("R")


@dataclass
class RunData:
    """Everything read from one results folder."""

    results_dir: Path
    summary: RunSummary
    iterations: list[IterationRow]
    throughput: list[ThroughputRow]
    queue: list[QueueRow] | None
    malformed_rows: dict[str, int] = field(default_factory=dict)
    phases: list[PhaseRow] = field(default_factory=list)  # empty for folders without phases.csv

    def job_order(self) -> list[str]:
        """Jobs in summary order, then any job seen only in the CSVs (first appearance)."""
        order = list(self.summary.jobs)
        for job in [r.job for r in self.iterations] + [r.job for r in self.throughput]:
            if job not in order:
                order.append(job)
        return order


def _opt_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _finite(text: str) -> float:
    """A CSV number; NaN and infinity make the row malformed (ValueError), like a bad number."""
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"not a finite number: {text!r}")
    return number


def _int(text: str) -> int:
    """Integers may have been written as floats ("1.0") by some writers."""
    try:
        return int(text)
    except ValueError:
        as_float = float(text)
        if not as_float.is_integer():
            raise
        return int(as_float)


def parse_summary(raw: Any, where: str = SUMMARY_JSON) -> RunSummary:
    """The typed summary.json of any version (results.schema); ConfigError naming `where` and
    the key when a section has the wrong shape (a value that is merely missing or not a number
    is its default: None)."""
    return from_json(RunSummary, raw, where)


def load_summary(results_dir: Path | str) -> RunSummary:
    path = Path(results_dir) / SUMMARY_JSON
    return parse_summary(read_json_file(path, "a results summary"), shown(str(path)))


def _csv_text(path: Path) -> str:
    """A CSV's text, undecodable bytes replaced and NULs dropped (rows with them then fail to
    parse and are counted); ConfigError naming the file when it is not a readable regular file."""
    where = shown(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(where, f"cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(where, "not a regular file")
    with os.fdopen(fd, "rb") as fh:
        try:
            data = fh.read()
        except OSError as exc:
            raise ConfigError(where, f"cannot read: {exc.strerror}") from None
    return data.decode("utf-8", "replace").replace("\0", "")


def _read_csv(path: Path) -> tuple[list[dict[str, str]], int]:
    """Rows as dicts; rows with missing fields count as malformed (a truncated last line), as
    do rows the csv module refuses (a field beyond its size limit)."""
    rows: list[dict[str, str]] = []
    bad = 0
    reader = csv.DictReader(io.StringIO(_csv_text(path), newline=""))
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error:
            bad += 1
            continue
        if None in row or any(v is None for v in row.values()):
            bad += 1
            continue
        rows.append(row)
    return rows, bad


def load_table(path: Path | str, row: Callable[[dict[str, str]], R]) -> tuple[list[R], int]:
    """A CSV's rows made by `row`, and the number of malformed rows skipped (a row `row`
    refuses with KeyError or ValueError counts as one)."""
    raw, bad = _read_csv(Path(path))
    out: list[R] = []
    for r in raw:
        try:
            out.append(row(r))
        except (KeyError, ValueError):
            bad += 1
    return out, bad


def _opt(text: str | None, cast):
    return None if text in (None, "") else cast(text)


def _iteration(r: dict[str, str]) -> IterationRow:
    return IterationRow(job=r["job"], rank=_int(r["rank"]), iteration=_int(r["iteration"]),
                        t_start=_finite(r["t_start"]), t_comm_start=_finite(r["t_comm_start"]),
                        t_comm_end=_finite(r["t_comm_end"]), iter_time=_finite(r["iter_time"]),
                        comm_time=_finite(r["comm_time"]), bytes_sent=_int(r["bytes_sent"]),
                        cpu_s=_opt(r.get("cpu_s"), _finite), send_lag_mean_s=_opt(r.get("send_lag_mean_s"), _finite),
                        send_lag_max_s=_opt(r.get("send_lag_max_s"), _finite), hold_s=_opt(r.get("hold_s"), _finite))


def _phase(r: dict[str, str]) -> PhaseRow:
    return PhaseRow(job=r["job"], rank=_int(r["rank"]), iteration=_int(r["iteration"]), phase=_int(r["phase"]),
                    name=r["name"], kind=r["kind"], collective=r["collective"], bytes=_opt(r["bytes"], _int),
                    t_start=float(r["t_start"]), t_end=float(r["t_end"]), duration=float(r["duration"]),
                    bytes_sent=_int(r["bytes_sent"]), planned_s=_opt(r["planned_s"], float),
                    delay_s=_opt(r["delay_s"], float))


def _throughput(r: dict[str, str]) -> ThroughputRow:
    return ThroughputRow(job=r["job"], rank=_int(r["rank"]), t=_finite(r["t"]), bin_s=_finite(r["bin_s"]),
                         bytes=_int(r["bytes"]),
                         **{k: _opt_int(r.get(k) or None) for k in THROUGHPUT_SENDER_COLUMNS})


def _queue(r: dict[str, str]) -> QueueRow:
    return QueueRow(t=_finite(r["t"]), switch=r["switch"], port=r["port"], depth=_finite(r["depth"]),
                    marks=_opt(r.get("marks"), _finite) or 0.0,
                    job_bytes={k[len(QUEUE_JOB_PREFIX):]: _finite(v) for k, v in r.items()
                               if k.startswith(QUEUE_JOB_PREFIX) and v},
                    drops=_opt(r.get("drops"), float))



def _flag(text: str) -> bool:
    """A boolean as the CSV writer wrote it ("True"/"False"), or as 1/0."""
    if text in ("True", "true", "1"):
        return True
    if text in ("False", "false", "0"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _cc_telemetry(r: dict[str, str]) -> CCTelemetryRow:
    return CCTelemetryRow(src=r["src"], cc=r["cc"], iteration=_int(r["iteration"]), slope=_finite(r["slope"]),
                          losses=_int(r["losses"]), rto=_flag(r["rto"]), final=_flag(r["final"]),
                          bytes=_int(r["bytes"]),
                          learned_bytes_per_iteration=_opt(r["learned_bytes_per_iteration"], _int))

def load_iterations(path: Path | str) -> tuple[list[IterationRow], int]:
    """Rows of iterations.csv and the number of malformed rows skipped."""
    return load_table(path, _iteration)


def load_phases(path: Path | str) -> tuple[list[PhaseRow], int]:
    """Rows of phases.csv and the number of malformed rows skipped."""
    return load_table(path, _phase)


def load_throughput(path: Path | str) -> tuple[list[ThroughputRow], int]:
    return load_table(path, _throughput)


def load_queue(path: Path | str) -> tuple[list[QueueRow], int]:
    return load_table(path, _queue)



def load_cc_telemetry(results_dir: Path | str) -> tuple[list[CCTelemetryRow], int]:
    """Rows of a run's cc_telemetry.csv and the malformed rows skipped; none where the run used
    no BPF congestion control (no file)."""
    path = Path(results_dir) / CC_TELEMETRY_CSV
    return load_table(path, _cc_telemetry) if path.exists() else ([], 0)

def load_run(results_dir: Path | str) -> RunData:
    """Read a results folder; ConfigError naming the file without a readable iterations.csv or
    a well-formed summary.json."""
    root = Path(results_dir)
    summary = load_summary(root)
    if not os.path.lexists(root / ITERATIONS_CSV):
        raise ConfigError(shown(str(root / ITERATIONS_CSV)), "missing (not a complete results folder)")
    malformed: dict[str, int] = {}
    iterations, malformed[ITERATIONS_CSV] = load_table(root / ITERATIONS_CSV, _iteration)

    def optional(name: str, row: Callable[[dict[str, str]], R]) -> list[R] | None:
        if not (root / name).exists():
            return None
        rows, malformed[name] = load_table(root / name, row)
        return rows

    throughput = optional(THROUGHPUT_CSV, _throughput) or []
    phases = optional(PHASES_CSV, _phase) or []
    queue = optional(QUEUE_CSV, _queue)
    return RunData(
        results_dir=root,
        summary=summary,
        iterations=iterations,
        throughput=throughput,
        queue=queue,
        malformed_rows=malformed,
        phases=phases,
    )

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mn_harness.config.loader import read_json_file
from mn_harness.errors import ConfigError, shown
from mn_harness.results.schema import (
    ITERATIONS_CSV,
    PHASES_CSV,
    QUEUE_CSV,
    QUEUE_JOB_PREFIX,
    SUMMARY_JSON,
    THROUGHPUT_CSV,
    THROUGHPUT_SENDER_COLUMNS,
    IterationRow,
    PhaseRow,
    QueueRow,
    ThroughputRow,
)


@dataclass(frozen=True)
class JobInfo:
    """The runner's description of one job (summary.json `jobs[name]`).

    `iterations` is what the runner counted as complete; `iterations_planned` the configured
    count, which is what missing rows are counted against when present."""

    name: str
    workers: list[str]
    iterations: int | None
    bytes_per_iteration: int | None
    compute_s: float | None
    ideal_iter_s: float | None
    bottleneck_bps: float | None
    isolated_iter_s: float | None = None
    iterations_planned: int | None = None
    warmup: int = 0  # iterations left out of the statistics (0 for summaries from before warm-up)
    # CASSINI's predicted slowdown at the best shifts and with the phases aligned (summary "cassini")
    predicted_slowdown: float | None = None
    predicted_aligned_slowdown: float | None = None

    @property
    def baseline_iter_s(self) -> float | None:
        """Measured isolated iteration time when the run has one, else the computed ideal."""
        return self.isolated_iter_s if self.isolated_iter_s else self.ideal_iter_s


@dataclass(frozen=True)
class Summary:
    """summary.json: the typed fields the report needs, plus the raw dict to update."""

    experiment: str
    cc: dict[str, str]
    jobs: dict[str, JobInfo]
    link_jobs: dict[str, list[str]]
    raw: dict[str, Any]
    # directed link -> job -> ranks whose sending socket crosses it; empty for old summaries
    link_ranks: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    link_bps: dict[str, float] = field(default_factory=dict)

    def ranks_on(self, link: str) -> dict[str, set[int]] | None:
        """Ranks per job crossing `link`, or None when unknown (then all ranks count)."""
        if link not in self.link_ranks:
            return None
        return {job: set(ranks) for job, ranks in self.link_ranks[link].items()}

    def busiest_link(self) -> str | None:
        """The link shared by the most jobs (ties: lowest capacity, then name): the one whose
        timeline shows interleaving."""
        if not self.link_jobs:
            return None
        return min(self.link_jobs, key=lambda link: (-len(set(self.link_jobs[link])),
                                                     self.link_bps.get(link, float("inf")), link))

    @property
    def job_order(self) -> list[str]:
        return list(self.jobs)


@dataclass
class RunData:
    """Everything read from one results folder."""

    results_dir: Path
    summary: Summary
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


def _opt_float(value: Any) -> float | None:
    """A finite number or None (NaN, infinity and non-numbers say nothing)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


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


def _object(value: Any, where: str, key: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(where, f"{key}: expected an object, got {type(value).__name__}")
    return value


def _array(value: Any, where: str, key: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(where, f"{key}: expected an array, got {type(value).__name__}")
    return value


def _ranks(value: Any, where: str, key: str) -> list[int]:
    ranks = _array(value, where, key)
    if not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
        raise ConfigError(where, f"{key}: expected an array of rank numbers")
    return ranks


def _rate(value: Any, where: str, key: str) -> float:
    rate = _opt_float(value)
    if rate is None:
        raise ConfigError(where, f"{key}: expected a number, got {value!r}")
    return rate


def parse_summary(raw: Any, where: str = "summary.json") -> Summary:
    """The typed view of a summary.json object; ConfigError naming `where` and the key when a
    section has the wrong shape (a value that is merely missing or not a number is None)."""
    if not isinstance(raw, dict):
        raise ConfigError(where, f"expected a JSON object, got {type(raw).__name__}")
    jobs: dict[str, JobInfo] = {}
    cassini = raw.get("cassini")
    predicted = cassini.get("jobs") if isinstance(cassini, dict) else None
    predicted = predicted if isinstance(predicted, dict) else {}
    for name, info in _object(raw.get("jobs"), where, "jobs").items():
        info = _object(info, where, f"jobs.{shown(name)}")
        guess = predicted.get(name)
        guess = guess if isinstance(guess, dict) else {}
        jobs[str(name)] = JobInfo(
            name=str(name),
            workers=[str(w) for w in _array(info.get("workers"), where, f"jobs.{shown(name)}.workers")],
            iterations=_opt_int(info.get("iterations")),
            bytes_per_iteration=_opt_int(info.get("bytes_per_iteration")),
            compute_s=_opt_float(info.get("compute_s")),
            ideal_iter_s=_opt_float(info.get("ideal_iter_s")),
            bottleneck_bps=_opt_float(info.get("bottleneck_bps")),
            isolated_iter_s=_opt_float(info.get("isolated_iter_s")),
            iterations_planned=_opt_int(info.get("iterations_planned")),
            warmup=_opt_int(info.get("warmup")) or 0,
            predicted_slowdown=_opt_float(guess.get("slowdown")),
            predicted_aligned_slowdown=_opt_float(guess.get("aligned_slowdown")),
        )
    link_jobs = {str(k): [str(j) for j in _array(v, where, f"link_jobs.{shown(k)}")]
                 for k, v in _object(raw.get("link_jobs"), where, "link_jobs").items()}
    return Summary(
        experiment=str(raw.get("experiment", "")),
        cc={str(k): str(v) for k, v in _object(raw.get("cc"), where, "cc").items()},
        jobs=jobs,
        link_jobs=link_jobs,
        raw=raw,
        link_ranks={str(k): {str(j): _ranks(rs, where, f"link_ranks.{shown(k)}.{shown(j)}")
                             for j, rs in _object(v, where, f"link_ranks.{shown(k)}").items()}
                    for k, v in _object(raw.get("link_ranks"), where, "link_ranks").items()},
        link_bps={str(k): _rate(v, where, f"link_bps.{shown(k)}")
                  for k, v in _object(raw.get("link_bps"), where, "link_bps").items()},
    )


def load_summary(results_dir: Path | str) -> Summary:
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


def load_iterations(path: Path | str) -> tuple[list[IterationRow], int]:
    """Rows of iterations.csv and the number of malformed rows skipped."""
    raw, bad = _read_csv(Path(path))
    out: list[IterationRow] = []
    for r in raw:
        try:
            out.append(
                IterationRow(
                    job=r["job"],
                    rank=_int(r["rank"]),
                    iteration=_int(r["iteration"]),
                    t_start=_finite(r["t_start"]),
                    t_comm_start=_finite(r["t_comm_start"]),
                    t_comm_end=_finite(r["t_comm_end"]),
                    iter_time=_finite(r["iter_time"]),
                    comm_time=_finite(r["comm_time"]),
                    bytes_sent=_int(r["bytes_sent"]),
                    cpu_s=_opt(r.get("cpu_s"), _finite),
                )
            )
        except (KeyError, ValueError):
            bad += 1
    return out, bad


def _opt(text: str | None, cast):
    return None if text in (None, "") else cast(text)


def load_phases(path: Path | str) -> tuple[list[PhaseRow], int]:
    """Rows of phases.csv and the number of malformed rows skipped."""
    raw, bad = _read_csv(Path(path))
    out: list[PhaseRow] = []
    for r in raw:
        try:
            out.append(PhaseRow(
                job=r["job"], rank=_int(r["rank"]), iteration=_int(r["iteration"]), phase=_int(r["phase"]),
                name=r["name"], kind=r["kind"], collective=r["collective"], bytes=_opt(r["bytes"], _int),
                t_start=float(r["t_start"]), t_end=float(r["t_end"]), duration=float(r["duration"]),
                bytes_sent=_int(r["bytes_sent"]), planned_s=_opt(r["planned_s"], float),
                delay_s=_opt(r["delay_s"], float)))
        except (KeyError, ValueError):
            bad += 1
    return out, bad


def load_throughput(path: Path | str) -> tuple[list[ThroughputRow], int]:
    raw, bad = _read_csv(Path(path))
    out: list[ThroughputRow] = []
    for r in raw:
        try:
            out.append(
                ThroughputRow(
                    job=r["job"],
                    rank=_int(r["rank"]),
                    t=_finite(r["t"]),
                    bin_s=_finite(r["bin_s"]),
                    bytes=_int(r["bytes"]),
                    **{k: _opt_int(r.get(k) or None) for k in THROUGHPUT_SENDER_COLUMNS},
                )
            )
        except (KeyError, ValueError):
            bad += 1
    return out, bad


def load_queue(path: Path | str) -> tuple[list[QueueRow], int]:
    raw, bad = _read_csv(Path(path))
    out: list[QueueRow] = []
    for r in raw:
        try:
            job_bytes = {k[len(QUEUE_JOB_PREFIX):]: _finite(v) for k, v in r.items()
                         if k.startswith(QUEUE_JOB_PREFIX) and v}
            out.append(
                QueueRow(
                    t=_finite(r["t"]),
                    switch=r["switch"],
                    port=r["port"],
                    depth=_finite(r["depth"]),
                    marks=_finite(r["marks"]) if r.get("marks") not in (None, "") else 0.0,
                    job_bytes=job_bytes,
                    drops=float(r["drops"]) if r.get("drops") not in (None, "") else None,
                )
            )
        except (KeyError, ValueError):
            bad += 1
    return out, bad


def load_run(results_dir: Path | str) -> RunData:
    """Read a results folder; ConfigError naming the file without a readable iterations.csv or
    a well-formed summary.json."""
    root = Path(results_dir)
    summary = load_summary(root)
    if not os.path.lexists(root / ITERATIONS_CSV):
        raise ConfigError(shown(str(root / ITERATIONS_CSV)), "missing (not a complete results folder)")
    iterations, bad_iter = load_iterations(root / ITERATIONS_CSV)
    malformed = {ITERATIONS_CSV: bad_iter}
    throughput: list[ThroughputRow] = []
    if (root / THROUGHPUT_CSV).exists():
        throughput, bad = load_throughput(root / THROUGHPUT_CSV)
        malformed[THROUGHPUT_CSV] = bad
    phases: list[PhaseRow] = []
    if (root / PHASES_CSV).exists():
        phases, bad = load_phases(root / PHASES_CSV)
        malformed[PHASES_CSV] = bad
    queue: list[QueueRow] | None = None
    if (root / QUEUE_CSV).exists():
        queue, bad = load_queue(root / QUEUE_CSV)
        malformed[QUEUE_CSV] = bad
    return RunData(
        results_dir=root,
        summary=summary,
        iterations=iterations,
        throughput=throughput,
        queue=queue,
        malformed_rows=malformed,
        phases=phases,
    )

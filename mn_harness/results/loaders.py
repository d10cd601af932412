"""Read a results folder into plain dataclasses.

The runner's workers write their CSVs line by line while they run, and a worker can be killed
mid-line; a report is most needed exactly when a run went wrong. So this module never raises on a
bad row: it skips it and counts it (`RunData.malformed_rows`), and a missing optional file
(`throughput.csv`, `queue.csv`) is an empty list / None rather than an error. Only a results
folder without `iterations.csv` or `summary.json` is refused, since nothing can be said then.

Everything downstream (metrics, plots, markdown) works on these dataclasses, never on raw CSV;
the columns are results.schema's, shared with the writers.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mn_harness.results.schema import (
    ITERATIONS_CSV,
    PHASES_CSV,
    QUEUE_CSV,
    QUEUE_JOB_PREFIX,
    SUMMARY_JSON,
    THROUGHPUT_CSV,
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
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _opt_int(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _int(text: str) -> int:
    """Integers may have been written as floats ("1.0") by some writers."""
    try:
        return int(text)
    except ValueError:
        as_float = float(text)
        if not as_float.is_integer():
            raise
        return int(as_float)


def parse_summary(raw: dict[str, Any]) -> Summary:
    jobs: dict[str, JobInfo] = {}
    cassini = raw.get("cassini")
    predicted = cassini.get("jobs") if isinstance(cassini, dict) else None
    predicted = predicted if isinstance(predicted, dict) else {}
    for name, info in (raw.get("jobs") or {}).items():
        info = info or {}
        guess = predicted.get(name)
        guess = guess if isinstance(guess, dict) else {}
        jobs[str(name)] = JobInfo(
            name=str(name),
            workers=[str(w) for w in info.get("workers") or []],
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
    link_jobs = {str(k): [str(j) for j in v] for k, v in (raw.get("link_jobs") or {}).items()}
    return Summary(
        experiment=str(raw.get("experiment", "")),
        cc={str(k): str(v) for k, v in (raw.get("cc") or {}).items()},
        jobs=jobs,
        link_jobs=link_jobs,
        raw=raw,
        link_ranks={str(k): {str(j): [int(r) for r in rs] for j, rs in v.items()}
                    for k, v in (raw.get("link_ranks") or {}).items()},
        link_bps={str(k): float(v) for k, v in (raw.get("link_bps") or {}).items()},
    )


def load_summary(results_dir: Path | str) -> Summary:
    path = Path(results_dir) / SUMMARY_JSON
    return parse_summary(json.loads(path.read_text()))


def _read_csv(path: Path) -> tuple[list[dict[str, str]], int]:
    """Rows as dicts; rows with missing fields count as malformed (a truncated last line)."""
    rows: list[dict[str, str]] = []
    bad = 0
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        for row in reader:
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
                    t_start=float(r["t_start"]),
                    t_comm_start=float(r["t_comm_start"]),
                    t_comm_end=float(r["t_comm_end"]),
                    iter_time=float(r["iter_time"]),
                    comm_time=float(r["comm_time"]),
                    bytes_sent=_int(r["bytes_sent"]),
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
                    t=float(r["t"]),
                    bin_s=float(r["bin_s"]),
                    bytes=_int(r["bytes"]),
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
            job_bytes = {k[len(QUEUE_JOB_PREFIX):]: float(v) for k, v in r.items()
                         if k.startswith(QUEUE_JOB_PREFIX) and v}
            out.append(
                QueueRow(
                    t=float(r["t"]),
                    switch=r["switch"],
                    port=r["port"],
                    depth=float(r["depth"]),
                    marks=float(r["marks"]) if r.get("marks") not in (None, "") else 0.0,
                    job_bytes=job_bytes,
                )
            )
        except (KeyError, ValueError):
            bad += 1
    return out, bad


def load_run(results_dir: Path | str) -> RunData:
    """Read a results folder; raises FileNotFoundError only without iterations.csv/summary.json."""
    root = Path(results_dir)
    summary = load_summary(root)
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

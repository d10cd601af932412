"""Turn the workers' JSON-lines files into the results folder's rows and CSVs.

Runs in the harness's teardown, so it must cope with a killed run: missing files, a truncated
last line, ranks that finished fewer iterations than others. Everything a worker flushed is kept;
the summary says how many rows are missing."""

from __future__ import annotations

import json
from pathlib import Path

from mn_harness.results.nominal import nominal_rows
from mn_harness.results.schema import (
    CC_TELEMETRY_COLUMNS,
    CC_TELEMETRY_CSV,
    ITERATION_COLUMNS,
    ITERATIONS_CSV,
    PHASE_COLUMNS,
    PHASES_CSV,
    THROUGHPUT_COLUMNS,
    THROUGHPUT_CSV,
    THROUGHPUT_SENDER_COLUMNS,
    IterationRow,
    PhaseRow,
    ThroughputRow,
    write_csv,
)


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a line cut by a kill: keep what came before
    except OSError:
        pass
    return rows


def iteration_rows(raw_dir: Path) -> list[IterationRow]:
    """Every worker's iteration lines, sorted by (job, iteration, rank)."""
    rows = []
    for path in sorted(raw_dir.glob("*.iterations.jsonl")):
        for record in read_jsonl(path):
            try:
                rows.append(IterationRow.from_worker(record))
            except (KeyError, TypeError, ValueError):
                continue  # not a row a worker wrote
    rows.sort(key=lambda r: (r.job, r.iteration, r.rank))
    return rows


def phase_rows(raw_dir: Path) -> list[PhaseRow]:
    """Every phase of every worker's iteration lines, sorted by (job, iteration, rank, start)."""
    rows = []
    for path in sorted(raw_dir.glob("*.iterations.jsonl")):
        for record in read_jsonl(path):
            for phase in record.get("phases") or ():
                try:
                    rows.append(PhaseRow.from_worker(record, phase))
                except (KeyError, TypeError, ValueError):
                    continue
    rows.sort(key=lambda r: (r.job, r.iteration, r.rank, r.t_start, r.phase))
    return rows


def throughput_rows(raw_dir: Path) -> list[ThroughputRow]:
    rows = []
    for path in sorted(raw_dir.glob("*.throughput.jsonl")):
        for r in read_jsonl(path):
            for t, nbytes, *sender in r.get("bins", ()):  # sender: THROUGHPUT_SENDER_COLUMNS or none
                state = [int(v) for v in sender] if len(sender) == len(THROUGHPUT_SENDER_COLUMNS) else []
                rows.append(ThroughputRow(r["job"], int(r["rank"]), t, r["bin_s"], int(nbytes),
                                          **dict(zip(THROUGHPUT_SENDER_COLUMNS, state, strict=False))))
    rows.sort(key=lambda r: (r.job, r.rank, r.t))
    return rows


def write_run_csvs(raw_dir: Path, results_dir: Path, time_scale: float = 1.0
                   ) -> tuple[list[IterationRow], list[PhaseRow], list[ThroughputRow]]:
    """iterations.csv, phases.csv and throughput.csv from the raw files, in the experiment's
    times (a dilated run's divided by `time_scale`: results/nominal.py); returns their rows."""
    rows = nominal_rows(iteration_rows(raw_dir), time_scale)
    phases = nominal_rows(phase_rows(raw_dir), time_scale)
    throughput = nominal_rows(throughput_rows(raw_dir), time_scale)
    write_csv(results_dir / ITERATIONS_CSV, ITERATION_COLUMNS, rows)
    write_csv(results_dir / PHASES_CSV, PHASE_COLUMNS, phases)
    write_csv(results_dir / THROUGHPUT_CSV, THROUGHPUT_COLUMNS, throughput)
    return rows, phases, throughput


def write_cc_telemetry(rows: list[dict], results_dir: Path) -> int:
    """cc_telemetry.csv (when there are rows); returns the row count."""
    if rows:
        write_csv(results_dir / CC_TELEMETRY_CSV, CC_TELEMETRY_COLUMNS, rows)
    return len(rows)

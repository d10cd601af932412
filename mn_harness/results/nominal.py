"""The one place where a dilated run's measurements become the experiment's own (nominal)
times. With run.emulation.time_scale K the emulation ran K times slower (config/time_scale.py):
every time the workers, the samplers and the kernel measured is divided by K here, when the
results are written, and every rate the run set is multiplied back, so iterations.csv,
phases.csv, throughput.csv, queue.csv, cpu.csv, cc_telemetry.csv and summary.json all speak the
experiment's times and rates, and a slowdown (a time over the ideal time of the nominal network)
is the same ratio whichever K. What stays the machine's: the fidelity monitors' link gaps (each
judged against its own serialisation time at the dilated rate), the CPU shares, `setup_s` and
the samplers' own rates and busy times in summary.json.

Every number column of the workers' rows is in one of the tables below
(tests/results/test_nominal.py fails on one that is in neither)."""

from __future__ import annotations

import csv
import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from mn_harness.results.schema import (
    CC_TELEMETRY_CSV,
    CPU_CSV,
    QUEUE_CSV,
    IterationRow,
    PhaseRow,
    ThroughputRow,
)

# the time fields of each row type (divided by K), and the number fields that are not times
TIME_FIELDS: dict[type, tuple[str, ...]] = {
    IterationRow: ("t_start", "t_comm_start", "t_comm_end", "iter_time", "comm_time", "cpu_s",
                   "send_lag_mean_s", "send_lag_max_s", "hold_s"),
    PhaseRow: ("t_start", "t_end", "duration", "planned_s", "delay_s"),
    ThroughputRow: ("t", "bin_s", "srtt_us", "busy_us", "rwnd_limited_us", "sndbuf_limited_us"),
}
NOT_TIMES: dict[type, tuple[str, ...]] = {
    IterationRow: ("rank", "iteration", "bytes_sent"),
    PhaseRow: ("rank", "iteration", "phase", "bytes", "bytes_sent"),
    ThroughputRow: ("rank", "bytes", "cwnd"),
}
# the files the run's samplers wrote beside the workers' rows: their time columns
CSV_TIME_COLUMNS = {QUEUE_CSV: ("t",), CPU_CSV: ("t", "interval_s"), CC_TELEMETRY_CSV: ("start_s", "end_s")}

Row = TypeVar("Row", IterationRow, PhaseRow, ThroughputRow)


def nominal_s(machine_s: float, time_scale: float) -> float:
    """A time the machine measured, as the experiment's."""
    return machine_s / time_scale


def nominal_bps(machine_bps: float, time_scale: float) -> float:
    """A rate the machine ran, as the experiment's."""
    return machine_bps * time_scale


def machine_bps(nominal: float, time_scale: float) -> float:
    """A rate of the experiment, as the machine runs it."""
    return nominal / time_scale


def nominal_rows(rows: Sequence[Row], time_scale: float) -> list[Row]:
    """The rows with every time field divided by K (microsecond counters stay whole numbers)."""
    if time_scale == 1 or not rows:
        return list(rows)
    names = TIME_FIELDS[type(rows[0])]

    def convert(value):
        if value is None:
            return None
        scaled = value / time_scale
        return round(scaled) if isinstance(value, int) else scaled

    return [dataclasses.replace(row, **{n: convert(getattr(row, n)) for n in names}) for row in rows]


def nominal_csvs(results_dir: Path, time_scale: float) -> None:
    """queue.csv, cpu.csv and cc_telemetry.csv (those present) with their time columns
    divided by K, rewritten in place."""
    if time_scale == 1:
        return
    for name, columns in CSV_TIME_COLUMNS.items():
        path = results_dir / name
        if not path.exists():
            continue
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            fieldnames = list(reader.fieldnames or [])
            rows = list(reader)
        for row in rows:
            for column in columns:
                if row.get(column) not in (None, ""):
                    row[column] = repr(round(float(row[column]) / time_scale, 9))
        tmp = path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fieldnames)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, path)

"""The columns of every CSV in a results folder, and the typed rows they hold.

One home for each schema: the runner's writers (results.collect, the queue collectors of the
data planes, the CC telemetry) and the readers (results.loaders, hence the report) import the
column tuples from here, so a column cannot be renamed on one side only. Times are seconds since
the experiment-wide start T0 (the workers' shared CLOCK_MONOTONIC origin). docs/results.md
describes every column."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ITERATIONS_CSV = "iterations.csv"
THROUGHPUT_CSV = "throughput.csv"
QUEUE_CSV = "queue.csv"
CC_TELEMETRY_CSV = "cc_telemetry.csv"
SUMMARY_JSON = "summary.json"
CPU_CSV = "cpu.csv"
PHASES_CSV = "phases.csv"

# iterations.csv: one row per job, rank and iteration
ITERATION_COLUMNS = ("job", "rank", "iteration", "t_start", "t_comm_start", "t_comm_end",
                     "iter_time", "comm_time", "bytes_sent", "cpu_s")
# phases.csv: one row per job, rank, iteration and phase the rank took part in
PHASE_COLUMNS = ("job", "rank", "iteration", "phase", "name", "kind", "collective", "bytes",
                 "t_start", "t_end", "duration", "bytes_sent", "planned_s", "delay_s")
# throughput.csv: bytes acknowledged on one worker's sending sockets per bin [t, t + bin_s); then
# what limited the sender (worker/tcpinfo.py, empty where not sampled: in-network aggregation):
# cwnd (segments, summed over the rank's connections) and srtt_us (the largest smoothed RTT) at
# the bin's end, and the microseconds of the bin the sockets had data to send (busy_us, in the
# kernel's jiffy steps) and were limited by the receiver's window or the send buffer
THROUGHPUT_SENDER_COLUMNS = ("cwnd", "srtt_us", "busy_us", "rwnd_limited_us", "sndbuf_limited_us")
THROUGHPUT_COLUMNS = ("job", "rank", "t", "bin_s", "bytes", *THROUGHPUT_SENDER_COLUMNS)
# queue.csv: one row per sampled egress port and sample; then one bytes_<job> column per job.
# `drops` is empty where the data plane cannot see its queue's drops (BMv2)
QUEUE_BASE_COLUMNS = ("t", "switch", "port", "link", "depth", "depth_max", "packets", "marks", "drops")
QUEUE_JOB_PREFIX = "bytes_"
# cpu.csv: the machine's CPU (all cores) per sampling interval ending at t (mn_harness.cpu_load)
CPU_COLUMNS = ("t", "interval_s", "busy", "steal")
# cc_telemetry.csv: one row per socket and iteration seen by an MLTCP/BPF congestion control
CC_TELEMETRY_COLUMNS = ("believed_bytes_per_iteration", "bytes", "cc", "dst", "end_s", "f_last",
                        "final", "iteration", "kernel_name", "learned_bytes_per_iteration",
                        "params", "src", "start_s")


def queue_columns(job_names: Iterable[str]) -> list[str]:
    return [*QUEUE_BASE_COLUMNS, *(f"{QUEUE_JOB_PREFIX}{j}" for j in job_names)]


@dataclass(frozen=True)
class IterationRow:
    """One worker's (job, rank) record of one training iteration; times in s relative to T0."""

    job: str
    rank: int
    iteration: int
    t_start: float
    t_comm_start: float
    t_comm_end: float
    iter_time: float
    comm_time: float
    bytes_sent: int
    # CPU time (user + system, every thread of the worker process) the iteration took; None
    # in lines from before it was recorded. With several workers per core, a job whose
    # workers need the CPU while others do is slowed by the machine, not only by the network.
    cpu_s: float | None = None

    @classmethod
    def from_worker(cls, record: Mapping[str, Any]) -> IterationRow:
        """From a worker's JSON line (which has no iter_time / comm_time: derived here).
        iter_time runs to the iteration's end (`t_end`, after a trailing compute phase; lines
        without it end with their communication)."""
        t_start, t_comm_start, t_comm_end = (float(record[k]) for k in
                                             ("t_start", "t_comm_start", "t_comm_end"))
        t_end = float(record.get("t_end", t_comm_end))
        return cls(str(record["job"]), int(record["rank"]), int(record["iteration"]), t_start,
                   t_comm_start, t_comm_end, round(t_end - t_start, 6),
                   round(t_comm_end - t_comm_start, 6), int(record["bytes_sent"]),
                   None if record.get("cpu_s") is None else float(record["cpu_s"]))


@dataclass(frozen=True)
class PhaseRow:
    """One phase of one rank's iteration: a compute phase (its planned mean and the delay
    applied: jitter and stragglers) or a collective (its size S and the bytes this rank sent).
    Slices of one compute phase between DDP bucket issues are one row."""

    job: str
    rank: int
    iteration: int
    phase: int  # index in the job's phase list
    name: str  # e.g. compute, compute.backward, ring_allreduce, ring_allreduce.bucket2
    kind: str  # compute | comm
    collective: str
    bytes: int | None
    t_start: float
    t_end: float
    duration: float
    bytes_sent: int
    planned_s: float | None
    delay_s: float | None

    @classmethod
    def from_worker(cls, record: Mapping[str, Any], phase: Mapping[str, Any]) -> PhaseRow:
        t_start, t_end = float(phase["t_start"]), float(phase["t_end"])
        nbytes, planned, delay = phase.get("bytes"), phase.get("planned_s"), phase.get("delay_s")
        return cls(str(record["job"]), int(record["rank"]), int(record["iteration"]), int(phase["phase"]),
                   str(phase["name"]), str(phase["kind"]), str(phase.get("collective") or ""),
                   None if nbytes is None else int(nbytes), t_start, t_end, round(t_end - t_start, 6),
                   int(phase.get("bytes_sent", 0)), None if planned is None else float(planned),
                   None if delay is None else float(delay))


@dataclass(frozen=True)
class ThroughputRow:
    """Bytes acked on one worker's sending sockets in the bin [t, t + bin_s), and the sender's
    state (THROUGHPUT_SENDER_COLUMNS; None where not sampled)."""

    job: str
    rank: int
    t: float
    bin_s: float
    bytes: int
    cwnd: int | None = None
    srtt_us: int | None = None
    busy_us: int | None = None
    rwnd_limited_us: int | None = None
    sndbuf_limited_us: int | None = None


@dataclass(frozen=True)
class QueueRow:
    """One queue sample of an egress port; depth in packets."""

    t: float
    switch: str
    port: str
    depth: float
    marks: float
    job_bytes: dict[str, float] = field(default_factory=dict)
    drops: float | None = None  # None: not measured (BMv2)


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, Any] | Any]) -> None:
    """Rows (mappings or the dataclasses above) under `columns`; extra fields are ignored."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow(row if isinstance(row, Mapping) else row.__dict__)

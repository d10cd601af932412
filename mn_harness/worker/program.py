"""One iteration of a worker: its program (mn_harness/jobs/program.py) run against the clock,
and the records it leaves.

Compute operations sleep; collectives go to the communication stream (the main thread waits
for them unless they are async); a pipeline pass runs here; `wait` waits for async collectives;
the iteration ends when everything it started is done. Every phase this rank took part in gets
a record (consecutive slices of one compute phase — DDP's backward between bucket issues —
merge into one): times since T0, bytes sent, and for compute the planned mean and the delay
applied (jitter, stragglers). The iteration's line keeps the columns every metric reads:
t_comm_start = the first collective's start, t_comm_end = the last one's end, t_end = when the
iteration ended, hold_s = how long it was held at its start (the harness's shift scheduler,
worker/holds.py), cpu_s = the CPU time the worker process (all its threads) took meanwhile,
send_lag_mean_s / send_lag_max_s = how long its sends waited to be written once they could be
(what they waited for had arrived: mn_harness.fidelity's workers' invariant)."""

from __future__ import annotations

import time
from typing import Any

from mn_harness.worker import pipeline
from mn_harness.worker.collective import CommStream, Handle, runner
from mn_harness.worker.program_ops import CollectiveOp, ComputeOp, PipelineOp, WaitOp
from mn_harness.worker.spec import WorkerSpec
from mn_harness.worker.transport import Transport


def record(phase: int, name: str, kind: str, collective: str, nbytes: int | None, t_start: float, t_end: float,
           sent: int = 0, planned: float | None = None, delay: float | None = None) -> dict[str, Any]:
    """One phase of an iteration line (times already relative to T0); results.schema.PhaseRow
    reads it."""
    return {"phase": phase, "name": name, "kind": kind, "collective": collective, "bytes": nbytes,
            "t_start": round(t_start, 6), "t_end": round(t_end, 6), "bytes_sent": sent,
            "planned_s": None if planned is None else round(planned, 6),
            "delay_s": None if delay is None else round(delay, 6)}


def my_peers(spec: WorkerSpec) -> set[int]:
    """Every rank this one exchanges data with in any collective of its program."""
    peers: set[int] = set()
    for op in spec.ops():
        if isinstance(op, CollectiveOp) and spec.rank in op.ranks:
            peers |= {op.ranks[p] for p in op.schedule().peers_of(op.ranks.index(spec.rank))}
    return peers


class IterationRunner:
    def __init__(self, spec: WorkerSpec, transport: Transport, stream: CommStream, t0: float):
        self.spec, self.transport, self.stream, self.t0 = spec, transport, stream, t0
        self.ops = spec.ops()
        self.means = spec.means()
        self.schedules = {op.id: op.schedule() for op in self.ops
                          if isinstance(op, CollectiveOp) and not isinstance(op, PipelineOp) and spec.rank in op.ranks}

    def _t(self, now: float) -> float:
        return round(now - self.t0, 6)

    def run(self, iteration: int, hold_s: float = 0.0) -> dict[str, Any]:
        spec = self.spec
        durations = spec.durations(iteration)
        records: list[dict[str, Any]] = []
        handles: dict[int, tuple[CollectiveOp, Handle]] = {}
        waited: set[int] = set()
        t_start, cpu_start = time.monotonic(), time.process_time()
        if hold_s > 0:
            time.sleep(hold_s)

        def collect(ids: list[int]) -> None:
            for i in ids:
                if i in handles and i not in waited:
                    op, handle = handles[i]
                    handle.wait()
                    waited.add(i)
                    records.append(self._comm_record(op, handle.t_start, handle.t_end, handle.bytes_sent))

        for op in self.ops:
            if isinstance(op, ComputeOp):
                if not spec.computes:
                    continue
                seconds = durations[op.k] * op.fraction
                began = time.monotonic()
                time.sleep(seconds)
                self._compute_record(records, op, began, time.monotonic(), self.means[op.k] * op.fraction, seconds)
            elif isinstance(op, WaitOp):
                collect(list(op.ids))
            elif spec.rank not in op.ranks:
                continue
            elif isinstance(op, PipelineOp):
                began = time.monotonic()
                sent = pipeline.run_pass(self.transport, op, op.ranks.index(spec.rank), iteration)
                records.append(self._comm_record(op, began, time.monotonic(), sent))
            else:
                me = op.ranks.index(spec.rank)
                handle = self.stream.submit(runner(self.transport, self.schedules[op.id], me, op.ranks,
                                                   iteration, op.id))
                handles[op.id] = (op, handle)
                if not op.is_async:
                    collect([op.id])
        collect(list(handles))
        t_end, cpu_s = time.monotonic(), time.process_time() - cpu_start
        lags = self.transport.take_lags()
        comm = [r for r in records if r["kind"] == "comm"]
        t_comm_start = min((r["t_start"] for r in comm), default=self._t(t_end))
        t_comm_end = max((r["t_end"] for r in comm), default=self._t(t_end))
        return {"job": spec.job, "rank": spec.rank, "iteration": iteration,
                "t_start": self._t(t_start), "t_comm_start": t_comm_start, "t_comm_end": t_comm_end,
                "t_end": self._t(t_end), "bytes_sent": sum(r["bytes_sent"] for r in comm),
                "hold_s": round(hold_s, 6), "cpu_s": round(cpu_s, 6),
                "send_lag_mean_s": round(sum(lags) / len(lags), 6) if lags else None,
                "send_lag_max_s": round(max(lags), 6) if lags else None,
                "phases": sorted(records, key=lambda r: (r["t_start"], r["phase"]))}

    def _compute_record(self, records: list[dict[str, Any]], op: ComputeOp, began: float, ended: float,
                        planned: float, slept: float) -> None:
        last = next((r for r in reversed(records) if r["kind"] == "compute"), None)
        if last is not None and last["name"] == op.name and last["phase"] == op.phase:
            last["t_end"] = self._t(ended)
            last["planned_s"] = round(last["planned_s"] + planned, 6)
            last["delay_s"] = round(last["delay_s"] + slept - planned, 6)
            return
        records.append(record(op.phase, op.name, "compute", "", None, began - self.t0, ended - self.t0,
                              planned=planned, delay=slept - planned))

    def _comm_record(self, op: CollectiveOp, began: float, ended: float, sent: int) -> dict[str, Any]:
        return record(op.phase, op.name, "comm", op.collective, op.bytes, began - self.t0, ended - self.t0, sent)

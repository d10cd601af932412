"""The workers' invariant: an emulated GPU computes for exactly as long as asked, and a
worker sends what it may send at once.

A compute phase is a sleep; a worker that wakes late because no core was free (or its host
took the CPU) stretches the phase, which a real GPU would not, and shifts the job's next
communication phase. Overshoot = how much longer a compute phase took than it was asked to
(its planned mean plus the jitter or straggler delay applied: phases.csv `planned_s` +
`delay_s`), per phase row, in every iteration including the warm-up. Send lag = how long a
send waited to be written once what it waited for had come (the segment it forwards, the
peer's READY): a real NIC's queue does not wait for a busy host (iterations.csv
`send_lag_mean_s`, `send_lag_max_s`; the synthetic worker measures it, torch's gloo does not
say)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from mn_harness.results.schema import IterationRow, PhaseRow
from mn_harness.results.schema_fidelity import FidelityWorkers, WorkerTiming
from mn_harness.results.stats import percentile


def compute_overshoots(phases: Iterable[PhaseRow]) -> list[float]:
    """Seconds each compute phase row took beyond what it was asked to (never negative: a
    phase that ended early by rounding counts as 0)."""
    out = []
    for row in phases:
        if row.kind != "compute" or row.planned_s is None:
            continue
        asked = row.planned_s + (row.delay_s or 0.0)
        out.append(max(0.0, row.duration - asked))
    return out


def workers_summary(phases: Iterable[PhaseRow], iterations: Iterable[IterationRow] = ()) -> FidelityWorkers:
    """summary.json fidelity.workers: compute overshoot and send lag, per job and over all."""
    by_job: dict[str, tuple[list[PhaseRow], list[IterationRow]]] = {}
    for row in phases:
        by_job.setdefault(row.job, ([], []))[0].append(row)
    for it in iterations:
        by_job.setdefault(it.job, ([], []))[1].append(it)
    jobs = {job: _timing(*rows) for job, rows in sorted(by_job.items())}
    every = _timing([r for p, _ in by_job.values() for r in p], [i for _, its in by_job.values() for i in its])
    return FidelityWorkers(**dataclasses.asdict(every), jobs=jobs)


def _ms(values: list[float], which: str) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    value = {"mean": sum(values) / len(values), "p99": percentile(ordered, 99), "max": ordered[-1]}[which]
    return round(value * 1000, 3)


def _timing(phases: list[PhaseRow], iterations: list[IterationRow]) -> WorkerTiming:
    over = compute_overshoots(phases)
    means = [i.send_lag_mean_s for i in iterations if i.send_lag_mean_s is not None]
    maxima = [i.send_lag_max_s for i in iterations if i.send_lag_max_s is not None]
    return WorkerTiming(compute_phases=len(over), compute_overshoot_mean_ms=_ms(over, "mean"),
                        compute_overshoot_p99_ms=_ms(over, "p99"), compute_overshoot_max_ms=_ms(over, "max"),
                        send_lag_mean_ms=_ms(means, "mean"), send_lag_p99_ms=_ms(maxima, "p99"),
                        send_lag_max_ms=_ms(maxima, "max"))

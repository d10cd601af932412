"""The workers' invariant: an emulated GPU computes for exactly as long as asked.

A compute phase is a sleep; a worker that wakes late because no core was free (or its host
took the CPU) stretches the phase, which a real GPU would not, and shifts the job's next
communication phase. Overshoot = how much longer a compute phase took than it was asked to
(its planned mean plus the jitter or straggler delay applied: phases.csv `planned_s` +
`delay_s`), per phase row, in every iteration including the warm-up."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from mn_harness.results.schema import PhaseRow
from mn_harness.results.schema_fidelity import ComputeOvershoot, FidelityWorkers
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


def workers_summary(phases: Iterable[PhaseRow]) -> FidelityWorkers:
    """summary.json fidelity.workers: compute overshoot, per job and over all."""
    by_job: dict[str, list[PhaseRow]] = {}
    for row in phases:
        by_job.setdefault(row.job, []).append(row)
    jobs = {job: _overshoot_stats(compute_overshoots(rows)) for job, rows in sorted(by_job.items())}
    every = _overshoot_stats([o for rows in by_job.values() for o in compute_overshoots(rows)])
    return FidelityWorkers(**dataclasses.asdict(every), jobs=jobs)


def _overshoot_stats(values: list[float]) -> ComputeOvershoot:
    if not values:
        return ComputeOvershoot(compute_phases=0)
    ordered = sorted(values)
    return ComputeOvershoot(compute_phases=len(values),
                            compute_overshoot_mean_ms=round(sum(values) / len(values) * 1000, 3),
                            compute_overshoot_p99_ms=round(percentile(ordered, 99) * 1000, 3),
                            compute_overshoot_max_ms=round(ordered[-1] * 1000, 3))

"""The scale rule (`scale: {real_link: 100Gbit}`, config/presets.py) applied to a job.

Keep the real iteration time T and communication fraction a: compute stays as it is, and every
communication phase's bytes are multiplied by (its ideal time on a network whose links all run
at `real_link`) / (its ideal time on the emulated network), so its communication time — and with
it a — is what it was on the real cluster. On uniform links that is S * C' / real_link, i.e.
a * T * C' / 8 bytes on the wire. Ideal times are the plan's link loads (jobs/ideal.py);
in-network aggregation scales by its ring bottleneck. Called by Experiment.from_dict once the
experiment is valid, so config.yaml and summary.json carry the scaled bytes."""

from __future__ import annotations

import dataclasses

from mn_harness.collectives import INC
from mn_harness.config import Experiment, JobConfig
from mn_harness.config.presets import ScaledWorkload
from mn_harness.config.workload import CommPhase, Phase
from mn_harness.network.plan import NetworkPlan


def phase_times(plan: NetworkPlan, phase: CommPhase, real_bps: float) -> tuple[float, float, float]:
    """(seconds at real_link everywhere, seconds on the emulated links, that link's rate)."""
    loads = plan.phase_link_loads(phase)
    rates = plan.link_bps()
    link = max(sorted(loads), key=lambda label: loads[label] / rates[label])
    return max(loads.values()) * 8 / real_bps, loads[link] * 8 / rates[link], rates[link]


def scale_job(job: JobConfig, plan: NetworkPlan) -> JobConfig:
    assert job.scale is not None
    real = job.scale.real_link_bps
    phases: list[Phase] = []
    comm_real = 0.0
    largest = (0.0, real)
    for phase in job.phases:
        if not isinstance(phase, CommPhase):
            phases.append(phase)
            continue
        if phase.collective == INC:
            emulated = plan.job_bottleneck_bps(job.workers)
            t_real, t_emul = phase.bytes * 8 / real, phase.bytes * 8 / emulated
        else:
            t_real, t_emul, emulated = phase_times(plan, phase, real)
        factor = t_real / t_emul
        comm_real += t_real
        largest = max(largest, (t_real, emulated))
        phases.append(dataclasses.replace(
            phase, bytes=max(1, round(phase.bytes * factor)),
            grad_bytes=round(phase.grad_bytes * factor) if phase.grad_bytes else 0))
    scaled_bytes = sum(p.bytes for p in phases if isinstance(p, CommPhase))
    record = ScaledWorkload(real_link_bps=real, emulated_link_bps=largest[1],
                            real_bytes_per_iteration=job.bytes_per_iteration,
                            bytes_per_iteration=scaled_bytes,
                            comm_fraction=comm_real / (comm_real + job.compute_s))
    return dataclasses.replace(job, phases=tuple(phases), bytes_per_iteration=scaled_bytes, scaled=record)


def apply_scaling(experiment: Experiment) -> Experiment:
    plan = NetworkPlan(experiment)
    return experiment.with_jobs(scale_job(job, plan) if job.scale and not job.scaled else job
                                for job in experiment.jobs)

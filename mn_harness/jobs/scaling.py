"""The scale rule (`scale: {real_link: 100Gbit}`, config/presets.py) applied to a job: the step
after loading an experiment.

Keep the real iteration time T and communication fraction a: compute stays as it is, and every
communication phase's bytes are multiplied by (its time on the wire on a network whose links
all run at `real_link`) / (its time on the wire on the emulated network), so its communication
time — and with it a — is what it was on the real cluster. On uniform links that is
S * C' / real_link, i.e. a * T * C' / 8 bytes on the wire. The times are the collectives'
records' arithmetic on the plan's routes (the busiest link; in-network aggregation: its ring
hops' slowest path).

The rule needs the network plan, which needs a loaded experiment, so loading records it
(JobConfig.scale) and `apply_scaling` applies it: the command line, the Python API's builders
and `as_experiment`, and compare's variants call it once an experiment is loaded; config.yaml
and summary.json carry the scaled bytes. Until then a job is `unscaled` and the jobs layer
refuses to run or time it (jobs.program.require_scaled)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mn_harness.collectives import Schedule
from mn_harness.config import Experiment, JobConfig
from mn_harness.config.presets import ScaledWorkload
from mn_harness.config.workload import CommPhase, Phase
from mn_harness.jobs.ideal import PlanView

if TYPE_CHECKING:
    from mn_harness.network.plan import NetworkPlan


@dataclass(frozen=True)
class UniformLinks:
    """The emulated network's paths with every link at one rate (the real cluster's)."""

    on: PlanView
    bps: float

    def link_loads(self, schedule: Schedule) -> dict[str, int]:
        return self.on.link_loads(schedule)

    def link_bps(self, link: str) -> float:
        return self.bps

    def path_bps(self, src: int, dst: int) -> float:
        return self.bps


def phase_times(plan: NetworkPlan, phase: CommPhase, real_bps: float) -> tuple[float, float, float]:
    """(seconds at real_link everywhere, seconds on the emulated links, the rate that bounds
    it there): its time on the wire (collectives' records), along the plan's routes."""
    emulated = PlanView(plan, phase.participants)
    on_real = phase.record.time_on_wire(phase.call(), UniformLinks(emulated, real_bps))
    on_emulated = phase.record.time_on_wire(phase.call(), emulated)
    return on_real.seconds, on_emulated.seconds, on_emulated.bottleneck_bps


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
    """The experiment with every job's scale rule applied (the same object when there is none
    left to apply)."""
    if not any(job.unscaled for job in experiment.jobs):
        return experiment
    # the plan only when a rule needs it: building an experiment alone loads no network layer
    # (whose package name the API's lazy `mn_harness.network` would otherwise meet first)
    from mn_harness.network.plan import NetworkPlan

    plan = NetworkPlan(experiment)
    return experiment.with_jobs(scale_job(job, plan) if job.unscaled else job
                                for job in experiment.jobs)

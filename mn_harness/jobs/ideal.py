"""What a job would achieve alone on the network: the baseline for slowdowns and timeouts.

A collective's ideal time is its record's arithmetic (mn_harness/collectives/registry.py) on the
network plan: by default its busiest link's bytes over that link's rate — the schedule's
transfers mapped onto the plan's routes, every link loaded by all transfers that cross it,
perfect pipelining assumed; a pipeline pass is played in its 1F1B order; in-network aggregation
is S over the slowest path of the job's ring hops. The ideal iteration time plays the job's
program (jobs/program.py) with mean compute times and these ideal collectives, one
communication stream — so DDP overlap and traces' concurrent collectives count as they would
ideally. Jitter and stragglers are left out. TCP/IP and Ethernet headers are left out too (the
ideal moves payload at the link rate), so an isolated job measures at least 1 /
payload_ceiling(mtu) of ideal (mn_harness/frames.py: 1.046x at a 1500-byte MTU, 1.007x at 9000)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from mn_harness.collectives import Ideal, Schedule
from mn_harness.config import JobConfig
from mn_harness.config.workload import ComputePhase
from mn_harness.jobs.program import collective_ops, job_program
from mn_harness.units import format_duration, format_size
from mn_harness.worker.program_ops import CollectiveOp, ComputeOp, ProgramOp, WaitOp

if TYPE_CHECKING:  # the caller's plan: importing this module (API builders) loads no network layer
    from mn_harness.network.plan import NetworkPlan


@dataclass(frozen=True)
class PlanView:
    """The network plan as a collective's arithmetic sees one use of it (collectives.Network):
    local rank i on hosts[i]; with `job`, along that job's flows' paths (ECMP's choice)."""

    plan: NetworkPlan
    hosts: tuple[str, ...]
    job: str | None = None

    def link_loads(self, schedule: Schedule) -> dict[str, int]:
        return self.plan.schedule_link_loads(schedule, self.hosts, self.job)

    @cached_property
    def rates(self) -> dict[str, float]:
        return self.plan.link_bps()

    def link_bps(self, link: str) -> float:
        return self.rates[link]

    def path_bps(self, src: int, dst: int) -> float:
        return self.plan.path_rate_bps(self.hosts[src], self.hosts[dst], self.job)


def op_view(job: JobConfig, op: CollectiveOp, plan: NetworkPlan) -> PlanView:
    return PlanView(plan, tuple(job.hosts[r] for r in op.ranks), job.name)


def bytes_sent_per_rank(job: JobConfig) -> list[int]:
    """Bytes each rank sends per iteration (summed over every collective, buckets included)."""
    sent = [0] * job.n_ranks
    for op in collective_ops(job_program(job)):
        for local, nbytes in enumerate(op.record.bytes_sent(op.call())):
            sent[op.ranks[local]] += nbytes
    return sent


def bytes_sent_per_worker(job: JobConfig) -> int:
    """The busiest rank's bytes per iteration (ring all-reduce: 2(n-1)/n * S for every rank)."""
    return max(bytes_sent_per_rank(job))


def link_bytes_per_iteration(job: JobConfig, plan: NetworkPlan) -> dict[str, int] | None:
    """Bytes the job's collectives put on each directed link per iteration, along its flows'
    paths (every collective and bucket summed); None when a collective of the job has no
    schedule of transfers (in-network aggregation)."""
    ops = collective_ops(job_program(job))
    if any(op.record.schedule is None for op in ops):
        return None
    total: dict[str, int] = {}
    for op in ops:
        for link, nbytes in op_view(job, op, plan).link_loads(op.schedule()).items():
            total[link] = total.get(link, 0) + nbytes
    return total


def comm_ideal(job: JobConfig, op: CollectiveOp, plan: NetworkPlan) -> Ideal:
    return op.record.ideal_time(op.call(), op_view(job, op, plan))


def play(program: list[ProgramOp], compute_s: list[float], comm_s: dict[int, float]) -> float:
    """One iteration's duration: compute ops take `fraction` of compute_s[k], collectives
    comm_s[id] each, one at a time on the stream; async ones run alongside the compute."""
    t = stream = 0.0
    ends: dict[int, float] = {}
    for op in program:
        if isinstance(op, ComputeOp):
            t += compute_s[op.k] * op.fraction
        elif isinstance(op, WaitOp):
            t = max([t] + [ends[i] for i in op.ids])
        else:
            stream = ends[op.id] = max(t, stream) + comm_s[op.id]
            if not op.is_async:
                t = stream
    return max(t, stream)


def ideal_iteration_s(job: JobConfig, plan: NetworkPlan) -> tuple[float, float]:
    """(ideal isolated iteration time in s, rate of the link bounding its longest collective)."""
    program = job_program(job)
    ideals = {op.id: comm_ideal(job, op, plan) for op in collective_ops(program)}
    longest = max(ideals.values(), key=lambda c: c.seconds)
    means = [p.compute.mean_s for p in job.compute_phases]
    return play(program, means, {i: c.seconds for i, c in ideals.items()}), longest.bottleneck_bps


def phase_summary(job: JobConfig, plan: NetworkPlan) -> list[dict[str, Any]]:
    """Per phase, what summary.json records: name, kind, collective, bytes, participants, and for
    a collective with a schedule the bytes each of its ranks sends, its ideal time and
    bottleneck link (buckets summed)."""
    out: list[dict[str, Any]] = []
    ops = collective_ops(job_program(job))
    for index, phase in enumerate(job.phases):
        row: dict[str, Any] = {"phase": index, "name": phase.name, "kind": phase.kind}
        if isinstance(phase, ComputePhase):
            row.update(compute_mean_s=phase.compute.mean_s, jitter=phase.compute.jitter,
                       distribution=phase.compute.distribution)
        else:
            row.update(collective=phase.collective, bytes=phase.bytes, participants=list(phase.participants))
            mine = [op for op in ops if op.phase == index and op.record.schedule is not None]
            if mine:
                ideals = [comm_ideal(job, op, plan) for op in mine]
                sent = [0] * len(phase.participants)
                for op in mine:
                    for r, nbytes in enumerate(op.record.bytes_sent(op.call())):
                        sent[r] += nbytes
                row.update(bytes_sent_per_rank=sent, ideal_s=sum(c.seconds for c in ideals),
                           bottleneck=ideals[0].bottleneck, bottleneck_bps=ideals[0].bottleneck_bps,
                           buckets=len(mine) if phase.overlap else None,
                           busbw_factor=phase.record.busbw_factor(len(phase.participants) - phase.servers))
        out.append(row)
    return out


def describe_job(job: JobConfig, plan: NetworkPlan) -> str:
    """One line for `validate`: the resolved phases and the ideal iteration time."""
    parts = [f"{p.name} {format_duration(p.compute.mean_s)}" if isinstance(p, ComputePhase)
             else f"{p.collective} {format_size(p.bytes)}" for p in job.phases]
    shown = ", ".join(parts[:6]) + (f", ... ({len(parts)} phases)" if len(parts) > 6 else "")
    extra = f"; {job.model.name}" if job.model else ""
    if job.scaled:
        real = format_size(job.scaled.real_bytes_per_iteration)
        extra += f", scaled from {real} (a = {job.scaled.comm_fraction:.1%})"
    ideal, _ = ideal_iteration_s(job, plan)
    return f"{job.name}: {shown}{extra}; ideal iteration {ideal * 1e3:.1f} ms"

"""What a job would achieve alone on the network: the baseline for slowdowns and timeouts.

A collective's ideal time is its busiest link's bytes over that link's rate: the schedule's
transfers (mn_harness/collectives) mapped onto the plan's routes, every link loaded by all
transfers that cross it, perfect pipelining assumed. A pipeline pass is played in its 1F1B
order (collectives.pipeline.ideal_time). The ideal iteration time plays the job's program
(jobs/program.py) with mean compute times and these ideal collectives, one communication stream
— so DDP overlap and traces' concurrent collectives count as they would ideally. Jitter and
stragglers are left out. TCP/IP header overhead (~4.5% at a 1500-byte MTU) is ignored too, so an
isolated job measures about 1.05x ideal.

In-network aggregation (inc_allreduce): a worker sends S once; its time is S over the slowest
link of the job's ring hops."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mn_harness import collectives
from mn_harness.collectives import pipeline
from mn_harness.config import JobConfig
from mn_harness.config.workload import CommPhase, ComputePhase
from mn_harness.jobs.program import Op, comm_ops, job_program
from mn_harness.network.plan import NetworkPlan
from mn_harness.units import format_duration, format_size


@dataclass(frozen=True)
class CommIdeal:
    seconds: float
    bottleneck_bps: float  # rate of the link that bounds it
    bottleneck: str | None  # that link's label (None: inc_allreduce)


def op_schedule(op: Op) -> collectives.Schedule:
    return collectives.schedule(op["collective"], op["bytes"], len(op["ranks"]), servers=op.get("servers", 0),
                                micro_batches=max(1, op.get("micro_batches", 1)),
                                grad_bytes=op.get("grad_bytes"))


def bytes_sent_per_rank(job: JobConfig) -> list[int]:
    """Bytes each rank sends per iteration (summed over every collective, buckets included)."""
    if job.collective == collectives.INC:
        return [job.bytes_per_iteration] * job.n
    sent = [0] * job.n_ranks
    for op in comm_ops(job_program(job)):
        for local, nbytes in enumerate(op_schedule(op).bytes_sent_per_rank()):
            sent[op["ranks"][local]] += nbytes
    return sent


def bytes_sent_per_worker(job: JobConfig) -> int:
    """The busiest rank's bytes per iteration (ring all-reduce: 2(n-1)/n * S for every rank)."""
    return max(bytes_sent_per_rank(job))


def link_bytes_per_iteration(job: JobConfig, plan: NetworkPlan) -> dict[str, int] | None:
    """Bytes the job's collectives put on each directed link per iteration, along its flows'
    paths (every collective and bucket summed); None for in-network aggregation, which has no
    schedule of transfers."""
    if job.collective == collectives.INC:
        return None
    hosts = job.hosts
    total: dict[str, int] = {}
    for op in comm_ops(job_program(job)):
        ranks = tuple(hosts[r] for r in op["ranks"])
        for link, nbytes in plan.schedule_link_loads(op_schedule(op), ranks, job.name).items():
            total[link] = total.get(link, 0) + nbytes
    return total


def comm_ideal(job: JobConfig, op: Op, plan: NetworkPlan) -> CommIdeal:
    hosts = tuple(job.hosts[r] for r in op["ranks"])
    rates = plan.link_bps()
    if op["op"] == "pipeline":
        def seconds(src: int, dst: int, nbytes: int) -> float:
            return nbytes * 8 / plan.path_rate_bps(hosts[src], hosts[dst], job.name)
        t = pipeline.ideal_time(len(hosts), op["micro_batches"], op["forward_s"], op["backward_s"],
                                op["bytes"], op["grad_bytes"], seconds)
        rate = min(plan.path_rate_bps(a, b, job.name) for a, b in zip(hosts, hosts[1:], strict=False))
        return CommIdeal(t, rate, None)
    loads = plan.schedule_link_loads(op_schedule(op), hosts, job.name)  # ECMP: along its flows
    link = max(sorted(loads), key=lambda label: loads[label] / rates[label])
    return CommIdeal(loads[link] * 8 / rates[link], rates[link], link)


def play(job: JobConfig, program: list[Op], compute_s: list[float], comm_s: dict[int, float]) -> float:
    """One iteration's duration: compute ops take `fraction` of compute_s[k], collectives
    comm_s[id] each, one at a time on the stream; async ones run alongside the compute."""
    t = stream = 0.0
    ends: dict[int, float] = {}
    for op in program:
        if op["op"] == "compute":
            t += compute_s[op["k"]] * op["fraction"]
        elif op["op"] == "wait":
            t = max([t] + [ends[i] for i in op["ids"]])
        else:
            stream = ends[op["id"]] = max(t, stream) + comm_s[op["id"]]
            if not op["async"]:
                t = stream
    return max(t, stream)


def ideal_iteration_s(job: JobConfig, plan: NetworkPlan) -> tuple[float, float]:
    """(ideal isolated iteration time in s, rate of the link bounding its longest collective)."""
    if job.collective == collectives.INC:
        rate = plan.job_bottleneck_bps(job.workers)
        return job.compute_s + job.bytes_per_iteration * 8 / rate, rate
    program = job_program(job)
    ideals = {op["id"]: comm_ideal(job, op, plan) for op in comm_ops(program)}
    longest = max(ideals.values(), key=lambda c: c.seconds)
    means = [p.compute.mean_s for p in job.compute_phases]
    return play(job, program, means, {i: c.seconds for i, c in ideals.items()}), longest.bottleneck_bps


def phase_summary(job: JobConfig, plan: NetworkPlan) -> list[dict[str, Any]]:
    """Per phase, what summary.json records: name, kind, collective, bytes, participants, the
    bytes each of its ranks sends, its ideal time and bottleneck link (buckets summed)."""
    out: list[dict[str, Any]] = []
    ops = [] if job.collective == collectives.INC else comm_ops(job_program(job))
    for index, phase in enumerate(job.phases):
        row: dict[str, Any] = {"phase": index, "name": phase.name, "kind": phase.kind}
        if isinstance(phase, ComputePhase):
            row.update(compute_mean_s=phase.compute.mean_s, jitter=phase.compute.jitter,
                       distribution=phase.compute.distribution)
        else:
            row.update(collective=phase.collective, bytes=phase.bytes, participants=list(phase.participants))
            mine = [op for op in ops if op["phase"] == index]
            if mine:
                ideals = [comm_ideal(job, op, plan) for op in mine]
                sent = [0] * len(phase.participants)
                for op in mine:
                    for r, nbytes in enumerate(op_schedule(op).bytes_sent_per_rank()):
                        sent[r] += nbytes
                row.update(bytes_sent_per_rank=sent, ideal_s=sum(c.seconds for c in ideals),
                           bottleneck=ideals[0].bottleneck, bottleneck_bps=ideals[0].bottleneck_bps,
                           buckets=len(mine) if phase.overlap else None,
                           busbw_factor=collectives.busbw_factor(phase.collective, _n(phase)))
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


def _n(phase: CommPhase) -> int:
    """The n of the bus bandwidth convention: participants (parameter server: its workers)."""
    return len(phase.participants) - phase.servers

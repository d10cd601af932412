"""What a job would achieve alone on the network: the baseline for slowdowns and timeouts.

Ideal iteration time = compute + bytes one worker sends per iteration / the slowest link on
the job's paths. It ignores TCP/IP header overhead (~4.5% at a 1500-byte MTU), so an isolated
job measures about 1.05x ideal."""

from __future__ import annotations

from mn_harness.config import JobConfig
from mn_harness.network.plan import NetworkPlan
from mn_harness.worker import ring


def bytes_sent_per_worker(job: JobConfig) -> int:
    """Ring all-reduce sends 2(n-1)/n * S per worker; in-network aggregation sends S once
    (the switch returns the sum)."""
    if job.collective == "inc_allreduce":
        return job.bytes_per_iteration
    return ring.bytes_sent_per_worker(job.bytes_per_iteration, job.n)


def ideal_iteration_s(job: JobConfig, plan: NetworkPlan) -> tuple[float, float]:
    """(ideal isolated iteration time in s, bottleneck rate in bit/s)."""
    rate = plan.job_bottleneck_bps(job.name)
    return job.compute_s + bytes_sent_per_worker(job) * 8 / rate, rate

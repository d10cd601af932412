"""What each worker is told: the WorkerSpec of every (job, rank), from the experiment and the
network plan. Pure data, no processes: the launcher saves each spec as JSON next to the worker's
output and starts `python -m mn_harness.worker SPEC.json` in the worker's host.

Every rank gets the job's program (jobs/program.py: the phases as operations, DDP buckets
included) and its own compute durations per iteration (jobs/delays.py, seeded from run.seed).

Ports: job j's ranks listen on TCP port BASE_PORT + its job id and connect from SOURCE_PORT_BASE +
its job id (network.flows: the plan knows every flow's 5-tuple, which ECMP hashes); job ids are
Experiment.job_ids(), the numbering the P4 entries use too; an inc_allreduce worker's job id on
the aggregation switch is the same id."""

from __future__ import annotations

import json
import os
from pathlib import Path

from mn_harness import collectives
from mn_harness.config import Experiment
from mn_harness.jobs.delays import compute_plan
from mn_harness.jobs.program import job_program, require_scaled
from mn_harness.jobs.shifts import start_shifts
from mn_harness.network.flows import listen_port, source_port
from mn_harness.network.plan import NetworkPlan
from mn_harness.worker.spec import WorkerSpec

# JSON object of mn_harness.worker.tunables.Tunables overrides for every worker of a run, for
# benchmarks that tune the transport (recorded in each raw/*.spec.json); unset: the defaults.
TRANSPORT_ENV = "MN_HARNESS_TRANSPORT"


def worker_stem(raw_dir: Path, job: str, rank: int) -> Path:
    """raw/<job>-r<rank>: the prefix of one worker's files (.spec.json, .iterations.jsonl ...)."""
    return raw_dir / f"{job}-r{rank}"


def worker_specs(experiment: Experiment, plan: NetworkPlan, raw_dir: Path,
                 cc_names: dict[str, str]) -> list[tuple[str, WorkerSpec]]:
    """(host, spec) for every worker of every job, in job then rank order."""
    out = []
    job_ids = experiment.job_ids()
    transport = json.loads(os.environ.get(TRANSPORT_ENV) or "{}")
    shifts = start_shifts(experiment, plan)  # run.shifts: CASSINI's, added to the start offsets
    for job in experiment.jobs:
        require_scaled(job)
        job_id = job_ids[job.name]
        ips = tuple(plan.host_ip[w] for w in job.hosts)
        # a program is made of schedules: in-network aggregation (none) runs without one
        program = job_program(job) if collectives.get(job.collective).schedule is not None else []
        means = [p.compute.mean_s for p in job.compute_phases]
        for rank, host in enumerate(job.hosts):
            stem = worker_stem(raw_dir, job.name, rank)
            out.append((host, WorkerSpec(
                job=job.name, rank=rank, ips=ips, port=listen_port(job_id),
                src_port=source_port(job_id),
                collective=job.collective, bytes_per_iteration=job.bytes_per_iteration,
                compute_s=job.compute_s, iterations=job.iterations,
                start_offset_s=job.start_offset_s + shifts.get(job.name, 0.0), cc=cc_names[job.name],
                iterations_path=str(stem) + ".iterations.jsonl",
                throughput_path=str(stem) + ".throughput.jsonl",
                bin_s=experiment.run.throughput_bin_s,
                program=program, compute_plan=compute_plan(job, rank, experiment.run.seed),
                compute_means=means, computes=rank < job.n_workers, transport=transport,
                realtime_main=experiment.run.emulation.worker_main_thread == "realtime",
                **_inc_fields(job, job_id, plan.gateway(host).peer_ip, experiment.run.seed),
            )))
    return out


def _inc_fields(job, job_id: int, gateway_ip: str, seed: int) -> dict:
    """WorkerSpec fields of an inc_allreduce worker: it sends to its gateway (the aggregation
    switch); the job id on the switch is Experiment.job_ids()'s, as in the P4 entries."""
    if job.inc is None:
        return {}
    return {"agg_switch_ip": gateway_ip, "agg_job_id": job_id, "inc_slots": job.inc.slots,
            "inc_scale": job.inc.scale, "inc_seed": seed}

"""summary.json's one writer: the run's summary (results.schema.RunSummary) from the experiment,
the plan, the workers' rows and what the session observed (RunFacts); per job the
configuration that matters for reading the numbers (hosts, CC, bytes, compute, bottleneck, ideal
time, its phases with their resolved bytes and the preset / scaling behind them), the iteration
statistics (results.iterations: the same definitions the report uses) and per-phase statistics
(results.phases), plus which jobs share which link. What later steps add — the isolated
baselines (runner), the report's metrics — goes through `update_summary` here too, so every
summary.json is written by `write_summary` in the current version."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from mn_harness.config import Experiment
from mn_harness.jobs.cassini import predict
from mn_harness.jobs.ideal import bytes_sent_per_rank, ideal_iteration_s, phase_summary
from mn_harness.network.plan import NetworkPlan
from mn_harness.results.collect import write_run_csvs
from mn_harness.results.iterations import job_iterations, job_stats, worker_cpu
from mn_harness.results.loaders import load_summary
from mn_harness.results.nominal import nominal_csvs
from mn_harness.results.phases import bytes_acked_per_rank, phase_stats
from mn_harness.results.records import to_json
from mn_harness.results.schema import (
    SUMMARY_JSON,
    SUMMARY_VERSION,
    FlowPath,
    IterationRow,
    JobSummary,
    PhaseRow,
    RunFacts,
    RunSummary,
    ThroughputRow,
    WorkerCpu,
)
from mn_harness.results.schema_fidelity import Fidelity


def summarise(experiment: Experiment, plan: NetworkPlan, rows: Sequence[IterationRow],
              cc_names: dict[str, str], phases: Sequence[PhaseRow] = (),
              throughput: Sequence[ThroughputRow] = (), facts: RunFacts | None = None) -> RunSummary:
    iters = job_iterations(rows, {job.name: job.n_ranks for job in experiment.jobs})
    jobs = {}
    for job in experiment.jobs:
        stats = job_stats(iters.get(job.name, []), rows, job.name, job.n_ranks, job.iterations,
                          experiment.warmup_of(job))
        ideal, rate = ideal_iteration_s(job, plan)
        sent = bytes_sent_per_rank(job)
        complete = {i.iteration for i in stats.complete}
        cpu = worker_cpu(rows, job.name, stats.warmup)
        jobs[job.name] = JobSummary(
            hosts=list(job.hosts),
            servers=list(job.servers),
            cc=cc_names.get(job.name, job.cc.name),
            iterations=stats.n_iterations,
            iterations_planned=job.iterations,
            missing_rows=stats.missing_rows,
            bytes_per_iteration=job.bytes_per_iteration,
            bytes_sent_per_worker=max(sent),
            bytes_sent_per_rank=sent,
            bytes_acked_per_rank={str(rank): n for rank, n in bytes_acked_per_rank(throughput, job.name).items()},
            compute_s=job.compute_s,
            phases=phase_summary(job, plan),
            phase_stats=phase_stats(phases, job.name, len(job.servers), complete),
            model=dataclasses.asdict(job.model) if job.model else None,
            scaled=dataclasses.asdict(job.scaled) if job.scaled else None,
            trace=job.trace,
            stragglers=[dataclasses.asdict(s) for s in job.stragglers],
            bottleneck_bps=rate,
            ideal_iter_s=ideal,
            mean_iter_s=stats.mean_iter_s,
            p50_iter_s=stats.p50_iter_s,
            p99_iter_s=stats.p99_iter_s,
            slowdown_mean=stats.slowdown_mean(ideal),
            slowdown_p99=stats.slowdown_p99(ideal),
            warmup=stats.warmup,
            warmup_mean_iter_s=stats.warmup_mean_iter_s,
            worker_cpu=WorkerCpu(**cpu) if cpu else None,
        )
    observed = facts or RunFacts()
    return RunSummary(
        **{f.name: getattr(observed, f.name) for f in dataclasses.fields(RunFacts)},
        experiment=experiment.name,
        cc={name: j.cc or "" for name, j in jobs.items()},
        jobs=jobs,
        link_jobs=plan.link_jobs(),
        link_ranks=plan.link_ranks(),
        link_bps=plan.link_bps(),
        routing=plan.routing,
        time_scale=experiment.run.emulation.time_scale,
        flow_paths=flow_paths(plan),
        cassini=cassini(experiment, plan),
    )


def cassini(experiment: Experiment, plan: NetworkPlan) -> dict | None:
    """CASSINI's prediction on the paths the flows took (None while an ECMP choice is unknown);
    an error in the prediction must not cost the run its summary."""
    if not plan.resolved:
        return None
    try:
        return predict(experiment, plan).to_dict()
    except Exception as exc:  # noqa: BLE001 - the measurement matters more than the model
        return {"error": str(exc)}


def flow_paths(plan: NetworkPlan) -> dict[str, list[FlowPath]]:
    """job -> one entry per flow: rank, 5-tuple and the nodes its data crossed (with ECMP, the
    data plane's choice; `resolved` false if the run ended before the choice was known)."""
    out: dict[str, list[FlowPath]] = {}
    for flow in plan.flows:
        out.setdefault(flow.job, []).append(FlowPath(
            rank=flow.rank, src=flow.src, dst=flow.dst, sport=flow.sport, dport=flow.dport,
            path=plan.flow_nodes(flow), resolved=len(plan.flow_paths(flow)) == 1))
    return out


def write_summary(results_dir: Path, summary: RunSummary) -> Path:
    """summary.json in the current version, written atomically (a reader never sees half a
    file)."""
    path = results_dir / SUMMARY_JSON
    tmp = path.with_suffix(".json.tmp")
    data = to_json(dataclasses.replace(summary, version=SUMMARY_VERSION))
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    return path


def update_summary(results_dir: Path, change: Callable[[RunSummary], RunSummary]) -> RunSummary:
    """Rewrite a folder's summary.json (of any version) with `change` applied; returns the new
    summary."""
    summary = change(load_summary(results_dir))
    write_summary(results_dir, summary)
    return summary


def write_run_results(experiment: Experiment, plan: NetworkPlan, results_dir: Path,
                      cc_names: dict[str, str], facts: RunFacts,
                      fidelity: Callable[[Sequence[IterationRow], Sequence[PhaseRow]], Fidelity] | None = None
                      ) -> RunSummary:
    """The results folder from the workers' raw files: iterations.csv, phases.csv,
    throughput.csv and summary.json (with what the session observed, and `fidelity`: the
    verdict made from the run's monitors and its phases). Returns the summary.

    `experiment` and `plan` are the experiment's as written (nominal); a run dilated by
    run.emulation.time_scale has its measurements converted here (results/nominal.py), the
    workers' phases before the verdict judges them."""
    scale = experiment.run.emulation.time_scale
    rows, phases, throughput = write_run_csvs(results_dir / "raw", results_dir, scale)
    nominal_csvs(results_dir, scale)
    if fidelity is not None:
        facts = dataclasses.replace(facts, fidelity=fidelity(rows, phases))
    summary = summarise(experiment, plan, rows, cc_names, phases, throughput, facts)
    write_summary(results_dir, summary)
    return summary

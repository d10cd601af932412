"""One experiment, end to end: config → network → data plane → congestion control → jobs →
results, as a use of the session (mn_harness.session), which owns bring-up and teardown: Ctrl-C,
SIGTERM, an exception or a dead worker all leave nothing behind, and whatever the workers
flushed is written out as results."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from mn_harness.config import Experiment
from mn_harness.results.loaders import load_summary
from mn_harness.results.schema import RunSummary
from mn_harness.results.summary import update_summary
from mn_harness.session import Session


def run_experiment(experiment: Experiment, out_root: str | Path | None = None,
                   log=print, after_run=None, **options: Any) -> Path:
    """Runs the experiment and returns its results folder. Raises on failure, after teardown
    and after writing whatever results exist (summary.json records the status). `after_run`
    is called with the results folder once it is written (also on failure); `options` are the
    Session's (pcap, cli, on_network_up, on_jobs_started, on_iteration, config, argv).

    With `run.isolated: true`, each job first runs alone on the same network (its own network
    build, same iterations) and its measured mean iteration time becomes the baseline
    (`isolated_iter_s` in summary.json) instead of the computed ideal."""
    if experiment.servers:  # spread over several machines: its head drives them (mn_harness.cluster)
        from mn_harness.cluster.head import run_cluster

        return run_cluster(experiment, out_root, log, after_run, **options)
    if experiment.run.isolated:
        return _run_with_isolated_baselines(experiment, out_root, log, after_run, options)
    session = Session(experiment, out_root, log, after_results=[after_run] if after_run else [], **options)
    with session:
        session.wait_jobs()
    assert session.results_dir is not None
    return session.results_dir


def _run_with_isolated_baselines(experiment: Experiment, out_root, log, after_run, options: dict) -> Path:
    say = log if log is not None else (lambda *_: None)
    baselines: dict[str, float | None] = {}
    alone_root = Path(out_root or experiment.run.output_dir) / f"{experiment.name}-isolated"
    for job in experiment.jobs:
        say(f"isolated baseline: {job.name} alone")
        alone = experiment.with_jobs([replace(job, start_offset_s=0.0)]).with_run(isolated=False)
        alone_dir = run_experiment(alone, out_root=alone_root, log=lambda *_: None)
        baselines[job.name] = load_summary(alone_dir).jobs[job.name].mean_iter_s

    def with_baselines(summary: RunSummary) -> RunSummary:
        jobs = {name: replace(info, isolated_iter_s=baselines[name]) if name in baselines else info
                for name, info in summary.jobs.items()}
        return replace(summary, jobs=jobs, isolated_runs=str(alone_root))

    def add_baselines(results_dir: Path) -> None:
        update_summary(results_dir, with_baselines)
        if after_run is not None:
            after_run(results_dir)

    options = {"config": experiment, **options}  # config.yaml says isolated: true
    return run_experiment(experiment.with_run(isolated=False), out_root, log, after_run=add_baselines, **options)

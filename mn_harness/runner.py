"""One experiment, end to end: config → network → data plane → congestion control → jobs →
results. Teardown is in `finally`, so Ctrl-C, SIGTERM, an exception or a dead worker all leave
nothing behind, and whatever the workers flushed is written out as results."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import yaml

from mn_harness.cc.manager import CongestionControlManager
from mn_harness.config import Experiment
from mn_harness.dataplane import select_dataplane
from mn_harness.jobs.launcher import WORKER_MODULE, JobLauncher
from mn_harness.network.emulated import EmulatedNetwork
from mn_harness.network.plan import NetworkPlan
from mn_harness.results.collect import write_cc_telemetry
from mn_harness.results.summary import write_run_results, write_summary
from mn_harness.state import RunState

CC_CACHE = Path(os.environ.get("MN_HARNESS_CACHE", "/var/cache/mn-harness"))


class Interrupted(KeyboardInterrupt):
    """SIGTERM/SIGHUP are turned into this so `finally` blocks tear down as on Ctrl-C."""


@contextmanager
def terminate_as_interrupt():
    """Only the main thread may set signal handlers; a caller running experiments from another
    thread keeps its own signal handling."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Interrupted(f"signal {signum}")

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def make_results_dir(experiment: Experiment, out_root: str | Path | None) -> Path:
    root = Path(out_root or experiment.run.output_dir)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = root / f"{experiment.name}-{stamp}"
    suffix = 1
    while path.exists():
        suffix += 1
        path = root / f"{experiment.name}-{stamp}-{suffix}"
    (path / "raw").mkdir(parents=True)
    return path


def run_experiment(experiment: Experiment, out_root: str | Path | None = None,
                   log=print, after_run=None) -> Path:
    """Runs the experiment and returns its results folder. Raises on failure, after teardown
    and after writing whatever results exist (summary.json records the status).

    With `run.isolated: true`, each job first runs alone on the same network (its own network
    build, same iterations) and its measured mean iteration time becomes the baseline
    (`isolated_iter_s` in summary.json) instead of the computed ideal."""
    if experiment.run.isolated:
        return _run_with_isolated_baselines(experiment, out_root, log, after_run)
    dataplane = select_dataplane(experiment.run.dataplane, log=log)
    if dataplane.name != experiment.run.dataplane:  # auto: check what it picked, record it
        experiment = experiment.with_run(dataplane=dataplane.name)
    plan = NetworkPlan(experiment)
    results_dir = make_results_dir(experiment, out_root)
    (results_dir / "config.yaml").write_text(yaml.safe_dump(experiment.to_dict(), sort_keys=False))
    state = RunState(f"{os.getpid()}-{results_dir.name}", results_dir)
    ccm = CongestionControlManager(CC_CACHE, log=log)
    network = EmulatedNetwork(experiment, plan, dataplane)
    launcher: JobLauncher | None = None
    cc_names: dict[str, str] = {}
    extra: dict = {"dataplane": dataplane.name,
                   "slow_start_after_idle": experiment.run.slow_start_after_idle}

    def record_processes() -> None:
        procs = [(pid, f"mininet:{name}") for name, pid in network.node_pids().items()]
        if launcher is not None:
            procs += [(pid, WORKER_MODULE) for pid in launcher.pids()]
        state.set_processes(procs)
        state.set("dataplane", dataplane.state())

    network._on_change = record_processes
    outcome = {"status": "failed"}

    def stop_jobs_and_sample() -> None:
        if launcher is not None:
            launcher.stop()
        extra.update(dataplane.stop_telemetry())
        if network.net is not None:
            extra["link_stats"] = _best_effort(lambda: dataplane.link_stats(network.net, network.plan))

    def write_results() -> None:
        state.remove()
        # network.plan: with ECMP, the one with the data plane's per-flow choices (resolve_paths)
        write_run_results(experiment, network.plan, results_dir, cc_names,
                          {"status": outcome["status"], **extra})
        if after_run is not None:
            after_run(results_dir)

    started = time.monotonic()
    # Teardown steps run in reverse order of registration, each one even if a later-registered
    # step failed: stop jobs, stop the network, save CC telemetry, unregister CCs, write results.
    with ExitStack() as teardown:
        teardown.callback(write_results)
        teardown.callback(ccm.close)
        teardown.callback(lambda: extra.update(cc_telemetry_rows=_save_cc_telemetry(ccm, results_dir)))
        teardown.callback(network.stop)
        teardown.callback(stop_jobs_and_sample)
        try:
            with terminate_as_interrupt():
                ccm.prepare({job.cc for job in experiment.jobs})
                state.set("bpf_cc", ccm.registered_names())
                cc_names = {job.name: ccm.kernel_name(job.cc) for job in experiment.jobs}
                log(f"network: {len(experiment.hosts)} hosts, {len(experiment.switches)} switches, "
                    f"{len(experiment.links)} links ({dataplane.name} data plane)")
                network.build()
                record_processes()
                network.plan = dataplane.resolve_paths(network.net, network.plan)
                extra.update(dataplane.routing_summary(network.plan))
                extra["setup_s"] = round(time.monotonic() - started, 3)
                launcher = JobLauncher(experiment, network, results_dir / "raw", cc_names, log=log,
                                       on_change=record_processes)
                launcher.start()
                t0 = launcher.release()
                dataplane.start_telemetry(results_dir, t0)
                log("jobs: " + ", ".join(f"{j.name} ({cc_names[j.name]}, {j.n} workers, "
                                          f"{j.iterations} iterations)" for j in experiment.jobs))
                launcher.wait(experiment.run.timeout_s or launcher.default_timeout())
                outcome["status"] = "completed"
        except KeyboardInterrupt:
            outcome["status"] = "interrupted"
            raise
        except Exception as exc:
            outcome["status"] = f"failed: {exc}"
            raise
    return results_dir


def _run_with_isolated_baselines(experiment: Experiment, out_root, log, after_run) -> Path:
    baselines: dict[str, float | None] = {}
    alone_root = Path(out_root or experiment.run.output_dir) / f"{experiment.name}-isolated"
    for job in experiment.jobs:
        log(f"isolated baseline: {job.name} alone")
        alone = experiment.with_jobs([replace(job, start_offset_s=0.0)]).with_run(isolated=False)
        alone_dir = run_experiment(alone, out_root=alone_root, log=lambda *_: None)
        summary = json.loads((alone_dir / "summary.json").read_text())
        baselines[job.name] = summary["jobs"][job.name]["mean_iter_s"]

    def add_baselines(results_dir: Path) -> None:
        path = results_dir / "summary.json"
        summary = json.loads(path.read_text())
        for name, value in baselines.items():
            summary["jobs"][name]["isolated_iter_s"] = value
        summary["isolated_runs"] = str(alone_root)
        write_summary(results_dir, summary)
        if after_run is not None:
            after_run(results_dir)

    return run_experiment(experiment.with_run(isolated=False), out_root, log, after_run=add_baselines)


def _best_effort(fn) -> dict:
    """Statistics gathered during teardown must never stop the teardown."""
    try:
        return fn()
    except Exception as exc:
        return {"error": str(exc)}


def _save_cc_telemetry(ccm: CongestionControlManager, results_dir: Path) -> int:
    try:
        rows = ccm.read_telemetry()
    except Exception:  # telemetry is best effort; the teardown must go on
        return 0
    return write_cc_telemetry(rows, results_dir)

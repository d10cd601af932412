"""The Python API: build an experiment, run it, act on the network while it is up.

    import mn_harness as mh
    results = mh.run("topologies/dumbbell-2jobs.yaml", cc="mltcp-reno")   # or a builder
    results.iterations.groupby("job").iter_time.mean()                      # pandas

    with mh.network(experiment, on_iteration=hook) as s:                   # the live network
        s.start_jobs(); s.set_link_rate("s1-s2", "100Mbit"); s.wait_jobs()

Runs need root: `sudo .venv/bin/python my_script.py` (the venv has the project and its
dependencies; the system python3 under sudo has neither). Everything here goes through the same
code as `mn-harness run`: the config package validates, the session (mn_harness.session) builds
and tears down, the results and report packages write the folder. docs/python-api.md is the guide."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mn_harness.api.builder import CCValue, ExperimentBuilder, as_experiment
from mn_harness.api.results import Results
from mn_harness.config import Experiment
from mn_harness.errors import UsageError

if TYPE_CHECKING:
    from mn_harness.session import Session

ExperimentLike = ExperimentBuilder | Experiment | str | Path


def _prepare(experiment: ExperimentLike, cc: CCValue | None, dataplane: str | None) -> Experiment:
    if os.geteuid() != 0:
        raise UsageError("running an experiment needs root (network namespaces, tc, BPF): "
                         "sudo .venv/bin/python <script>")
    exp = as_experiment(experiment)
    if cc is not None:
        exp = ExperimentBuilder.from_experiment(exp).set_cc(cc).build()
    if dataplane is not None:
        exp = exp.with_run(dataplane=dataplane)
    return exp


def _finish(results_dir: Path, report: bool, plots: bool) -> Results:
    results = Results(results_dir)
    if report:
        results.report(plots=plots)
    return results


def run(experiment: ExperimentLike, *, out: str | Path | None = None, cc: CCValue | None = None,
        dataplane: str | None = None, label: str | None = None, report: bool = True,
        plots: bool = False, quiet: bool = False, **options: Any) -> Results:
    """Run an experiment (a builder, an Experiment, or a file's path) and return its Results.

    `out`: the folder the run's folder goes under (default run.output_dir); `cc`/`dataplane`:
    as the CLI's --cc/--dataplane; `label`: what results.load() calls the run; `report`:
    metrics into summary.json and report.md (`plots` too); `quiet`: no progress lines (they
    still go to harness.log). `options` go to the Session: pcap="s1-s2", cli="up"|"after",
    on_network_up, on_jobs_started, on_iteration. Raises what the run raised, after teardown
    and after writing the results (summary.json has the status)."""
    from mn_harness.runner import run_experiment

    exp = _prepare(experiment, cc, dataplane)
    results_dir = run_experiment(exp, out_root=out, log=None if quiet else print, label=label, **options)
    return _finish(results_dir, report, plots)


@contextmanager
def network(experiment: ExperimentLike, *, out: str | Path | None = None, cc: CCValue | None = None,
            dataplane: str | None = None, label: str | None = None, report: bool = True,
            plots: bool = False, quiet: bool = False, **options: Any) -> Iterator[Session]:
    """The experiment's network, up for the `with` block: yields the Session (`.net` is the
    Mininet network; `start_jobs()`, `wait_jobs()`, `set_link_rate()`, `kill_worker()`,
    `interact()`). Leaving the block tears down and writes the results; afterwards
    `Results(session.results_dir)` reads them (the report is written when the block ended
    normally)."""
    from mn_harness.session import Session

    exp = _prepare(experiment, cc, dataplane)
    session = Session(exp, out, None if quiet else print, label=label, **options)
    with session:
        yield session
    assert session.results_dir is not None
    _finish(session.results_dir, report, plots)


__all__ = ["ExperimentBuilder", "Results", "network", "run"]

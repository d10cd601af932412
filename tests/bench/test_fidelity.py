"""bench/fidelity.py's scenarios (no runs, no root): every scenario makes a valid experiment in
each mode, with the CC, the collective and the iterations the bench asks for, so a scenario
that drifts from the config schema fails here and not an hour into a measurement."""

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fidelity():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module("fidelity")
    finally:
        sys.path.remove(str(ROOT / "bench"))


@pytest.mark.parametrize("scenario", ["demo", "three_jobs", "heavy", "three_slack"])
def test_every_scenario_is_a_valid_experiment(scenario):
    fidelity = _fidelity()
    exp = fidelity.experiment(scenario, "mltcp-reno", "synthetic", 7)
    assert exp.jobs and all(j.iterations == 7 and j.collective == "ring_allreduce" for j in exp.jobs)
    assert {j.cc.name for j in exp.jobs} == {"mltcp-reno"}


def test_three_slack_is_the_3jobs_slack_scenario():
    """The held-back scenario of bench/reproduce.py: 3 jobs, 25 MB / 500 ms each."""
    exp = _fidelity().experiment("three_slack", "reno", "synthetic", 40)
    assert len(exp.jobs) == 3
    assert {(j.bytes_per_iteration, j.compute_s) for j in exp.jobs} == {(25_000_000, 0.5)}

"""Compute durations per rank and iteration: seeded jitter and stragglers, repeatable exactly."""

import statistics

import pytest

from mn_harness.config import Experiment
from mn_harness.jobs.delays import compute_plan
from tests.config.test_workload import BASE


def job(compute, stragglers=(), iterations=2000, servers=False):
    raw = {**BASE, "jobs": [{"name": "j", "workers": ["h1", "h2", "h3"], "iterations": iterations,
                             "stragglers": list(stragglers),
                             "phases": [{"compute": compute}, {"compute": "10ms"},
                                        {"collective": "parameter_server" if servers else "all_gather",
                                         "bytes": "1MB"}]}]}
    if servers:
        raw["jobs"][0]["servers"] = ["h4"]
    return Experiment.from_dict(raw).jobs[0]


def test_no_jitter_is_exactly_the_mean():
    plan = compute_plan(job("100ms", iterations=5), 0, seed=1)
    assert plan == [[0.1, 0.01]] * 5


@pytest.mark.parametrize("distribution", ["normal", "lognormal"])
def test_jitter_has_the_asked_mean_and_spread(distribution):
    plan = compute_plan(job({"mean": "100ms", "jitter": "10%", "distribution": distribution}), 1, seed=7)
    first = [it[0] for it in plan]
    assert statistics.mean(first) == pytest.approx(0.1, rel=0.02)
    assert statistics.stdev(first) == pytest.approx(0.01, rel=0.1)
    assert all(it[1] == 0.01 for it in plan) and min(first) > 0


def test_same_seed_same_plan_other_seed_or_rank_another():
    j = job({"mean": "100ms", "jitter": "20%"}, [{"ranks": [1], "delay": "50ms", "probability": 0.3}], 50)
    assert compute_plan(j, 1, seed=3) == compute_plan(j, 1, seed=3)
    assert compute_plan(j, 1, seed=3) != compute_plan(j, 1, seed=4)
    assert compute_plan(j, 0, seed=3) != compute_plan(j, 1, seed=3)


def test_straggler_delay_with_probability_and_persistent_slowdown():
    stragglers = [{"ranks": [1], "delay": "50ms", "probability": 0.25}, {"ranks": [2], "slowdown": 1.5}]
    j = job("100ms", stragglers)
    delayed = [it[0] - 0.1 for it in compute_plan(j, 1, seed=1)]
    hits = [d for d in delayed if d > 0]
    assert all(d == pytest.approx(0.05) for d in hits)  # the delay goes to the first compute phase
    assert len(hits) / len(delayed) == pytest.approx(0.25, abs=0.03)
    assert compute_plan(j, 2, seed=1)[0] == [pytest.approx(0.15), pytest.approx(0.015)]
    assert compute_plan(j, 0, seed=1)[0] == [0.1, 0.01]


def test_parameter_servers_do_not_compute():
    j = job("100ms", iterations=3, servers=True)
    assert compute_plan(j, 3, seed=1) == [[0.0, 0.0]] * 3

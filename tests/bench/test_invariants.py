"""bench/invariants.py's scenarios (no runs): valid experiments, and the slowed demo is the demo
five times slower and nothing else."""

from mn_harness.config import Experiment
from mn_harness.jobs.ideal import ideal_iteration_s
from mn_harness.network.plan import NetworkPlan
from tests.helpers import bench_module


def test_every_scenario_is_a_valid_experiment_and_the_slowed_demo_is_five_times_slower():
    bench = bench_module("invariants")
    exps = {name: Experiment.from_dict(make(None), name) for name, make in bench.SCENARIOS.items()}
    fast, slow = exps["demo"], exps["demo-100m"]
    assert [j.bytes_per_iteration for j in fast.jobs] == [j.bytes_per_iteration for j in slow.jobs]
    assert [link.queue_packets for link in fast.links] == [link.queue_packets for link in slow.links]
    assert all(a.bw_bps == 5 * b.bw_bps for a, b in zip(fast.links, slow.links, strict=True))
    for a, b in zip(fast.jobs, slow.jobs, strict=True):
        ideal_a, _ = ideal_iteration_s(a, NetworkPlan(fast))
        ideal_b, _ = ideal_iteration_s(b, NetworkPlan(slow))
        assert abs(ideal_b - 5 * ideal_a) < 1e-6
    assert exps["solo-1g"].jobs[0].cc.name == "cubic"

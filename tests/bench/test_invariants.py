"""bench/invariants.py's scenarios (no runs): valid experiments, and the slowed demos are the
demo run through run.emulation.time_scale and nothing else."""

from mn_harness.config import Experiment
from mn_harness.config.time_scale import dilate
from mn_harness.jobs.ideal import ideal_iteration_s
from mn_harness.network.plan import NetworkPlan
from tests.helpers import bench_module


def test_every_scenario_is_a_valid_experiment_and_the_slowed_demos_are_the_demo_dilated():
    bench = bench_module("invariants")
    exps = {name: Experiment.from_dict(make(None), name) for name, make in bench.SCENARIOS.items()}
    fast = exps["demo"]
    assert fast.run.emulation.time_scale == 1
    for name, k in (("demo-100m", 5), ("demo-20m", 25)):
        slow = exps[name]
        assert slow.run.emulation.time_scale == k
        assert slow.links == fast.links and [j.phases for j in slow.jobs] == [j.phases for j in fast.jobs]
        machine = dilate(slow)
        assert {link.bw_bps for link in machine.links} == {500e6 / k}
        for a, b in zip(fast.jobs, machine.jobs, strict=True):
            ideal_a, _ = ideal_iteration_s(a, NetworkPlan(fast))
            ideal_b, _ = ideal_iteration_s(b, NetworkPlan(machine))
            assert abs(ideal_b - k * ideal_a) < 1e-6
    assert exps["solo-1g"].jobs[0].cc.name == "cubic"

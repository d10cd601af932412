"""CASSINI's prediction on hand-computed cases: jobs on one 1 Gbit/s dumbbell bottleneck (each
2-worker ring sends its S bytes per iteration once per direction, so it communicates S·8/C)."""

import pytest

from mn_harness.config import Experiment
from mn_harness.jobs.cassini import Circle, JobDemand, predict
from mn_harness.network.plan import NetworkPlan

GBIT = 1e9


def dumbbell(jobs):
    """jobs: [(compute_s, comm_s)]: job i on hosts a<i> -> b<i> across s1-s2."""
    n = len(jobs)
    raw = {"hosts": [f"a{i}" for i in range(n)] + [f"b{i}" for i in range(n)], "switches": ["s1", "s2"],
           "link_defaults": {"bw": "1Gbit"},
           "links": [{"endpoints": ["s1", "s2"]}] + [{"endpoints": [f"a{i}", "s1"]} for i in range(n)]
           + [{"endpoints": [f"b{i}", "s2"]} for i in range(n)],
           "jobs": [{"name": f"j{i}", "workers": [f"a{i}", f"b{i}"], "bytes_per_iteration": int(comm * GBIT / 8),
                     "compute": compute, "iterations": 10} for i, (compute, comm) in enumerate(jobs)]}
    exp = Experiment.from_dict(raw)
    return predict(exp, NetworkPlan(exp))


def test_two_compatible_jobs_score_one():
    p = dumbbell([(0.3, 0.2), (0.3, 0.2)])  # a = 0.4 each
    link = p.links["s1->s2"]
    assert link.score == pytest.approx(1.0)
    assert link.slowdown == pytest.approx(1.0) and p.jobs["j1"].slowdown == pytest.approx(1.0)
    assert link.aligned_score == pytest.approx(0.6)  # phases on top of each other: 40% at 2C
    assert p.jobs["j0"].aligned_slowdown == pytest.approx(1.4)  # (1 - a) + N a
    assert 0.2 - 1e-3 <= link.shifts_s["j1"] <= 0.3 + 1e-3  # j1's phase fits in j0's compute
    assert link.demand_bps == {"j0": GBIT, "j1": GBIT}
    assert p.loops == []


def test_a_shift_sits_in_the_middle_of_the_equally_good_ones():
    """Where the phases fit with room to spare, every rotation that keeps them apart scores 1; the
    shift returned leaves the room on both sides of each phase (real phases run longer than the
    ideal): j1's 0.2 s phase in the middle of j0's 0.3 s compute, three 0.2 s phases of a 0.8 s
    period spread evenly."""
    p = dumbbell([(0.3, 0.2), (0.3, 0.2)])
    assert p.links["s1->s2"].shifts_s["j1"] == pytest.approx(0.25, abs=0.01)
    p = dumbbell([(0.6, 0.2)] * 3)
    shifts = sorted(p.links["s1->s2"].shifts_s.values())
    gaps = [b - a for a, b in zip(shifts, [*shifts[1:], shifts[0] + 0.8], strict=False)]
    assert gaps == pytest.approx([0.8 / 3] * 3, abs=0.02), shifts


def test_two_jobs_each_needing_60_percent_of_the_link():
    """The phases overlap at least 2·0.6 − 1 = 20% of the period at twice the capacity: 0.8; the
    link needs 1.2 periods per period: predicted slowdown 1.2 (aligned: 0.4, (1 − a) + 2a = 1.6)."""
    p = dumbbell([(0.2, 0.3), (0.2, 0.3)])
    link = p.links["s1->s2"]
    assert link.score == pytest.approx(0.8)
    assert link.slowdown == pytest.approx(1.2)
    assert link.aligned_score == pytest.approx(0.4) and link.aligned_slowdown == pytest.approx(1.6)


@pytest.mark.parametrize("n", [3, 4])
def test_n_jobs_each_communicating_one_nth_interleave_perfectly(n):
    """Fair sharing with aligned phases costs (1 − a) + N·a = 2 − 1/N; interleaving 1.0."""
    period = 0.6
    p = dumbbell([(period * (1 - 1 / n), period / n)] * n)
    link = p.links["s1->s2"]
    assert link.score == pytest.approx(1.0, abs=0.01)
    assert link.aligned_slowdown == pytest.approx(2 - 1 / n, abs=0.01)
    shifts = sorted(link.shifts_s.values())
    assert all(b - a >= period / n - 0.01 for a, b in zip(shifts, shifts[1:], strict=False))


def test_non_integer_period_ratio_overlaps_whatever_the_rotation():
    """Periods 0.5 s and 0.7 s, 0.1 s of communication each: over the 3.5 s circle the 35 phase
    pairs hit every multiple of 0.1 s once, so at any rotation they overlap 0.1 s in total:
    score 1 − 0.1/3.5 at the best rotation and at rotation 0 alike."""
    p = dumbbell([(0.4, 0.1), (0.6, 0.1)])
    link = p.links["s1->s2"]
    assert link.score == pytest.approx(1 - 1 / 35, abs=1e-3)
    assert link.aligned_score == pytest.approx(1 - 1 / 35, abs=1e-3)
    assert p.quantum_s["j0"] == 0.001  # 3.5 s on the circle: 3500 ticks of 1 ms


def test_score_of_a_given_rotation_on_the_circle():
    circle = Circle({"a": JobDemand(1.0, 0.5, 0.5, GBIT), "b": JobDemand(1.0, 0.5, 0.5, GBIT)})
    load = {"a": GBIT, "b": GBIT}
    assert circle.score({"a": 0, "b": 0}, load, GBIT) == pytest.approx(0.5)
    half = circle.ticks["b"] // 2
    assert circle.score({"a": 0, "b": half}, load, GBIT) == pytest.approx(1.0)
    assert circle.score({"a": 0, "b": half // 2}, load, GBIT) == pytest.approx(0.75)


def test_circular_dependency_pairwise_compatible_jointly_not(topologies):
    """leaf-spine: three jobs pairwise sharing three uplinks, a ≈ 0.39 each. Every link alone
    can rotate its two jobs apart (0.78 < 1), but one rotation per job for all three links
    cannot (3a > 1): the joint excess is 3a − 1 and the affinity graph has the loop."""
    from mn_harness.config import load_experiment

    exp = load_experiment(topologies / "leaf-spine.yaml")
    p = predict(exp, NetworkPlan(exp))
    a = p.jobs["jobA"].comm_fraction
    assert all(link.score == pytest.approx(1.0) for link in p.links.values())
    joint_excess = sum(1 - link.joint_score for link in p.links.values()) / 2  # both directions
    assert joint_excess == pytest.approx(3 * a - 1, abs=0.01)
    # the unavoidable excess is spread over the three links: every job predicted alike
    for job in p.jobs.values():
        assert job.slowdown == pytest.approx(1 + (3 * a - 1) / 3, abs=0.01)
    assert len(p.loops) == 1 and sorted(set(p.loops[0][::2])) == ["jobA", "jobB", "jobC"]


def test_job_without_shared_link_is_predicted_unslowed():
    raw = {"hosts": ["a", "b", "c", "d"], "switches": ["s1", "s2"], "link_defaults": {"bw": "1Gbit"},
           "links": [{"endpoints": ["a", "s1"]}, {"endpoints": ["b", "s1"]}, {"endpoints": ["c", "s2"]},
                     {"endpoints": ["d", "s2"]}, {"endpoints": ["s1", "s2"]}],
           "jobs": [{"name": "x", "workers": ["a", "b"], "bytes_per_iteration": "1MB", "compute": "10ms",
                     "iterations": 2},
                    {"name": "y", "workers": ["c", "d"], "bytes_per_iteration": "1MB", "compute": "10ms",
                     "iterations": 2}]}
    exp = Experiment.from_dict(raw)
    p = predict(exp, NetworkPlan(exp))
    assert p.links == {} and p.jobs["x"].slowdown == 1.0 and p.jobs["x"].links == []


def test_two_flows_of_one_ring_on_a_link_share_it_in_the_demand():
    """Three 4-worker rings [a, b, a', b'] across the dumbbell: each sends 1.5·S per rank, and
    two of its four ring edges cross each direction of s1-s2, so the link carries 3·S of a job
    per iteration and its ideal communication (3·S·8/C) already has both flows sharing the link.
    Its demand there is C, not 2·C (two flows at the bottleneck rate each): three jobs with
    c = 0.18 s of a 0.68 s period fit side by side (score 1), and aligned they cost
    (1 − a) + 3a."""
    hosts = [f"{side}{i}" for side in "ab" for i in range(6)]
    raw = {"hosts": hosts, "switches": ["s1", "s2"], "link_defaults": {"bw": "1Gbit"},
           "links": [{"endpoints": ["s1", "s2"]}] + [{"endpoints": [h, "s1" if h[0] == "a" else "s2"]}
                                                     for h in hosts],
           "jobs": [{"name": f"j{k}", "workers": [f"a{2 * k}", f"b{2 * k}", f"a{2 * k + 1}", f"b{2 * k + 1}"],
                     "bytes_per_iteration": int(0.06 * GBIT / 8), "compute": 0.5, "iterations": 10}
                    for k in range(3)]}
    exp = Experiment.from_dict(raw)
    p = predict(exp, NetworkPlan(exp))
    link = p.links["s1->s2"]
    assert p.jobs["j0"].comm_fraction == pytest.approx(0.18 / 0.68, abs=1e-3)
    assert link.demand_bps == pytest.approx({"j0": GBIT, "j1": GBIT, "j2": GBIT})
    assert link.score == pytest.approx(1.0, abs=0.01)
    a = 0.18 / 0.68
    assert link.aligned_slowdown == pytest.approx(1 - a + 3 * a, abs=0.01)

"""The affinity graph's loops (circular dependencies) and components."""

from mn_harness.config import load_experiment
from mn_harness.jobs.affinity import components, link_groups, loops
from mn_harness.network.plan import NetworkPlan


def test_both_directions_of_a_path_are_one_group_and_no_loop(topologies):
    plan = NetworkPlan(load_experiment(topologies / "dumbbell-2jobs.yaml"))
    groups = link_groups(plan.link_jobs())
    assert [(g.links, g.jobs) for g in groups] == [(("s1->s2", "s2->s1"), ("job1", "job2"))]
    assert loops(groups) == []


def test_leaf_spine_has_the_three_job_loop(topologies):
    plan = NetworkPlan(load_experiment(topologies / "leaf-spine.yaml"))
    found = loops(link_groups(plan.link_jobs()))
    assert len(found) == 1
    loop = found[0]
    assert loop[0] == loop[-1] and len(loop) == 7  # job, link, job, link, job, link, job
    assert sorted(loop[0:6:2]) == ["jobA", "jobB", "jobC"]
    assert {frozenset(loop[i - 1:i + 2:2]) for i in (1, 3, 5)} == {
        frozenset({"jobA", "jobC"}), frozenset({"jobA", "jobB"}), frozenset({"jobB", "jobC"})}


def test_a_star_of_jobs_on_one_link_has_no_loop():
    assert loops(link_groups({"l1": ["A", "B", "C", "D"]})) == []
    assert loops(link_groups({"l1": ["A", "B"], "l2": ["B", "C"], "l3": ["C", "D"]})) == []  # a chain


def test_loops_of_two_links_and_of_a_ring():
    assert loops(link_groups({"l1": ["A", "B"], "l2": ["A", "B", "C"]})) == [["B", "l1", "A", "l2", "B"]]
    ring = {"l1": ["A", "B"], "l2": ["B", "C"], "l3": ["C", "D"], "l4": ["D", "A"]}
    found = loops(link_groups(ring))
    assert len(found) == 1 and len(found[0]) == 9 and set(found[0]) == {"A", "B", "C", "D", *ring}
    two = loops(link_groups({**ring, "l5": ["A", "C"]}))
    assert len(two) == 2  # edges − nodes + 1 independent loops


def test_components_split_unrelated_jobs():
    comps = components(link_groups({"l1": ["A", "B"], "l2": ["C", "D"], "l3": ["B", "E"], "l4": ["F"]}))
    assert [sorted(jobs) for jobs, _ in comps] == [["A", "B", "E"], ["C", "D"]]

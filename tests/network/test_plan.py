"""Addressing and shortest-path routing, on the shipped topologies and on a loop."""


import pytest
import yaml

from mn_harness.config import Experiment, load_experiment
from mn_harness.network.plan import NetworkPlan
from tests.helpers import TOPOLOGIES


def test_dumbbell_paths_share_only_the_bottleneck():
    plan = NetworkPlan(load_experiment(TOPOLOGIES / "dumbbell-2jobs.yaml"))
    assert [h.label for h in plan.path("h1", "h3")] == ["h1->s1", "s1->s2", "s2->h3"]
    shared = {link: jobs for link, jobs in plan.link_jobs().items() if len(jobs) > 1}
    assert shared == {"s1->s2": ["job1", "job2"], "s2->s1": ["job1", "job2"]}


def test_addresses_unique_and_interfaces_fit_ifnamsiz():
    plan = NetworkPlan(load_experiment(TOPOLOGIES / "leaf-spine.yaml"))
    ips = [i.ip for intfs in plan.interfaces.values() for i in intfs]
    macs = [i.mac for intfs in plan.interfaces.values() for i in intfs]
    assert len(ips) == len(set(ips)) and len(macs) == len(set(macs))
    assert all(len(i.name) <= 15 for intfs in plan.interfaces.values() for i in intfs)


def test_every_switch_routes_every_host_along_shortest_paths():
    exp = load_experiment(TOPOLOGIES / "leaf-spine.yaml")
    plan = NetworkPlan(exp)
    for src in exp.hosts:
        for dst in exp.hosts:
            if src == dst:
                continue
            hops = plan.path(src, dst)
            assert hops[0].src == src and hops[-1].dst == dst
            same_leaf = plan.gateway(src).peer_node == plan.gateway(dst).peer_node
            assert len(hops) == (2 if same_leaf else 4)  # host-leaf(-spine-leaf)-host


def test_ring_of_switches_routes_around_the_loop():
    raw = {
        "hosts": ["a", "b"], "switches": ["s1", "s2", "s3", "s4"],
        "link_defaults": {"bw": "1Gbit"},
        "links": [{"endpoints": ["s1", "s2"]}, {"endpoints": ["s2", "s3"]}, {"endpoints": ["s3", "s4"]},
                  {"endpoints": ["s4", "s1"]}, {"endpoints": ["a", "s1"]}, {"endpoints": ["b", "s3"], "bw": "10Mbit"}],
        "jobs": [{"name": "j", "workers": ["a", "b"], "bytes_per_iteration": 1000, "compute": 0, "iterations": 1}],
    }
    plan = NetworkPlan(Experiment.from_dict(raw))
    path = [h.label for h in plan.path("a", "b")]
    assert path == ["a->s1", "s1->s2", "s2->s3", "s3->b"]  # tie s2/s4 broken by name
    assert plan.path_rate_bps("a", "b") == plan.path_rate_bps("b", "a") == 10e6
    route = next(r for r in plan.routes["s1"] if r.dst_host == "b")
    assert route.next_hop_node == "s2" and route.out.peer_node == "s2"


def test_link_ranks_name_the_sockets_crossing_each_direction():
    plan = NetworkPlan(load_experiment(TOPOLOGIES / "dumbbell-2jobs.yaml"))
    ranks = plan.link_ranks()
    assert ranks["s1->s2"] == {"job1": [0], "job2": [0]}  # h1->h3 and h2->h4
    assert ranks["s2->s1"] == {"job1": [1], "job2": [1]}
    assert plan.link_bps()["s1->s2"] == 1e9


# -- ECMP -----------------------------------------------------------------------------------------

def leaf_spine(routing="ecmp", seed=1):
    raw = yaml.safe_load((TOPOLOGIES / "leaf-spine.yaml").read_text())
    raw["routing"] = routing
    raw["run"]["seed"] = seed
    return Experiment.from_dict(raw)


def test_shortest_routing_keeps_one_next_hop_ecmp_keeps_every_equal_cost_one():
    shortest, ecmp = NetworkPlan(leaf_spine("shortest")), NetworkPlan(leaf_spine("ecmp"))
    assert shortest.next_hops("leaf1", "h3") == ("spine1",)
    assert ecmp.next_hops("leaf1", "h3") == ("spine1", "spine2")
    assert ecmp.next_hops("spine1", "h3") == ("leaf2",)  # one way down
    assert ecmp.next_hops("leaf1", "h2") == ("h2",)  # same leaf: no choice
    route = next(r for r in ecmp.routes["leaf1"] if r.dst_host == "h3")
    assert route.multipath and [h.node for h in route.next_hops] == ["spine1", "spine2"]
    assert shortest.resolved and not ecmp.resolved


def test_unresolved_ecmp_counts_every_candidate_path_resolved_exactly_one():
    plan = NetworkPlan(leaf_spine())
    flow = next(f for f in plan.flows if f.job == "jobA" and f.rank == 0)  # h1 -> h3
    assert [[h.dst for h in p] for p in plan.flow_paths(flow)] == [
        ["leaf1", "spine1", "leaf2", "h3"], ["leaf1", "spine2", "leaf2", "h3"]]
    assert "jobA" in plan.link_jobs()["leaf1->spine2"]  # may share it
    asked = []

    def choose(switch, came_from, f, options):
        asked.append((switch, came_from, f.rank, options))
        return options[-1]

    resolved = plan.resolve(choose)
    assert resolved.resolved
    assert ("leaf1", "h1", 0, ("spine1", "spine2")) in asked  # asked at the leaf, with where from
    assert [h.dst for h in resolved.flow_paths(flow)[0]] == ["leaf1", "spine2", "leaf2", "h3"]
    assert "jobA" not in resolved.link_jobs().get("leaf1->spine1", [])
    assert resolved.flow_nodes(flow) == ["h1", "leaf1", "spine2", "leaf2", "h3"]


def test_resolve_refuses_a_choice_that_is_not_a_next_hop():
    plan = NetworkPlan(leaf_spine())
    with pytest.raises(ValueError, match="not one of"):
        plan.resolve(lambda switch, came_from, flow, options: "leaf3")


def test_ideal_time_follows_the_flow_paths():
    """The ideal collective is computed on the paths the flows take: ECMP's choice decides
    whether jobA's ring crosses the slow leaf1 - spine2 link."""
    from mn_harness.jobs.ideal import ideal_iteration_s

    raw = yaml.safe_load((TOPOLOGIES / "leaf-spine.yaml").read_text())
    raw["routing"] = "ecmp"
    raw["links"][1]["bw"] = "100Mbit"  # leaf1 - spine2 is slower
    plan = NetworkPlan(Experiment.from_dict(raw))
    job = plan.experiment.jobs[0]
    via_spine1 = plan.resolve(lambda switch, came_from, flow, options: options[0])
    via_spine2 = plan.resolve(lambda switch, came_from, flow, options: options[-1])
    assert ideal_iteration_s(job, via_spine1)[1] == 500e6
    assert ideal_iteration_s(job, via_spine2)[1] == 100e6
    assert ideal_iteration_s(job, via_spine2)[0] > ideal_iteration_s(job, via_spine1)[0]

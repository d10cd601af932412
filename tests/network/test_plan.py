"""Addressing and shortest-path routing, on the shipped topologies and on a loop."""


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
    assert plan.job_bottleneck_bps(("a", "b")) == 10e6
    route = next(r for r in plan.routes["s1"] if r.dst_host == "b")
    assert route.next_hop_node == "s2" and route.out.peer_node == "s2"


def test_link_ranks_name_the_sockets_crossing_each_direction():
    plan = NetworkPlan(load_experiment(TOPOLOGIES / "dumbbell-2jobs.yaml"))
    ranks = plan.link_ranks()
    assert ranks["s1->s2"] == {"job1": [0], "job2": [0]}  # h1->h3 and h2->h4
    assert ranks["s2->s1"] == {"job1": [1], "job2": [1]}
    assert plan.link_bps()["s1->s2"] == 1e9

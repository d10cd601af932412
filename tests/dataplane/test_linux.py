"""The Linux data plane's commands per router, from the network plan (no namespace needed), and a
real ECMP run on the leaf-spine file."""

import json

import pytest
import yaml

from mn_harness.collectives import ring
from mn_harness.config import Experiment, load_experiment
from mn_harness.dataplane.linux import (
    ecmp_sysctls,
    parse_route_get,
    route_commands,
    route_get_argv,
    router_commands,
)
from mn_harness.network.flows import ecmp_hash_seed
from mn_harness.network.plan import NetworkPlan
from mn_harness.runner import run_experiment
from tests.helpers import TOPOLOGIES


def test_dumbbell_router_addresses_shaping_and_routes():
    plan = NetworkPlan(load_experiment(TOPOLOGIES / "dumbbell-2jobs.yaml"))
    cmds = router_commands(plan, "s1")
    ports = [i.name for i in plan.interfaces["s1"]]
    assert ports == ["s1-eth1", "s1-eth2", "s1-eth3"]
    for intf in plan.interfaces["s1"]:
        assert ["ip", "addr", "add", f"{intf.ip}/24", "dev", intf.name] in cmds
        assert ["ip", "link", "set", intf.name, "up"] in cmds
        htb = next(c for c in cmds if c[:2] == ["tc", "class"] and intf.name in c)
        assert htb[htb.index("rate") + 1] == "1000000000bit"
    # s1 reaches h1, h2 directly; h3, h4 only through s2's end of the bottleneck link
    routes = route_commands(plan, "s1")
    s2_end = next(i.peer_ip for i in plan.interfaces["s1"] if i.peer_node == "s2")
    assert routes == [["ip", "route", "replace", f"{plan.host_ip[h]}/32", "via", s2_end, "dev", "s1-eth3"]
                      for h in ("h3", "h4")]
    assert cmds[-2:] == routes  # routes after every port is up


def test_leaf_spine_routes_follow_the_plan_paths():
    plan = NetworkPlan(load_experiment(TOPOLOGIES / "leaf-spine.yaml"))
    for router in plan.experiment.switch_names:
        for argv in route_commands(plan, router):
            dst = argv[3].split("/")[0]
            host = next(h for h, ip in plan.host_ip.items() if ip == dst)
            route = next(r for r in plan.routes[router] if r.dst_host == host)
            assert argv[5] == route.next_hop_ip and argv[7] == route.out.name
            assert route.out.peer_node == route.next_hop_node != host


def ecmp_leaf_spine():
    raw = yaml.safe_load((TOPOLOGIES / "leaf-spine.yaml").read_text())
    raw["routing"] = "ecmp"
    return NetworkPlan(Experiment.from_dict(raw))


def test_ecmp_routes_are_multipath_with_seeded_5_tuple_hashing():
    plan = ecmp_leaf_spine()
    routes = route_commands(plan, "leaf1")
    to_h3 = next(r for r in routes if r[3] == f"{plan.host_ip['h3']}/32")
    hops = {to_h3[i + 2]: to_h3[i + 4] for i, word in enumerate(to_h3) if word == "nexthop"}
    assert hops == {plan.interface_towards("leaf1", s).peer_ip: plan.interface_towards("leaf1", s).name
                    for s in ("spine1", "spine2")}
    sysctls = ecmp_sysctls(plan)
    assert sysctls["net.ipv4.fib_multipath_hash_policy"] == "3"  # custom fields, never the socket hash
    assert int(sysctls["net.ipv4.fib_multipath_hash_fields"], 16) == 0x37  # addresses, protocol, ports
    assert int(sysctls["net.ipv4.fib_multipath_hash_seed"]) == ecmp_hash_seed(plan.experiment.run.seed)
    assert ecmp_sysctls(NetworkPlan(load_experiment(TOPOLOGIES / "leaf-spine.yaml"))) == {}


def test_route_get_asks_the_kernel_with_the_flow_5_tuple():
    plan = ecmp_leaf_spine()
    flow = plan.flows[0]  # jobA rank 0: h1 -> h3
    argv = route_get_argv(plan, "leaf1", "h1", flow)
    assert argv[:5] == ["ip", "-o", "route", "get", plan.host_ip["h3"]]
    assert argv[argv.index("iif") + 1] == plan.gateway("h1").peer_name  # leaf1's port to h1
    assert argv[argv.index("sport") + 1] == str(flow.sport) and argv[argv.index("dport") + 1] == str(flow.dport)
    out = "10.0.8.2 from 10.0.6.2 via 10.0.1.2 dev leaf1-eth2 table main \\    cache iif leaf1-eth3"
    assert parse_route_get(out) == "leaf1-eth2" and parse_route_get("unreachable") is None


@pytest.mark.root
@pytest.mark.slow
def test_real_ecmp_run_spreads_jobs_over_both_spines(tmp_path):
    """The leaf-spine file with routing: ecmp: flows of different jobs take different spines,
    the recorded paths are the ones the packets took (the routers' byte counters), and a second
    build with the same seed resolves the same paths."""
    raw = yaml.safe_load((TOPOLOGIES / "leaf-spine.yaml").read_text())
    raw["routing"] = "ecmp"
    for job in raw["jobs"]:
        job.update(iterations=3, bytes_per_iteration="2MB", compute="20ms")
    exp = Experiment.from_dict(raw, "ecmp")
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["routing"] == "ecmp"
    paths = {(job, f["rank"]): f["path"] for job, flows in summary["flow_paths"].items() for f in flows}
    assert all(f["resolved"] for flows in summary["flow_paths"].values() for f in flows)
    spine_of = {key: next(n for n in path if n.startswith("spine")) for key, path in paths.items()}
    job_spines = {job: {s for (j, _), s in spine_of.items() if j == job} for job in ("jobA", "jobB", "jobC")}
    assert len(set().union(*job_spines.values())) == 2, job_spines  # both spines carry traffic
    assert len({frozenset(s) for s in job_spines.values()}) > 1 or any(len(s) == 2 for s in job_spines.values())
    # every hop of every recorded path carried at least the flow's bytes; unused spine links ~none
    used = {f"{a}->{b}" for path in paths.values() for a, b in zip(path, path[1:], strict=False)}
    sent = 3 * ring.bytes_sent_per_worker(2_000_000, 2)
    for link, stats in summary["link_stats"].items():
        if "spine" not in link:
            continue
        if link in used:
            assert stats["sent_bytes"] >= sent, (link, stats)
        else:
            assert stats["sent_bytes"] < sent / 10, (link, stats)  # ACKs of the other direction at most
    again = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    flows_again = json.loads((again / "summary.json").read_text())["flow_paths"]
    assert flows_again == summary["flow_paths"]  # same seed, same paths

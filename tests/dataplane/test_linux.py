"""The Linux data plane's commands per router, from the network plan (no namespace needed)."""


from mn_harness.config import load_experiment
from mn_harness.dataplane.linux import route_commands, router_commands
from mn_harness.network.plan import NetworkPlan
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

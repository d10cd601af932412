"""The Linux data plane: its commands per router and port from the network plan (no namespace
needed), real runs with ECN marking and queue telemetry (root, slow), and a real ECMP run on the
leaf-spine file."""

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
from tests.helpers import TOPOLOGIES, small_demo


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


def test_every_switch_port_gets_its_egress_program_config():
    from mn_harness.dataplane.linux import egress_config
    from mn_harness.p4.limits import FRAME_BYTES

    raw = small_demo()
    raw["switches"] = [{"name": "s1", "ecn_threshold": "30KB"}, "s2"]
    plan = NetworkPlan(Experiment.from_dict(raw, "demo"))
    s1 = {i.peer_node: egress_config(plan, i, "backlog") for i in plan.interfaces["s1"]}
    assert s1["s2"].mark_bytes == 30000 and s1["s2"].limit_bytes == 100 * FRAME_BYTES
    assert s1["s2"].rate_bps == 1e9 and s1["s2"].burst_bytes == 125000 and s1["s2"].jobs == 3
    s2 = egress_config(plan, plan.interfaces["s2"][0], "vq")
    assert s2.mark_bytes == 20 * FRAME_BYTES and s2.tracker == "vq"
    host = egress_config(plan, plan.interfaces["h1"][0], "backlog")
    assert host.mark_bytes is None  # hosts never mark
    raw["links"][2]["delay"] = "1ms"  # netem leaf: limits packets and holds the delay line
    plan = NetworkPlan(Experiment.from_dict(raw, "demo"))
    assert egress_config(plan, plan.interfaces["s1"][2], "backlog").limit_bytes == 2**32 - 1


# -- real runs: ECN marking and queue telemetry (root, slow) ---------------------------------

def overlapping_demo(cc: str = "cubic", **run) -> dict:
    """The demo with both jobs starting together and communication longer than compute (8 MB,
    ~64 ms at 1 Gbit/s, vs 30 ms), so their flows share s1->s2 and its queue builds (the demo's
    20 ms offset with 2 MB iterations would let them take turns and never queue)."""
    raw = small_demo(iterations=4, bytes_per_iteration="8MB", compute="30ms")
    for job in raw["jobs"]:
        job.update(cc=cc, start_offset="0ms")
    raw["run"].update(run)
    return raw


def _run(raw: dict, tmp_path, name: str):
    import json

    from mn_harness.runner import run_experiment

    results = run_experiment(Experiment.from_dict(raw, name), out_root=tmp_path, log=lambda *_: None)
    return results, json.loads((results / "summary.json").read_text())


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("cc", ["dctcp", "mltcp-dctcp"])
def test_ecn_ccs_are_marked_at_the_linux_bottleneck_and_queue_csv_is_like_bmv2s(cc, tmp_path):
    import csv

    from mn_harness.report.markdown import report_run
    from mn_harness.results.schema import queue_columns

    results, summary = _run(overlapping_demo(cc), tmp_path, f"demo-{cc}")
    assert summary["status"] == "completed" and summary["ecn"]["method"] == "bpf-backlog"
    with open(results / "queue.csv") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == queue_columns(["job1", "job2"])  # BMv2's columns + drops
        rows = list(reader)
    ports = {(r["switch"], r["port"]) for r in rows}
    assert ports == {("s1", "1"), ("s1", "2"), ("s1", "3"), ("s2", "1"), ("s2", "2"), ("s2", "3")}
    assert all(r["drops"] != "" for r in rows)
    bottleneck = summary["queue"]["s1:3"]
    print(f"\ns1->s2: {bottleneck}; marks per job {summary['ecn_marks']}; {summary['telemetry']}")
    assert bottleneck["link"] == "s1->s2" and bottleneck["max_depth"] > 0
    assert bottleneck["marks"] == sum(int(r["marks"]) for r in rows if (r["switch"], r["port"]) == ("s1", "3"))
    assert bottleneck["drops"] == sum(int(r["drops"]) for r in rows if (r["switch"], r["port"]) == ("s1", "3"))
    assert summary["ecn_marks"]["job1"] > 0 and summary["ecn_marks"]["job2"] > 0
    assert summary["telemetry"]["samples_per_s"] >= 50  # the rate itself: bench/ecn.py
    assert summary["ecn"]["thresholds"]["s1:3"] == "20 packets"
    # a time series: many intervals of the bottleneck, times increasing
    times = [float(r["t"]) for r in rows if (r["switch"], r["port"]) == ("s1", "3")]
    assert len(times) >= 20 and times == sorted(times)
    report_run(results, plots=True)
    assert (results / "plots" / "queue.png").stat().st_size > 1000


@pytest.mark.root
@pytest.mark.slow
def test_not_ect_cubic_is_never_marked_unless_tcp_ecn_is_on(tmp_path):
    _, plain = _run(overlapping_demo(), tmp_path / "auto", "demo-cubic")
    _, ecn = _run(overlapping_demo(tcp_ecn=True), tmp_path / "ecn", "demo-cubic-ecn")
    print(f"\ncubic: marks {plain['ecn_marks']}, s1->s2 {plain['queue']['s1:3']}; "
          f"cubic + tcp_ecn: marks {ecn['ecn_marks']}, s1->s2 {ecn['queue']['s1:3']}")
    assert plain["queue"]["s1:3"]["max_depth"] > 20  # it queued above the threshold, unmarked
    assert plain["ecn_marks"] == {"job1": 0, "job2": 0} and plain["queue"]["s1:3"]["marks"] == 0
    assert ecn["ecn_marks"]["job1"] > 0 and ecn["ecn_marks"]["job2"] > 0


def _red_in_this_kernel() -> bool:
    """Whether sch_red exists here: tried on the loopback of a throwaway namespace."""
    import subprocess

    proc = subprocess.run(["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "red", "limit", "100000",
                           "min", "3000", "max", "4500", "avpkt", "1500", "burst", "3", "probability",
                           "1.0", "bandwidth", "1gbit", "ecn"], capture_output=True, text=True)
    return proc.returncode == 0


@pytest.fixture
def tc_without_libbpf(tmp_path, monkeypatch):
    """A `tc` first on PATH that is the real one but says it was built without libbpf (as on a
    system whose iproute2 cannot load BTF-defined BPF objects)."""
    import shutil

    real = shutil.which("tc")
    wrapper = tmp_path / "bin" / "tc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = "-V" ] && {{ echo "tc utility, iproute2-6.1.0"; exit 0; }}\n'
                       f'exec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{__import__('os').environ['PATH']}")


@pytest.mark.root
@pytest.mark.slow
def test_without_tc_bpf_red_marks_where_the_kernel_has_it_else_one_line(tmp_path, tc_without_libbpf):
    import subprocess
    import sys

    import yaml

    red = _red_in_this_kernel()
    raw = small_demo(iterations=2)
    for job in raw["jobs"]:
        job["cc"] = "dctcp"
    config = tmp_path / "dctcp.yaml"
    config.write_text(yaml.safe_dump(raw))
    proc = subprocess.run([sys.executable, "-m", "mn_harness.cli", "run", str(config), "--out", str(tmp_path),
                           "--no-plots"], capture_output=True, text=True, timeout=300)
    if red:
        assert proc.returncode == 0, proc.stderr
        assert "marking with RED instead" in proc.stdout
    else:
        assert proc.returncode == 1
        assert proc.stderr.strip().splitlines() == [
            "mn-harness: ECN marking unavailable (job job1 uses dctcp): tc (iproute2) was built without "
            "libbpf and cannot load the program (`tc -V` names no libbpf): install a distribution "
            "iproute2 >= 5.18; and no sch_red (RED) qdisc; see docs/troubleshooting.md#dctcp-ecn"]
    # nothing needs marks: the run goes on and says how it marked
    _, summary = _run(small_demo(iterations=2), tmp_path / "cubic", "demo-cubic")
    assert summary["status"] == "completed"
    assert summary["ecn"]["method"].startswith("red (tc (iproute2) was built without libbpf" if red
                                               else "none (tc (iproute2) was built without libbpf")
    assert "telemetry" in summary and summary["telemetry"]["error"].startswith("no queue telemetry: ")


@pytest.fixture
def kernel_cc(tmp_path):
    """`kernel_cc("dctcp")` -> the kernel name to setsockopt; every BPF congestion control it
    registered is unregistered in the teardown, also when the test fails or is interrupted
    (Ctrl-C; SIGTERM too, tests/conftest.py), and the teardown checks that none is left."""
    from mn_harness.cc.manager import CongestionControlManager, available_congestion_controls
    from mn_harness.cc.spec import CCSpec

    ccm = CongestionControlManager(log=lambda *_: None)
    try:
        def prepare(cc: str) -> str:
            spec = CCSpec.from_dict(cc, "cc")
            ccm.prepare([spec])
            return ccm.kernel_name(spec)

        yield prepare
    finally:
        names = ccm.registered_names()
        ccm.close()
        assert not set(names) & set(available_congestion_controls()), "a BPF CC is still registered"


def _bulk_flow_queue(cc: str, kernel_name: str, tmp_path, seconds: float = 4.0) -> dict:
    """One bulk TCP flow h1 -2 Gbit/s- s1 -1 Gbit/s- h2 (100-frame queue, K = 20) with the
    congestion control `kernel_name` on both ends; the summary of s1's port towards h2 as
    queue.csv sampled it. The network and its traffic processes are torn down by linux_network
    whatever happens."""
    import time

    from mn_harness.testing.linux_testbed import bulk_flow_topology, in_host, linux_network, traffic_result

    raw = bulk_flow_topology()
    with linux_network(raw) as (network, plan, dataplane):
        rx = in_host(network, "h2", "tcp-recv", "9004", kernel_name)
        assert rx.stdout.readline()
        tmp_path.mkdir(parents=True, exist_ok=True)
        dataplane.start_telemetry(tmp_path, time.monotonic())
        tx = in_host(network, "h1", "tcp-send", plan.host_ip["h2"], "9004", kernel_name, str(seconds))
        sent = traffic_result(tx)
        traffic_result(rx)
        summary = dataplane.stop_telemetry()
    port = summary["queue"]["s1:2"]
    print(f"\n{cc}: {sent['bytes'] * 8 / sent['seconds'] / 1e9:.3f} Gbit/s, ECN {sent['ecn']}, s1->h2 {port}")
    return {**port, "ecn": sent["ecn"]}


@pytest.mark.root
@pytest.mark.slow
def test_dctcp_keeps_the_mean_queue_near_the_threshold_while_cubic_fills_it(tmp_path, kernel_cc):
    # The lowest of three DCTCP flows: a 4-second flow now and then settles in a mode that keeps
    # the queue at 25-38 frames (a third of its packets marked, some dropped) instead of ~17-18;
    # seen in about one flow of ten, and in two of three in one CI run, so neither one flow nor
    # the median is the claim. What would break the claim moves every flow: without marks
    # DCTCP fills the queue as cubic does (mean ~65 below), and a threshold applied at another
    # depth moves the mean with it (measured here: K = 5 gave 3.4, K = 40 gave 34.5). Where the
    # queue sits relative to K depends on the machine: here the flows sat at 17-18, on a CI
    # machine at 12.5-14.7 (GSO bursts drain below K between marks). The claim is that the queue
    # follows K (between K/2 and 1.5 K), not that it sits at K.
    dctcp_name = kernel_cc("dctcp")
    dctcps = [_bulk_flow_queue("dctcp", dctcp_name, tmp_path / f"dctcp{i}") for i in range(3)]
    cubic = _bulk_flow_queue("cubic", kernel_cc("cubic"), tmp_path / "cubic")
    # hosts keep tcp_ecn at the kernel default: DCTCP's TCP_CONG_NEEDS_ECN negotiates by itself
    assert all(d["ecn"] and d["marks"] > 0 for d in dctcps) and not cubic["ecn"]
    dctcp = min(dctcps, key=lambda d: d["mean_depth"])
    from mn_harness.testing.linux_testbed import bulk_flow_topology
    threshold = next(link["ecn_threshold"] for link in bulk_flow_topology()["links"] if "ecn_threshold" in link)
    assert threshold / 2 <= dctcp["mean_depth"] <= threshold * 1.5
    # cubic's packets are not-ECT: never marked, dropped once the 100-frame FIFO is full (the
    # drops show it filled; the sampled maximum can miss the top: 87 in one loaded run)
    assert cubic["marks"] == 0 and cubic["drops"] > 0 and cubic["max_depth"] >= 80
    assert cubic["mean_depth"] >= 2 * dctcp["mean_depth"]


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

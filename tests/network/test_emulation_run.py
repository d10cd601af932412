"""run.emulation on real networks (root, slow): what each choice builds is read back from the
kernel (qdiscs, the bridge, routes, RPS masks, a worker's CPU affinity), and jobs run on it."""

from __future__ import annotations

import json
import os
import time

import pytest

from mn_harness.api import network
from mn_harness.config import Experiment
from mn_harness.network.cpu_placement import NETWORK_CORE, worker_cores
from tests.helpers import small_demo

pytestmark = [pytest.mark.root, pytest.mark.slow]

PLAIN = {"switches": "bridge", "access_links": "unshaped", "queue_limit": "txqueuelen",
         "htb_burst": "15KiB", "htb_cburst": "auto"}


def demo(**emulation) -> Experiment:
    raw = small_demo(iterations=3)
    raw["run"]["emulation"] = emulation
    return Experiment.from_dict(raw, "emulation")


def qdiscs(node, intf: str) -> str:
    return node.cmd(f"tc qdisc show dev {intf}")


def test_the_plain_mininet_network_bridges_and_shapes_only_the_bottleneck(tmp_path):
    """Bridges in the switches' namespaces, hosts on-link with no gateway and no qdisc, the
    bottleneck's ends HTB as TCLink makes it (burst 15k, tc's cburst) over a 1000-packet pfifo;
    the jobs run, the link monitor watches only the shaped ends, link_stats has no host end."""
    seen: dict[str, str] = {}

    def look(session):
        net = session.net
        seen["bridge"] = net["s1"].cmd("ip -d link show br0")
        seen["ports"] = net["s1"].cmd("ip -o link show master br0")
        seen["forwarding"] = net["s1"].cmd("cat /proc/sys/net/ipv4/ip_forward")
        seen["host_qdisc"] = qdiscs(net["h1"], "h1-eth0")
        seen["host_routes"] = net["h1"].cmd("ip route")
        seen["access_qdisc"] = qdiscs(net["s1"], "s1-eth1")
        seen["bottleneck_class"] = net["s1"].cmd("tc class show dev s1-eth3")
        seen["bottleneck_leaf"] = qdiscs(net["s1"], "s1-eth3")

    with network(demo(**PLAIN), out=tmp_path, quiet=True) as session:
        look(session)
        session.wait_jobs()
    summary = json.loads((session.results_dir / "summary.json").read_text())
    assert summary["status"] == "completed", summary["status"]
    assert "bridge" in seen["bridge"] and "stp_state 0" in seen["bridge"]
    assert {"s1-eth1", "s1-eth2", "s1-eth3"} <= {w.rstrip(":@").split("@")[0] for w in seen["ports"].split()}
    assert seen["forwarding"].strip() == "0"
    assert "noqueue" in seen["host_qdisc"] and "htb" not in seen["host_qdisc"]
    assert "10.0.0.0/8 dev h1-eth0" in seen["host_routes"] and "default" not in seen["host_routes"]
    assert "htb" not in seen["access_qdisc"]
    assert "burst 15" in seen["bottleneck_class"] and "cburst 1" in seen["bottleneck_class"]
    assert "pfifo 10: parent 1:1 limit 1000p" in seen["bottleneck_leaf"]
    assert set(summary["fidelity"]["links"]) == {"s1->s2", "s2->s1"}
    assert set(summary["link_stats"]) == {"s1->s2", "s2->s1"}
    assert summary["emulation"]["switches"] == "bridge" and summary["emulation"]["access_links"] == "unshaped"


def test_a_nics_queue_at_the_hosts_and_packet_limits_at_the_switches(tmp_path):
    with network(demo(host_queue="txqueuelen", queue_limit="packets", htb_quantum="3028B"),
                    out=tmp_path, quiet=True) as session:
        host = qdiscs(session.net["h1"], "h1-eth0")
        port = qdiscs(session.net["s1"], "s1-eth3")
        cls = session.net["s1"].cmd("tc -d class show dev s1-eth3")
        session.wait_jobs()
    assert "pfifo 10: parent 1:1 limit 1000p" in host
    assert "pfifo 10: parent 1:1 limit 100p" in port
    assert "quantum 3028" in cls
    summary = json.loads((session.results_dir / "summary.json").read_text())
    assert "h1->s1" in summary["link_stats"] and summary["status"] == "completed"


def test_split_cpu_placement_pins_the_workers_and_steers_receive_work_to_core_0(tmp_path):
    cores = worker_cores()
    with network(demo(cpu_placement="split"), out=tmp_path, quiet=True) as session:
        read = "unshare -m sh -c 'umount -l /sys; mount -t sysfs x /sys && cat /sys/class/net/{}/queues/rx-0/rps_cpus'"
        masks = {intf: session.net[node].cmd(read.format(intf))
                 for node, intf in (("h1", "h1-eth0"), ("s1", "s1-eth3"))}
        session.start_jobs()
        assert session.launcher is not None
        affinity = {w.host: w.proc.pid for w in session.launcher.workers}
        allowed = {host: sorted(os.sched_getaffinity(pid)) for host, pid in affinity.items()}
        session.wait_jobs()
    assert all(int(m.strip(), 16) == 1 << NETWORK_CORE for m in masks.values()), masks
    assert all(a == cores for a in allowed.values()), allowed


def thread_classes(pid: int) -> dict[str, set[int]]:
    """Each of a process's threads by name: the scheduling classes its threads of that name are in."""
    classes: dict[str, set[int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = "main" if int(tid) == pid else open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            classes.setdefault(name, set()).add(os.sched_getscheduler(int(tid)))
        except (OSError, ValueError):
            pass  # a thread that ended meanwhile
    return classes


def test_a_real_time_main_thread_in_every_synthetic_worker_and_nothing_else(tmp_path):
    """worker_main_thread realtime: while the jobs run, each worker's main thread is in
    SCHED_FIFO and its senders, receivers, sampler and stream in the fair class; the jobs
    complete and summary.json records the choice."""
    raw = small_demo(iterations=12, compute="100ms")
    raw["run"]["emulation"] = {"worker_main_thread": "realtime"}
    seen: dict[str, dict[str, set[int]]] = {}
    with network(Experiment.from_dict(raw, "realtime"), out=tmp_path, quiet=True) as session:
        session.start_jobs()
        assert session.launcher is not None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(seen) < len(session.launcher.workers):
            for w in session.launcher.workers:
                classes = thread_classes(w.proc.pid)
                if os.SCHED_FIFO in classes.get("main", set()) and {"mnh-send", "mnh-bins"} <= set(classes):
                    seen[f"{w.job}-r{w.rank}"] = classes
            time.sleep(0.05)
        session.wait_jobs()
    summary = json.loads((session.results_dir / "summary.json").read_text())
    assert summary["status"] == "completed", summary["status"]
    assert summary["emulation"]["worker_main_thread"] == "realtime"
    assert len(seen) == 4, seen
    for classes in seen.values():
        assert classes["main"] == {os.SCHED_FIFO}
        assert {name for name, c in classes.items() if os.SCHED_FIFO in c} == {"main"}, classes
        assert {"mnh-send", "mnh-recv", "mnh-bins", "mnh-stream"} <= set(classes), classes


def test_a_larger_mtu_reaches_every_interface_and_route_and_the_links_are_judged(tmp_path):
    """link_defaults.mtu 9000 with one host's link at 1500: every interface has its link's MTU
    in its namespace, the hosts whose path crosses the 1500 link route to it with that MTU, the
    jobs complete, and the link monitor judged the 9000-byte links' gaps (full frames of 9014)."""
    raw = small_demo(iterations=4, bytes_per_iteration="8MB", compute="10ms")
    raw["link_defaults"]["mtu"] = 9000
    raw["links"][4]["mtu"] = 1500  # s2-h4: job2 (h2 <-> h4) crosses it
    exp = Experiment.from_dict(raw, "mtu")
    seen: dict[str, str] = {}
    with network(exp, out=tmp_path, quiet=True) as session:
        net = session.net
        for node in ("h1", "h2", "h4", "s1", "s2"):
            seen[node] = net[node].cmd("ip -o link show")
        seen["h2_route"] = net["h2"].cmd(f"ip route get {session.plan.host_ip['h4']}")
        seen["h1_route"] = net["h1"].cmd(f"ip route get {session.plan.host_ip['h3']}")
        session.wait_jobs()
    summary = json.loads((session.results_dir / "summary.json").read_text())
    assert summary["status"] == "completed", summary["status"]

    def mtu(node: str, intf: str) -> int:
        line = next(x for x in seen[node].splitlines() if f" {intf}@" in x or f" {intf}:" in x)
        return int(line.split(" mtu ")[1].split()[0])

    assert mtu("h1", "h1-eth0") == mtu("s1", "s1-eth1") == mtu("s1", "s1-eth3") == mtu("s2", "s2-eth1") == 9000
    assert mtu("h4", "h4-eth0") == mtu("s2", "s2-eth3") == 1500
    assert "mtu 1500" in seen["h2_route"], seen["h2_route"]
    assert "mtu" not in seen["h1_route"], seen["h1_route"]  # its path is 9000 throughout: the device's
    links = summary["fidelity"]["links"]
    assert (links["s1->s2"].get("gaps") or 0) > 0 or (links["h1->s1"].get("gaps") or 0) > 0, links

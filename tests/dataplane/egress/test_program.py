"""The egress program on a real router port (root: namespaces, tc, BPF): it CE-marks ECT packets
only once the queue they join holds the threshold, never touches not-ECT packets (the FIFO
drops those at its limit), counts marks and drops as the receiver and the qdisc see them, tracks
the qdisc's own backlog, and is gone after teardown.

Topology: h1 -(10 Gbit/s)- s1 -(10 Mbit/s)- h2, so s1's port towards h2 is the only queue that
fills (one 1514-byte frame leaves it every 1.2 ms)."""

from __future__ import annotations

import subprocess
import time

import pytest

from mn_harness.network.shaping import queue_stats
from mn_harness.p4.limits import FRAME_BYTES
from mn_harness.testing.linux_testbed import in_host, linux_network, traffic_result
from mn_harness.testing.qdisc_stats import QdiscStatsReader

pytestmark = pytest.mark.root
QUEUE = 50
THRESHOLD = 10
FLOOD = 400
FRAME_NS = FRAME_BYTES * 8 / 10e6 * 1e9  # one frame's transmission at the 10 Mbit/s port


def two_hosts(threshold=THRESHOLD, queue=QUEUE, **run) -> dict:
    return {"hosts": ["h1", "h2"], "switches": ["s1"],
            "links": [{"endpoints": ["h1", "s1"], "bw": "10Gbit", "queue": 1000},
                      {"endpoints": ["s1", "h2"], "bw": "10Mbit", "queue": queue,
                       "ecn_threshold": threshold}],
            "jobs": [{"name": "j", "workers": ["h1", "h2"], "bytes_per_iteration": "1MB",
                      "compute": "10ms", "iterations": 1}],
            "run": {"dataplane": "linux", **run}}


def bottleneck(network, dataplane):
    prog = dataplane.programs[("s1", "s1-eth2")]
    return prog, network.nodes["s1"].pid


def flood(network, plan, tos: int) -> dict:
    """Resolve neighbours first (an unresolved next hop would hold packets back), then FLOOD
    datagrams from h1 to h2 as fast as Python sends them."""
    subprocess.run(["mnexec", "-a", str(network.nodes["h1"].pid), "ping", "-c", "1", "-W", "2",
                    plan.host_ip["h2"]], capture_output=True, check=True)
    rx = in_host(network, "h2", "udp-recv", "9000", "0.5")
    assert rx.stdout.readline()  # ready
    traffic_result(in_host(network, "h1", "udp-send", plan.host_ip["h2"], "9000", str(FLOOD), str(tos)))
    return traffic_result(rx)


def test_ect_packets_are_marked_only_at_or_above_the_threshold_and_counted():
    with linux_network(two_hosts()) as (network, plan, dataplane):
        assert dataplane.support.describe() == "bpf-backlog"
        prog, pid = bottleneck(network, dataplane)
        before, tc_before = prog.read(), queue_stats(pid, "s1-eth2")
        got = flood(network, plan, tos=2)  # ECT(0)
        after, tc_after = prog.read(), queue_stats(pid, "s1-eth2")
    print(f"\nreceived {got['received']} of {FLOOD}, CE {got['ce']}; program: marks "
          f"{after.marks - before.marks}, drops {after.drop_frames - before.drop_frames}")
    # a datagram with sequence number s joined a queue of at most s frames
    assert got["ce"] > 0 and min(got["ce_seqs"]) >= THRESHOLD
    assert set(range(THRESHOLD)) <= set(got["seqs"]) - set(got["ce_seqs"])  # the first ones pass unmarked
    assert after.marks - before.marks == got["ce"]
    assert after.ect_frames - before.ect_frames == got["received"]
    drops = after.drop_frames - before.drop_frames
    assert drops > 0 and drops == tc_after["drops"] - tc_before["drops"]


def test_not_ect_packets_are_never_marked_and_dropped_at_the_limit():
    with linux_network(two_hosts()) as (network, plan, dataplane):
        prog, pid = bottleneck(network, dataplane)
        before, tc_before = prog.read(), queue_stats(pid, "s1-eth2")
        got = flood(network, plan, tos=0)
        after, tc_after = prog.read(), queue_stats(pid, "s1-eth2")
    print(f"\nreceived {got['received']} of {FLOOD}, CE {got['ce']}")
    assert got["ce"] == 0 and after.marks == before.marks
    assert set(range(QUEUE)) <= set(got["seqs"])  # nothing lost before the queue was full
    assert got["received"] < FLOOD
    drops = after.drop_frames - before.drop_frames
    assert drops == tc_after["drops"] - tc_before["drops"] >= FLOOD - got["received"] - 2


def test_threshold_off_marks_nothing():
    with linux_network(two_hosts(threshold="off")) as (network, plan, dataplane):
        prog, _ = bottleneck(network, dataplane)
        got = flood(network, plan, tos=2)
        assert got["ce"] == 0 and prog.read().marks == 0 and got["received"] >= QUEUE


def test_tracked_depth_is_the_qdisc_backlog_under_load():
    """A cubic flow keeps s1's 100-frame queue busy; at 200 moments the tracked depth right after
    the latest packet and the qdisc's backlog (RTM_GETQDISC, what `tc -s qdisc` prints) are read
    within microseconds. The tracked depth is only defined at arrivals, so a moment counts when
    no packet arrived during the read and the latest arrived less than one frame time (1.2 ms
    at 10 Mbit/s) before the backlog was read: at most one frame left the queue in between (a
    sender pausing for 13 ms would otherwise let 11 frames drain from the backlog alone)."""
    with linux_network(two_hosts(queue=100)) as (network, plan, dataplane):
        prog, pid = bottleneck(network, dataplane)
        rx = in_host(network, "h2", "tcp-recv", "9001", "cubic")
        assert rx.stdout.readline()
        tx = in_host(network, "h1", "tcp-send", plan.host_ip["h2"], "9001", "cubic", "4")
        time.sleep(1.0)  # past slow start
        pairs = []
        with QdiscStatsReader(pid, "s1-eth2") as qdisc:
            assert qdisc.root().kind == "htb"
            for _ in range(2000):
                first = prog.read()
                backlog = qdisc.root().backlog
                read_ns = time.monotonic_ns()  # the program's clock (bpf_ktime_get_ns)
                second = prog.read()
                if first.last_ns == second.last_ns and read_ns - second.last_ns < FRAME_NS:
                    pairs.append((second.last_depth / FRAME_BYTES, backlog / FRAME_BYTES))
                time.sleep(0.002)
                if len(pairs) >= 200:
                    break
        traffic_result(tx)
        traffic_result(rx)
    worst = max(pairs, key=lambda p: abs(p[0] - p[1]) - max(2.0, 0.1 * p[1]))
    print(f"\n{len(pairs)} moments; tracked vs backlog, worst {worst[0]:.2f} vs {worst[1]:.2f} frames; "
          f"mean backlog {sum(b for _, b in pairs) / len(pairs):.1f}")
    assert len(pairs) >= 100
    assert sum(b for _, b in pairs) / len(pairs) > 20  # the queue was under load
    for tracked, backlog in pairs:
        assert abs(tracked - backlog) <= max(2.0, 0.1 * backlog), (tracked, backlog)


def test_teardown_leaves_no_program_behind():
    from mn_harness.state import egress_program_loaded

    with linux_network(two_hosts()) as (_, _, dataplane):
        ids = [p.prog_id for p in dataplane.programs.values()]
        state = dataplane.state()
        assert ids and all(egress_program_loaded(i) for i in ids)
        assert {p["prog_id"] for p in state["egress_programs"]} == set(ids)
    assert not any(egress_program_loaded(i) for i in ids)
    assert dataplane.programs == {}

"""mn_harness.testing.p4network on a real BMv2: the network the pytest plugin hands a test.
Ports by name, frames in and out, what a mismatch says, reset between tests (entries,
counters, registers, queues, frames still in flight), registers over Thrift."""

import time

import pytest
from p4.v1 import p4runtime_pb2
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mn_harness.config.experiment import load_experiment_dict
from mn_harness.testing.p4network import P4Network, Port, single_switch
from mn_harness.testing.p4testbed import TestbedError

pytestmark = [pytest.mark.bmv2, pytest.mark.root]


@pytest.fixture(scope="module")
def net():
    with P4Network(single_switch()) as n:
        yield n


def udp(net, src, dst, ttl=64, size=200, **ip):
    a, b = net.host(src), net.host(dst)
    return (Ether(src=a.mac, dst=a.switch_mac) / IP(src=a.ip, dst=b.ip, ttl=ttl, **ip) / UDP(sport=5, dport=9)
            / Raw(b"x" * size))


def out(net, src, dst, ttl=63, size=200, **ip):
    a, b = net.host(src), net.host(dst)
    return (Ether(src=b.switch_mac, dst=b.mac) / IP(src=a.ip, dst=b.ip, ttl=ttl, **ip) / UDP(sport=5, dport=9)
            / Raw(b"x" * size))


def test_ports_by_host_number_or_switch_and_number(net):
    net.reset()
    assert net.port("h2") == net.port(2) == net.port(("s1", 2)) == Port("s1", 2, "h2")
    assert net.host("h3").port == Port("s1", 3, "h3") and str(net.host("h3").port) == "s1:3 (h3)"
    with pytest.raises(TestbedError, match="s1:7 is not a port that faces a host"):
        net.port(7)
    with pytest.raises(TestbedError, match="no host 'h9'; hosts: h1, h2, h3"):
        net.port("h9")


def test_send_expect_and_nothing_else(net):
    net.reset()
    net.send("h1", udp(net, "h1", "h3"))
    got = net.expect("h3", out(net, "h1", "h3"))
    assert got[IP].ttl == 63
    net.expect_nothing()
    assert net.counter("port_tx", 3).packets == 1


def test_a_mismatch_says_what_came_out_instead(net):
    net.reset()
    net.send("h1", udp(net, "h1", "h2"))
    with pytest.raises(AssertionError) as err:
        net.expect("h2", out(net, "h1", "h2", ttl=64), timeout=0.5)
    text = str(err.value)
    assert text.startswith("nothing like Ether / IP / UDP 10.0.0.1:5 > 10.0.1.1:discard / Raw out of s1:2 (h2) "
                           "within 0.5 s\n")
    assert "IP.ttl: 64 expected, 63 received" in text
    with pytest.raises(AssertionError, match=r"unexpected frames: s1:2 \(h2\): Ether / IP / UDP"):
        net.expect_nothing(["h2"], timeout=0.1)


def test_reset_puts_the_switch_back_as_brought_up(net):
    net.reset()
    # a job rule of the test's, a slowed queue with frames still in it, counters counting
    net.insert("job_classify", {"hdr.ipv4.dscp": (5, 0x3F)}, "set_job", {"job": 7}, priority=50)
    net.set_queue("h2", rate_pps=20, depth=64)
    net.send("h1", [udp(net, "h1", "h2", id=i) for i in range(20)])
    assert net.expect("h2", lambda p: p.haslayer(IP), timeout=2)
    deadline = time.monotonic() + 2
    while net.counter("port_enq", 2).packets < 20 and time.monotonic() < deadline:
        time.sleep(0.02)  # the ingress thread is still on it
    assert net.counter("port_enq", 2).packets == 20
    assert net.counter("port_tx", 2).packets < 20  # most are still queued
    net.reset()
    rules = net.entries("job_classify")
    assert len(rules) == len(net.bed.setup("s1").job_rules) and all(e.priority != 50 for e in rules)
    assert net.counter("port_enq", 2).packets == 0 and net.counter("port_tx", 2).packets == 0
    assert net.received("h2") == []
    # the queue drains at the link's 100 Mbit/s again: a burst of 20 is through at once
    start = time.monotonic()
    net.send("h1", [udp(net, "h1", "h2", id=i) for i in range(20)])
    for i in range(20):
        net.expect("h2", out(net, "h1", "h2", id=i), timeout=1)
    assert time.monotonic() - start < 0.5
    net.reset()
    assert net.counter("port_tx", 2).packets == 0  # nothing of the earlier burst left in flight


def test_queue_watch_sees_the_depth_every_packet_saw(net):
    net.reset()
    net.set_queue("h2", rate_pps=100, depth=64)
    watch = net.watch_queue("h2")
    net.send("h1", [udp(net, "h1", "h2", id=i, tos=2) for i in range(30)])
    for _ in range(30):
        net.expect("h2", lambda p: p.haslayer(UDP), timeout=3)
    sample = watch.read()
    assert sample.depth.packets == 30 and sample.depth.max >= 20
    assert sample.marks >= 5  # ECT packets above the default threshold of 20


def inc_experiment():
    return load_experiment_dict({
        "hosts": ["h1", "h2", "h3"], "switches": [{"name": "s1", "program": "aggregation"}],
        "links": [{"endpoints": [h, "s1"]} for h in ("h1", "h2", "h3")], "link_defaults": {"bw": "100Mbit"},
        "jobs": [{"name": "j", "workers": ["h1", "h2", "h3"], "collective": "inc_allreduce",
                  "bytes_per_iteration": "1MB", "compute": "1ms", "iterations": 1}], "run": {"dataplane": "bmv2"}})


def multicast_groups(net) -> list:
    entry = p4runtime_pb2.PacketReplicationEngineEntry()
    entry.multicast_group_entry.multicast_group_id = 0  # all of them
    return [e.packet_replication_engine_entry.multicast_group_entry for e in net.conn().read([entry])]


def test_registers_are_read_and_reset_and_aggregation_jobs_come_back():
    """aggregation.p4 with an inc_allreduce job: a register written over Thrift is read back and
    empty after a reset, which writes the job's entries and multicast group again."""
    with P4Network(inc_experiment()) as agg:
        assert agg.bed.setup("s1").features()[-1] == "aggregation"
        agg.bed.switches["s1"].cli(["register_write MyIngress.agg_seq 3 42"])
        assert agg.register("agg_seq", 3) == 42
        [group] = multicast_groups(agg)
        agg.reset()
        assert agg.register("agg_seq", 3) == 0
        assert multicast_groups(agg) == [group] and len(group.replicas) == 3
        assert len(agg.entries("agg_job")) == 1

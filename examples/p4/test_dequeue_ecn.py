"""Unit tests of dequeue_ecn.p4 with mn-harness's pytest plugin (nothing else), on the switches of
experiment.yaml brought up as the experiment brings them up (without its jobs). Each test gets
them reset to that state. Ports are named by the host on their other end; h.ip, h.mac and
h.switch_mac are the addresses to write into packets. These are the tests `mn-harness p4 new`
wrote, with the marking test turned round for marking at dequeue.

    sudo <venv>/bin/python -m pytest .      (skipped, saying why, without BMv2 or root)
"""

from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

HERE = Path(__file__).resolve().parent
NOT_ECT, ECT0, CE = 0, 2, 3
THRESHOLD = 20  # experiment.yaml: ecn_threshold of s1
PAYLOAD = 200   # bytes: IPv4 packets of more than 128 bytes go to the data queue (the one that marks)


@pytest.fixture(scope="module")
def p4_experiment():
    return HERE / "experiment.yaml"


def udp(p4, src, dst, ttl=64, tos=0, ident=1):
    """A frame as host `src` sends it to host `dst`: to the MAC of its switch port."""
    a, b = p4.host(src), p4.host(dst)
    return (Ether(src=a.mac, dst=a.switch_mac) / IP(src=a.ip, dst=b.ip, ttl=ttl, tos=tos, id=ident)
            / UDP(sport=4000, dport=5000) / Raw(b"x" * PAYLOAD))


def delivered(p4, src, dst, ttl=63, tos=0, ident=1):
    """The same frame as the last switch hands it to `dst`."""
    a, b = p4.host(src), p4.host(dst)
    return (Ether(src=b.switch_mac, dst=b.mac) / IP(src=a.ip, dst=b.ip, ttl=ttl, tos=tos, id=ident)
            / UDP(sport=4000, dport=5000) / Raw(b"x" * PAYLOAD))


def test_forwards_rewrites_macs_and_decrements_ttl(p4):
    p4.send("h1", udp(p4, "h1", "h2", ttl=64))
    p4.expect("h2", delivered(p4, "h1", "h2", ttl=63))  # the checksum must be right too
    p4.expect_nothing()
    port = p4.host("h2").port  # s1:2
    assert p4.counter("port_tx", port.number, switch=port.switch).packets == 1


def test_ttl_expired_is_dropped(p4):
    p4.send("h1", [udp(p4, "h1", "h2", ttl=1), udp(p4, "h1", "h2", ttl=0)])
    p4.expect_nothing()


def congested_burst(p4, tos, n=40):
    """`n` packets from h1 into h2's port, whose data queue drains 100 packets/s: packet i finds
    about i packets queued ahead of it. Returns what h2 got, in order."""
    p4.set_queue("h2", rate_pps=100, depth=64)
    p4.send("h1", [udp(p4, "h1", "h2", tos=tos, ident=i) for i in range(n)])
    return [p4.expect("h2", delivered(p4, "h1", "h2", tos=tos, ident=i), ignore=["IP.tos"], timeout=5)
            for i in range(n)]


def test_marks_the_packets_that_leave_a_long_queue_behind(p4):
    """Marking at dequeue: packet i of the burst leaves about n - 1 - i packets behind it, so the
    first ones are marked and the last ones, leaving a short queue, are not (marking at enqueue
    does the opposite: the first packets found the queue empty)."""
    got = congested_burst(p4, ECT0)
    marked = [i for i, pkt in enumerate(got) if pkt[IP].tos & 3 == CE]
    assert marked, "nothing marked"
    assert max(marked) <= len(got) - THRESHOLD, f"marked {marked}"
    assert len(marked) >= THRESHOLD - 3, f"marked {marked}"  # the first may leave before the rest came
    port = p4.host("h2").port
    assert p4.counter("port_marks", port.number, switch=port.switch).packets == len(marked)


def test_never_marks_packets_that_are_not_ect(p4):
    got = congested_burst(p4, NOT_ECT)
    assert [pkt[IP].tos for pkt in got] == [NOT_ECT] * len(got)


def test_queue_telemetry_sees_the_depth_and_the_marks(p4):
    watch = p4.watch_queue("h2")
    got = congested_burst(p4, ECT0)
    sample = watch.read()
    assert sample.depth.packets == len(got)
    assert sample.depth.max >= THRESHOLD
    assert sample.marks == sum(pkt[IP].tos & 3 == CE for pkt in got)

"""The tc commands built for a link, checked as argv lists (no namespace needed)."""

import pytest

from mn_harness.network.shaping import (
    egress_commands,
    fifo_limit_bytes,
    htb_burst_bytes,
    offload_commands,
    parse_queue_stats,
)
from mn_harness.p4.limits import FRAME_BYTES


def test_htb_then_byte_fifo_of_queue_frames():
    root, cls, leaf = egress_commands("s1-eth3", 1e9, 100)
    assert root == ["tc", "qdisc", "replace", "dev", "s1-eth3", "root", "handle", "1:", "htb", "default", "1"]
    assert cls[:9] == ["tc", "class", "add", "dev", "s1-eth3", "parent", "1:", "classid", "1:1"]
    assert cls[cls.index("rate") + 1] == "1000000000bit" == cls[cls.index("ceil") + 1]
    # ~1 ms at 1 Gbit/s = 125000 bytes
    assert cls[cls.index("burst") + 1] == "125000" == cls[cls.index("cburst") + 1]
    assert leaf == ["tc", "qdisc", "add", "dev", "s1-eth3", "parent", "1:1", "handle", "10:",
                    "bfifo", "limit", str(100 * FRAME_BYTES)]


def test_slow_links_keep_a_burst_of_four_frames():
    assert htb_burst_bytes(10e6) == 4 * FRAME_BYTES
    assert htb_burst_bytes(100e6) == 12500
    assert fifo_limit_bytes(7) == 7 * 1514


def test_delay_makes_netem_the_leaf_with_a_packet_limit():
    leaf = egress_commands("h1-eth0", 1e8, 50, delay_s=0.0015)[-1]
    assert leaf[:9] == ["tc", "qdisc", "add", "dev", "h1-eth0", "parent", "1:1", "handle", "10:"]
    assert leaf[9:] == ["netem", "delay", "1500us", "limit", "50"]


@pytest.mark.parametrize("segs,expected", [
    (1, [["ethtool", "-K", "x", "tso", "off", "gso", "off", "gro", "off"]]),
    (16, [["ip", "link", "set", "dev", "x", "gso_max_segs", "16"], ["ethtool", "-K", "x", "gro", "off"]]),
])
def test_offloads(segs, expected):
    assert offload_commands("x", segs) == expected


def test_queue_stats_read_the_leaf_not_the_htb_root():
    out = """qdisc htb 1: root refcnt 2 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000
 Sent 999 bytes 9 pkt (dropped 0, overlimits 5 requeues 0)
 backlog 0b 0p requeues 0
qdisc bfifo 10: parent 1:1 limit 151400b
 Sent 123456 bytes 100 pkt (dropped 7, overlimits 0 requeues 0)
 backlog 3028b 2p requeues 0
"""
    assert parse_queue_stats(out) == {"sent_bytes": 123456, "sent_packets": 100, "drops": 7}
    assert parse_queue_stats("") == {"sent_bytes": 0, "sent_packets": 0, "drops": 0}

"""The tc commands built for a link, checked as argv lists (no namespace needed)."""

import pytest

from mn_harness.config import LinkConfig
from mn_harness.config.emulation import Emulation
from mn_harness.network.shaping import (
    EgressShape,
    egress_commands,
    egress_shape,
    fifo_limit_bytes,
    offload_commands,
    parse_queue_stats,
)
from mn_harness.p4.limits import FRAME_BYTES

DEFAULTS = Emulation()


def shape(bw_bps: float, queue: int, delay_s: float = 0.0, emulation: Emulation = DEFAULTS,
          access: bool = False, host_end: bool = False) -> EgressShape:
    link = LinkConfig("a", "b", bw_bps, queue, delay_s)
    out = egress_shape(link, emulation, access=access, host_end=host_end)
    assert out is not None
    return out


def test_htb_then_byte_fifo_of_queue_frames():
    root, cls, leaf = egress_commands("s1-eth3", shape(1e9, 100))
    assert root == ["tc", "qdisc", "replace", "dev", "s1-eth3", "root", "handle", "1:", "htb", "default", "1"]
    assert cls[:9] == ["tc", "class", "add", "dev", "s1-eth3", "parent", "1:", "classid", "1:1"]
    assert cls[cls.index("rate") + 1] == "1000000000bit" == cls[cls.index("ceil") + 1]
    # ~1 ms at 1 Gbit/s = 125000 bytes
    assert cls[cls.index("burst") + 1] == "125000" == cls[cls.index("cburst") + 1]
    assert leaf == ["tc", "qdisc", "add", "dev", "s1-eth3", "parent", "1:1", "handle", "10:",
                    "bfifo", "limit", str(100 * FRAME_BYTES)]


def test_slow_links_keep_a_burst_of_four_frames():
    burst = Emulation().htb_burst
    assert burst.bytes_at(10e6) == 4 * FRAME_BYTES
    assert burst.bytes_at(100e6) == 12500
    assert fifo_limit_bytes(7) == 7 * 1514


def test_delay_makes_netem_the_leaf_with_a_packet_limit():
    leaf = egress_commands("h1-eth0", shape(1e8, 50, delay_s=0.0015))[-1]
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


def test_clsact_and_the_egress_bpf_filter_and_their_removal():
    from mn_harness.network.shaping import bpf_detach_commands, bpf_egress_argv, clsact_commands

    assert clsact_commands("s1-eth3") == [["tc", "qdisc", "replace", "dev", "s1-eth3", "clsact"]]
    argv = bpf_egress_argv("s1-eth3", "/cache/egress_queue-x.o")
    assert argv[:6] == ["tc", "filter", "replace", "dev", "s1-eth3", "egress"]
    assert argv[-5:] == ["direct-action", "obj", "/cache/egress_queue-x.o", "sec", "tc"]
    assert bpf_detach_commands("s1-eth3") == [["tc", "filter", "del", "dev", "s1-eth3", "egress"],
                                              ["tc", "qdisc", "del", "dev", "s1-eth3", "clsact"]]


def test_red_leaf_is_a_step_at_the_threshold_that_never_drops_not_ect_early():
    from mn_harness.network.shaping import red_leaf_argv

    leaf = egress_commands("s1-eth3", shape(1e9, 100), red_mark_bytes=20 * FRAME_BYTES)[-1]
    assert leaf[:10] == ["tc", "qdisc", "add", "dev", "s1-eth3", "parent", "1:1", "handle", "10:", "red"]
    opts = dict(zip(leaf[10:-2:2], leaf[11:-2:2], strict=True))
    assert opts == {"limit": str(100 * FRAME_BYTES), "min": str(20 * FRAME_BYTES),
                    "max": str(21 * FRAME_BYTES), "avpkt": str(FRAME_BYTES), "burst": "20",
                    "probability": "1.0", "bandwidth": "1000000000bit"}
    assert leaf[-2:] == ["ecn", "nodrop"]
    # a threshold at or above the limit still leaves max below the limit
    high = red_leaf_argv([], 1e9, 10, 50 * FRAME_BYTES)
    assert int(high[high.index("max") + 1]) <= 10 * FRAME_BYTES


def test_queue_stats_read_a_red_leaf_too():
    out = """qdisc htb 1: root refcnt 2 r2q 10 default 0x1
 Sent 999 bytes 9 pkt (dropped 0, overlimits 5 requeues 0)
qdisc red 10: parent 1:1 limit 151400b min 30280b max 31794b ecn nodrop
 Sent 4000 bytes 3 pkt (dropped 1, overlimits 0 requeues 0)
"""
    assert parse_queue_stats(out) == {"sent_bytes": 4000, "sent_packets": 3, "drops": 1}


def test_the_default_emulation_shapes_ports_by_queue_and_hosts_like_a_nic():
    """run.emulation's defaults: HTB, 1 ms buckets, no quantum; a byte FIFO of `queue` frames at
    every switch port, a NIC's FIFO of txqueuelen packets at a host's own end."""
    for access, host_end in ((False, False), (True, False), (True, True)):
        _, cls, leaf = egress_commands("x", shape(5e8, 100, access=access, host_end=host_end))
        assert cls[9:] == ["htb", "rate", "500000000bit", "ceil", "500000000bit", "burst", "62500",
                           "cburst", "62500"]
        assert leaf[-3:] == (["pfifo", "limit", "1000"] if host_end else ["bfifo", "limit", str(100 * FRAME_BYTES)])


def test_unshaped_access_links_leave_both_ends_of_a_hosts_link_alone():
    plain = Emulation(access_links="unshaped")
    link = LinkConfig("h1", "s1", 5e8, 100)
    assert egress_shape(link, plain, access=True, host_end=True) is None
    assert egress_shape(link, plain, access=True) is None
    assert egress_shape(LinkConfig("s1", "s2", 5e8, 100), plain, access=False) is not None


@pytest.mark.parametrize("emulation,host_end,leaf", [
    (Emulation(queue_limit="packets"), False, ["pfifo", "limit", "100"]),
    (Emulation(queue_limit="txqueuelen"), False, ["pfifo", "limit", "1000"]),
    (Emulation(host_queue="txqueuelen"), True, ["pfifo", "limit", "1000"]),
    (Emulation(host_queue="txqueuelen"), False, ["bfifo", "limit", str(100 * FRAME_BYTES)]),
    (Emulation(host_queue="link"), True, ["bfifo", "limit", str(100 * FRAME_BYTES)]),
])
def test_queue_limits_in_packets_and_the_nics_own_queue(emulation, host_end, leaf):
    out = shape(5e8, 100, emulation=emulation, access=True, host_end=host_end)
    assert egress_commands("x", out)[-1][-3:] == leaf
    assert out.limit_bytes == (None if leaf[0] == "pfifo" else 100 * FRAME_BYTES)


def test_htb_buckets_and_quantum_as_mininets_tclink_gives_them():
    """Mininet's TCLink: `burst 15k`, cburst and quantum left to tc."""
    from mn_harness.config.emulation import Burst

    tclink = Emulation(htb_burst=Burst(bytes=15360), htb_cburst=Burst(), htb_quantum=None)
    _, cls, _ = egress_commands("x", shape(5e8, 100, emulation=tclink))
    assert cls[9:] == ["htb", "rate", "500000000bit", "ceil", "500000000bit", "burst", "15360"]
    _, cls, _ = egress_commands("x", shape(5e8, 100, emulation=Emulation(htb_quantum=1514)))
    assert cls[-2:] == ["quantum", "1514"]


def test_a_rate_change_keeps_the_shapes_buckets():
    from mn_harness.network.shaping import rate_change_commands

    (argv,) = rate_change_commands("x", shape(1e9, 100).at_rate(1e8))
    assert argv[:4] == ["tc", "class", "change", "dev"]
    assert argv[-8:] == ["rate", "100000000bit", "ceil", "100000000bit", "burst", "12500", "cburst", "12500"]

"""Egress shaping: each link end gets HTB at the link rate with a packet FIFO of `queue`
packets as its leaf, so a bottleneck's queue really fills and drops (no netem needed).

Segmentation offloads are turned off on every interface first: with GSO/TSO a 64 KB
super-packet would count as one packet in the FIFO and make `queue` meaningless.
`delay` needs netem as the leaf instead; where the kernel lacks sch_netem we say so."""

from __future__ import annotations

import re

from mn_harness.network.commands import run_in
from mn_harness.network.errors import MissingKernelFeature, NetworkError
from mn_harness.p4.limits import FRAME_BYTES


def limit_offloads(pid: int, intf: str, gso_max_segs: int) -> None:
    """Cap GSO super-packets at a few MTUs: per-MTU packets cost too much CPU on small
    machines (an isolated 1 Gbit/s job reached ~70% of the link), while 64 KB super-packets
    would make a `queue` of N packets hold up to 43N packets. Measured on a 2-core VM, an
    isolated 25 MB ring step over 1 Gbit/s: 1 seg 70%, 8 segs 89%, 16 segs 91%, unlimited 96%
    of the link rate. 1 turns segmentation offloads off entirely (exact per-packet queues)."""
    if gso_max_segs == 1:
        run_in(pid, ["ethtool", "-K", intf, "tso", "off", "gso", "off", "gro", "off"], check=False)
    else:
        run_in(pid, ["ip", "link", "set", "dev", intf, "gso_max_segs", str(gso_max_segs)], check=False)
        run_in(pid, ["ethtool", "-K", intf, "gro", "off"], check=False)


def add_netem(pid: int, qdisc_argv: list[str], delay_s: float, limit: int, where: str) -> None:
    """Add a netem delay qdisc (`qdisc_argv` says where: root or a parent class). Probes by
    trying, inside the node's own namespace (nothing outside is touched), and turns the kernel's
    refusal into one line saying what is missing."""
    try:
        run_in(pid, [*qdisc_argv, "netem", "delay", f"{delay_s * 1e6:.0f}us", "limit", str(limit)])
    except NetworkError as exc:
        if "unknown" in str(exc).lower() or "No such file" in str(exc):
            raise MissingKernelFeature(
                f"{where}: delay needs the sch_netem kernel module, absent in this kernel "
                "(install linux-modules-extra-$(uname -r), or remove `delay`)"
            ) from None
        raise


def shape_egress(pid: int, intf: str, bw_bps: float, queue_packets: int, delay_s: float = 0.0,
                 where: str = "") -> None:
    rate = f"{int(bw_bps)}bit"
    # burst: enough for a few ms of traffic at high rates, at least a few MTUs
    burst = max(4 * FRAME_BYTES, int(bw_bps / 8 / 1000))
    run_in(pid, ["tc", "qdisc", "replace", "dev", intf, "root", "handle", "1:", "htb", "default", "1"])
    run_in(pid, ["tc", "class", "add", "dev", intf, "parent", "1:", "classid", "1:1", "htb",
                 "rate", rate, "ceil", rate, "burst", str(burst), "cburst", str(burst)])
    if delay_s > 0:
        add_netem(pid, ["tc", "qdisc", "add", "dev", intf, "parent", "1:1", "handle", "10:"],
                  delay_s, queue_packets, where or intf)
    else:
        # byte-limited: a GSO super-packet of k MTUs takes k packets' room
        run_in(pid, ["tc", "qdisc", "add", "dev", intf, "parent", "1:1", "handle", "10:", "bfifo",
                     "limit", str(queue_packets * FRAME_BYTES)])


_SENT_RE = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+)")


def queue_stats(pid: int, intf: str) -> dict:
    """Bytes sent and packets dropped by the leaf queue (pfifo or netem) of an egress port."""
    out = run_in(pid, ["tc", "-s", "qdisc", "show", "dev", intf], check=False)
    stats = {"sent_bytes": 0, "sent_packets": 0, "drops": 0}
    leaf = False
    for line in out.splitlines():
        if line.startswith("qdisc"):
            leaf = line.split()[1] in ("bfifo", "pfifo", "netem")
            continue
        match = _SENT_RE.search(line)
        if match and leaf:
            stats = {"sent_bytes": int(match[1]), "sent_packets": int(match[2]), "drops": int(match[3])}
    return stats

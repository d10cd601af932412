"""Egress shaping: each link end gets HTB at the link rate with a byte FIFO of `queue` frames as
its leaf, so a bottleneck's queue really fills and drops (no netem needed).

The tc argv lists are built by pure functions (`egress_commands`, `offload_commands`) so they can
be checked without a namespace; `shape_egress` and `limit_offloads` run them in a node.
Segmentation offloads are capped first (see `offload_commands`): with unlimited GSO/TSO a 64 KB
super-packet would count as one packet in the FIFO and make `queue` meaningless. `delay` needs
netem as the leaf instead; where the kernel lacks sch_netem we say so in one line."""

from __future__ import annotations

import re

from mn_harness.network.commands import run_in
from mn_harness.network.errors import MissingKernelFeature, NetworkError
from mn_harness.p4.limits import FRAME_BYTES

HTB_HANDLE = "1:"
HTB_CLASS = "1:1"
LEAF_HANDLE = "10:"
MAX_TC_U32 = 2**32 - 1  # tc's rate/burst/limit fields are 32-bit


def htb_burst_bytes(bw_bps: float) -> int:
    """HTB burst: about 1 ms of traffic at the link rate, at least 4 frames."""
    return max(4 * FRAME_BYTES, int(bw_bps / 8 / 1000))


def fifo_limit_bytes(queue_packets: int) -> int:
    """The leaf FIFO's limit: byte-sized, so a GSO super-packet of k frames takes k frames' room."""
    return queue_packets * FRAME_BYTES


def netem_argv(qdisc_argv: list[str], delay_s: float, limit: int) -> list[str]:
    return [*qdisc_argv, "netem", "delay", f"{delay_s * 1e6:.0f}us", "limit", str(limit)]


def egress_commands(intf: str, bw_bps: float, queue_packets: int, delay_s: float = 0.0) -> list[list[str]]:
    """The tc commands that shape `intf`'s egress: HTB root at bw_bps, then a byte FIFO of
    queue_packets frames (or netem with `delay_s` and a packet limit) as the leaf."""
    rate = f"{int(bw_bps)}bit"
    burst = str(htb_burst_bytes(bw_bps))
    commands = [
        ["tc", "qdisc", "replace", "dev", intf, "root", "handle", HTB_HANDLE, "htb", "default", "1"],
        ["tc", "class", "add", "dev", intf, "parent", HTB_HANDLE, "classid", HTB_CLASS, "htb",
         "rate", rate, "ceil", rate, "burst", burst, "cburst", burst],
    ]
    leaf = ["tc", "qdisc", "add", "dev", intf, "parent", HTB_CLASS, "handle", LEAF_HANDLE]
    if delay_s > 0:
        commands.append(netem_argv(leaf, delay_s, queue_packets))
    else:
        commands.append([*leaf, "bfifo", "limit", str(fifo_limit_bytes(queue_packets))])
    return commands


def rate_change_commands(intf: str, bw_bps: float) -> list[list[str]]:
    """Change a shaped egress's rate in place (the HTB class egress_commands made; its queue and
    the packets in it stay): a link's rate changed while jobs run."""
    rate = f"{int(bw_bps)}bit"
    burst = str(htb_burst_bytes(bw_bps))
    return [["tc", "class", "change", "dev", intf, "parent", HTB_HANDLE, "classid", HTB_CLASS, "htb",
             "rate", rate, "ceil", rate, "burst", burst, "cburst", burst]]


def offload_commands(intf: str, gso_max_segs: int) -> list[list[str]]:
    """Cap GSO super-packets at a few frames: per-frame packets cost too much CPU on small
    machines (an isolated 1 Gbit/s job reached ~70% of the link), while 64 KB super-packets
    would make a `queue` of N packets hold up to 43N packets. Measured on a 2-core VM, an
    isolated 25 MB ring step over 1 Gbit/s: 1 seg 70%, 8 segs 89%, 16 segs 91%, unlimited 96%
    of the link rate. 1 turns segmentation offloads off entirely (exact per-packet queues)."""
    if gso_max_segs == 1:
        return [["ethtool", "-K", intf, "tso", "off", "gso", "off", "gro", "off"]]
    return [["ip", "link", "set", "dev", intf, "gso_max_segs", str(gso_max_segs)],
            ["ethtool", "-K", intf, "gro", "off"]]


def limit_offloads(pid: int, intf: str, gso_max_segs: int) -> None:
    for argv in offload_commands(intf, gso_max_segs):
        run_in(pid, argv, check=False)  # a veth without the feature keeps its default


def add_netem(pid: int, qdisc_argv: list[str], delay_s: float, limit: int, where: str) -> None:
    """Add a netem delay qdisc (`qdisc_argv` says where: root or a parent class). Probes by
    trying, inside the node's own namespace (nothing outside is touched), and turns the kernel's
    refusal into one line saying what is missing."""
    run_netem(pid, netem_argv(qdisc_argv, delay_s, limit), where)


def run_netem(pid: int, argv: list[str], where: str) -> None:
    try:
        run_in(pid, argv)
    except NetworkError as exc:
        if "unknown" in str(exc).lower() or "No such file" in str(exc):
            raise MissingKernelFeature(
                f"{where}: delay needs the sch_netem kernel module, absent in this kernel "
                "(install linux-modules-extra-$(uname -r), or remove `delay`)"
            ) from None
        raise


def shape_egress(pid: int, intf: str, bw_bps: float, queue_packets: int, delay_s: float = 0.0,
                 where: str = "") -> None:
    for argv in egress_commands(intf, bw_bps, queue_packets, delay_s):
        if "netem" in argv:
            run_netem(pid, argv, where or intf)
        else:
            run_in(pid, argv)


_SENT_RE = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+)")


def parse_queue_stats(tc_output: str) -> dict:
    """Bytes sent and packets dropped by the leaf queue (bfifo, pfifo or netem) in the output of
    `tc -s qdisc show dev X`."""
    stats = {"sent_bytes": 0, "sent_packets": 0, "drops": 0}
    leaf = False
    for line in tc_output.splitlines():
        if line.startswith("qdisc"):
            leaf = line.split()[1] in ("bfifo", "pfifo", "netem")
            continue
        match = _SENT_RE.search(line)
        if match and leaf:
            stats = {"sent_bytes": int(match[1]), "sent_packets": int(match[2]), "drops": int(match[3])}
    return stats


def queue_stats(pid: int, intf: str) -> dict:
    """Bytes sent and packets dropped by the leaf queue of an egress port."""
    return parse_queue_stats(run_in(pid, ["tc", "-s", "qdisc", "show", "dev", intf], check=False))

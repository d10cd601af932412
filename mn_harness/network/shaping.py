"""Egress shaping: each link end gets HTB at the link rate with a byte FIFO of `queue` frames as
its leaf, so a bottleneck's queue really fills and drops (no netem needed). run.emulation
(config/emulation.py) may leave the hosts' links unshaped, count the FIFO in packets, or set
HTB's buckets and quantum: `egress_shape` is the one place that turns it into an `EgressShape`.

The tc argv lists are built by pure functions (`egress_commands`, `offload_commands`,
`clsact_commands`, `bpf_egress_argv`, `red_leaf_argv`) so they can be checked without a
namespace; `shape_egress` and `limit_offloads` run them in a node. ECN marking on the Linux data
plane (mn_harness/dataplane/egress) puts a tc BPF program on the port's clsact egress hook, in
front of this HTB; on kernels that cannot run it but have sch_red, RED (`ecn nodrop`, a step at
the threshold) is the leaf instead of the FIFO.
Segmentation offloads are capped first (see `offload_commands`): with unlimited GSO/TSO a 64 KB
super-packet would count as one packet in the FIFO and make `queue` meaningless. `delay` needs
netem as the leaf instead; where the kernel lacks sch_netem we say so in one line."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from mn_harness.config import LinkConfig
from mn_harness.config.emulation import TXQUEUELEN, Burst, Emulation
from mn_harness.network.commands import run_in
from mn_harness.network.errors import MissingKernelFeature, NetworkError
from mn_harness.network.plan import Interface, NetworkPlan
from mn_harness.p4.limits import FRAME_BYTES

HTB_HANDLE = "1:"
HTB_CLASS = "1:1"
LEAF_HANDLE = "10:"
MAX_TC_U32 = 2**32 - 1  # tc's rate/burst/limit fields are 32-bit


def fifo_limit_bytes(queue_packets: int, frame_bytes: int = FRAME_BYTES) -> int:
    """The leaf FIFO's limit: byte-sized, so a GSO super-packet of k frames takes k frames' room
    (`queue_packets` full frames of the link's MTU)."""
    return queue_packets * frame_bytes


@dataclass(frozen=True)
class EgressShape:
    """How one egress is shaped: HTB at `bw_bps` (its buckets and quantum as run.emulation says)
    over a leaf FIFO (`leaf`: bfifo or pfifo, `limit` in its unit), or netem when the link has a
    delay (a packet limit of `queue_packets`); `frame_bytes`: a full frame of the link's MTU."""

    bw_bps: float
    queue_packets: int
    leaf: str = "bfifo"
    limit: int = 0
    burst: Burst = Emulation().htb_burst
    cburst: Burst = Emulation().htb_cburst
    quantum: int | None = None
    delay_s: float = 0.0
    frame_bytes: int = FRAME_BYTES

    @property
    def limit_bytes(self) -> int | None:
        """The FIFO's limit in bytes, when it counts bytes (else None: it counts packets)."""
        return self.limit if self.leaf == "bfifo" and self.delay_s == 0 else None

    def at_rate(self, bw_bps: float) -> EgressShape:
        return dataclasses.replace(self, bw_bps=bw_bps)

    def class_params(self) -> list[str]:
        """The HTB class's rate, ceil, buckets and quantum, as tc takes them."""
        rate = f"{int(self.bw_bps)}bit"
        out = ["rate", rate, "ceil", rate]
        for key, bucket in (("burst", self.burst), ("cburst", self.cburst)):
            size = bucket.bytes_at(self.bw_bps, self.frame_bytes)
            if size is not None:
                out += [key, str(size)]
        if self.quantum is not None:
            out += ["quantum", str(self.quantum)]
        return out


def egress_shape(link: LinkConfig, emulation: Emulation, *, access: bool, host_end: bool = False) -> EgressShape | None:
    """The shape of one end of `link`, or None when that end is left unshaped. `access`: the
    link has a host at one end (run.emulation.access_links says whether both its ends are
    shaped); `host_end`: this is the host's end (run.emulation.host_queue picks its FIFO)."""
    if access and not emulation.shapes_access():
        return None
    if host_end and emulation.host_queue == "txqueuelen" or emulation.queue_limit == "txqueuelen":
        leaf, limit = "pfifo", TXQUEUELEN
    elif emulation.queue_limit == "packets":
        leaf, limit = "pfifo", link.queue_packets
    else:
        leaf, limit = "bfifo", fifo_limit_bytes(link.queue_packets, link.frame_bytes)
    return EgressShape(link.bw_bps, link.queue_packets, leaf, limit, emulation.htb_burst, emulation.htb_cburst,
                       emulation.htb_quantum, link.delay_s, link.frame_bytes)


def port_shape(plan: NetworkPlan, intf: Interface) -> EgressShape | None:
    """The shape of `intf`'s egress in `plan`'s network (None: unshaped): the one answer the
    hosts' set-up, the data plane and the link monitor all take."""
    hosts = set(plan.experiment.hosts)
    return egress_shape(intf.link, plan.experiment.run.emulation,
                        access=intf.node in hosts or intf.peer_node in hosts, host_end=intf.node in hosts)


def netem_argv(qdisc_argv: list[str], delay_s: float, limit: int) -> list[str]:
    return [*qdisc_argv, "netem", "delay", f"{delay_s * 1e6:.0f}us", "limit", str(limit)]


def egress_commands(intf: str, shape: EgressShape, red_mark_bytes: int | None = None) -> list[list[str]]:
    """The tc commands that shape `intf`'s egress: HTB root, one class at the shape's rate, then
    its FIFO (or netem with the link's delay and a packet limit, or RED marking at
    `red_mark_bytes`) as the leaf."""
    commands = [
        ["tc", "qdisc", "replace", "dev", intf, "root", "handle", HTB_HANDLE, "htb", "default", "1"],
        ["tc", "class", "add", "dev", intf, "parent", HTB_HANDLE, "classid", HTB_CLASS, "htb",
         *shape.class_params()],
    ]
    leaf = ["tc", "qdisc", "add", "dev", intf, "parent", HTB_CLASS, "handle", LEAF_HANDLE]
    if shape.delay_s > 0:
        commands.append(netem_argv(leaf, shape.delay_s, shape.queue_packets))
    elif red_mark_bytes is not None:
        commands.append(red_leaf_argv(leaf, shape.bw_bps, shape.queue_packets, red_mark_bytes, shape.frame_bytes))
    else:
        commands.append([*leaf, shape.leaf, "limit", str(shape.limit)])
    return commands


def red_leaf_argv(leaf: list[str], bw_bps: float, queue_packets: int, mark_bytes: int,
                  frame_bytes: int = FRAME_BYTES) -> list[str]:
    """RED as a step marker (for kernels with sch_red but no usable tc BPF): ECT packets are
    marked CE once the average queue reaches `mark_bytes` (min = mark, max = mark + 1 frame,
    probability 1), `nodrop` keeps not-ECT packets queued until the FIFO limit, as the byte FIFO
    would (Linux >= 5.8), and `burst` = the threshold in frames makes tc pick the smallest EWMA
    weight exponent (Wlog 1: the average moves half-way to each new backlog)."""
    limit = fifo_limit_bytes(queue_packets, frame_bytes)
    low = max(1, min(mark_bytes, limit - frame_bytes))
    return [*leaf, "red", "limit", str(limit), "min", str(low), "max", str(low + frame_bytes),
            "avpkt", str(frame_bytes), "burst", str(max(1, -(-low // frame_bytes))),
            "probability", "1.0", "bandwidth", f"{int(bw_bps)}bit", "ecn", "nodrop"]


def clsact_commands(intf: str) -> list[list[str]]:
    """The clsact qdisc that holds `intf`'s egress BPF filter."""
    return [["tc", "qdisc", "replace", "dev", intf, "clsact"]]


def bpf_egress_argv(intf: str, obj: str, section: str = "tc") -> list[str]:
    """Attach `obj`'s program in `section` to `intf`'s egress (direct action: it returns the
    verdict itself; ours always lets the packet through)."""
    return ["tc", "filter", "replace", "dev", intf, "egress", "pref", "1", "handle", "1", "bpf",
            "direct-action", "obj", obj, "sec", section]


def bpf_detach_commands(intf: str) -> list[list[str]]:
    """Remove the egress filter and the clsact qdisc again (the HTB root stays)."""
    return [["tc", "filter", "del", "dev", intf, "egress"], ["tc", "qdisc", "del", "dev", intf, "clsact"]]


def rate_change_commands(intf: str, shape: EgressShape) -> list[list[str]]:
    """Change a shaped egress's rate in place to `shape`'s (the HTB class egress_commands made;
    its queue and the packets in it stay): a link's rate changed while jobs run."""
    return [["tc", "class", "change", "dev", intf, "parent", HTB_HANDLE, "classid", HTB_CLASS, "htb",
             *shape.class_params()]]


def offload_commands(intf: str, gso_max_segs: int) -> list[list[str]]:
    """Cap GSO super-packets at a few frames: per-frame packets cost too much CPU on small
    machines (an isolated 1 Gbit/s job reached ~70% of the link), while 64 KB super-packets
    would make a `queue` of N packets hold up to 43N packets (the kernel's GSO size limit, 64 KB,
    bounds a super-packet too: at MTU 9000 a cap of 16 still means at most 7 frames). Measured on a 2-core VM, an
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


def shape_egress(pid: int, intf: str, shape: EgressShape, where: str = "",
                 red_mark_bytes: int | None = None) -> None:
    for argv in egress_commands(intf, shape, red_mark_bytes):
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
            leaf = line.split()[1] in ("bfifo", "pfifo", "netem", "red")
            continue
        match = _SENT_RE.search(line)
        if match and leaf:
            stats = {"sent_bytes": int(match[1]), "sent_packets": int(match[2]), "drops": int(match[3])}
    return stats


def queue_stats(pid: int, intf: str) -> dict:
    """Bytes sent and packets dropped by the leaf queue of an egress port."""
    return parse_queue_stats(run_in(pid, ["tc", "-s", "qdisc", "show", "dev", intf], check=False))

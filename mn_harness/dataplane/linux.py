"""The embedded default data plane: each switch is a Linux router in its own namespace.

Routers rather than bridges, because routing works on any connected topology, loops included
(leaf-spine), with static shortest-path routes from the plan; a bridge would need STP. And a
router's receive path frees each packet from the socket that sent it, as a NIC's transmit
completion does, where behind a bridge it stays charged to its sender through the switches'
queues (dataplane/bridge.py). Each
egress port is shaped with HTB + a byte FIFO (see shaping.py), so the bottleneck queue is a
real kernel queue that fills and drops.

ECN and queue telemetry (mn_harness/dataplane/egress): every switch egress port that marks
(its `ecn_threshold`, default 20 packets, not `off`) or is sampled (`run.queue_telemetry`) gets
the egress BPF program on its clsact hook, in front of the HTB. It CE-marks ECT packets joining
a queue at or above the threshold, lets the FIFO drop at its limit as before, and counts what
queue.csv needs; a thread samples it (default 100/s). Where the kernel cannot run it, RED marks
instead (no queue.csv) or, failing that, the run stops with one line if anything needs marks
(egress/probe.py).

ECMP (`routing: ecmp`): a route with several equal-cost next hops becomes a multipath route
(`ip route replace X/32 nexthop via A dev .. nexthop via B dev ..`) and every router hashes
the 5-tuple with the same seed: `fib_multipath_hash_policy` 3 with `fib_multipath_hash_fields`
= source and destination address, protocol, source and destination port. Not policy 1 (the
documented "L4" policy): for forwarded packets it reuses the hash the sending socket put on the
skb (`sk_txhash`, random per connection and re-drawn on timeouts, and it survives the veth into
the router's namespace), so a flow's path changed from run to run and did not match `ip route
get` (measured: 5 of 8 connections). With policy 3 the kernel's choice is a function of the
5-tuple and `fib_multipath_hash_seed` (Linux >= 6.11; from network.flows), so `resolve_paths`
asks each router with `ip route get ... iif ... ipproto tcp sport .. dport ..` which next hop it
takes, and every run with the same seed takes the same paths (measured: 8 of 8, twice)."""

from __future__ import annotations

import re
from pathlib import Path

from mininet.net import Mininet
from mininet.node import Node

from mn_harness.bpf.toolchain import check_toolchain
from mn_harness.config import SwitchConfig
from mn_harness.dataplane.base import Dataplane
from mn_harness.dataplane.egress.build import EgressBuilder, EgressConfig, default_cache_dir
from mn_harness.dataplane.egress.probe import Support, bpf_unavailable_reason, choose_tracker, ecn_demand
from mn_harness.dataplane.egress.program import EgressProgram
from mn_harness.dataplane.egress.sampler import EgressSampler, SampledPort
from mn_harness.dataplane.errors import DataplaneError
from mn_harness.dataplane.queue_csv import QueueCollector, sample_hz_from_env
from mn_harness.dataplane.queues import (
    ecn_summary,
    host_job_ids,
    link_label,
    monitored_interfaces,
    port_threshold,
    switch_ports,
)
from mn_harness.network.commands import run_in
from mn_harness.network.errors import NetworkError
from mn_harness.network.flows import Flow, ecmp_hash_seed
from mn_harness.network.nodes import TimedShell
from mn_harness.network.plan import Interface, NetworkPlan
from mn_harness.network.shaping import (
    HTB_CLASS,
    LEAF_HANDLE,
    egress_commands,
    port_shape,
    queue_stats,
    rate_change_commands,
    red_leaf_argv,
    shape_egress,
)
from mn_harness.state import EgressProgramGone, Undo

# fib_multipath_hash_fields bits (include/net/ip_fib.h): src ip, dst ip, ip proto, src port, dst port
ECMP_HASH_FIELDS = 0x0001 | 0x0002 | 0x0004 | 0x0010 | 0x0020
ECMP_HASH_POLICY = 3  # custom: the fields above, never the socket's hash
_DEV_RE = re.compile(r"\bdev (\S+)")


def address_commands(intf: Interface) -> list[list[str]]:
    """A router port: its /24 address (the plan's), up."""
    return [["ip", "addr", "flush", "dev", intf.name],
            ["ip", "addr", "add", f"{intf.ip}/{intf.prefix_len}", "dev", intf.name],
            ["ip", "link", "set", intf.name, "up"]]


def route_commands(plan: NetworkPlan, router: str) -> list[list[str]]:
    """A /32 per host that is not on a directly connected /24, via the plan's next hop (ECMP:
    a multipath route over every equal-cost next hop)."""
    out = []
    for route in plan.routes[router]:
        if route.next_hop_ip == route.dst_ip:
            continue
        argv = ["ip", "route", "replace", f"{route.dst_ip}/32"]
        if route.multipath:
            for hop in route.next_hops:
                argv += ["nexthop", "via", hop.ip, "dev", hop.out.name]
        else:
            argv += ["via", route.next_hop_ip, "dev", route.out.name]
        out.append(argv)
    return out


def ecmp_sysctls(plan: NetworkPlan) -> dict[str, str]:
    """The routers' multipath hash settings; empty with shortest-path routing."""
    if plan.routing != "ecmp":
        return {}
    return {"net.ipv4.fib_multipath_hash_policy": str(ECMP_HASH_POLICY),
            "net.ipv4.fib_multipath_hash_fields": f"0x{ECMP_HASH_FIELDS:x}",
            "net.ipv4.fib_multipath_hash_seed": str(ecmp_hash_seed(plan.experiment.run.seed))}


def route_get_argv(plan: NetworkPlan, router: str, came_from: str, flow: Flow) -> list[str]:
    """`ip route get` for a packet of `flow` arriving at `router` from `came_from`: the kernel's
    own forwarding decision (input route lookup with the 5-tuple, as for a forwarded packet)."""
    iif = plan.interface_towards(router, came_from).name
    return ["ip", "-o", "route", "get", plan.host_ip[flow.dst], "from", plan.host_ip[flow.src],
            "iif", iif, "ipproto", "tcp", "sport", str(flow.sport), "dport", str(flow.dport)]


def parse_route_get(output: str) -> str | None:
    """The egress device in `ip -o route get` output."""
    match = _DEV_RE.search(output)
    return match[1] if match else None


def router_commands(plan: NetworkPlan, router: str) -> list[list[str]]:
    """Every command the Linux data plane runs in `router`'s namespace, in order (after the
    node's own sysctls): addresses, egress shaping (of the ports run.emulation shapes), routes."""
    out: list[list[str]] = []
    for intf in plan.interfaces[router]:
        out += address_commands(intf)
        if (shape := port_shape(plan, intf)) is not None:
            out += egress_commands(intf.name, shape)
    return out + route_commands(plan, router)


NO_LIMIT_BYTES = 2**32 - 1


def egress_config(plan: NetworkPlan, intf: Interface, tracker: str, compare: bool = False) -> EgressConfig:
    """The program one (shaped) port gets: its threshold (hosts: none), its FIFO limit, its HTB.
    A FIFO that counts packets (netem, with a link's `delay`, which also holds the packets it
    delays; a pfifo, run.emulation.queue_limit) gets no byte limit: there drops are not
    predicted (NO_LIMIT_BYTES) and with netem the depth includes the delay line (docs/ecn.md).
    tc's own burst (auto) is about one frame."""
    shape = port_shape(plan, intf)
    assert shape is not None, f"{intf.name} is not shaped"
    limit = shape.limit_bytes
    return EgressConfig(mark_bytes=port_threshold(plan, intf).threshold_bytes(intf.link.frame_bytes),
                        limit_bytes=NO_LIMIT_BYTES if limit is None else limit, rate_bps=shape.bw_bps,
                        burst_bytes=shape.burst.bytes_at(shape.bw_bps, shape.frame_bytes) or shape.frame_bytes,
                        jobs=len(plan.experiment.jobs) + 1, tracker=tracker, compare=compare)


class LinuxRouter(TimedShell, Node):
    """A namespace with IP forwarding on; interfaces are configured by the data plane."""

    def config(self, **params):
        result = super().config(**params)
        run_in(self.pid, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        run_in(self.pid, ["sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=0"])
        return result


class LinuxDataplane(Dataplane):
    name = "linux"

    def __init__(self, sample_hz: float | None = None, log=print, compare_trackers: bool = False):
        self.routers: dict[str, Node] = {}
        self.sample_hz = float(sample_hz or sample_hz_from_env())
        if self.sample_hz <= 0:
            raise DataplaneError(f"telemetry sample rate must be > 0, got {self.sample_hz}")
        self.log = log
        self.compare_trackers = compare_trackers  # the tracking benchmark: both trackers run
        self.plan: NetworkPlan | None = None
        self.support: Support | None = None
        self.programs: dict[tuple[str, str], EgressProgram] = {}  # (node, interface) -> program
        self._collector: QueueCollector | None = None
        self.seed_applied = True

    def add_switch(self, net: Mininet, switch: SwitchConfig, plan: NetworkPlan) -> Node:
        node = net.addHost(switch.name, cls=LinuxRouter, ip=None)
        self.routers[switch.name] = node
        return node

    def configure(self, net: Mininet, plan: NetworkPlan) -> None:
        self.plan = plan
        for name, node in self.routers.items():
            node.config()
            self._configure_forwarding(node, name, plan)
            for intf in plan.interfaces[name]:
                if (shape := port_shape(plan, intf)) is not None:
                    shape_egress(node.pid, intf.name, shape, where=f"link {intf.link.name}")
        self._set_up_egress(net, plan)

    def _configure_forwarding(self, node: Node, name: str, plan: NetworkPlan) -> None:
        """A router: the multipath hash (ECMP), each port's own address, the plan's routes."""
        for key, value in ecmp_sysctls(plan).items():
            try:
                run_in(node.pid, ["sysctl", "-q", "-w", f"{key}={value}"])
            except NetworkError as exc:
                if key.endswith("hash_seed"):  # Linux < 6.11: a key drawn at boot instead
                    self.seed_applied = False
                    continue
                raise DataplaneError(f"routing: ecmp needs {key} (hash policy 3, Linux >= "
                                     f"5.12): {exc}") from None
        for intf in plan.interfaces[name]:
            for argv in address_commands(intf):
                run_in(node.pid, argv)
        for argv in route_commands(plan, name):
            run_in(node.pid, argv)

    # -- ECN marking and the egress programs -------------------------------------------------
    def _set_up_egress(self, net: Mininet, plan: NetworkPlan) -> None:
        # an unshaped port (run.emulation.access_links) has no queue to mark at or to sample
        marking = [i for i in switch_ports(plan) if not port_threshold(plan, i).off and port_shape(plan, i)]
        watched = [i for i in monitored_interfaces(plan) if port_shape(plan, i) is not None]
        wanted = list({(i.node, i.name): i for i in marking + watched}.values())
        if not wanted:
            self.support = Support("off")
            return
        reason = bpf_unavailable_reason()
        if reason is None:
            reason = self._attach_programs(net, plan, wanted, choose_tracker())
        if reason is None:
            return
        self.log(f"ecn: the egress BPF program cannot run here: {reason}")
        if marking and self._try_red(net, plan, marking):
            self.support = Support("red", reason=reason)
            self.log("ecn: marking with RED instead (no queue.csv)")
            return
        self.support = Support("none", reason=f"{reason}; and no sch_red (RED) qdisc" if marking else reason)
        demand = ecn_demand(plan.experiment)
        if marking and demand:
            raise DataplaneError(f"ECN marking unavailable ({demand}): {self.support.reason}; "
                                 "see docs/troubleshooting.md#dctcp-ecn")
        if marking:
            self.log("ecn: no marking on this kernel; no job needs it")

    def _attach_programs(self, net: Mininet, plan: NetworkPlan, ports: list[Interface],
                         tracker: str) -> str | None:
        """Attach the program to every port; the first port doubles as the probe: its failure
        is returned as the reason BPF cannot be used (later failures are errors)."""
        builder = EgressBuilder(default_cache_dir(), log=self.log)
        builder.tools = check_toolchain()
        jobs = host_job_ids(plan)
        for n, intf in enumerate(ports):
            obj = builder.build(egress_config(plan, intf, tracker, self.compare_trackers))
            prog = EgressProgram(net[intf.node].pid, intf.name, obj, len(plan.experiment.jobs) + 1,
                                 where=f"link {link_label(intf)}")
            try:
                prog.attach()
            except DataplaneError as exc:
                prog.detach()
                if n == 0:
                    return str(exc)
                raise
            self.programs[(intf.node, intf.name)] = prog
            prog.set_jobs(jobs)
        self.support = Support("bpf", tracker)
        return None

    def _try_red(self, net: Mininet, plan: NetworkPlan, ports: list[Interface]) -> bool:
        """RED as the leaf of every marking port without `delay`; False if the kernel refuses."""
        for n, intf in enumerate(p for p in ports if p.link.delay_s == 0):
            leaf = ["tc", "qdisc", "replace", "dev", intf.name, "parent", HTB_CLASS, "handle", LEAF_HANDLE]
            mark = port_threshold(plan, intf).threshold_bytes(intf.link.frame_bytes)
            assert mark is not None
            try:
                run_in(net[intf.node].pid, red_leaf_argv(leaf, intf.link.bw_bps, intf.link.queue_packets, mark,
                                                         intf.link.frame_bytes))
            except NetworkError:
                if n == 0:
                    return False
                raise
        return True

    # -- telemetry ---------------------------------------------------------------------------
    def start_telemetry(self, out_dir: Path, t0: float) -> None:
        if self.plan is None:
            return
        self.stop_telemetry()
        ports = [SampledPort(i.node, i.port, link_label(i), self.programs[(i.node, i.name)],
                             drops_known=i.link.delay_s == 0, frame_bytes=i.link.frame_bytes)
                 for i in monitored_interfaces(self.plan) if (i.node, i.name) in self.programs]
        if not ports:
            return
        names = [j.name for j in self.plan.experiment.jobs]
        self._collector = QueueCollector(Path(out_dir) / "queue.csv", names, EgressSampler(ports, names),
                                         t0, self.sample_hz, name="linux-queue-telemetry")
        self._collector.start()

    def stop_telemetry(self) -> dict:
        collector, self._collector = self._collector, None
        out: dict = {}
        if collector is not None:
            collector.stop()
            out = collector.summary()
        elif self.support is not None and self.support.method != "bpf" and self.plan is not None \
                and monitored_interfaces(self.plan):
            out = {"telemetry": {"samples": 0, "error": f"no queue telemetry: {self.support.reason}"}}
        if self.plan is not None and self.support is not None:
            out["ecn"] = ecn_summary(self.plan, self.support.describe())
        return out

    def resolve_paths(self, net: Mininet, plan: NetworkPlan) -> NetworkPlan:
        """Each flow's next hop at every multipath router, as the router's kernel decides it."""
        if plan.resolved:
            return plan

        def choose(router: str, came_from: str, flow: Flow, options: tuple[str, ...]) -> str:
            argv = route_get_argv(plan, router, came_from, flow)
            dev = parse_route_get(run_in(self.routers[router].pid, argv))
            peer = next((i.peer_node for i in plan.interfaces[router] if i.name == dev), None)
            if peer not in options:
                raise DataplaneError(f"{router}: the kernel routes {flow.label} via {dev}, not one of "
                                     f"the plan's next hops {', '.join(options)}")
            return peer

        return plan.resolve(choose)

    def routing_summary(self, plan: NetworkPlan) -> dict:
        out = super().routing_summary(plan)
        if plan.routing == "ecmp" and not self.seed_applied:
            out["ecmp_hash_seed"] = None
            out["routing_note"] = ("no net.ipv4.fib_multipath_hash_seed (Linux < 6.11): the hash key "
                                   "is drawn at boot, paths repeat only until the next reboot")
        return out

    def set_egress_rate(self, node: Node, intf: Interface, bw_bps: float) -> None:
        assert self.plan is not None
        shape = port_shape(self.plan, intf)
        assert shape is not None, f"{intf.name} is not shaped"  # the network checked the link
        for argv in rate_change_commands(intf.name, shape.at_rate(bw_bps)):
            run_in(node.pid, argv)
        if (intf.node, intf.name) in self.programs and self.support is not None \
                and self.support.tracker == "vq":  # the backlog tracker follows the HTB by itself
            self.log(f"ecn: {link_label(intf)}: the virtual queue still drains at the old rate "
                     "(compiled in); its depth and marks are off until the run ends")

    def link_stats(self, net: Mininet, plan: NetworkPlan) -> dict:
        stats = {}
        for name, node in self.routers.items():
            for intf in plan.interfaces[name]:
                if port_shape(plan, intf) is not None:
                    stats[f"{name}->{intf.peer_node}"] = queue_stats(node.pid, intf.name)
        return stats

    def undo_records(self) -> list[Undo]:
        """The egress programs, which go with their namespaces (mn_harness.state: EgressProgramGone)."""
        return [EgressProgramGone(p.prog_id, p.intf) for p in self.programs.values() if p.prog_id]

    def stop(self) -> None:
        """Stop sampling and take every egress program off its port. Idempotent."""
        try:
            self.stop_telemetry()
        finally:
            programs, self.programs = list(self.programs.values()), {}
            for prog in programs:
                prog.detach()

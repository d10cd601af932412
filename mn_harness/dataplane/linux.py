"""The embedded default data plane: each switch is a Linux router in its own namespace.

Routers rather than bridges, because routing works on any connected topology, loops included
(leaf-spine), with static shortest-path routes from the plan; a bridge would need STP. Each
egress port is shaped with HTB + a packet FIFO (see shaping.py), so the bottleneck queue is a
real kernel queue that fills and drops.

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

from mininet.net import Mininet
from mininet.node import Node

from mn_harness.config import SwitchConfig
from mn_harness.dataplane.base import Dataplane
from mn_harness.dataplane.errors import DataplaneError
from mn_harness.network.commands import run_in
from mn_harness.network.errors import NetworkError
from mn_harness.network.flows import Flow, ecmp_hash_seed
from mn_harness.network.plan import Interface, NetworkPlan
from mn_harness.network.shaping import egress_commands, queue_stats, rate_change_commands, shape_egress

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
    node's own sysctls): addresses, egress shaping, routes."""
    out: list[list[str]] = []
    for intf in plan.interfaces[router]:
        out += address_commands(intf)
        out += egress_commands(intf.name, intf.link.bw_bps, intf.link.queue_packets, intf.link.delay_s)
    return out + route_commands(plan, router)


class LinuxRouter(Node):
    """A namespace with IP forwarding on; interfaces are configured by the data plane."""

    def config(self, **params):
        result = super().config(**params)
        run_in(self.pid, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        run_in(self.pid, ["sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=0"])
        return result


class LinuxDataplane(Dataplane):
    name = "linux"

    def __init__(self):
        self.routers: dict[str, Node] = {}
        self.seed_applied = True

    def add_switch(self, net: Mininet, switch: SwitchConfig, plan: NetworkPlan) -> Node:
        node = net.addHost(switch.name, cls=LinuxRouter, ip=None)
        self.routers[switch.name] = node
        return node

    def configure(self, net: Mininet, plan: NetworkPlan) -> None:
        for name, node in self.routers.items():
            node.config()
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
                shape_egress(node.pid, intf.name, intf.link.bw_bps, intf.link.queue_packets,
                             intf.link.delay_s, where=f"link {intf.link.name}")
            for argv in route_commands(plan, name):
                run_in(node.pid, argv)

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
        for argv in rate_change_commands(intf.name, bw_bps):
            run_in(node.pid, argv)

    def link_stats(self, net: Mininet, plan: NetworkPlan) -> dict:
        stats = {}
        for name, node in self.routers.items():
            for intf in plan.interfaces[name]:
                stats[f"{name}->{intf.peer_node}"] = queue_stats(node.pid, intf.name)
        return stats

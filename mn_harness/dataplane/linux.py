"""The embedded default data plane: each switch is a Linux router in its own namespace.

Routers rather than bridges, because routing works on any connected topology, loops included
(leaf-spine), with static shortest-path routes from the plan; a bridge would need STP. Each
egress port is shaped with HTB + a packet FIFO (see shaping.py), so the bottleneck queue is a
real kernel queue that fills and drops."""

from __future__ import annotations

from mininet.net import Mininet
from mininet.node import Node

from mn_harness.config import SwitchConfig
from mn_harness.dataplane.base import Dataplane
from mn_harness.network.commands import run_in
from mn_harness.network.plan import Interface, NetworkPlan
from mn_harness.network.shaping import egress_commands, queue_stats, rate_change_commands, shape_egress


def address_commands(intf: Interface) -> list[list[str]]:
    """A router port: its /24 address (the plan's), up."""
    return [["ip", "addr", "flush", "dev", intf.name],
            ["ip", "addr", "add", f"{intf.ip}/{intf.prefix_len}", "dev", intf.name],
            ["ip", "link", "set", intf.name, "up"]]


def route_commands(plan: NetworkPlan, router: str) -> list[list[str]]:
    """A /32 per host that is not on a directly connected /24, via the plan's next hop."""
    return [["ip", "route", "replace", f"{route.dst_ip}/32", "via", route.next_hop_ip,
             "dev", route.out.name]
            for route in plan.routes[router] if route.next_hop_ip != route.dst_ip]


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

    def add_switch(self, net: Mininet, switch: SwitchConfig, plan: NetworkPlan) -> Node:
        node = net.addHost(switch.name, cls=LinuxRouter, ip=None)
        self.routers[switch.name] = node
        return node

    def configure(self, net: Mininet, plan: NetworkPlan) -> None:
        for name, node in self.routers.items():
            node.config()
            for intf in plan.interfaces[name]:
                for argv in address_commands(intf):
                    run_in(node.pid, argv)
                shape_egress(node.pid, intf.name, intf.link.bw_bps, intf.link.queue_packets,
                             intf.link.delay_s, where=f"link {intf.link.name}")
            for argv in route_commands(plan, name):
                run_in(node.pid, argv)

    def set_egress_rate(self, node: Node, intf: Interface, bw_bps: float) -> None:
        for argv in rate_change_commands(intf.name, bw_bps):
            run_in(node.pid, argv)

    def link_stats(self, net: Mininet, plan: NetworkPlan) -> dict:
        stats = {}
        for name, node in self.routers.items():
            for intf in plan.interfaces[name]:
                stats[f"{name}->{intf.peer_node}"] = queue_stats(node.pid, intf.name)
        return stats

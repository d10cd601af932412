"""The Linux data plane with a bridge for each switch (run.emulation.switches: bridge): the
switches of a plain Mininet network (mininet.nodelib.LinuxBridge), so the project's network can
be held against the network Mininet users build (bench/reference_network.py).

Each switch is a Linux bridge (`br0`, STP off: the experiment's checks refuse a topology with a
loop) that enslaves all of the switch's ports; shaping, ECN marking, queue telemetry and the link
monitor are the Linux routers' own, on the same ports. Two things differ from Mininet's
LinuxBridge, neither on the packets' path:

* the bridge lives in the switch's own network namespace, not in the machine's, so nothing of
  the emulated network is visible outside it and it vanishes with its shell;
* `net.bridge.bridge-nf-call-{arp,ip,ip6}tables` are 0 in that namespace (the kernel here has
  br_netfilter built in, whose default sends bridged packets through netfilter; Mininet's
  LinuxBridge warns when they are 1, and its users' bridges run with them off).

One thing differs from a hardware switch, as in plain Mininet: a bridge forwards a packet
without IP's receive path, which is where the kernel frees a packet from the socket that sent it
(a veth does not), so the packet counts against its sender's socket until the receiving host,
the switches' queues included, and TCP's small-queue limit throttles each sender by its packets
waiting in them. Routers free it at the first switch, as a NIC's transmit completion does; that
is why the routers are the default (docs/fidelity.md#routers-against-bridges-the-senders-socket-memory).

Hosts keep the plan's addresses; every other host is on-link (10.0.0.0/8 on their one
interface), found by ARP across the bridges; no gateway, so nothing is routed anywhere."""

from __future__ import annotations

from mininet.net import Mininet
from mininet.node import Node

from mn_harness.config import SwitchConfig
from mn_harness.dataplane.linux import LinuxDataplane
from mn_harness.network.commands import run_in
from mn_harness.network.nodes import TimedShell
from mn_harness.network.plan import Interface, NetworkPlan

BRIDGE = "br0"
EMULATED_PREFIX = "10.0.0.0/8"  # every address the plan hands out (network/plan.py)
BRIDGE_NF_SYSCTLS = ("net.bridge.bridge-nf-call-arptables", "net.bridge.bridge-nf-call-iptables",
                     "net.bridge.bridge-nf-call-ip6tables")


def bridge_commands(plan: NetworkPlan, switch: str) -> list[list[str]]:
    """The bridge of `switch` with every port of it enslaved, all up."""
    out = [["ip", "link", "add", BRIDGE, "type", "bridge", "stp_state", "0"]]
    for intf in plan.interfaces[switch]:
        out += [["ip", "addr", "flush", "dev", intf.name], ["ip", "link", "set", intf.name, "master", BRIDGE],
                ["ip", "link", "set", intf.name, "up"]]
    return out + [["ip", "link", "set", BRIDGE, "up"]]


class BridgeSwitch(TimedShell, Node):
    """A namespace holding one bridge; no IP forwarding (it switches frames)."""


class LinuxBridgeDataplane(LinuxDataplane):
    def add_switch(self, net: Mininet, switch: SwitchConfig, plan: NetworkPlan) -> Node:
        node = net.addHost(switch.name, cls=BridgeSwitch, ip=None)
        self.routers[switch.name] = node
        return node

    def _configure_forwarding(self, node: Node, name: str, plan: NetworkPlan) -> None:
        for key in BRIDGE_NF_SYSCTLS:
            run_in(node.pid, ["sysctl", "-q", "-w", f"{key}=0"], check=False)  # absent without br_netfilter
        for argv in bridge_commands(plan, name):
            run_in(node.pid, argv)

    def host_routes(self, intf: Interface) -> list[list[str]]:
        return [["ip", "route", "replace", EMULATED_PREFIX, "dev", intf.name]]

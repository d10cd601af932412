"""Build the emulated network in Mininet from the plan, and always take it down again.

Mininet gives us the namespaces (one shell per node, started with mnexec) and the veth pairs;
we configure addresses, routes and queues ourselves with argv commands, because Mininet's
TCLink puts `max_queue_size` into netem, which this kernel may lack. Host namespaces are
unnamed (Mininet's), so they vanish with their shell: stopping the shells is the teardown."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from mininet.link import Link
from mininet.net import Mininet
from mininet.node import Node

from mn_harness.config import Experiment, LinkConfig
from mn_harness.config.ecn import tcp_ecn_sysctl
from mn_harness.network import tcp_counters
from mn_harness.network.commands import run_in
from mn_harness.network.cpu_placement import steer_receive
from mn_harness.network.errors import NetworkError
from mn_harness.network.nodes import HarnessHost
from mn_harness.network.plan import Interface, NetworkPlan
from mn_harness.network.shaping import limit_offloads, port_shape, queue_stats, rate_change_commands, shape_egress

if TYPE_CHECKING:  # the data plane is a layer above: it is handed in, never imported
    from mn_harness.dataplane.base import Dataplane

TCP_RTO_MIN_S = 0.2  # the kernel's TCP_RTO_MIN (include/net/tcp.h)


def dilated_route_timers(time_scale: float) -> list[str]:
    """The options a host's routes take so its TCP keeps the model's times in an emulation K
    times slower (run.emulation.time_scale): the one fixed timer a route can set, the minimum
    RTO, 200 ms x K. The kernel's other fixed times (the delayed ACK's 40 ms minimum, the loss
    probe's 10 ms floor, the 1 s initial RTO of a handshake, the jiffy) cannot be set per
    namespace: docs/fidelity.md#time-dilation."""
    if time_scale == 1:
        return []
    return ["rto_min", f"{TCP_RTO_MIN_S * time_scale * 1e3:.0f}ms"]


class EmulatedNetwork:
    def __init__(self, experiment: Experiment, plan: NetworkPlan, dataplane: Dataplane,
                 on_change: Callable[[], None] = lambda: None,
                 remote_end: Callable[[Interface, Node], None] | None = None):
        self.experiment = experiment
        self.plan = plan
        self.dataplane = dataplane
        self.net: Mininet | None = None
        self.nodes: dict[str, Node] = {}
        self._on_change = on_change  # lets the session record pids for `mn-harness clean`
        # On one server of a run spread over several (mn_harness.cluster), the plan holds only
        # that server's nodes, and this makes the local end of a link to another server.
        self._remote_end = remote_end

    def build(self) -> None:
        exp, plan = self.experiment, self.plan
        here = set(plan.interfaces)  # every node; on one server of a cluster run, its own
        self.net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False,
                           autoStaticArp=False, waitConnected=False)
        for host in exp.hosts:
            if host in here:
                self.nodes[host] = self.net.addHost(host, cls=HarnessHost, ip=None)
                self._on_change()
        for switch in exp.switches:
            if switch.name in here:
                self.nodes[switch.name] = self.dataplane.add_switch(self.net, switch, plan)
                self._on_change()
        for link in exp.links:
            if link.a not in here or link.b not in here:
                if (link.a in here or link.b in here) and self._remote_end is not None:
                    end = link.a if link.a in here else link.b
                    self._remote_end(next(x for x in plan.interfaces[end] if x.link is link), self.nodes[end])
                continue
            a = next(x for x in plan.interfaces[link.a] if x.link is link)
            b = next(x for x in plan.interfaces[link.b] if x.link is link)
            self.net.addLink(self.nodes[link.a], self.nodes[link.b], port1=a.port, port2=b.port,
                             intfName1=a.name, intfName2=b.name, addr1=a.mac, addr2=b.mac, cls=Link)
        hosts = set(exp.hosts)
        for node_name in plan.interfaces:
            node = self.nodes[node_name]
            segs = exp.run.gso_max_segs
            if node_name in hosts:
                segs = self.dataplane.host_gso_max_segs(segs)
            if node.inNamespace:
                for intf in plan.interfaces[node_name]:
                    run_in(node.pid, ["ip", "link", "set", "dev", intf.name, "mtu", str(intf.link.mtu)])
                    limit_offloads(node.pid, intf.name, segs)
        for host in exp.hosts:
            if host in here:
                self._configure_host(host)
        self.dataplane.configure(self.net, plan)
        if exp.run.emulation.cpu_placement == "split":
            for node_name, intfs in plan.interfaces.items():
                steer_receive(self.nodes[node_name].pid, [i.name for i in intfs])

    def _configure_host(self, host: str) -> None:
        node = self.nodes[host]
        intf = self.plan.gateway(host)
        pid = node.pid
        run_in(pid, ["ip", "link", "set", "lo", "up"])
        run_in(pid, ["ip", "addr", "flush", "dev", intf.name])
        run_in(pid, ["ip", "addr", "add", f"{intf.ip}/{intf.prefix_len}", "dev", intf.name])
        run_in(pid, ["ip", "link", "set", intf.name, "up"])
        mn_intf = node.intf(intf.name)  # tell Mininet too, so its CLI's `h1 ping h3` works
        mn_intf.ip, mn_intf.prefixLen = intf.ip, intf.prefix_len
        timers = dilated_route_timers(self.experiment.run.emulation.time_scale)
        for argv in self.dataplane.host_routes(intf):
            run_in(pid, argv + timers)
        for dst_ip, mtu in self.plan.route_mtus(host).items():  # paths through a link of a smaller MTU
            run_in(pid, ["ip", "route", "replace", f"{dst_ip}/32", "via", intf.peer_ip, "dev", intf.name,
                         "mtu", str(mtu), *timers])
        if self.dataplane.host_neighbours_static():
            run_in(pid, ["ip", "neigh", "replace", intf.peer_ip, "lladdr", intf.peer_mac,
                         "dev", intf.name, "nud", "permanent"])
        ssai = "1" if self.experiment.run.slow_start_after_idle else "0"
        run_in(pid, ["sysctl", "-q", "-w", f"net.ipv4.tcp_slow_start_after_idle={ssai}"])
        run_in(pid, ["sysctl", "-q", "-w", "net.ipv4.tcp_no_metrics_save=1"])
        sysctls = self.dataplane.host_sysctls()
        if (ecn := tcp_ecn_sysctl(self.experiment.run.tcp_ecn)) is not None:
            sysctls["net.ipv4.tcp_ecn"] = ecn  # run.tcp_ecn overrides the data plane's choice
        for key, value in sysctls.items():
            run_in(pid, ["sysctl", "-q", "-w", f"{key}={value}"])
        shape = port_shape(self.plan, intf)
        if shape is not None:  # else the veth as it is: no qdisc, no rate (run.emulation.access_links)
            shape_egress(pid, intf.name, shape, where=f"link {intf.link.name}")

    def set_link_rate(self, link: LinkConfig, bw_bps: float) -> None:
        """Both ends of `link` send at bw_bps from now on: a host's egress is shaped here, a
        switch port's by the data plane. An unshaped link has no rate to change."""
        hosts = set(self.experiment.hosts)
        for end in (link.a, link.b):
            intf = next(i for i in self.plan.interfaces[end] if i.link is link)
            shape = port_shape(self.plan, intf)
            if shape is None:
                raise NetworkError(f"link {link.name} is not shaped (run.emulation.access_links: "
                                   f"{self.experiment.run.emulation.access_links}): it has no rate to change")
            if end in hosts:
                for argv in rate_change_commands(intf.name, shape.at_rate(bw_bps)):
                    run_in(self.nodes[end].pid, argv)
            else:
                self.dataplane.set_egress_rate(self.nodes[end], intf, bw_bps)

    def host_link_stats(self) -> dict[str, dict]:
        """Per shaped host egress (`h1->s1`): bytes, packets and drops of its FIFO, as summary.json's
        `link_stats` keeps the switch ports' (a drop here is the sender's own queue overflowing)."""
        pids = self.node_pids()
        return {f"{host}->{intf.peer_node}": queue_stats(pids[host], intf.name)
                for host in self.experiment.hosts if host in pids
                for intf in self.plan.interfaces[host] if port_shape(self.plan, intf) is not None}

    def node_pids(self) -> dict[str, int]:
        """Node name -> pid of its shell, for the nodes whose shell is still running (a shell
        that ended is not reported: its pid may already belong to someone else)."""
        return {name: node.pid for name, node in self.nodes.items()
                if getattr(node, "pid", None) and getattr(node, "shell", None) is not None
                and node.shell.poll() is None}

    def tcp_counters(self) -> dict[str, dict[str, int]]:
        """Each running host's kernel TCP counters now (network.tcp_counters: all of them;
        a run keeps the difference of two reads)."""
        pids = self.node_pids()
        return {host: tcp_counters.parse(run_in(pids[host], ["cat", *tcp_counters.FILES], check=False, timeout=10))
                for host in self.experiment.hosts if host in pids}

    def tcp_counters_since(self, before: dict[str, dict[str, int]]) -> dict:
        """summary.json's `tcp_counters`: what every host's TCP did since `before`."""
        return tcp_counters.summary(self.experiment, before, self.tcp_counters())

    def abort_connections(self) -> None:
        """Destroy the TCP sockets the jobs left in the hosts (`ss -K`): a socket orphaned with
        unsent data retransmits for minutes when its path is gone (a switch that died), keeping
        its namespace alive and holding a BPF congestion control the run must free."""
        for host in self.experiment.hosts:
            pid = self.node_pids().get(host)
            if pid is not None:
                try:
                    run_in(pid, ["ss", "-K", "-t", "-a"], check=False, timeout=10)
                except NetworkError:  # teardown goes on: stopping the node ends its sockets too
                    pass

    def stop(self) -> None:
        """Idempotent: stops the data plane, then every node shell (which ends its namespace)."""
        if self.net is None:
            return
        try:
            self.dataplane.stop()
        finally:
            net, self.net = self.net, None
            for node in self.nodes.values():
                shell = getattr(node, "shell", None)
                if shell is not None and shell.poll() is not None:
                    # a shell that exited (`h1 exit` typed in the Mininet CLI) answers no command:
                    # Mininet's interface deletion would wait for it forever; its namespace, and
                    # the veth ends in it, are gone already
                    node.cmd = lambda *args, **kwargs: ""
            try:
                net.stop()
            finally:
                # belt and braces: a shell that survived net.stop() would keep a namespace alive
                for node in self.nodes.values():
                    shell = getattr(node, "shell", None)
                    if shell is not None and shell.poll() is None:
                        try:
                            os.killpg(shell.pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass

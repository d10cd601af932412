"""The interface every data plane implements.

The network builder creates hosts and links and configures the host side; the data plane
creates the switch nodes, configures their forwarding (Linux routes or P4 tables) and their
egress queues (where the bottleneck queue lives), and may sample telemetry while jobs run.
Linux routers and BMv2 switches thus slot in beside each other behind one interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from mininet.net import Mininet
from mininet.node import Node

from mn_harness.config import SwitchConfig
from mn_harness.dataplane.errors import DataplaneError
from mn_harness.dataplane.port_rates import PortRate
from mn_harness.network.flows import ecmp_hash_seed
from mn_harness.network.plan import Interface, NetworkPlan
from mn_harness.state import Undo


class Dataplane(ABC):
    name: str = "abstract"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when this data plane can run here, else one line saying what to install."""
        return None

    @abstractmethod
    def add_switch(self, net: Mininet, switch: SwitchConfig, plan: NetworkPlan) -> Node:
        """Create the node for one switch (before links are added)."""

    @abstractmethod
    def configure(self, net: Mininet, plan: NetworkPlan) -> None:
        """After links exist: addresses, forwarding state and egress shaping of switch ports."""

    def resolve_paths(self, net: Mininet, plan: NetworkPlan) -> NetworkPlan:
        """After `configure`: the plan with this data plane's per-flow ECMP choices made
        (NetworkPlan.resolve); a plan without choices to make comes back as it is."""
        if not plan.resolved:
            raise DataplaneError(f"routing: ecmp is not supported by the {self.name} data plane "
                                 "(it cannot tell which path a flow takes)")
        return plan

    def routing_summary(self, plan: NetworkPlan) -> dict:
        """summary.json fields saying how ECMP hashed the flows (results.schema.RunFacts; the
        routing and the paths themselves are the plan's)."""
        out: dict = {}
        if plan.routing == "ecmp":
            out["ecmp_hash_seed"] = ecmp_hash_seed(plan.experiment.run.seed)
        return out

    def host_neighbours_static(self) -> bool:
        """True when hosts need static ARP entries for their gateway (switch answers no ARP)."""
        return False

    def host_routes(self, intf: Interface) -> list[list[str]]:
        """The routes a host gets on its one interface: by default everything via its switch end
        (a router); nothing on that path leads outside the emulated network."""
        return [["ip", "route", "replace", "default", "via", intf.peer_ip, "dev", intf.name]]

    def host_gso_max_segs(self, configured: int) -> int:
        """GSO cap for host interfaces; a software switch that forwards frames one by one
        (BMv2) needs MTU-sized frames, i.e. 1."""
        return configured

    def host_sysctls(self) -> dict[str, str]:
        """Extra per-host sysctls, e.g. net.ipv4.tcp_ecn=1 where the switches mark ECN."""
        return {}

    def start_telemetry(self, out_dir: Path, t0: float) -> None:  # noqa: B027 - optional hook
        """Begin sampling (e.g. queue depths into out_dir/queue.csv); t0 is the experiment-wide
        CLOCK_MONOTONIC start, so samples share the workers' time axis (t - t0 seconds)."""

    def stop_telemetry(self) -> dict:
        """Stop sampling; returns summary fields (e.g. max queue depth, ECN marks per job)."""
        return {}

    def link_stats(self, net: Mininet, plan: NetworkPlan) -> dict:
        """Per directed link: drops, bytes; empty when the data plane cannot tell."""
        return {}

    def switch_port_rates(self) -> dict[str, PortRate]:
        """Per directed link of a switch that forwards in user space (BMv2): its rate while
        backlogged, the link invariant where the kernel monitor cannot look (fidelity)."""
        return {}

    def set_egress_rate(self, node: Node, intf: Interface, bw_bps: float) -> None:
        """Change the rate of a switch port's egress queue while jobs run (session.set_link_rate)."""
        raise DataplaneError(f"the {self.name} data plane cannot change a link's rate")

    def switch_logs(self) -> dict[str, Path]:
        """Log files of the switch processes, read into harness.log before stop()."""
        return {}

    def undo_records(self) -> list[Undo]:
        """What `mn-harness clean` must undo of this data plane after a crash (its processes,
        directories ...): mn_harness.state records, taken while the processes are ours."""
        return []

    def check_alive(self) -> None:  # noqa: B027 - optional hook
        """Called while the jobs run: raise a one-line DataplaneError when the data plane has
        died (a switch process exited), so the run ends at once instead of at its timeout."""

    def stop(self) -> None:  # noqa: B027 - optional hook
        """Stop switch processes; called before the Mininet network is stopped. Idempotent."""

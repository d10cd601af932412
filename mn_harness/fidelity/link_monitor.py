"""The link monitor of a run: every shaped egress of the network (hosts' and Linux routers'
ports) registered with the kernel program (link.py) before the jobs start, read while they run
(the progress line warns when a link falls behind) and at the end (summary.json `fidelity`).

Only the Linux data plane's egresses are HTB qdiscs this program sees; a BMv2 switch forwards
in user space (its ports' own invariant: the data plane's telemetry), but the hosts' egresses
are watched with either data plane."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mn_harness.bpf.errors import BpfError
from mn_harness.fidelity.link import Egress, LinkGapProgram, LinkGaps
from mn_harness.network.commands import run_in
from mn_harness.network.errors import NetworkError
from mn_harness.network.plan import NetworkPlan
from mn_harness.network.shaping import port_shape

_LINK_LINE = re.compile(r"^(\d+):\s+([^:@\s]+)")


def ifindexes(pid: int) -> dict[str, int]:
    """Interface name -> ifindex in the namespace of `pid`."""
    out = run_in(pid, ["ip", "-o", "link", "show"])
    return {m[2]: int(m[1]) for line in out.splitlines() if (m := _LINK_LINE.match(line))}


def netns_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def shaped_egresses(plan: NetworkPlan, pids: Mapping[str, int], nodes: set[str]) -> list[Egress]:
    """Every shaped interface of `nodes` (name -> shell pid), named by the directed link it sends
    on (an unshaped one, run.emulation.access_links, has no rate to hold)."""
    out = []
    for node in sorted(nodes):
        pid = pids.get(node)
        if pid is None:
            continue
        index, netns = ifindexes(pid), netns_inode(pid)
        for intf in plan.interfaces.get(node, []):
            if intf.name in index and port_shape(plan, intf) is not None:
                out.append(Egress(f"{intf.node}->{intf.peer_node}", netns, index[intf.name], intf.link.bw_bps,
                                  intf.link.frame_bytes))
    return out


@dataclass(frozen=True)
class LinkSettings:
    tolerance: float  # a gap within this share of the serialisation time is faithful


class LinkMonitor:
    """The kernel program attached for one run. `unavailable` says why not, when it could not be."""

    def __init__(self, settings: LinkSettings, log: Callable[[str], None] = print):
        self.settings, self.log = settings, log
        self.program: LinkGapProgram | None = None
        self.egresses: list[Egress] = []
        self.unavailable: str | None = None
        self._last: dict[str, LinkGaps] = {}
        self.cost_s = 0.0  # this process's time spent loading and reading (the kernel's per packet is not in it)

    def start(self, egresses: list[Egress]) -> None:
        began = time.process_time()
        try:
            self.program = LinkGapProgram(log=self.log)
            for egress in egresses:
                # gaps after dequeues smaller than a full frame of the link are not counted
                self.program.put(egress, egress.frame_bytes, self.settings.tolerance)
            self.program.attach()
        except (BpfError, NetworkError, OSError) as exc:
            self.unavailable = str(exc)
            self.log(f"fidelity: the link monitor cannot run here: {exc}")
            self.close()
            return
        self.egresses = egresses
        self.cost_s += time.process_time() - began

    def set_rate(self, name: str, rate_bps: float) -> None:
        if self.program is not None:
            for egress in self.egresses:
                if egress.name == name:
                    self.program.set_rate(egress, rate_bps)

    def read(self) -> dict[str, LinkGaps]:
        """Every egress's counts since start()."""
        if self.program is None:
            return {}
        began = time.process_time()
        out = {}
        for egress in self.egresses:
            gaps = self.program.read(egress)
            if gaps is not None:
                out[egress.name] = gaps
        self.cost_s += time.process_time() - began
        return out

    def since_last(self) -> dict[str, LinkGaps]:
        """Every egress's counts since the previous call (the progress line's window)."""
        now = self.read()
        delta = {name: gaps - self._last[name] if name in self._last else gaps for name, gaps in now.items()}
        self._last = now
        return delta

    def kernel_ns(self) -> int | None:
        """Nanoseconds the kernel program ran so far; None unless kernel.bpf_stats_enabled is 1
        (the monitors' cost bench turns it on)."""
        if self.program is None:
            return None
        ns, runs = self.program.run_stats()
        return ns if runs else None

    def close(self) -> None:
        if self.program is not None:
            self.program.close()
            self.program = None

"""The checks of one run, as the session drives them: the link monitor from the workers' READY
to their end, the host's reads from the CPU sampler, the workers' phases once collected, and
the verdict written into summary.json (verdict.fidelity_block)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mn_harness.config.fidelity import FidelityThresholds
from mn_harness.cpu_load import StatSample
from mn_harness.fidelity.bmv2_rate import PortRate
from mn_harness.fidelity.host import host_summary
from mn_harness.fidelity.link import LinkGaps
from mn_harness.fidelity.link_monitor import LinkMonitor, LinkSettings, shaped_egresses
from mn_harness.fidelity.verdict import fidelity_block, link_violations
from mn_harness.fidelity.workers import workers_summary
from mn_harness.network.errors import NetworkError
from mn_harness.network.plan import NetworkPlan
from mn_harness.results.schema import PhaseRow


class RunFidelity:
    def __init__(self, thresholds: FidelityThresholds, log: Callable[[str], None] = print):
        self.thresholds = thresholds
        self.log = log
        self.links: Mapping[str, LinkGaps] | None = None
        self.link_unavailable: str | None = None
        self.host: dict[str, Any] | None = None
        self.switch_ports: Mapping[str, PortRate] = {}
        self.cost_s: float | None = None  # this process's CPU time loading and reading the link monitor
        self.kernel_s: float | None = None  # the kernel program's own time (with kernel.bpf_stats_enabled)
        self._monitor: LinkMonitor | None = None

    def start(self, plan: NetworkPlan, pids: Mapping[str, int], shaped_nodes: set[str]) -> None:
        """Attach the link monitor to every shaped egress of `shaped_nodes` (node -> shell pid)."""
        if not self.thresholds.enabled:
            return
        monitor = LinkMonitor(LinkSettings(self.thresholds.link_tolerance), log=self.log)
        try:
            egresses = shaped_egresses(plan, pids, shaped_nodes)
        except (NetworkError, OSError) as exc:
            self.link_unavailable = f"cannot list the shaped interfaces: {exc}"
            return
        monitor.start(egresses)
        if monitor.unavailable is not None:
            self.link_unavailable = monitor.unavailable
            return
        self._monitor = monitor

    def set_rate(self, link_name: str, bw_bps: float) -> None:
        """Both directions of link `a-b` now run at bw_bps."""
        if self._monitor is not None:
            a, b = link_name.split("-", 1)
            for name in (f"{a}->{b}", f"{b}->{a}"):
                self._monitor.set_rate(name, bw_bps)

    def note(self) -> str:
        """A warning for the progress line when, since the last call, a link or the host broke
        its invariant; "" when all is well."""
        parts = []
        if self._monitor is not None:
            window = self._monitor.since_last()
            # a progress window is short: judge a link on a tenth of the run's minimum
            t = self.thresholds
            scaled = FidelityThresholds(link_tolerance=t.link_tolerance, link_within=t.link_within,
                                        link_min_gaps=max(1, t.link_min_gaps // 10))
            parts += [f"link {v.where} {v.measured:.0%} within ±{t.link_tolerance:.0%}"
                      for v in link_violations(window, scaled)]
        return "  !unfaithful: " + ", ".join(parts) if parts else ""

    def stop_links(self) -> None:
        """The jobs are over: the link counts are final."""
        if self._monitor is not None:
            self.links = self._monitor.read()
            self.cost_s = self._monitor.cost_s
            ns = self._monitor.kernel_ns()
            self.kernel_s = None if ns is None else ns / 1e9
            self._monitor.close()
            self._monitor = None

    def host_from(self, samples: Sequence[tuple[float, StatSample]]) -> None:
        self.host = host_summary(samples)

    def switch_ports_from(self, ports: Mapping[str, PortRate]) -> None:
        """The data plane's own switch ports (BMv2: their rates while backlogged)."""
        self.switch_ports = dict(ports)

    def block(self, phases: Sequence[PhaseRow]) -> dict[str, Any]:
        """summary.json `fidelity`."""
        return fidelity_block(self.thresholds, self.links, self.link_unavailable, self.host,
                              workers_summary(phases), self.cost_s, self.switch_ports, self.kernel_s)

    def close(self) -> None:
        if self._monitor is not None:
            self._monitor.close()
            self._monitor = None


"""The checks of one run, as the session drives them: the link monitor from the workers' READY
to their end, the host's reads from the CPU sampler, the workers' phases once collected, and
the verdict written into summary.json (verdict.fidelity_block)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mn_harness.config.fidelity import FidelityThresholds
from mn_harness.dataplane.port_rates import PortRate
from mn_harness.fidelity.cpu_load import CpuLoadSampler
from mn_harness.fidelity.cpu_load import warning as cpu_warning
from mn_harness.fidelity.host import host_summary
from mn_harness.fidelity.link import LinkGaps
from mn_harness.fidelity.link_monitor import LinkMonitor, LinkSettings, shaped_egresses
from mn_harness.fidelity.verdict import fidelity_block, link_violations
from mn_harness.fidelity.workers import workers_summary
from mn_harness.network.emulated import EmulatedNetwork
from mn_harness.network.errors import NetworkError
from mn_harness.results.schema import IterationRow, PhaseRow
from mn_harness.results.schema_fidelity import Fidelity, FidelityHost


class RunFidelity:
    def __init__(self, thresholds: FidelityThresholds, log: Callable[[str], None] = print):
        self.thresholds = thresholds
        self.log = log
        self.links: Mapping[str, LinkGaps] | None = None
        self.link_unavailable: str | None = None
        self.host: FidelityHost | None = None
        self.switch_ports: Mapping[str, PortRate] = {}
        self.cost_s: float | None = None  # this process's CPU time loading and reading the link monitor
        self.kernel_s: float | None = None  # the kernel program's own time (with kernel.bpf_stats_enabled)
        self._monitor: LinkMonitor | None = None
        self._sampler: CpuLoadSampler | None = None

    def start(self, network: EmulatedNetwork, kernel_switches: bool) -> None:
        """Attach the link monitor to every shaped egress: the hosts', and the switches' where
        they are kernel routers (the Linux data plane)."""
        if not self.thresholds.enabled:
            return
        exp = network.experiment
        nodes = set(exp.hosts) | ({s.name for s in exp.switches} if kernel_switches else set())
        monitor = LinkMonitor(LinkSettings(self.thresholds.link_tolerance), log=self.log)
        try:
            egresses = shaped_egresses(network.plan, network.node_pids(), nodes)
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
        """A warning for the progress line when, since the last call, a link broke its
        invariant; "" when all is well."""
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

    def start_host(self) -> None:
        """The CPU sampler (summary.json cpu_load, cpu.csv) whose reads make the host invariant."""
        self._sampler = CpuLoadSampler().start()

    def stop(self, results_dir: Path | None, t0: float) -> dict[str, Any] | None:
        """The jobs are over: the link counts are final, the host's reads too; returns the
        CPU sampler's `cpu_load` (None when it was not running). Idempotent."""
        self.stop_links()
        sampler, self._sampler = self._sampler, None
        if sampler is None:
            return None
        try:
            load = sampler.stop(results_dir, t0)
        except Exception as exc:  # noqa: BLE001 - a statistic must never stop the teardown
            return {"error": str(exc)}
        self.host = host_summary(sampler.samples)
        if line := cpu_warning(load):
            self.log(line)
        return load

    def stop_links(self) -> None:
        if self._monitor is not None:
            self.links = self._monitor.read()
            self.cost_s = self._monitor.cost_s
            ns = self._monitor.kernel_ns()
            self.kernel_s = None if ns is None else ns / 1e9
            self._monitor.close()
            self._monitor = None

    def switch_ports_from(self, ports: Mapping[str, PortRate]) -> None:
        """The data plane's own switch ports (BMv2: their rates while backlogged)."""
        self.switch_ports = dict(ports)

    def block(self, iterations: Sequence[IterationRow], phases: Sequence[PhaseRow]) -> Fidelity:
        """summary.json `fidelity`."""
        return fidelity_block(self.thresholds, self.links, self.link_unavailable, self.host,
                              workers_summary(phases, iterations), self.cost_s, self.switch_ports, self.kernel_s)

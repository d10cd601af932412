"""The job's congestion control for sockets its workers do not own (torch/gloo jobs): the default
of each of the job's hosts' network namespaces (mn_harness/cc/namespace.py has the kernel rules).

Order in a run: allow() once the CCs are registered (the global allowed list may only name
registered CCs), apply() once the hosts exist and before any worker starts (sockets take the
default when they are created), reset() before the network goes (a namespace's default holds a
reference on its CC: BPF CCs could not be freed at unregistering), close() before the CCs are
unregistered. Jobs whose worker sets TCP_CONGESTION on its own sockets are left alone."""

from __future__ import annotations

from collections.abc import Callable

from mn_harness import collectives
from mn_harness.cc.namespace import AllowedList, reset_namespace_default, set_namespace_default
from mn_harness.config import Experiment
from mn_harness.network.commands import run_in
from mn_harness.network.emulated import EmulatedNetwork


class HostDefaultCC:
    def __init__(self, experiment: Experiment, on_state: Callable[[dict], None] = lambda _s: None,
                 log: Callable[[str], None] = print):
        self.experiment = experiment
        self.allowed = AllowedList(on_change=on_state)  # on_state records it for `mn-harness clean`
        self.hosts: dict[str, str] = {}  # host -> kernel CC name
        self.log = log

    def allow(self, cc_names: dict[str, str]) -> None:
        """cc_names: job -> kernel CC name."""
        self.hosts = {host: cc_names[job.name] for job in self.experiment.jobs
                      if collectives.get(job.collective).engine == collectives.TORCH for host in job.workers}
        self.allowed.allow(sorted(set(self.hosts.values())))

    def apply(self, network: EmulatedNetwork) -> None:
        for host, name in self.hosts.items():
            set_namespace_default(run_in, network.nodes[host].pid, host, name)

    def reset(self, network: EmulatedNetwork) -> None:
        """Best effort: the namespaces go with the network anyway."""
        for host in self.hosts:
            node = network.nodes.get(host)
            if node is None or not node.pid:
                continue
            try:
                reset_namespace_default(run_in, node.pid)
            except Exception as exc:  # keep tearing down
                self.log(f"cc: could not reset {host}'s default congestion control: {exc}")

    def close(self) -> None:
        self.allowed.close()

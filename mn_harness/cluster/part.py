"""One server's part of a run spread over several: what the agent (mn_harness.cluster.agent) does
on its server, step by step as the head asks.

The same pieces as a run on one machine (mn_harness.session), given the plan of this server's
nodes only (`local_view`): its congestion controls (registered once per kernel: the head says
whether this server registers them or uses the names another server on its kernel registered),
its nodes and the links between them, its ends of the links to other servers (tunnels:
mn_harness.cluster.tunnel), its routers' queues and egress programs, its workers, the samplers
(queue.csv, the CPU, the link monitor). Its files (the workers' raw lines, queue.csv, cpu.csv,
harness.log) go to a folder of its own under the server's temporary directory, which the head
fetches and merges.

Teardown is the session's, in the same order and with the same state file on this server (run
id `<pid>-part-<run>-<server>`): stop the workers and destroy their sockets, stop the samplers,
stop the network (the tunnels go with their nodes' namespaces), then, once the head says every
server on this kernel has stopped, unregister the congestion controls; the folder goes after
the head has fetched it. Each step runs even if an earlier one failed; whatever is not undone
stays in the state file for `mn-harness clean` on this server (or the head's `clean`, which
runs it over ssh)."""

from __future__ import annotations

import base64
import copy
import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mn_harness.cc.manager import CongestionControlManager
from mn_harness.cluster import tunnel
from mn_harness.config import Experiment
from mn_harness.dataplane import select_dataplane
from mn_harness.fidelity.run import RunFidelity
from mn_harness.fidelity.verdict import fidelity_block
from mn_harness.jobs.errors import JobError
from mn_harness.jobs.launcher import WORKER_MODULE, JobLauncher, count_lines
from mn_harness.jobs.specs import worker_specs
from mn_harness.network.commands import run_in
from mn_harness.network.emulated import EmulatedNetwork
from mn_harness.network.plan import Interface, NetworkPlan
from mn_harness.results import records
from mn_harness.results.collect import write_cc_telemetry
from mn_harness.runlog import RunLog
from mn_harness.state import RemoveDirectory, RemoveTunnel, RunState, UnregisterCongestionControl

PART_PREFIX = "mn-harness-part-"


def local_view(plan: NetworkPlan, nodes: set[str]) -> NetworkPlan:
    """The plan as one server builds it: every route and flow as before, the interfaces of its
    own nodes only (what the network builder, the data plane and the monitors iterate over)."""
    view = copy.copy(plan)
    view.interfaces = {n: intfs for n, intfs in plan.interfaces.items() if n in nodes}
    return view


class PartLauncher(JobLauncher):
    """The workers of this server's hosts only; progress per rank (the head takes the minimum)."""

    def __init__(self, *args, local: set[str], plan: NetworkPlan, **kwargs):
        super().__init__(*args, **kwargs)
        self.local = local
        self.plan = plan  # the whole plan: a worker's spec names its peers on every server

    def specs(self):
        specs = worker_specs(self.experiment, self.plan, self.raw_dir, self.cc_names)
        return [(host, spec) for host, spec in specs if host in self.local]

    def rank_progress(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for w in self.workers:
            out.setdefault(w.job, {})[str(w.rank)] = count_lines(w.spec.iterations_path)
        return out


class ServerPart:
    def __init__(self, experiment: Experiment, server: str, run: str, log: Callable[[str], None]):
        self.experiment = experiment
        self.server = next(s for s in experiment.servers if s.name == server)
        self.local = set(self.server.nodes)
        self.log = RunLog(log)
        self.out = Path(tempfile.mkdtemp(prefix=f"{PART_PREFIX}{server}-"))
        self.log.attach(self.out)
        self.state = RunState(f"{os.getpid()}-part-{run}-{server}", self.out)
        self.state.record("folder", [RemoveDirectory(str(self.out))])
        self.plan = NetworkPlan(experiment)
        self.dataplane = select_dataplane("linux", log=self.log, experiment=experiment)
        self.network = EmulatedNetwork(experiment, local_view(self.plan, self.local), self.dataplane,
                                       on_change=self._record_processes, remote_end=self._remote_end)
        self.ccm = CongestionControlManager(log=self.log)
        self.fidelity = RunFidelity(experiment.run.fidelity, log=self.log)
        self.launcher: PartLauncher | None = None
        self.cc_names: dict[str, str] = {}
        self.tunnels: dict[int, tunnel.TunnelEnd] = {}  # link index -> this server's end, made
        self.t0: float | None = None
        self._tcp_before: dict = {}
        self._stopped = False
        self._facts: dict[str, Any] = {}

    # -- bring-up ----------------------------------------------------------------------------
    def register_ccs(self) -> dict[str, str]:
        """Register the jobs' congestion controls in this server's kernel; job -> kernel name."""
        self.ccm.prepare({job.cc for job in self.experiment.jobs})
        self.state.record("cc", (UnregisterCongestionControl(name, map_id, bpftool)
                                 for name, map_id, bpftool in self.ccm.registered()))
        return {job.name: self.ccm.kernel_name(job.cc) for job in self.experiment.jobs}

    def make_tunnels(self, ends: list[tunnel.TunnelEnd]) -> dict[int, str]:
        """Make this server's end of each link in its own namespace: link -> "ok" or "taken"."""
        out = {}
        for end in ends:
            result = tunnel.create(end)
            out[end.link] = result
            if result == "ok":
                self.tunnels[end.link] = end
                self._record_tunnels()
        return out

    def drop_tunnels(self, links: list[int]) -> None:
        for link in links:
            end = self.tunnels.pop(link, None)
            if end is not None:
                tunnel.delete(end.kind, end.ident)
        self._record_tunnels()

    def _record_tunnels(self) -> None:
        self.state.record("tunnels", [RemoveTunnel(e.kind, e.ident) for e in self.tunnels.values()])

    def _remote_end(self, intf: Interface, node) -> None:
        """The network builder's hook: the prepared tunnel of `intf`'s link becomes `intf`."""
        from mininet.link import Intf

        index = self.experiment.links.index(intf.link)
        end = self.tunnels.get(index)
        if end is None:
            raise tunnel.TunnelError(f"link {intf.link.name}: no tunnel was made for it on {self.server.name}")
        run_in(None, tunnel.move_argv(end.kind, end.ident, node.pid))
        for argv in tunnel.rename_argv(end.kind, end.ident, intf.name, intf.mac, intf.link.mtu):
            run_in(node.pid, argv)
        # Mininet learns of it too (its CLI, its teardown); it is in the namespace already
        Intf(intf.name, node=node, port=intf.port, moveIntfFn=lambda *_a, **_k: True)

    def build(self, cc_names: dict[str, str]) -> None:
        self.cc_names = dict(cc_names)
        self.network.build()
        self.state.done("tunnels")  # each went with its move: its node's namespace holds it
        self._record_processes()

    def _record_processes(self) -> None:
        state = self.state
        state.record("network", (state.process(pid, f"mininet:{name}")
                                 for name, pid in self.network.node_pids().items()))
        if self.launcher is not None:
            state.record("jobs", (state.process(pid, WORKER_MODULE) for pid in self.launcher.pids()))
        state.record("dataplane", self.dataplane.undo_records())

    # -- the jobs ----------------------------------------------------------------------------
    def start(self) -> None:
        """Start this server's workers and wait until each is READY (its connections are up:
        the other servers' workers are starting at the same time)."""
        self._tcp_before = _best_effort(self.network.tcp_counters)
        self.launcher = PartLauncher(self.experiment, self.network, self.out / "raw", self.cc_names,
                                     log=self.log, on_change=self._record_processes, local=self.local,
                                     plan=self.plan)
        self.launcher.start()
        self.launcher.wait_ready(60.0)
        self._record_processes()
        self.fidelity.start(self.network, kernel_switches=True)

    def go(self, t0: float) -> None:
        """Start the workers at `t0` on this server's clock."""
        assert self.launcher is not None
        self.t0 = self.launcher.go(t0)
        self.dataplane.start_telemetry(self.out, t0)
        self.fidelity.start_host()

    def poll(self) -> dict:
        """Progress per job and rank; whether every worker here is done; a one-line JobError when
        one died (or the data plane did)."""
        assert self.launcher is not None
        self.dataplane.check_alive()
        for w in self.launcher.workers:
            code = w.proc.poll()
            if code not in (None, 0):
                raise JobError(f"{w.job} rank {w.rank} on {w.host} died (exit {code}): "
                               f"{w.stderr_tail() or 'no stderr'}")
        done = all(w.proc.poll() == 0 for w in self.launcher.workers)
        return {"progress": self.launcher.rank_progress(), "done": done, "note": self.fidelity.note()}

    # -- teardown ----------------------------------------------------------------------------
    def stop(self) -> dict:
        """Stop the workers and the samplers, take the network down; what was measured here (the
        head merges it: mn_harness.cluster.merge). Idempotent."""
        if self._stopped:
            return self._facts
        self._stopped = True
        facts: dict[str, Any] = {}
        try:
            if self.launcher is not None:
                self.launcher.stop()
            load = self.fidelity.stop(self.out, self.t0 or 0.0)
            if load is not None:
                facts["cpu_load"] = load
            if self.launcher is not None and "error" not in self._tcp_before:
                after = _best_effort(self.network.tcp_counters)
                if "error" not in after:
                    facts["tcp_counters"] = {"before": self._tcp_before, "after": after}
            self.network.abort_connections()
            self.state.done("jobs")
            if self.launcher is not None:
                for w in self.launcher.workers:
                    self.log.append_file(f"worker {w.job} rank {w.rank} on {w.host}: stderr", w.stderr_path)
            facts.update(self.dataplane.stop_telemetry())
            if self.network.net is not None:
                facts["link_stats"] = _best_effort(lambda: self.dataplane.link_stats(self.network.net,
                                                                                    self.network.plan))
            facts["fidelity"] = records.to_json(fidelity_block(
                self.experiment.run.fidelity, self.fidelity.links, self.fidelity.link_unavailable,
                self.fidelity.host, None, self.fidelity.cost_s, {}, self.fidelity.kernel_s))
        finally:
            _best_effort(self.fidelity.stop_links)  # its kernel monitor detached on every path (idempotent)
            self.network.stop()
            self.state.done("dataplane")
            self.state.done("network")
            self.drop_tunnels(list(self.tunnels))
            self.state.done("tunnels")
        self._facts = facts
        return facts

    def release_ccs(self) -> list[dict]:
        """Unregister what this server registered (every server on its kernel has stopped);
        the CC telemetry rows read just before."""
        try:
            rows = self.ccm.read_telemetry()
        except Exception:  # noqa: BLE001 - telemetry is best effort
            rows = []
        write_cc_telemetry(rows, self.out)
        self.ccm.close()
        self.state.done("cc")
        return rows

    def pack(self) -> str:
        """This server's folder as a gzipped tar, base64 (the head unpacks it)."""
        self.log.close()
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            tar.add(self.out, arcname=".")
        return base64.b64encode(buffer.getvalue()).decode()

    def close(self) -> bool:
        """Whatever is left, in the session's order; then the folder. True when nothing is left
        to undo (the state file is gone)."""
        for step in (self.stop, self.release_ccs):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - every step runs
                self.log(f"teardown: {exc}")
        self.log.close()
        shutil.rmtree(self.out, ignore_errors=True)
        self.state.done("folder")
        return self.state.finish()


def _best_effort(fn) -> dict:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - statistics never stop a teardown
        return {"error": str(exc)}

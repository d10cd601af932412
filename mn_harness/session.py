"""One experiment's network, up for the time of a `with` block: the machinery under
`mn-harness run` (runner.run_experiment) and under a script's `mn_harness.network(...)`.

    with Session(experiment, on_iteration=hook) as s:   # CCs registered, network built
        s.net["h1"].cmd("ip route")                      # the Mininet network, live
        s.start_jobs()                                   # workers READY, one common start
        s.set_link_rate("s1-s2", "100Mbit")              # act while the jobs run
        s.wait_jobs()                                    # until every worker is done
    s.results_dir                                        # written on leaving the block

Leaving the block — normally, by an exception, Ctrl-C or SIGTERM — tears everything down in
order (stop the jobs, destroy the TCP sockets they left and sample the data plane, stop captures,
read switch logs, stop the network, save CC telemetry, unregister CCs and wait until the kernel
freed their struct_ops maps) and then writes the results (CSVs, summary.json with status and
provenance, harness.log), each step even if an earlier one failed, and hands the folder to the
user behind sudo. SIGTERM/SIGHUP act as Ctrl-C throughout, teardown included: a second one cuts
the current step short. The run's state file (mn_harness.state) lists what each step must undo,
by exact process identity, loses a step's records only once that step finished and is removed
last, so `mn-harness clean` can finish a teardown that was cut short (TeardownIncomplete says so
in one line). The callbacks (on_network_up, on_jobs_started, on_iteration) get the session;
when each runs is said in mn_harness/hooks.py (on_iteration: polled every 0.2 s, so it runs
while later iterations go on)."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from mn_harness import provenance
from mn_harness.capture import CAPTURE_MARKER, PacketCapture, check_tcpdump, parse_links
from mn_harness.cc.manager import CongestionControlManager
from mn_harness.config import Experiment, LinkConfig
from mn_harness.config.dump import experiment_to_yaml
from mn_harness.config.emulation import record as emulation_record
from mn_harness.config.time_scale import dilate
from mn_harness.dataplane import select_dataplane
from mn_harness.errors import UsageError, one_line
from mn_harness.fidelity.run import RunFidelity
from mn_harness.fidelity.verdict import time_scale_advice
from mn_harness.hooks import Hook, IterationHook, IterationWatcher
from mn_harness.interrupts import terminate_as_interrupt
from mn_harness.jobs.default_cc import HostDefaultCC
from mn_harness.jobs.errors import JobError
from mn_harness.jobs.launcher import WORKER_MODULE, JobLauncher
from mn_harness.network.emulated import EmulatedNetwork
from mn_harness.network.plan import NetworkPlan
from mn_harness.ownership import hand_over
from mn_harness.results import folder
from mn_harness.results.collect import write_cc_telemetry
from mn_harness.results.folder import ResultsWriteError
from mn_harness.results.nominal import machine_bps, nominal_s
from mn_harness.results.schema import LinkChange, RunFacts
from mn_harness.results.summary import write_run_results
from mn_harness.runlog import RunLog
from mn_harness.state import RestoreAllowedCongestionControl, RunState, TeardownIncomplete, UnregisterCongestionControl
from mn_harness.units import parse_bandwidth

CLI_MODES = ("up", "after")


class Session:
    def __init__(self, experiment: Experiment, out_root: str | Path | None = None,
                 log: Callable[[str], None] | None = print, *,
                 pcap: str | Sequence[str] = (), cli: str | None = None,
                 on_network_up: Hook | None = None, on_jobs_started: Hook | None = None,
                 on_iteration: IterationHook | None = None,
                 after_results: Iterable[Callable[[Path], None]] = (),
                 config: Experiment | None = None, argv: Sequence[str] | None = None,
                 label: str | None = None):
        if cli is not None and cli not in CLI_MODES:
            raise UsageError(f"--cli: expected {' or '.join(CLI_MODES)}, got {cli!r}")
        if experiment.servers:  # its nodes live on other machines: mn_harness.cluster runs it
            raise UsageError("servers: an experiment spread over servers has no network on this machine "
                             "to hold; run it (mn-harness run, mn_harness.run)")
        self.out_root = out_root
        self.log = RunLog(log)
        self.pcap_links: list[LinkConfig] = parse_links(pcap, experiment) if pcap else []
        if self.pcap_links:
            check_tcpdump()  # before anything is created
        self.cli = cli
        self.on_network_up = [on_network_up] if on_network_up else []
        self.on_jobs_started = [on_jobs_started] if on_jobs_started else []
        self.on_iteration = [on_iteration] if on_iteration else []
        self.after_results = list(after_results)
        self.label = label  # summary.json `label`: what results.load() groups the run by
        self.dataplane = select_dataplane(experiment.run.dataplane, log=self.log, experiment=experiment)
        # `auto` resolved: the run and its config.yaml (the isolated wrapper's own) say which
        self.experiment = experiment.with_run(dataplane=self.dataplane.name)
        # what the network, the CCs and the workers run: the experiment K times slower with
        # run.emulation.time_scale K (itself at 1); the results speak self.experiment's times
        self.emulated = dilate(self.experiment)
        self.time_scale = self.experiment.run.emulation.time_scale
        self._config = (config or experiment).with_run(dataplane=self.dataplane.name)
        self.results_dir: Path | None = None
        self.provenance = provenance.collect(bpf_cc=any(j.cc.is_bpf for j in experiment.jobs),
                                             dataplane=self.dataplane.name, argv=argv)
        self._state: RunState | None = None
        self.ccm = CongestionControlManager(log=self.log)
        self.network: EmulatedNetwork | None = None
        self.capture = PacketCapture(self.pcap_links)
        # the CC of sockets a worker does not own (torch/gloo): its hosts' namespace default
        self.host_cc = HostDefaultCC(self.emulated, on_state=self._record_allowed_ccs, log=self.log)
        self.cc_names: dict[str, str] = {}  # job -> kernel CC name
        self.launcher: JobLauncher | None = None
        self._tcp_before: dict = {}  # every host's TCP counters at the jobs' start
        self.t0: float | None = None
        self.status = "failed"
        # what summary.json says the run observed besides the workers' rows (results.schema)
        self.facts = RunFacts(dataplane=self.dataplane.name,
                              slow_start_after_idle=self.experiment.run.slow_start_after_idle,
                              emulation=emulation_record(self.experiment.run))
        self.link_changes: list[LinkChange] = []
        self.killed: list[str] = []
        self._iterations = IterationWatcher(self.on_iteration)
        self._stack: ExitStack | None = None
        self.fidelity = RunFidelity(experiment.run.fidelity, log=self.log)

    # -- what a script uses ------------------------------------------------------------------
    @property
    def net(self):
        """The Mininet network (nodes by name: `s.net["h1"]`); None once torn down."""
        return self.network.net if self.network else None

    @property
    def plan(self) -> NetworkPlan:
        """The emulated network's plan (with run.emulation.time_scale K: its rates / K)."""
        assert self.network is not None, "the session is not up"
        return self.network.plan

    @property
    def state(self) -> RunState:
        """The run's state file (mn_harness.state), from bring-up on."""
        assert self._state is not None, "the session is not up"
        return self._state

    def start_jobs(self) -> float:
        """Start every worker, wait until all are READY, give them one start time; returns it
        (CLOCK_MONOTONIC seconds, the results' time origin)."""
        if self.launcher is not None:
            raise UsageError("start_jobs: the jobs were started already")
        assert self.network is not None and self.results_dir is not None, "the session is not up"
        self._tcp_before = _best_effort(self.network.tcp_counters)  # summary.json tcp_counters: from here
        self.launcher = JobLauncher(self.emulated, self.network, self.results_dir / "raw", self.cc_names,
                                    log=self.log, on_change=self._record_processes)
        self.launcher.start()
        self.fidelity.start(self.network, kernel_switches=self.dataplane.name == "linux")
        self.t0 = self.launcher.release()
        self._record_processes()  # every worker is READY: each one's identity is readable now
        self._note(socket_cc=self.launcher.socket_cc())
        self.dataplane.start_telemetry(self.results_dir, self.t0)
        self.fidelity.start_host()  # summary.json cpu_load and fidelity.host: while the jobs run
        self.log("jobs: " + ", ".join(f"{j.name} ({self.cc_names[j.name]}, {j.n_workers} workers, "
                                      f"{j.iterations} iterations)" for j in self.experiment.jobs))
        for hook in self.on_jobs_started:
            hook(self)
        return self.t0

    def wait_jobs(self, timeout_s: float | None = None) -> None:
        """Until every worker has finished (JobError when one dies, or on the timeout: default
        run.timeout, else a generous bound derived from the jobs; all of them times of the
        experiment, K times longer on the machine with run.emulation.time_scale K)."""
        if self.launcher is None:
            self.start_jobs()
        assert self.launcher is not None
        limit = timeout_s * self.time_scale if timeout_s else \
            self.emulated.run.timeout_s or self.launcher.default_timeout()
        try:
            self.launcher.wait(limit, on_tick=self._tick, check=self.dataplane.check_alive,
                               note=self.fidelity.note)
        except JobError as exc:
            if self.killed:
                raise JobError(f"{exc} (the script killed {', '.join(self.killed)})") from None
            raise
        self._tick()
        self._stop_monitors()  # the jobs are over: what comes next (--cli=after) is not theirs
        self.status = "completed"
        if self.cli == "after":
            self.interact()

    def set_link_rate(self, link: str | LinkConfig, bw: str | float) -> None:
        """Both directions of `link` (e.g. "s1-s2") at `bw` (e.g. "100Mbit", or bit/s) from now
        on; recorded in summary.json's `link_changes` with the time since the jobs' start. The
        rate and the time are the experiment's (with run.emulation.time_scale K the network
        runs at bw / K)."""
        assert self.network is not None, "the session is not up"
        target = link if isinstance(link, LinkConfig) else parse_links(link, self.experiment, "link")[0]
        bps = parse_bandwidth(bw, f"set_link_rate({target.name!r})")
        emulated = next(li for li in self.emulated.links if li.name == target.name)
        self.network.set_link_rate(emulated, machine_bps(bps, self.time_scale))
        self.fidelity.set_rate(target.name, machine_bps(bps, self.time_scale))
        t = None if self.t0 is None else round(nominal_s(time.monotonic() - self.t0, self.time_scale), 4)
        self.link_changes.append(LinkChange(t=t, link=target.name, bw_bps=bps))
        self.log(f"link {target.name}: rate set to {bps / 1e6:g} Mbit/s" + (f" at t={t:.3f}s" if t is not None else ""))

    def kill_worker(self, job: str, rank: int = 0) -> int:
        """SIGKILL one worker (failure injection); the run then fails saying so. Returns its pid."""
        if self.launcher is None:
            raise UsageError("kill_worker: the jobs have not been started")
        worker = next((w for w in self.launcher.workers if w.job == job and w.rank == rank), None)
        if worker is None:
            raise UsageError(f"kill_worker: no worker {job} rank {rank}")
        os.kill(worker.proc.pid, signal.SIGKILL)
        self.killed.append(f"{job} rank {rank}")
        self.log(f"killed worker {job} rank {rank} (pid {worker.proc.pid}) on {worker.host}")
        return worker.proc.pid

    def progress(self) -> dict[str, int]:
        """Iterations every rank of each job has finished so far."""
        return self.launcher.progress() if self.launcher else {j.name: 0 for j in self.experiment.jobs}

    def interact(self) -> None:
        """The Mininet CLI on the running network (`exit` or Ctrl-D returns)."""
        from mininet.cli import CLI
        self.log("cli: Mininet CLI on the running network (e.g. `h1 ping -c1 h3`); `exit` or Ctrl-D continues")
        CLI(self.net)

    # -- bring-up ----------------------------------------------------------------------------
    def __enter__(self) -> Session:
        self._stack = ExitStack()
        try:
            self._bring_up(self._stack)
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def _bring_up(self, stack: ExitStack) -> None:
        exp, started = self.emulated, time.monotonic()
        plan = NetworkPlan(exp)
        self.results_dir = folder.make_results_dir(exp.name, self.out_root or exp.run.output_dir)
        self.log.attach(self.results_dir)
        try:
            (self.results_dir / "config.yaml").write_text(experiment_to_yaml(self._config))
        except OSError as exc:
            raise ResultsWriteError(f"cannot write the results to {self.results_dir}: "
                                    f"{exc.strerror or exc}") from None
        self._state = RunState(f"{os.getpid()}-{self.results_dir.name}", self.results_dir)
        self.network = EmulatedNetwork(exp, plan, self.dataplane, on_change=self._record_processes)
        # Teardown runs in reverse order of registration, each step even if a later-registered one failed:
        # stop jobs, stop captures, reset namespace CC defaults, stop the network, save CC telemetry, restore
        # the allowed CC list, unregister CCs, write results (an exit callback: it sees what went wrong
        # before it). The signal handlers stay until the very end.
        stack.enter_context(terminate_as_interrupt())
        stack.push(self._write_results)
        stack.callback(self._undo, self.ccm.close, "cc")
        stack.callback(self._undo, self.host_cc.close, "allowed_cc")
        stack.callback(self._save_cc_telemetry)
        stack.callback(self._undo, self.network.stop, "dataplane", "network")
        stack.callback(self.host_cc.reset, self.network)
        stack.callback(self._read_switch_logs)
        stack.callback(self._stop_captures)
        stack.callback(self._stop_jobs_and_sample)
        self.ccm.prepare({job.cc for job in exp.jobs})
        self.state.record("cc", (UnregisterCongestionControl(name, map_id, bpftool)
                                 for name, map_id, bpftool in self.ccm.registered()))
        self.cc_names.update({job.name: self.ccm.kernel_name(job.cc) for job in exp.jobs})
        self.host_cc.allow(self.cc_names)
        changed = exp.run.emulation.changed()
        if self.time_scale != 1:
            rates = sorted({link.bw_bps for link in exp.links})
            self.log(f"time scale {self.time_scale:g}: the emulation runs {self.time_scale:g} times slower (links at "
                     f"{', '.join(f'{r / 1e6:g}' for r in rates)} Mbit/s); results in the experiment's times")
        self.log(f"network: {len(exp.hosts)} hosts, {len(exp.switches)} switches, "
                 f"{len(exp.links)} links ({self.dataplane.name} data plane)"
                 + (f"; emulation: {', '.join(f'{k} {v}' for k, v in changed.items())}" if changed else ""))
        self.network.build()
        self._record_processes()
        # with ECMP, the data plane's per-flow choices: what jobs, results and hooks see from now on
        self.network.plan = self.dataplane.resolve_paths(self.network.net, self.network.plan)
        self._note(**self.dataplane.routing_summary(self.network.plan))
        self.host_cc.apply(self.network)
        if self.pcap_links:
            self.capture.start(self.network.nodes, plan, self.results_dir)
            self._record_processes()
            self.log("pcap: capturing " + ", ".join(link.name for link in self.pcap_links) + " into pcap/")
        self._note(setup_s=round(time.monotonic() - started, 3))
        for hook in self.on_network_up:
            hook(self)
        if self.cli == "up":
            self.interact()

    def _record_processes(self) -> None:
        """Every process the run started, per teardown step, by exact identity, taken while
        they are unreaped children of this process (so no pid can have been reused yet). Node
        shells, workers and captures lead their own process groups (mnexec -d)."""
        if self.network is None:
            return
        state = self.state
        state.record("network", (state.process(pid, f"mininet:{name}")
                                 for name, pid in self.network.node_pids().items()))
        if self.launcher is not None:
            state.record("jobs", (state.process(pid, WORKER_MODULE) for pid in self.launcher.pids()))
        if self.capture.captures:
            state.record("captures", (state.process(pid, CAPTURE_MARKER, netns=False)
                                      for pid in self.capture.pids()))
        state.record("dataplane", self.dataplane.undo_records())

    def _note(self, **facts: Any) -> None:
        """Fields of summary.json the run observed (results.schema.RunFacts)."""
        self.facts = replace(self.facts, **facts)

    def _tick(self) -> None:
        if self.on_iteration and self.launcher is not None:  # progress() reads every worker's lines
            self._iterations.poll(self, self.launcher.progress())

    # -- teardown ----------------------------------------------------------------------------
    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.status = "interrupted"
        elif exc is not None:
            self.status = f"failed: {exc}"
        elif self.status != "completed":
            self.status = "stopped" if self.launcher is not None else "network only"
        if exc is not None:
            self.log(f"run {self.status}")
        stack, self._stack = self._stack, None
        # the stack sees the exception, so the last step can say what cut the teardown short
        return bool(stack.__exit__(exc_type, exc, tb)) if stack is not None else False

    def _stop_jobs_and_sample(self) -> None:
        if self.launcher is not None:
            self.launcher.stop()
        self._stop_monitors()
        if self.network is not None:
            if self.launcher is not None and "error" not in self._tcp_before:
                self._note(tcp_counters=_best_effort(partial(self.network.tcp_counters_since, self._tcp_before)))
            self.network.abort_connections()
        self.state.done("jobs")
        if self.launcher is not None:
            for w in self.launcher.workers:
                self.log.append_file(f"worker {w.job} rank {w.rank} on {w.host}: stderr", w.stderr_path)
        self._note(**self.dataplane.stop_telemetry())
        self.fidelity.switch_ports_from(self.dataplane.switch_port_rates())
        if self.network is not None and self.net is not None:
            network, net = self.network, self.net
            self._note(link_stats=_best_effort(lambda: {**self.dataplane.link_stats(net, self.plan),
                                                        **network.host_link_stats()}))

    def _stop_monitors(self) -> None:
        if (load := self.fidelity.stop(self.results_dir, self.t0 or 0.0)) is not None:
            self._note(cpu_load=load)

    def _stop_captures(self) -> None:
        if self.capture.captures:
            self._note(pcap=self.capture.stop())
            for link, info in (self.facts.pcap or {}).items():
                self.log(f"pcap: {link}: {info['tcpdump'] or 'stopped'} -> {info['file']}")
        self.state.done("captures")

    def _undo(self, step: Callable[[], object], *sections: str) -> None:
        """A teardown step; the state file's sections it undoes go once it has finished."""
        step()
        for section in sections:
            self.state.done(section)

    def _record_allowed_ccs(self, allowed: dict) -> None:
        """What the run added to tcp_allowed_congestion_control, for its teardown or `clean`."""
        added = tuple(allowed.get("added") or ())
        self.state.record("allowed_cc", [RestoreAllowedCongestionControl(added)] if added else [])

    def _read_switch_logs(self) -> None:
        try:
            logs = list(self.dataplane.switch_logs().items())
        except Exception:  # noqa: BLE001 - a log must never stop the teardown
            logs = []
        for title, path in logs:
            self.log.append_file(f"switch {title}", path)

    def _write_results(self, exc_type, exc, tb) -> bool:
        """The last teardown step: the results, then the state file goes unless a step left
        something to undo (then TeardownIncomplete, naming it and `mn-harness clean`)."""
        assert self.results_dir is not None
        pending = self.state.pending()
        self.log(f"status: {self.status}")
        self._note(status=self.status, label=self.label, link_changes=self.link_changes or None,
                   teardown=f"incomplete: {', '.join(pending)}" if pending else None,
                   provenance=provenance.finish(self.provenance))
        try:
            try:
                # the results speak the experiment as written: its rates, its times (results.nominal)
                summary = write_run_results(self.experiment, self.plan.for_experiment(self.experiment),
                                            self.results_dir, self.cc_names, self.facts, fidelity=self.fidelity.block)
                self.log(summary.fidelity.line() if summary.fidelity else "fidelity: not recorded")
                if advice := time_scale_advice(summary.fidelity, self.time_scale, self.plan.link_bps()):
                    self.log(advice)
            except OSError as write_error:  # a full or failing results disk
                raise ResultsWriteError(f"cannot write the results to {self.results_dir}: "
                                        f"{write_error.strerror or write_error}") from None
            for after in self.after_results:
                after(self.results_dir)
        finally:
            self.log.close()
            hand_over(self.results_dir)
            if not self.state.finish():
                interrupted = isinstance(exc, KeyboardInterrupt)
                why = "interrupted" if interrupted else one_line(exc or "failed")
                raise TeardownIncomplete(
                    f"teardown incomplete ({', '.join(pending)} left: {why}): run `sudo mn-harness clean` "
                    f"to finish it (kept in {self.state.path}); partial results in {self.results_dir}",
                    interrupted=interrupted) from exc
        return False

    def _save_cc_telemetry(self) -> None:
        try:
            rows = self.ccm.read_telemetry()
        except Exception:  # telemetry is best effort; the teardown must go on
            rows = []
        assert self.results_dir is not None
        self._note(cc_telemetry_rows=write_cc_telemetry(rows, self.results_dir))


def _best_effort(fn) -> dict:
    """Statistics gathered during teardown must never stop the teardown."""
    try:
        return fn()
    except Exception as exc:
        return {"error": str(exc)}

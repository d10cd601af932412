"""One experiment's network, up for the time of a `with` block: the machinery under
`mn-harness run` (runner.run_experiment) and under a script's `mn_harness.network(...)`.

    with Session(experiment, on_iteration=hook) as s:   # CCs registered, network built
        s.net["h1"].cmd("ip route")                      # the Mininet network, live
        s.start_jobs()                                   # workers READY, one common start
        s.set_link_rate("s1-s2", "100Mbit")              # act while the jobs run
        s.wait_jobs()                                    # until every worker is done
    s.results_dir                                        # written on leaving the block

Leaving the block — normally, by an exception, Ctrl-C or SIGTERM — tears everything down in
order (stop the jobs and sample the data plane, stop captures, read switch logs, stop the network,
save CC telemetry, unregister CCs) and then writes the results (CSVs, summary.json with status and
provenance, harness.log), each step even if an earlier one failed, and hands the folder to the
user behind sudo. Callbacks get the session: `on_network_up` once the network is built,
`on_jobs_started` after the common start, `on_iteration(session, job, iteration)` when every rank
of a job has finished an iteration (polled every 0.2 s, so it runs while later ones go on)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from mn_harness import provenance
from mn_harness.capture import CAPTURE_MARKER, PacketCapture, check_tcpdump, parse_links
from mn_harness.cc.manager import CongestionControlManager
from mn_harness.config import Experiment, LinkConfig
from mn_harness.config.dump import experiment_to_yaml
from mn_harness.dataplane import select_dataplane
from mn_harness.errors import UsageError
from mn_harness.jobs.errors import JobError
from mn_harness.jobs.launcher import WORKER_MODULE, JobLauncher
from mn_harness.network.emulated import EmulatedNetwork
from mn_harness.network.plan import NetworkPlan
from mn_harness.ownership import hand_over, make_dirs
from mn_harness.results.collect import write_cc_telemetry
from mn_harness.results.summary import write_run_results
from mn_harness.runlog import RunLog
from mn_harness.state import RunState
from mn_harness.units import parse_bandwidth

CC_CACHE = Path(os.environ.get("MN_HARNESS_CACHE", "/var/cache/mn-harness"))
CLI_MODES = ("up", "after")
Hook = Callable[["Session"], None]
IterationHook = Callable[["Session", str, int], None]


class Interrupted(KeyboardInterrupt):
    """SIGTERM/SIGHUP are turned into this so `finally` blocks tear down as on Ctrl-C."""


@contextmanager
def terminate_as_interrupt():
    """Only the main thread may set signal handlers; a caller running experiments from another
    thread keeps its own signal handling."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Interrupted(f"signal {signum}")

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def make_results_dir(experiment: Experiment, out_root: str | Path | None) -> Path:
    # absolute: workers run with their raw/ folder as cwd and are handed paths under it
    root = make_dirs(Path(out_root or experiment.run.output_dir)).absolute()
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = root / f"{experiment.name}-{stamp}"
    suffix = 1
    while path.exists():
        suffix += 1
        path = root / f"{experiment.name}-{stamp}-{suffix}"
    (path / "raw").mkdir(parents=True)
    return path


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
        self.experiment = experiment
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
        self._config = config or experiment  # what config.yaml says (the isolated wrapper's own)
        self._argv = argv
        self.label = label  # summary.json `label`: what results.load() groups the run by
        self.results_dir: Path | None = None
        self.network: EmulatedNetwork | None = None
        self.launcher: JobLauncher | None = None
        self.t0: float | None = None
        self.status = "failed"
        self.link_changes: list[dict[str, Any]] = []
        self.killed: list[str] = []
        self._iterations_seen: dict[str, int] = {}
        self._stack: ExitStack | None = None

    # -- what a script uses ------------------------------------------------------------------
    @property
    def net(self):
        """The Mininet network (nodes by name: `s.net["h1"]`); None once torn down."""
        return self.network.net if self.network else None

    @property
    def plan(self) -> NetworkPlan:
        assert self.network is not None, "the session is not up"
        return self.network.plan

    def start_jobs(self) -> float:
        """Start every worker, wait until all are READY, give them one start time; returns it
        (CLOCK_MONOTONIC seconds, the results' time origin)."""
        if self.launcher is not None:
            raise UsageError("start_jobs: the jobs were started already")
        assert self.network is not None and self.results_dir is not None, "the session is not up"
        self.launcher = JobLauncher(self.experiment, self.network, self.results_dir / "raw", self.cc_names,
                                    log=self.log, on_change=self._record_processes)
        self.launcher.start()
        self.t0 = self.launcher.release()
        self.dataplane.start_telemetry(self.results_dir, self.t0)
        self.log("jobs: " + ", ".join(f"{j.name} ({self.cc_names[j.name]}, {j.n} workers, "
                                      f"{j.iterations} iterations)" for j in self.experiment.jobs))
        for hook in self.on_jobs_started:
            hook(self)
        return self.t0

    def wait_jobs(self, timeout_s: float | None = None) -> None:
        """Until every worker has finished (JobError when one dies, or on the timeout: default
        run.timeout, else a generous bound derived from the jobs)."""
        if self.launcher is None:
            self.start_jobs()
        assert self.launcher is not None
        limit = timeout_s or self.experiment.run.timeout_s or self.launcher.default_timeout()
        try:
            self.launcher.wait(limit, on_tick=self._tick)
        except JobError as exc:
            if self.killed:
                raise JobError(f"{exc} (the script killed {', '.join(self.killed)})") from None
            raise
        self._tick()
        self.status = "completed"
        if self.cli == "after":
            self.interact()

    def run_jobs(self) -> None:
        """start_jobs() then wait_jobs()."""
        self.wait_jobs()

    def set_link_rate(self, link: str | LinkConfig, bw: str | float) -> None:
        """Both directions of `link` (e.g. "s1-s2") at `bw` (e.g. "100Mbit", or bit/s) from now
        on; recorded in summary.json's `link_changes` with the time since the jobs' start."""
        assert self.network is not None, "the session is not up"
        target = link if isinstance(link, LinkConfig) else parse_links(link, self.experiment, "link")[0]
        bps = parse_bandwidth(bw, f"set_link_rate({target.name!r})")
        self.network.set_link_rate(target, bps)
        t = None if self.t0 is None else round(time.monotonic() - self.t0, 4)
        self.link_changes.append({"t": t, "link": target.name, "bw_bps": bps})
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
        exp = self.experiment
        self.dataplane = select_dataplane(exp.run.dataplane, log=self.log)
        if self.dataplane.name != exp.run.dataplane:  # auto: check what it picked, record it
            exp = self.experiment = exp.with_run(dataplane=self.dataplane.name)
        config = self._config
        if config.run.dataplane != self.dataplane.name:
            config = config.with_run(dataplane=self.dataplane.name)
        plan = NetworkPlan(exp)
        self.results_dir = make_results_dir(exp, self.out_root)
        self.log.attach(self.results_dir)
        self.provenance = provenance.collect(bpf_cc=any(j.cc.is_bpf for j in exp.jobs),
                                             dataplane=self.dataplane.name, argv=self._argv)
        (self.results_dir / "config.yaml").write_text(experiment_to_yaml(config))
        self.state = RunState(f"{os.getpid()}-{self.results_dir.name}", self.results_dir)
        self.ccm = CongestionControlManager(CC_CACHE, log=self.log)
        self.network = EmulatedNetwork(exp, plan, self.dataplane)
        self.network._on_change = self._record_processes
        self.capture = PacketCapture(self.pcap_links, self.results_dir)
        self.cc_names: dict[str, str] = {}
        self.extra: dict[str, Any] = {"dataplane": self.dataplane.name,
                                      "slow_start_after_idle": exp.run.slow_start_after_idle}
        self._started = time.monotonic()
        # Teardown runs in reverse order of registration, each step even if a later-registered
        # one failed: stop jobs, stop captures, stop the network, save CC telemetry, unregister
        # CCs, write results. The signal handlers stay until the very end.
        stack.enter_context(terminate_as_interrupt())
        stack.callback(self._write_results)
        stack.callback(self.ccm.close)
        stack.callback(lambda: self.extra.update(cc_telemetry_rows=self._save_cc_telemetry()))
        stack.callback(self.network.stop)
        stack.callback(self._read_switch_logs)
        stack.callback(self._stop_captures)
        stack.callback(self._stop_jobs_and_sample)
        self.ccm.prepare({job.cc for job in exp.jobs})
        self.state.set("bpf_cc", self.ccm.registered_names())
        self.cc_names.update({job.name: self.ccm.kernel_name(job.cc) for job in exp.jobs})
        self.log(f"network: {len(exp.hosts)} hosts, {len(exp.switches)} switches, "
                 f"{len(exp.links)} links ({self.dataplane.name} data plane)")
        self.network.build()
        self._record_processes()
        # with ECMP, the data plane's per-flow choices: what jobs, results and hooks see from now on
        self.network.plan = self.dataplane.resolve_paths(self.network.net, self.network.plan)
        self.extra.update(self.dataplane.routing_summary(self.network.plan))
        if self.pcap_links:
            self.capture.start(self.network.nodes, plan)
            self._record_processes()
            self.log("pcap: capturing " + ", ".join(link.name for link in self.pcap_links) + " into pcap/")
        self.extra["setup_s"] = round(time.monotonic() - self._started, 3)
        for hook in self.on_network_up:
            hook(self)
        if self.cli == "up":
            self.interact()

    def _record_processes(self) -> None:
        if self.network is None:
            return
        procs = [(pid, f"mininet:{name}") for name, pid in self.network.node_pids().items()]
        if self.launcher is not None:
            procs += [(pid, WORKER_MODULE) for pid in self.launcher.pids()]
        procs += [(pid, CAPTURE_MARKER) for pid in self.capture.pids()]
        self.state.set_processes(procs)
        self.state.set("dataplane", self.dataplane.state())

    def _tick(self) -> None:
        if not self.on_iteration or self.launcher is None:
            return
        for job, done in self.launcher.progress().items():
            seen = self._iterations_seen.get(job, 0)
            for iteration in range(seen, done):
                self._iterations_seen[job] = iteration + 1
                for hook in self.on_iteration:
                    hook(self, job, iteration)

    # -- teardown ----------------------------------------------------------------------------
    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.status = "interrupted"
        elif exc is not None:
            self.status = f"failed: {exc}"
        elif self.status != "completed":
            self.status = "stopped" if self.launcher is not None else "network only"
        if exc is not None:
            self.log(f"run {self.status}")
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()

    def _stop_jobs_and_sample(self) -> None:
        if self.launcher is not None:
            self.launcher.stop()
            for w in self.launcher.workers:
                self.log.append_file(f"worker {w.job} rank {w.rank} on {w.host}: stderr", w.stderr_path)
        self.extra.update(self.dataplane.stop_telemetry())
        if self.net is not None:
            self.extra["link_stats"] = _best_effort(lambda: self.dataplane.link_stats(self.net, self.plan))

    def _stop_captures(self) -> None:
        if self.capture.captures:
            self.extra["pcap"] = self.capture.stop()
            for link, info in self.extra["pcap"].items():
                self.log(f"pcap: {link}: {info['tcpdump'] or 'stopped'} -> {info['file']}")

    def _read_switch_logs(self) -> None:
        for title, path in _best_effort_logs(self.dataplane):
            self.log.append_file(f"switch {title}", path)

    def _write_results(self) -> None:
        assert self.results_dir is not None
        self.state.remove()
        if self.link_changes:
            self.extra["link_changes"] = self.link_changes
        if self.label is not None:
            self.extra["label"] = self.label
        self.log(f"status: {self.status}")
        self.extra["provenance"] = provenance.finish(self.provenance)
        try:
            write_run_results(self.experiment, self.plan, self.results_dir, self.cc_names,
                              {"status": self.status, **self.extra})
            for after in self.after_results:
                after(self.results_dir)
        finally:
            self.log.close()
            hand_over(self.results_dir)

    def _save_cc_telemetry(self) -> int:
        try:
            rows = self.ccm.read_telemetry()
        except Exception:  # telemetry is best effort; the teardown must go on
            return 0
        assert self.results_dir is not None
        return write_cc_telemetry(rows, self.results_dir)


def _best_effort(fn) -> dict:
    """Statistics gathered during teardown must never stop the teardown."""
    try:
        return fn()
    except Exception as exc:
        return {"error": str(exc)}


def _best_effort_logs(dataplane) -> list[tuple[str, Path]]:
    try:
        return list(dataplane.switch_logs().items())
    except Exception:  # noqa: BLE001 - a log must never stop the teardown
        return []

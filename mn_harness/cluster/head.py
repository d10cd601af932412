"""A run spread over servers, from the machine it was started on (the head): what `mn-harness run`
does when the experiment names `servers:` (mn_harness.runner hands it here).

The head builds nothing itself. It reaches every server over ssh (one agent each:
mn_harness.cluster.agent), checks that each runs the same project (version and package digest)
as root, finds which servers share a kernel (their boot id: each congestion control is then
registered once per kernel, by the first of them, and the others use its names), and then has
every server build its part in step with the others: its nodes and links, its tunnel ends
(unique VNIs agreed with the kernels, mn_harness.cluster.tunnel), its workers until READY. It
estimates each server's clock (mn_harness.cluster.clock), starts every worker at one time, polls
the servers' progress (a server that stops answering ends the run in one line), estimates the
clocks again and tears down: every server stops its workers, samplers and network, then the
congestion controls go (after every server of their kernel has stopped), then each server's
folder comes back and is merged into one results folder (mn_harness.cluster.merge).

Teardown runs whatever happened (an error, a dead worker, Ctrl-C, SIGTERM, a lost server), each
step for every server it can still reach. A server the head lost tears its part down by itself
(its agent's lease); the head's state file keeps a record of that part until `mn-harness clean`
has checked it over ssh."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from mn_harness import provenance
from mn_harness.cluster.clock import ClockTrack, probe
from mn_harness.cluster.merge import SERVERS_DIR, merge_facts, merge_fidelity, merge_queue_csv, merge_raw, unpack
from mn_harness.cluster.ssh import Channel, ServerError, ServerLost, python_for
from mn_harness.cluster.tunnel import KINDS, TunnelEnd, TunnelError, draw, needed_mtu
from mn_harness.cluster.version import identity
from mn_harness.config import Experiment
from mn_harness.config.dump import experiment_to_yaml
from mn_harness.config.servers import ServerConfig, crossing_links
from mn_harness.errors import UsageError, one_line
from mn_harness.interrupts import terminate_as_interrupt
from mn_harness.jobs.errors import JobError
from mn_harness.jobs.ideal import ideal_iteration_s
from mn_harness.network.plan import NetworkPlan
from mn_harness.ownership import hand_over
from mn_harness.progress import format_eta, run_eta_s
from mn_harness.results import folder
from mn_harness.results.collect import write_cc_telemetry
from mn_harness.results.folder import ResultsWriteError
from mn_harness.results.schema import RunFacts
from mn_harness.results.summary import write_run_results
from mn_harness.runlog import RunLog
from mn_harness.state import CleanRemotePart, RunState, TeardownIncomplete

START_MARGIN_S = 0.5  # from the head's t0 decision to the start: the GO must reach every server first
POLL_S = 0.5
POLL_TIMEOUT_S = 8.0  # a server that answers no poll for this long is lost
TUNNEL_ATTEMPTS = 8


class ClusterRun:
    def __init__(self, experiment: Experiment, out_root: str | Path | None = None,
                 log: Callable[[str], None] | None = print, *, after_results: Iterable[Callable[[Path], None]] = (),
                 config: Experiment | None = None, argv: Sequence[str] | None = None, label: str | None = None):
        self.experiment = experiment.with_run(dataplane="linux")
        self._config = (config or experiment).with_run(dataplane="linux")
        self.servers = {s.name: s for s in self.experiment.servers}
        self.out_root = out_root
        self.log = RunLog(log)
        self.after_results = list(after_results)
        self.label = label
        self.provenance = provenance.collect(bpf_cc=any(j.cc.is_bpf for j in experiment.jobs),
                                             dataplane="linux", argv=argv)
        self.plan = NetworkPlan(self.experiment)
        self.channels: dict[str, Channel] = {}
        self.prepared: set[str] = set()  # servers holding a part of this run
        self.hello: dict[str, dict] = {}
        self.owner: dict[str, str] = {}  # server -> the server that registers the CCs of its kernel
        self.cc_names: dict[str, dict[str, str]] = {}  # registering server -> job -> kernel name
        self.ips: dict[str, str] = {}
        self.tunnels: dict[int, tuple[str, int]] = {}  # link index -> (kind, VNI / key)
        self.clocks: dict[str, ClockTrack] = {}
        self.facts: dict[str, dict] = {}  # server -> what it measured (its stop answer)
        self.cc_rows: list[dict] = []
        self.part_dirs: dict[str, Path] = {}
        self.setup_s: float | None = None
        self.t0: float | None = None
        self.status = "failed"
        self.results_dir: Path | None = None
        self.state: RunState | None = None
        self.run_id = ""

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> Path:
        root = self.out_root or self.experiment.run.output_dir
        self.results_dir = folder.make_results_dir(self.experiment.name, root)
        self.log.attach(self.results_dir)
        try:
            (self.results_dir / "config.yaml").write_text(experiment_to_yaml(self._config))
        except OSError as exc:
            raise ResultsWriteError(f"cannot write the results to {self.results_dir}: {exc.strerror or exc}") from None
        self.run_id = f"{os.getpid()}-{self.results_dir.name}"
        self.state = RunState(self.run_id, self.results_dir)
        error: BaseException | None = None
        with terminate_as_interrupt():
            try:
                started = time.monotonic()
                self._bring_up()
                self.setup_s = round(time.monotonic() - started, 3)
                self._run_jobs()
                self.status = "completed"
            except KeyboardInterrupt as exc:
                self.status, error = "interrupted", exc
            except Exception as exc:
                self.status, error = f"failed: {one_line(exc)}", exc
            if error is not None:
                self.log(f"run {self.status}")
            self._teardown()
            self._write_results(error)
        if error is not None:
            raise error
        return self.results_dir

    def _bring_up(self) -> None:
        self.connect()
        crossing = self.prepare()
        self.build(crossing)

    def connect(self) -> None:
        """Every server's agent up, the same project as here, run as root; who registers the
        congestion controls of each kernel."""
        for name, server in self.servers.items():  # recorded first: `clean` reaches every part
            self.ips[name] = _resolve(server)
        assert self.state is not None
        self.state.record("remote", [CleanRemotePart(s.name, s.address, s.user, s.port, s.python or "",
                                                     self.run_id) for s in self.servers.values()])
        for name, server in self.servers.items():
            self.channels[name] = Channel(server, log=self.log)
        self.hello = self._each(self.servers, lambda n: self.channels[n].request("hello", timeout_s=60))
        mine = identity()
        for name, hello in self.hello.items():
            where = self.servers[name].where
            if (hello.get("version"), hello.get("digest")) != (mine["version"], mine["digest"]):
                raise ServerError(f"{where}: runs mn-harness {hello.get('version')} (files {hello.get('digest')}), "
                                  f"this machine {mine['version']} (files {mine['digest']}): every server needs the "
                                  f"same version ({python_for(self.servers[name])} there)")
            if not hello.get("root"):
                raise ServerError(f"{where}: the agent does not run as root (ssh as root, or a user with "
                                  "passwordless sudo)")
        kernels: dict[str, str] = {}
        for name in self.servers:  # the first server of each kernel registers its CCs
            self.owner[name] = kernels.setdefault(self.hello[name]["boot_id"], name)
        shared = [n for n in self.servers if self.owner[n] != n]
        described = [f"{n} ({self.hello[n]['hostname']}, {self.hello[n]['kernel']})" for n in self.servers]
        self.log(f"servers: {', '.join(described)}"
                 + (f"; sharing a kernel with another: {', '.join(f'{n} (with {self.owner[n]})' for n in shared)}"
                    if shared else ""))

    def prepare(self) -> list:
        """Every server's part prepared (the congestion controls registered, once per kernel),
        the tunnels of the crossing links made; the crossing links."""
        exp = self.experiment
        crossing = crossing_links(exp.servers, exp.links)
        peers: dict[str, dict[str, str]] = {n: {} for n in self.servers}
        for _link, a, b in crossing:
            peers[a][b], peers[b][a] = self.ips[b], self.ips[a]
        config = experiment_to_yaml(exp)

        def prepare(name: str) -> dict:
            answer = self.channels[name].request("prepare", timeout_s=300, config=config, server=name,
                                                 run=self.run_id, peers=peers[name],
                                                 register_cc=self.owner[name] == name)
            self.prepared.add(name)
            return answer

        prepared = self._each(self.servers, prepare)
        self.cc_names = {n: a["cc_names"] for n, a in prepared.items() if self.owner[n] == n}
        self._make_tunnels(crossing, {n: a["underlay"] for n, a in prepared.items()})
        return crossing

    def build(self, crossing: list) -> None:
        """Every server's nodes, links and tunnel ends; its workers started and READY."""
        exp = self.experiment
        self.log(f"network: {len(exp.hosts)} hosts, {len(exp.switches)} switches, {len(exp.links)} links over "
                 f"{len(self.servers)} servers; crossing: "
                 + (", ".join(f"{link.name} ({a}-{b}, {self.tunnels[exp.links.index(link)][0]} "
                              f"{self.tunnels[exp.links.index(link)][1]})" for link, a, b in crossing) or "none"))
        self._each(self.servers, lambda n: self.channels[n].request(
            "build", timeout_s=600, cc_names=self.cc_names[self.owner[n]]))
        self._each(self.servers, lambda n: self.channels[n].request("start", timeout_s=180))

    def _make_tunnels(self, crossing: list, underlay: dict[str, dict[str, dict]]) -> None:
        """A kind and a VNI/key per crossing link that both servers' kernels accept (the module
        docstring of mn_harness.cluster.tunnel)."""
        exp = self.experiment
        pending: dict[int, tuple[str, str, str]] = {}
        for link, a, b in crossing:
            common = [k for k in KINDS if k in self.hello[a]["tunnels"] and k in self.hello[b]["tunnels"]]
            if not common:
                raise TunnelError(f"link {link.name}: servers {a} and {b} have no tunnel kind in common "
                                  f"({a}: {', '.join(self.hello[a]['tunnels']) or 'none'}; {b}: "
                                  f"{', '.join(self.hello[b]['tunnels']) or 'none'}; the kernels need vxlan or ip_gre)")
            kind = common[0]
            for me, peer in ((a, b), (b, a)):
                info, need = underlay[me][peer], needed_mtu(kind, self.ips[peer], link.mtu)
                if info["mtu"] < need:
                    raise TunnelError(f"{self.servers[me].where}: its underlay to {peer} ({info['dev']}, MTU "
                                      f"{info['mtu']}) cannot carry link {link.name}'s {link.mtu}-byte frames in "
                                      f"{kind} (needs MTU {need}): "
                                      f"`ip link set {info['dev']} mtu {need}` on both servers")
            pending[exp.links.index(link)] = (kind, a, b)
        for attempt in range(TUNNEL_ATTEMPTS):
            if not pending:
                return
            ends: dict[str, list[dict]] = {n: [] for n in self.servers}
            idents = {i: draw(self.run_id, i, attempt, kind) for i, (kind, _a, _b) in pending.items()}
            for i, (kind, a, b) in pending.items():
                for me, peer in ((a, b), (b, a)):
                    ends[me].append(TunnelEnd(i, kind, idents[i], underlay[me][peer]["src"], self.ips[peer]).as_dict())
            busy = [n for n in self.servers if ends[n]]
            made = self._each(busy, partial(self._ask, "tunnels", per_server={"ends": ends}, pick="results"))
            for i, (kind, a, b) in list(pending.items()):
                if made[a][str(i)] == "ok" and made[b][str(i)] == "ok":
                    self.tunnels[i] = (kind, idents[i])
                    del pending[i]
            drop = {n: [i for i in pending if made.get(n, {}).get(str(i)) == "ok"] for n in busy}
            self._each([n for n in busy if drop[n]], partial(self._ask, "drop_tunnels", per_server={"links": drop}))
        raise TunnelError(f"no free VNI/key for {len(pending)} crossing link(s) after {TUNNEL_ATTEMPTS} draws")

    def _run_jobs(self) -> None:
        exp = self.experiment
        for name in self.channels:
            self.clocks[name] = ClockTrack(probe(partial(self._clock, name), time.monotonic))
        self.t0 = t0 = time.monotonic() + START_MARGIN_S
        self._each(self.servers, partial(self._ask, "go", per_server={
            "t0": {n: t0 + self.clocks[n].before.offset_s for n in self.servers}}))
        self.log("jobs: " + ", ".join(f"{j.name} ({self.cc_names[self.owner[next(iter(self.servers))]][j.name]}, "
                                      f"{j.n_workers} workers, {j.iterations} iterations)" for j in exp.jobs))
        limit = exp.run.timeout_s or self._default_timeout()
        totals = {j.name: j.iterations for j in exp.jobs}
        last_report = 0.0
        while True:
            answers = self._each(self.servers, lambda n: self.channels[n].request("poll", timeout_s=POLL_TIMEOUT_S))
            done = {job: min((int(v) for a in answers.values() for v in (a["progress"].get(job) or {}).values()),
                             default=0) for job in totals}
            elapsed = time.monotonic() - self.t0
            line = f"[{elapsed:6.1f}s] " + "  ".join(f"{j} {done[j]}/{totals[j]}" for j in totals)
            eta = run_eta_s(done, totals, elapsed)
            line += f"  ETA {format_eta(eta)}" if eta is not None else ""
            if all(a["done"] for a in answers.values()):
                self.log(line)
                break
            if elapsed > limit:
                raise JobError(f"run timed out after {limit:.0f}s: {line}")
            if elapsed - last_report >= 2.0:
                self.log(line + "".join(a.get("note") or "" for a in answers.values()))
                last_report = elapsed
            time.sleep(POLL_S)
        for name in self.channels:
            self.clocks[name] = ClockTrack(self.clocks[name].before, probe(partial(self._clock, name), time.monotonic))

    def _clock(self, server: str) -> float:
        return float(self.channels[server].request("clock", timeout_s=10)["t"])

    def _ask(self, op: str, server: str, per_server: dict[str, dict[str, Any]] | None = None,
             pick: str | None = None, timeout_s: float = 60.0, **fields: Any) -> Any:
        """One request to `server`, with its own value of each `per_server` field."""
        mine = {key: values[server] for key, values in (per_server or {}).items()}
        answer = self.channels[server].request(op, timeout_s=timeout_s, **fields, **mine)
        return answer[pick] if pick else answer

    def _default_timeout(self) -> float:
        longest = max(job.start_offset_s + 5 * ideal_iteration_s(job, self.plan)[0] * job.iterations
                      for job in self.experiment.jobs)
        return longest + 30.0

    # -- teardown ----------------------------------------------------------------------------
    def _reachable(self, names: Iterable[str] | None = None) -> list[str]:
        return [n for n in (self.channels if names is None else names)
                if n in self.channels and self.channels[n].lost is None]

    def _step(self, what: str, fn: Callable[[], Any]) -> None:
        """A teardown step: it runs whatever the earlier ones did; Ctrl-C cuts only it short."""
        try:
            fn()
        except KeyboardInterrupt:
            self.log(f"teardown: {what} cut short")
        except Exception as exc:  # noqa: BLE001 - every step runs
            self.log(f"teardown: {what}: {one_line(exc)}")

    def _teardown(self) -> None:
        def stop() -> None:
            answers = self._each(self._reachable(self.prepared),
                                 lambda n: self.channels[n].request("stop", timeout_s=120),
                                 raise_first=False)
            self.facts.update({n: a["facts"] for n, a in answers.items()})

        def release() -> None:
            owners = [n for n in self._reachable(self.prepared) if self.owner.get(n) == n]
            answers = self._each(owners, lambda n: self.channels[n].request("release_cc", timeout_s=120),
                                 raise_first=False)
            self.cc_rows = [row for n in owners if n in answers for row in answers[n]["rows"]]

        def fetch() -> None:
            assert self.results_dir is not None
            answers = self._each(self._reachable(self.prepared),
                                 lambda n: self.channels[n].request("pack", timeout_s=300),
                                 raise_first=False)
            for name, answer in answers.items():
                self.part_dirs[name] = self.results_dir / SERVERS_DIR / name
                unpack(answer["tar"], self.part_dirs[name])

        def bye() -> None:
            answers = self._each(self._reachable(), lambda n: self.channels[n].request("bye", timeout_s=120),
                                 raise_first=False)
            assert self.state is not None
            left = [n for n in self.servers if not answers.get(n, {}).get("clean")]
            self.state.record("remote", [r for r in self.state.sections.get("remote", [])
                                         if isinstance(r, CleanRemotePart) and r.server in left])
            if not left:
                self.state.done("remote")

        for what, fn in (("stopping the servers", stop), ("releasing the congestion controls", release),
                         ("fetching the servers' results", fetch), ("closing the servers", bye)):
            self._step(what, fn)
        for ch in self.channels.values():
            self._step(f"ssh to {ch.server.name}", ch.close)

    def _write_results(self, error: BaseException | None) -> None:
        assert self.results_dir is not None and self.state is not None
        exp = self.experiment
        pending = self.state.pending()
        lost = [n for n in self.servers if n not in self.part_dirs]
        cc_names = self.cc_names.get(next(iter(self.servers)), {})
        self.provenance["servers"] = {
            n: {"address": s.address, "user": s.user, "port": s.port, "python": python_for(s),
                "hostname": self.hello.get(n, {}).get("hostname"), "kernel": self.hello.get(n, {}).get("kernel"),
                "boot_id": self.hello.get(n, {}).get("boot_id"), "registers_cc": self.owner.get(n) == n,
                "cc_names": self.cc_names.get(self.owner.get(n, ""), {}), "nodes": list(s.nodes),
                "clock": self.clocks[n].as_dict() if n in self.clocks else None}
            for n, s in self.servers.items()}
        self.provenance["tunnels"] = {exp.links[i].name: {"kind": k, "id": ident}
                                      for i, (k, ident) in self.tunnels.items()}
        self.log(f"status: {self.status}")
        try:
            merge_raw(self.part_dirs, self.results_dir / "raw", self.clocks, self.t0 or 0.0)
            merge_queue_csv(self.part_dirs, self.results_dir)
            rows = write_cc_telemetry(self.cc_rows, self.results_dir)
            facts = RunFacts(status=self.status, label=self.label, dataplane="linux",
                             slow_start_after_idle=exp.run.slow_start_after_idle, setup_s=self.setup_s,
                             cc_telemetry_rows=rows, teardown=f"incomplete: {', '.join(pending)}" if pending else None,
                             provenance=provenance.finish(self.provenance), **merge_facts(exp, self.facts))

            def fidelity(iterations, phases):
                means = _iteration_means(exp, iterations)
                return merge_fidelity(exp.run.fidelity, self.facts, self.clocks, means, iterations, phases, lost)

            summary = write_run_results(exp, self.plan, self.results_dir, cc_names, facts, fidelity=fidelity)
            self.log(summary.fidelity.line() if summary.fidelity else "fidelity: not recorded")
            for after in self.after_results:
                after(self.results_dir)
        except OSError as exc:
            raise ResultsWriteError(f"cannot write the results to {self.results_dir}: "
                                    f"{exc.strerror or exc}") from None
        finally:
            self.log.close()
            hand_over(self.results_dir)
            if not self.state.finish():
                interrupted = isinstance(error, KeyboardInterrupt)
                why = "interrupted" if interrupted else one_line(error or "failed")
                gone = ", ".join(r.describe() for records in self.state.sections.values() for r in records)
                raise TeardownIncomplete(
                    f"{why}; not confirmed torn down: {gone} (each tears its part down by itself once it has "
                    f"lost the head; `sudo mn-harness clean` checks over ssh); partial results in {self.results_dir}",
                    interrupted=interrupted) from error

    # -- every server at once ----------------------------------------------------------------
    def _each(self, names: Iterable[str], fn: Callable[[str], Any], raise_first: bool = True) -> dict[str, Any]:
        """fn(server) for every server at once (threads: a request waits for its answer); the
        first error (in server order) is raised once all have finished, unless raise_first is
        False (teardown: the servers that answered)."""
        names = list(names)
        results: dict[str, Any] = {}
        errors: dict[str, BaseException] = {}

        def work(name: str) -> None:
            try:
                results[name] = fn(name)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                errors[name] = exc

        threads = [threading.Thread(target=work, args=(n,), name=f"head-{n}", daemon=True) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)
        if errors and raise_first:
            lost = [n for n in names if isinstance(errors.get(n), ServerLost)]
            raise errors[lost[0] if lost else next(n for n in names if n in errors)]
        for name, exc in errors.items():
            if not raise_first:
                self.log(f"{self.servers[name].where}: {one_line(exc)}")
        return results


def _resolve(server: ServerConfig) -> str:
    """The server's address as an IP (the tunnels need one)."""
    try:
        return str(socket.getaddrinfo(server.address, server.port, proto=socket.IPPROTO_TCP)[0][4][0])
    except (socket.gaierror, IndexError) as exc:
        raise ServerError(f"{server.where}: cannot resolve its address: {exc}") from None


def _iteration_means(experiment: Experiment, rows: Sequence[Any]) -> list[float]:
    """Each job's mean iteration time after its warm-up (the clock invariant's yardstick)."""
    out = []
    for job in experiment.jobs:
        times = [r.iter_time for r in rows if r.job == job.name and r.iteration >= experiment.warmup_of(job)]
        if times:
            out.append(sum(times) / len(times))
    return out


def run_cluster(experiment: Experiment, out_root: str | Path | None = None, log=print, after_run=None,
                **options: Any) -> Path:
    """mn_harness.runner's run_experiment for an experiment with `servers:`."""
    unsupported = sorted(k for k, v in options.items() if v and k not in ("config", "argv", "label"))
    if unsupported:
        raise UsageError(f"not with `servers`: {', '.join(unsupported)} (a run spread over servers has no "
                       "live network on this machine)")
    return ClusterRun(experiment, out_root, log, after_results=[after_run] if after_run else [],
                      config=options.get("config"), argv=options.get("argv"), label=options.get("label")).run()

"""The whole experiment: nodes, links, jobs, run options, and the checks that need all of them
(references to unknown hosts, duplicate names, a disconnected topology)."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mn_harness import collectives
from mn_harness.cc.spec import MAX_IDLE_GAP_S, CCSpec
from mn_harness.config.ecn import queue_telemetry_directions
from mn_harness.config.loader import default_name, read_experiment_file
from mn_harness.config.model import (
    EXPERIMENT_RE,
    MIN_LINK_BPS,
    ROUTINGS,
    JobConfig,
    LinkConfig,
    RunConfig,
    SwitchConfig,
    _list,
    check_keys,
    check_name,
)
from mn_harness.config.servers import ServerConfig, check_cluster, parse_servers
from mn_harness.errors import ConfigError
from mn_harness.frames import DEFAULT_MTU
from mn_harness.p4 import DEFAULT_PROGRAM
from mn_harness.p4.limits import AGG_MAX_WORKERS, AGG_POOL, FRAME_BYTES, MAX_JOBS, MAX_PORTS, NO_MARKING

MAX_INTERFACE_NAME = 15  # IFNAMSIZ - 1
MAX_NETWORK_NODES = 1024  # hosts + switches: each is a namespace with a shell (and a worker)
MAX_LINKS = 65536  # the address plan gives link i the /24 10.<i / 256>.<i % 256>.0
TOP_KEYS = {"experiment", "description", "hosts", "switches", "links", "link_defaults", "routing", "jobs",
            "run", "servers"}


@dataclass(frozen=True)
class Experiment:
    name: str
    hosts: tuple[str, ...]
    switches: tuple[SwitchConfig, ...]
    links: tuple[LinkConfig, ...]
    jobs: tuple[JobConfig, ...]
    run: RunConfig
    description: str = ""
    routing: str = "shortest"  # ROUTINGS; see network.plan
    servers: tuple[ServerConfig, ...] = ()  # the machines it is spread over (config.servers); () here

    @property
    def switch_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.switches)

    def neighbours(self) -> dict[str, list[tuple[str, LinkConfig]]]:
        adj: dict[str, list[tuple[str, LinkConfig]]] = {n: [] for n in self.hosts + self.switch_names}
        for link in self.links:
            adj[link.a].append((link.b, link))
            adj[link.b].append((link.a, link))
        return adj

    def with_jobs(self, jobs) -> Experiment:
        return dataclasses.replace(self, jobs=tuple(jobs))

    def with_cc(self, cc: CCSpec | None) -> Experiment:
        """Every job with congestion control `cc` (the CLI's --cc); None changes nothing."""
        if cc is None:
            return self
        return self.with_jobs(dataclasses.replace(job, cc=cc) for job in self.jobs)

    def warmup_of(self, job: JobConfig) -> int:
        """run.warmup for `job`, reduced so that at least one iteration is measured."""
        return max(0, min(self.run.warmup, job.iterations - 1))

    def warnings(self) -> list[str]:
        """One line each for what is valid but probably not meant: an explicit MLTCP idle gap
        that no compute phase exceeds, a warm-up that leaves (almost) nothing to measure."""
        out = []
        for i, job in enumerate(self.jobs):
            gap = job.cc.idle_gap_warning(job.shortest_idle_s, f"jobs[{i}].cc")
            if gap:
                out.append(gap)
            if self.warmup_of(job) < self.run.warmup:
                out.append(f"jobs[{i}].iterations: {job.iterations} iteration(s) with run.warmup "
                           f"{self.run.warmup}: only {self.warmup_of(job)} left out as warm-up")
        return out

    def job_ids(self) -> dict[str, int]:
        """Job name -> job id 1, 2, ... in job order (0 is "no job"). The one numbering used by
        the P4 entries (job_classify, aggregation jobs), the telemetry and the workers' ports."""
        return {job.name: i for i, job in enumerate(self.jobs, 1)}

    def with_run(self, **changes) -> Experiment:
        """A copy with run options changed, re-checked where they matter (the data plane
        decides whether inc_allreduce jobs can run)."""
        changed = dataclasses.replace(self, run=dataclasses.replace(self.run, **changes))
        if "dataplane" in changes:
            changed._check_inc_jobs()
            changed.check_dataplane_limits(changed.run.dataplane)
            check_cluster(changed)
        return changed

    @classmethod
    def from_dict(cls, raw: Any, default_name: str = "experiment", base_dir: Path | None = None) -> Experiment:
        """`base_dir`: where relative paths in the file (a job's `trace`, a switch's `program`)
        are read from. A job's `scale` rule is recorded, not applied: it needs the network plan,
        so it is the step after loading (mn_harness.jobs.scaling.apply_scaling)."""
        check_keys(raw, "", TOP_KEYS, {"hosts", "links", "jobs"})
        name = raw.get("experiment", default_name)
        if not isinstance(name, str) or not EXPERIMENT_RE.fullmatch(name):
            raise ConfigError("experiment", f"{name!r} is not a valid experiment name (letters, digits, _ . -)")
        description = raw.get("description", "")
        if not isinstance(description, str):
            raise ConfigError("description", "expected a string")

        seen: dict[str, str] = {}

        def claim(node: str, path: str) -> None:
            if node in seen:
                raise ConfigError(path, f"duplicate name {node!r} (already used at {seen[node]})")
            seen[node] = path

        hosts = []
        for i, h in enumerate(_list(raw["hosts"], "hosts")):
            hosts.append(check_name(h, f"hosts[{i}]"))
            claim(h, f"hosts[{i}]")
        if not hosts:
            raise ConfigError("hosts", "at least one host is needed")
        switches = []
        for i, s in enumerate(_list(raw.get("switches", []), "switches")):
            switch = SwitchConfig.from_dict(s, f"switches[{i}]", base_dir)
            claim(switch.name, f"switches[{i}]")
            switches.append(switch)
        if len(hosts) + len(switches) > MAX_NETWORK_NODES:
            raise ConfigError("hosts", f"{len(hosts)} hosts and {len(switches)} switches; at most "
                              f"{MAX_NETWORK_NODES} nodes in one experiment")

        defaults = raw.get("link_defaults", {})
        check_keys(defaults, "link_defaults", {"bw", "queue", "delay", "mtu"})
        links = []
        pairs: dict[frozenset, str] = {}
        for i, l_raw in enumerate(_list(raw["links"], "links")):
            link = LinkConfig.from_dict(l_raw, f"links[{i}]", defaults)
            for j, end in enumerate((link.a, link.b)):
                if end not in seen:
                    raise ConfigError(f"links[{i}].endpoints[{j}]", f"unknown node {end!r}")
            pair = frozenset((link.a, link.b))
            if pair in pairs:
                raise ConfigError(f"links[{i}]", f"duplicate link {link.a}-{link.b} (also {pairs[pair]})")
            pairs[pair] = f"links[{i}]"
            links.append(link)
            if len(links) > MAX_LINKS:
                raise ConfigError(f"links[{i}]", f"more than {MAX_LINKS} links (the address plan)")

        host_set = set(hosts)
        degree = {h: 0 for h in hosts}
        for i, link in enumerate(links):
            if link.a in host_set and link.b in host_set:
                raise ConfigError(f"links[{i}]", "hosts connect to switches, not to each other")
            for end in (link.a, link.b):
                if end in host_set:
                    degree[end] += 1
        for i, h in enumerate(hosts):
            if degree[h] != 1:
                raise ConfigError(f"hosts[{i}]", f"host {h!r} has {degree[h]} links; each host needs exactly one")

        jobs = []
        job_names: dict[str, str] = {}
        for i, j_raw in enumerate(_list(raw["jobs"], "jobs")):
            job = JobConfig.from_dict(j_raw, f"jobs[{i}]", base_dir)
            if job.name in job_names:
                raise ConfigError(f"jobs[{i}].name", f"duplicate job name {job.name!r} (also {job_names[job.name]})")
            job_names[job.name] = f"jobs[{i}]"
            for k, w in enumerate(job.hosts):
                if w not in host_set:
                    what = "a switch, not a host" if w in seen else "unknown host"
                    raise ConfigError(_host_path(i, job, k), f"{what} {w!r}")
            jobs.append(job)
        if not jobs:
            raise ConfigError("jobs", "at least one job is needed")
        for i, job in enumerate(jobs):
            for k, w in enumerate(job.hosts):
                for other in jobs[:i]:
                    if w in other.hosts:
                        raise ConfigError(_host_path(i, job, k), f"host {w!r} already runs job {other.name!r}")

        routing = raw.get("routing", "shortest")
        if routing not in ROUTINGS:
            raise ConfigError("routing", f"unknown routing {routing!r} (known: {', '.join(ROUTINGS)})")
        experiment = cls(
            name=name,
            hosts=tuple(hosts),
            switches=tuple(switches),
            links=tuple(links),
            jobs=tuple(jobs),
            run=RunConfig.from_dict(raw.get("run", {}), "run"),
            description=description,
            routing=routing,
            servers=parse_servers(raw.get("servers"), hosts, [s.name for s in switches],
                                  [(link.a, link.b) for link in links], check_name),
        )
        experiment._check_connected()
        experiment._check_interface_names()
        queue_telemetry_directions(experiment)  # the links it names exist
        experiment._check_inc_jobs()
        experiment._check_emulation()
        experiment.check_dataplane_limits(experiment.run.dataplane)
        check_cluster(experiment)
        return experiment

    def _check_interface_names(self) -> None:
        """`<node>-eth<N>` must fit IFNAMSIZ - 1 = 15 characters for every port of every node."""
        degree: dict[str, int] = {}
        for link in self.links:
            for end in (link.a, link.b):
                degree[end] = degree.get(end, 0) + 1
        for i, s in enumerate(self.switches):
            name = f"{s.name}-eth{degree.get(s.name, 0)}"
            if len(name) > MAX_INTERFACE_NAME:
                raise ConfigError(f"switches[{i}]", f"switch {s.name!r} has {degree[s.name]} links: its "
                                  f"interface {name!r} is longer than {MAX_INTERFACE_NAME} characters "
                                  "(use a shorter name or fewer links)")

    def _check_emulation(self) -> None:
        """Bridges (run.emulation.switches) forward on one spanning tree without STP: a loop
        would flood for ever, and a bridge has no equal-cost paths to hash over. Nor does a
        bridge tell a host that a frame is too large for its next link (a router answers with
        ICMP, and the hosts' routes carry each path's MTU): one MTU on every link. A dilated link
        (run.emulation.time_scale) must still be one HTB can shape; an experiment spread over
        servers is not dilated (each server's part would need its own conversion)."""
        scale = self.run.emulation.time_scale
        if scale != 1 and self.servers:
            raise ConfigError("run.emulation.time_scale", "an experiment spread over servers runs in real time "
                              "(time_scale 1)")
        slowest = min(link.bw_bps for link in self.links)
        if slowest / scale < MIN_LINK_BPS:
            raise ConfigError("run.emulation.time_scale", f"{scale:g}: the slowest link would run at "
                              f"{slowest / scale:g} bit/s, below 1kbit (tc's HTB cannot shape slower)")
        for job in self.jobs:
            if job.cc.is_bpf and job.cc.resolved().idle_gap_s * scale > MAX_IDLE_GAP_S:
                raise ConfigError("run.emulation.time_scale", f"{scale:g}: job {job.name}'s MLTCP idle gap "
                                  f"({job.cc.resolved().idle_gap_s:g}s) would exceed {MAX_IDLE_GAP_S:g}s")
        if self.run.emulation.switches != "bridge":
            return
        for i, link in enumerate(self.links):
            if link.mtu != self.links[0].mtu:
                raise ConfigError(f"links[{i}].mtu", f"{link.mtu}: with bridges (run.emulation.switches) every "
                                  f"link has one MTU; links[0] has {self.links[0].mtu}")
        if self.routing == "ecmp":
            raise ConfigError("run.emulation.switches", "bridge: routing ecmp needs routers (a bridge "
                              "forwards on one path)")
        nodes = len(self.hosts) + len(self.switches)
        if len(self.links) > nodes - 1:
            raise ConfigError("run.emulation.switches", f"bridge: the topology has a loop ({len(self.links)} "
                              f"links between {nodes} nodes); bridges need a tree (routers take loops)")

    def check_dataplane_limits(self, dataplane: str) -> None:
        """The P4 programs' limits (mn_harness.p4.limits), for the bmv2 data plane: ports per
        switch, jobs told apart. `auto` is checked again once it has picked bmv2."""
        if dataplane != "bmv2":
            return
        if self.run.emulation.switches != "router":
            raise ConfigError("run.emulation.switches", f"{self.run.emulation.switches}: only on the linux "
                              "data plane (BMv2 switches are P4 programs)")
        ports: dict[str, int] = {}
        for link in self.links:
            for end in (link.a, link.b):
                ports[end] = ports.get(end, 0) + 1
        for i, s in enumerate(self.switches):
            if ports.get(s.name, 0) > MAX_PORTS - 1:
                raise ConfigError(f"switches[{i}]", f"switch {s.name!r} has {ports[s.name]} links; the "
                                  f"P4 programs have ports 1..{MAX_PORTS - 1} (bmv2 data plane)")
        if len(self.jobs) > MAX_JOBS - 1:
            raise ConfigError("jobs", f"{len(self.jobs)} jobs; the P4 programs tell at most "
                              f"{MAX_JOBS - 1} apart (bmv2 data plane)")
        for i, link in enumerate(self.links):
            if link.queue_packets > NO_MARKING:
                raise ConfigError(f"links[{i}].queue", f"at most {NO_MARKING} packets on the bmv2 data "
                                  f"plane (queue depths are 19-bit fields), got {link.queue_packets}")
            if link.mtu != DEFAULT_MTU:
                raise ConfigError(f"links[{i}].mtu", f"{link.mtu}: only {DEFAULT_MTU} on the bmv2 data plane "
                                  f"(its queues' rates are frames of {FRAME_BYTES} bytes per second)")
            if link.bw_bps < 8 * FRAME_BYTES:
                raise ConfigError(f"links[{i}].bw", f"at least {8 * FRAME_BYTES}bit on the bmv2 data "
                                  "plane (its queues drain whole frames per second: 1 frame/s)")

    def _check_inc_jobs(self) -> None:
        """inc_allreduce: every worker's only link goes to the same switch, which runs the
        aggregation program (or a program of the user's: the data plane checks it has the
        aggregation feature) on the BMv2 data plane (auto may pick it); its slot pool holds the
        jobs' slots."""
        programs = {s.name: s.program for s in self.switches}
        pool: dict[str, int] = {}
        for i, job in enumerate(self.jobs):
            if collectives.get(job.collective).engine != collectives.INC:
                continue
            peers = {next(p for p, _ in self.neighbours()[w]) for w in job.workers}
            switch = peers.pop() if len(peers) == 1 else None
            if (switch is None or programs.get(switch) in (None, DEFAULT_PROGRAM)
                    or self.run.dataplane not in ("bmv2", "auto")):
                raise ConfigError(f"jobs[{i}].collective", "inc_allreduce needs all workers on one "
                                  "aggregation switch (bmv2 data plane, program: aggregation)")
            assert job.inc is not None  # set for every inc_allreduce job
            if job.n_workers > AGG_MAX_WORKERS:
                raise ConfigError(f"jobs[{i}].workers", f"{job.n_workers} workers; in-network aggregation "
                                  f"takes at most {AGG_MAX_WORKERS} (the switch's worker bitmap)")
            pool[switch] = pool.get(switch, 0) + 2 * job.inc.slots
            if pool[switch] > AGG_POOL:
                raise ConfigError(f"jobs[{i}].inc.slots", f"the inc jobs on {switch} need "
                                  f"{pool[switch] // 2} slots, the switch has {AGG_POOL // 2}")

    def _check_connected(self) -> None:
        adj = self.neighbours()
        start = self.hosts[0]
        reached = {start}
        todo = deque([start])
        while todo:
            for nxt, _ in adj[todo.popleft()]:
                if nxt not in reached:
                    reached.add(nxt)
                    todo.append(nxt)
        for h in self.hosts:
            if h not in reached:
                raise ConfigError("links", f"topology is disconnected: host {h!r} cannot reach {start!r}")
        for i, s in enumerate(self.switches):
            if s.name not in reached:
                raise ConfigError(f"switches[{i}]", f"switch {s.name!r} is not connected to the hosts")

    def to_dict(self) -> dict:
        """The resolved config as nested dicts of the dataclass fields (units in SI base units).
        The experiment-file form, which config.yaml holds, is mn_harness.config.dump's."""
        return dataclasses.asdict(self)


def _host_path(i: int, job: JobConfig, k: int) -> str:
    """YAML path of the job's k-th host (workers first, then servers)."""
    return f"jobs[{i}].workers[{k}]" if k < job.n_workers else f"jobs[{i}].servers[{k - job.n_workers}]"


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file (the one reader: mn_harness.config.loader)."""
    return Experiment.from_dict(read_experiment_file(path), default_name=default_name(path),
                                base_dir=Path(path).parent)


def load_experiment_dict(raw: Mapping, name: str = "experiment") -> Experiment:
    return Experiment.from_dict(raw, default_name=name)

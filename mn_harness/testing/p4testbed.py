"""A small BMv2 test bed without Mininet: hosts in network namespaces, BMv2 switches in the root
namespace, veth pairs for links, and every switch brought up exactly as the harness's data plane
brings its switches up (mn_harness.p4.bringup: queues, pipeline, entries from the NetworkPlan,
aggregation jobs when given). `P4Testbed.for_experiment` takes all of that from an experiment
file as `dataplane: bmv2` would (mn_harness.dataplane.bmv2_setup). Used by the P4 tests
(tests/p4/), the pytest plugin (mn_harness.testing.pytest_p4) and bench/bmv2_throughput.py; the
harness itself (mn_harness.dataplane.bmv2) runs its switches in namespaces of their own.

Hosts get their plan's address and a default route, so they can ping and run TCP through the
switches; with `host_addresses=False` they get none and their kernels stay silent, so a port
sees only the frames a test sends (mn_harness.testing.ports) and what the switches forward.

Every name the test bed creates starts with a unique prefix (default "p4t" + 4 hex digits), so
several test beds (and other people's namespaces) coexist; the switches' per-run files (BMv2's
notifications socket) live in a directory of this test bed's own under /tmp. `close()` removes
exactly what it created: processes it started, switches, veths, namespaces, that directory.

    plan = make_plan(["h1", "h2"], ["s1"], [("h1", "s1"), ("h2", "s1")])
    with P4Testbed(plan, queues={("s1", 2): LinkQueue(rate_mbit=10, depth=100)},
                   ecn_threshold=20) as tb:
        tb.host_run("h1", ["ping", "-c", "1", tb.ip("h2")])
        tb.conn("s1").read_counter("port_tx")
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mn_harness.config.experiment import Experiment, load_experiment_dict
from mn_harness.network.plan import NetworkPlan
from mn_harness.p4 import DEFAULT_PROGRAM, PROGRAMS_DIR
from mn_harness.p4.aggregation import AggJob
from mn_harness.p4.bmv2 import BMv2Switch, QueueConfig, disable_offloads, pick_free_port
from mn_harness.p4.bringup import SwitchSetup, bring_up, install_agg_jobs, install_entries
from mn_harness.p4.compile import CompiledProgram, compile_p4
from mn_harness.p4.entries import qbucket_shift, switch_specs
from mn_harness.p4.errors import P4Error
from mn_harness.p4.runtime import P4Info, SwitchConnection

ECN_TELEMETRY_P4 = PROGRAMS_DIR / f"{DEFAULT_PROGRAM}.p4"


class TestbedError(P4Error):
    __test__ = False  # not a pytest test class, despite the name


def _run(cmd: Sequence[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise TestbedError(f"{' '.join(cmd)} failed ({proc.returncode}): "
                           f"{(proc.stderr or proc.stdout).strip()}")
    return proc


def make_plan(hosts: Sequence[str], switches: Sequence[str],
              links: Sequence[tuple[str, str]], routing: str = "shortest", seed: int = 1) -> NetworkPlan:
    """A NetworkPlan for a small test topology (one dummy job over all hosts: the plan needs
    one; nothing is run). `routing: ecmp` installs ECMP groups hashing with `seed`'s hash seed."""
    return NetworkPlan(load_experiment_dict({
        "hosts": list(hosts), "switches": list(switches), "routing": routing, "run": {"seed": seed},
        "links": [{"endpoints": [a, b]} for a, b in links], "link_defaults": {"bw": "1Gbit"},
        "jobs": [{"name": "j", "workers": list(hosts), "bytes_per_iteration": "1MB",
                  "compute": "10ms", "iterations": 1}]}, "p4testbed"))


@dataclass(frozen=True)
class LinkQueue:
    """BMv2 egress queues of one switch port: rate in Mbit/s and depth in packets, as the
    harness sets them (QueueConfig.for_link: data queue in full-size frames/s, small-packet queue
    at the same byte rate in small frames); None leaves BMv2's default."""
    rate_mbit: float | None = None
    depth: int | None = None

    def queue_config(self) -> QueueConfig:
        return QueueConfig.for_link(self.rate_mbit, self.depth)


class P4Testbed:
    def __init__(self, plan: NetworkPlan, *, prefix: str | None = None,
                 queues: Mapping[tuple[str, int], LinkQueue] | None = None,
                 ecn_threshold: int | None = None, program: str | Path = ECN_TELEMETRY_P4,
                 agg_jobs: Mapping[str, Sequence[AggJob]] | None = None,
                 cache_dir: str | Path | None = None, log_dir: str | Path | None = None,
                 bmv2_log: bool = False, pcap: bool = False, host_addresses: bool = True):
        self.plan = plan
        self.specs = switch_specs(plan)
        self.hosts = list(plan.experiment.hosts)
        self.prefix = prefix or f"p4t{secrets.token_hex(2)}"
        if len(self.prefix) > 8:
            raise TestbedError("prefix must be at most 8 characters (interface names <= 15)")
        self.queues = dict(queues or {})
        self.ecn_threshold = ecn_threshold
        self.program_path = Path(program)
        self.agg_jobs = {name: list(jobs) for name, jobs in (agg_jobs or {}).items()}
        self.cache_dir = cache_dir
        self.log_dir = log_dir
        self.bmv2_log = bmv2_log
        self.pcap = pcap
        self.host_addresses = host_addresses
        self.from_experiment = False        # for_experiment: setups as the data plane makes them
        self.program_override: Path | None = None  # for_experiment: every switch runs this
        self.program: CompiledProgram | None = None   # the first switch's (all, unless for_experiment)
        self.p4info: P4Info | None = None
        self.setups: dict[str, SwitchSetup] = {}
        self.p4infos: dict[str, P4Info] = {}
        self.run_dir: Path | None = None
        self.switches: dict[str, BMv2Switch] = {}
        self.conns: dict[str, SwitchConnection] = {}
        self._namespaces: list[str] = []
        self._veths: list[str] = []         # root-namespace ends we created
        self._procs: list[subprocess.Popen] = []
        self._sw_index = {name: spec.device_id for name, spec in self.specs.items()}

    @classmethod
    def for_experiment(cls, experiment: Experiment | NetworkPlan, *, program: str | Path | None = None,
                       **kw) -> P4Testbed:
        """Switches programmed as `dataplane: bmv2` programs them for `experiment`
        (bmv2_setup.switch_setups: each switch's `program`, its links' queues from `bw` and
        `queue`, the ECN thresholds, the job rules, the aggregation jobs); `program` replaces
        every switch's. Jobs are not run."""
        plan = experiment if isinstance(experiment, NetworkPlan) else NetworkPlan(experiment)
        bed = cls(plan, program=program or ECN_TELEMETRY_P4, **kw)
        bed.from_experiment = True
        bed.program_override = None if program is None else Path(program)
        return bed

    # -- names -------------------------------------------------------------------------------
    def netns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def port_intf(self, switch: str, port: int) -> str:
        return f"{self.prefix}s{self._sw_index[switch]}p{port}"

    def ip(self, host: str) -> str:
        return self.plan.host_ip[host]

    def mac(self, host: str) -> str:
        return self.plan.gateway(host).mac

    def gateway_mac(self, host: str) -> str:
        """The MAC of the switch port the host is attached to (what its ARP resolves to)."""
        return self.plan.gateway(host).peer_mac

    def switch_port(self, switch: str, peer: str) -> int:
        return self.specs[switch].port_to(peer)

    def conn(self, switch: str) -> SwitchConnection:
        return self.conns[switch]

    # -- build -------------------------------------------------------------------------------
    def start(self) -> P4Testbed:
        if os.geteuid() != 0:
            raise TestbedError("the P4 test bed needs root (namespaces, veths)")
        try:
            self.setups = self._make_setups()
            self.p4infos = {name: P4Info.from_file(setup.program.p4info_path)
                            for name, setup in self.setups.items()}
            first = next(iter(self.setups))
            self.program, self.p4info = self.setups[first].program, self.p4infos[first]
            self.run_dir = Path(tempfile.mkdtemp(prefix=f"mn-harness-{self.prefix}-"))
            self._build_links()
            self._bring_up_switches()
        except BaseException:
            self.close()
            raise
        return self

    def _compile(self, source: Path) -> CompiledProgram:
        return compile_p4(source, self.cache_dir)

    def _make_setups(self) -> dict[str, SwitchSetup]:
        if self.from_experiment:
            from mn_harness.dataplane.bmv2_setup import switch_setups

            return switch_setups(self.plan, lambda path: self._compile(self.program_override or path))
        program = self._compile(self.program_path)
        return {switch: SwitchSetup(self.specs[switch], program,
                                    queues={port: q.queue_config() for (s, port), q in self.queues.items()
                                            if s == switch},
                                    ecn_threshold=self.ecn_threshold,
                                    agg_jobs=self.agg_jobs.get(switch, ()))
                for switch in self.specs}

    def _build_links(self) -> None:
        hosts = set(self.hosts)
        for host in self.hosts:
            ns = self.netns(host)
            _run(["ip", "netns", "add", ns])
            self._namespaces.append(ns)
            self.ns_run(host, ["ip", "link", "set", "lo", "up"])
            for scope in ("all", "default"):  # no router solicitations from the veths moved in
                self.ns_run(host, ["sysctl", "-qw", f"net.ipv6.conf.{scope}.disable_ipv6=1"], check=False)
        for link in self.plan.experiment.links:
            ends = [next(i for i in self.plan.interfaces[node] if i.link is link)
                    for node in (link.a, link.b)]
            names = [f"{self.prefix}h{self.hosts.index(i.node)}" if i.node in hosts
                     else self.port_intf(i.node, i.port) for i in ends]
            _run(["ip", "link", "add", names[0], "type", "veth", "peer", "name", names[1]])
            self._veths.append(names[0])
            for intf, name in zip(ends, names, strict=True):
                if intf.node in hosts:
                    ns = self.netns(intf.node)
                    _run(["ip", "link", "set", name, "netns", ns])
                    self.ns_run(intf.node, ["ip", "link", "set", name, "name", intf.name])
                    self.ns_run(intf.node, ["ip", "link", "set", intf.name, "address", intf.mac])
                    if self.host_addresses:
                        self.ns_run(intf.node, ["ip", "addr", "add", f"{intf.ip}/{intf.prefix_len}",
                                                "dev", intf.name])
                    self.ns_run(intf.node, ["ip", "link", "set", intf.name, "up"])
                    if self.host_addresses:
                        self.ns_run(intf.node, ["ip", "route", "replace", "default", "via",
                                                intf.peer_ip, "dev", intf.name])
                    disable_offloads(intf.name, ns)
                else:
                    _run(["ip", "link", "set", name, "address", intf.mac])
                    _run(["ip", "link", "set", name, "up"])
                    _run(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"], check=False)
                    disable_offloads(name)

    def setup(self, switch: str) -> SwitchSetup:
        """What `switch` is programmed with (the same SwitchSetup the data plane builds)."""
        return self.setups[switch]

    def _bring_up_switches(self) -> None:
        assert self.run_dir is not None
        for name, spec in self.specs.items():
            ports = {p: self.port_intf(name, p) for p in spec.port_numbers()}
            bm = BMv2Switch(name, spec.device_id, ports, grpc_port=pick_free_port(),
                            thrift_port=pick_free_port(), log_dir=self.log_dir,
                            log=self.bmv2_log, pcap=self.pcap,
                            notifications_socket=self.run_dir / f"{name}-notifications.ipc")
            self.switches[name] = bm
            self.conns[name] = bring_up(bm, self.setup(name), self.p4infos[name])

    def restore_queues(self, switch: str) -> None:
        """`switch`'s egress queues as brought up."""
        if self.setup(switch).queues:
            self.switches[switch].configure_queues(self.setup(switch).queues)

    def reset(self, switch: str) -> None:
        """`switch`'s pipeline as it was brought up: pushed again (tables, counters, registers
        and multicast groups start empty), its entries and aggregation jobs written again."""
        setup, conn = self.setup(switch), self.conns[switch]
        conn.set_pipeline(self.p4infos[switch], setup.program.read_json())
        install_entries(conn, setup.entries())
        install_agg_jobs(conn, setup.agg_jobs)  # their multicast groups went with the pipeline

    def host_ports(self) -> dict[str, tuple[str, int]]:
        """Host -> (switch, port) it is attached to."""
        return {h: (self.plan.gateway(h).peer_node, self.switch_port(self.plan.gateway(h).peer_node, h))
                for h in self.hosts}

    def bucket_shifts(self, switch: str) -> dict[int, int]:
        depths = self.setup(switch).queue_depths()
        return {p: qbucket_shift(depths.get(p)) for p in self.specs[switch].port_numbers()}

    # -- run ---------------------------------------------------------------------------------
    def ns_cmd(self, host: str, cmd: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns(host), *cmd]

    def ns_run(self, host: str, cmd: Sequence[str], check: bool = True,
               timeout: float | None = 60, **kw) -> subprocess.CompletedProcess:
        return _run(self.ns_cmd(host, cmd), check=check, timeout=timeout, **kw)

    def host_run(self, host: str, cmd: Sequence[str], **kw) -> subprocess.CompletedProcess:
        return self.ns_run(host, cmd, **kw)

    def host_popen(self, host: str, cmd: Sequence[str], **kw) -> subprocess.Popen:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("text", True)
        proc = subprocess.Popen(self.ns_cmd(host, cmd), **kw)
        self._procs.append(proc)
        return proc

    # -- teardown ----------------------------------------------------------------------------
    def close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self._procs.clear()
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()
        for bm in self.switches.values():
            bm.stop()
        self.switches.clear()
        for name in self._veths:
            _run(["ip", "link", "del", name], check=False)
        self._veths.clear()
        for ns in self._namespaces:
            pids = _run(["ip", "netns", "pids", ns], check=False).stdout.split()
            for pid in pids:  # only processes inside our own namespace
                try:
                    os.kill(int(pid), 9)
                except (OSError, ValueError):
                    pass
            _run(["ip", "netns", "del", ns], check=False)
        self._namespaces.clear()
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.run_dir = None

    def __enter__(self) -> P4Testbed:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

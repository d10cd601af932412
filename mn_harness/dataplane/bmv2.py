"""The BMv2 data plane: every switch is a BMv2 `simple_switch_grpc` running
mn_harness/p4/programs/ecn_telemetry.p4 (or aggregation.p4, or a program of the user's that meets
mn_harness.p4.contract), brought up by mn_harness.p4.bringup from the same NetworkPlan
(addresses, shortest paths) as the Linux data plane, with what dataplane/bmv2_setup.py derives
from it.

Namespaces, never the root namespace
    Each switch is a Mininet node of its own (a namespace with IP forwarding off); its veths live
    only there and the switch process runs inside it (`mnexec -a <node pid> simple_switch_grpc`).
    Nothing is created in the root namespace, so concurrent runs with the same interface names
    cannot collide and `mn-harness clean` never has to guess. The harness reaches the switch's
    P4Runtime server over a unix socket in a per-run directory (`--grpc-server-addr
    unix:/tmp/mn-harness-bmv2-*/s1.sock`; PI's gRPC server accepts unix: addresses, the
    file system is shared across network namespaces); the Thrift runtime (queue depth/rate) listens
    on the namespace's own loopback, so `simple_switch_CLI` runs inside the namespace too and every
    switch may use port 9090. BMv2's notifications socket (a nanomsg build's
    `--notifications-addr`; default /tmp/bmv2-<device id>-notifications.ipc, the same for every
    run) is put in that directory too, so two runs at once never share one.

The bottleneck queue is BMv2's own
    Per egress port two priority queues (`--priority-queues 2`; the program puts IPv4 packets of
    <= 128 bytes - pure ACKs, pings - and ARP replies into the small queue, served first): data
    queue `set_queue_depth` = the link's `queue` (packets) and `set_queue_rate` = its `bw` in
    1514-byte frames per second; small queue the same depth and `bw` in 142-byte frames per second
    (BMv2 paces in packets, so ACKs in the data queue would take full-frame slots: data got ~2/3 of
    the link). ECN and the depth telemetry are the data queue's. A link's `delay` is a netem
    qdisc (no rate, large limit) on the switch port, after BMv2's queues. Hosts keep their HTB
    shaping from the network builder (their own egress), send MTU-sized frames
    (`host_gso_max_segs` = 1: BMv2 forwards frames one by one) with checksums filled in (tx
    checksum offload off: frames cross BMv2 through libpcap), and negotiate ECN
    (`net.ipv4.tcp_ecn=1`). Switch ports: all offloads off.

ECN
    Marked CE by the switch when the data queue depth at enqueue is >= the switch's
    `ecn_threshold` (YAML, packets; default DEFAULT_ECN_THRESHOLD = 20, a DCTCP-style K for
    100-packet queues). A threshold above the queue size turns marking off in effect.

Jobs
    job ids 1, 2, ... in job order; `job_classify` entries from the plan (TCP between the two
    hosts of each ring hop, either direction) attribute bytes and marks to jobs.

Telemetry (`start_telemetry`)
    A thread reads every switch's counters (TelemetryReader, one Read RPC per switch) at
    `sample_hz` (default 100, env MN_HARNESS_BMV2_SAMPLE_HZ) and appends to `queue.csv`, flushed
    every ~0.2 s so an interrupted run keeps it. One row per switch port per sample:

    t        seconds since the experiment start t0 (CLOCK_MONOTONIC, the workers' time axis)
    switch, port, link   switch name, BMv2 port number, directed link label ("s1->s2")
    depth    mean data-queue depth (packets) seen at enqueue by the data-queue packets of the
             interval (0 when none arrived); depth_max the largest
    packets  packets enqueued into the data queue in the interval (small packets not counted)
    marks    CE marks set on this port *in this sample's interval* (per sample, not cumulative)
    bytes_<job>  bytes of that job sent out of this port in the interval

    `stop_telemetry()` returns {"queue": {"s1:2": {link, max_depth, mean_depth (packet-weighted),
    packets, marks}}, "ecn_marks": {job: marks on all ports}, "telemetry": {samples, samples_per_s}}.

Processes
    `undo_records()` gives every running switch's exact identity and the socket directory
    (mn_harness.state: `mn-harness clean` kills and removes them after a crash); switches also die
    with the harness (PR_SET_PDEATHSIG) and with their namespace node. `check_alive()` fails the
    run in one line as soon as a switch process has exited. `stop()` stops all of them and
    removes the socket directory; it is idempotent.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

from mininet.net import Mininet
from mininet.node import Node

from mn_harness.config import SwitchConfig
from mn_harness.dataplane.base import Dataplane
from mn_harness.dataplane.bmv2_setup import check_setup, switch_setups
from mn_harness.dataplane.errors import DataplaneError
from mn_harness.dataplane.port_rates import Bmv2Rates, PortRate
from mn_harness.dataplane.queue_csv import QueueCollector, QueueSample, sample_hz_from_env
from mn_harness.dataplane.queues import ecn_summary, link_label, monitored_interfaces
from mn_harness.network.commands import run_in
from mn_harness.network.flows import ecmp_hash_seed
from mn_harness.network.nodes import TimedShell
from mn_harness.network.plan import Interface, NetworkPlan
from mn_harness.network.shaping import add_netem
from mn_harness.p4.bmv2 import BMv2Switch, QueueConfig, cli_has_thrift, disable_offloads
from mn_harness.p4.bringup import SwitchSetup, bring_up
from mn_harness.p4.ecmp import chooser as ecmp_chooser
from mn_harness.p4.entries import job_ids, qbucket_shift
from mn_harness.p4.errors import P4Error
from mn_harness.p4.runtime import P4Info, SwitchConnection
from mn_harness.p4.telemetry import PortSample, TelemetryReader
from mn_harness.p4.toolchain import find_toolchain
from mn_harness.state import KillProcess, RemoveDirectory, Undo

THRIFT_PORT = 9090           # on each switch namespace's own loopback
SAMPLE_HZ_ENV = "MN_HARNESS_BMV2_SAMPLE_HZ"  # else MN_HARNESS_QUEUE_SAMPLE_HZ, else 100


def bmv2_paths(plan: NetworkPlan) -> NetworkPlan:
    """`plan` with every flow's path as the BMv2 switches' ECMP hash picks it: pure Python, so
    `validate` can show it before anything runs."""
    if plan.resolved:
        return plan
    return plan.resolve(ecmp_chooser(plan, ecmp_hash_seed(plan.experiment.run.seed)))


class Bmv2SwitchNode(TimedShell, Node):
    """A namespace for one BMv2 switch: loopback up (Thrift), no IP forwarding, no IPv6 chatter."""

    def config(self, **params):
        result = super().config(**params)
        run_in(self.pid, ["ip", "link", "set", "lo", "up"])
        run_in(self.pid, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=0"], check=False)
        run_in(self.pid, ["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
        run_in(self.pid, ["sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"], check=False)
        return result


class Bmv2Dataplane(Dataplane):
    name = "bmv2"

    def __init__(self, sample_hz: float | None = None, bmv2_log: bool = False):
        self.sample_hz = float(sample_hz or sample_hz_from_env(SAMPLE_HZ_ENV))
        if self.sample_hz <= 0:
            raise DataplaneError(f"telemetry sample rate must be > 0, got {self.sample_hz}")
        self.bmv2_log = bmv2_log
        self.configs: dict[str, SwitchConfig] = {}
        self.nodes: dict[str, Node] = {}
        self.switches: dict[str, BMv2Switch] = {}
        self.conns: dict[str, SwitchConnection] = {}
        self.plan: NetworkPlan | None = None
        self.run_dir: Path | None = None
        self._collector: QueueCollector | None = None
        self._lock = threading.Lock()
        self.rates = Bmv2Rates()  # the ports' link invariant (fidelity), fed by the telemetry

    @classmethod
    def unavailable_reason(cls) -> str | None:
        tc = find_toolchain()
        if not tc.complete:
            return tc.missing_reason()
        if not cli_has_thrift(tc.bin("simple_switch_CLI")):
            return ("simple_switch_CLI needs the Python thrift module: apt-get install python3-thrift "
                    "(and a venv made with --system-site-packages) or pip install thrift")
        for tool, package in (("mnexec", "mininet"), ("ethtool", "ethtool")):
            if shutil.which(tool) is None:
                return f"{tool} not found: apt-get install {package}"
        return None

    # -- Dataplane interface -----------------------------------------------------------------
    def add_switch(self, net: Mininet, switch: SwitchConfig, plan: NetworkPlan) -> Node:
        node = net.addHost(switch.name, cls=Bmv2SwitchNode, ip=None)
        self.configs[switch.name] = switch
        self.nodes[switch.name] = node
        return node

    def host_gso_max_segs(self, configured: int) -> int:
        return 1

    def host_sysctls(self) -> dict[str, str]:
        return {"net.ipv4.tcp_ecn": "1"}

    def configure(self, net: Mininet, plan: NetworkPlan) -> None:
        self.plan = plan
        setups = self._setups(plan)
        self.run_dir = Path(tempfile.mkdtemp(prefix="mn-harness-bmv2-"))
        try:
            # hosts: frames cross BMv2 through libpcap, so checksums must be filled in by the host
            for host in plan.experiment.hosts:
                intf = plan.gateway(host)
                run_in(net[host].pid, ["ethtool", "-K", intf.name, "tx", "off", "sg", "off",
                                       "tso", "off", "gso", "off", "gro", "off"], check=False)
            for name, node in self.nodes.items():
                self._configure_switch(name, node, plan, setups[name])
        except P4Error as exc:
            raise DataplaneError(f"bmv2: {exc}".splitlines()[0]) from exc

    def _setups(self, plan: NetworkPlan) -> dict[str, SwitchSetup]:
        """Per switch what it is programmed with (bmv2_setup.switch_setups), each program
        checked against what the experiment asks of it (one line naming the YAML path)."""
        setups = switch_setups(plan)
        for name, setup in setups.items():
            check_setup(plan, name, setup, P4Info.from_file(setup.program.p4info_path))
        return {name: setups[name] for name in self.configs}

    def _configure_switch(self, name: str, node: Node, plan: NetworkPlan, setup: SwitchSetup) -> None:
        node.config()
        prefix = ["mnexec", "-a", str(node.pid)]
        intfs = plan.interfaces.get(name, [])
        for intf in intfs:
            run_in(node.pid, ["ip", "addr", "flush", "dev", intf.name])
            run_in(node.pid, ["ip", "link", "set", intf.name, "up"])
            disable_offloads(intf.name, exec_prefix=prefix)
            if intf.link.delay_s > 0:
                self._delay(node.pid, intf)
        assert self.run_dir is not None
        sw = BMv2Switch(name, setup.spec.device_id, {i.port: i.name for i in intfs}, grpc_port=0,
                        thrift_port=THRIFT_PORT, exec_prefix=prefix,
                        grpc_socket=self.run_dir / f"{name}.sock",
                        notifications_socket=self.run_dir / f"{name}-notifications.ipc",
                        log_dir=self.run_dir / name, log=self.bmv2_log)
        with self._lock:
            self.switches[name] = sw
        self.conns[name] = bring_up(sw, setup)

    @staticmethod
    def _delay(pid: int, intf) -> None:
        add_netem(pid, ["tc", "qdisc", "replace", "dev", intf.name, "root"], intf.link.delay_s,
                  100000, f"link {intf.link.name}")

    # -- telemetry ---------------------------------------------------------------------------
    def start_telemetry(self, out_dir: Path, t0: float) -> None:
        if self.plan is None or not self.conns:
            return
        self.stop_telemetry()
        jobs = job_ids(self.plan)
        names = {v: k for k, v in jobs.items()}
        watched = {(i.node, i.port): link_label(i) for i in monitored_interfaces(self.plan)}
        readers = []
        for name, conn in self.conns.items():
            intfs = [i for i in self.plan.interfaces.get(name, []) if (name, i.port) in watched]
            if intfs:
                shifts = {i.port: qbucket_shift(i.link.queue_packets) for i in intfs}
                readers.append(TelemetryReader(conn, name, [i.port for i in intfs], jobs.values(),
                                               shifts))
        if not readers:
            return

        for intf in monitored_interfaces(self.plan):
            if intf.node in self.conns:
                self.rates.watch(intf.node, intf.port, link_label(intf),
                                 QueueConfig.for_link(intf.link.bw_bps / 1e6).rate_pps or 0)

        def sample() -> list[QueueSample]:
            out = []
            for r in readers:
                for s in r.sample():
                    self.rates.add(s.switch, s.port, s.interval, s.tx_packets, s.depth.mean)
                    out.append(_queue_sample(s, watched.get((s.switch, s.port), ""), names))
            return out

        self._collector = QueueCollector(Path(out_dir) / "queue.csv", list(jobs), sample, t0,
                                         self.sample_hz, name="bmv2-telemetry")
        self._collector.start()

    def stop_telemetry(self) -> dict:
        collector, self._collector = self._collector, None
        out = {}
        if collector is not None:
            collector.stop()
            out = collector.summary()
        if self.plan is not None:
            out["ecn"] = ecn_summary(self.plan, "bmv2")
        return out

    def link_stats(self, net: Mininet, plan: NetworkPlan) -> dict:
        return {}

    def switch_port_rates(self) -> dict[str, PortRate]:
        return self.rates.by_link()

    def resolve_paths(self, net: Mininet, plan: NetworkPlan) -> NetworkPlan:
        """The switches' ECMP choices, computed as the P4 program computes them (p4.ecmp)."""
        return bmv2_paths(plan)

    def set_egress_rate(self, node: Node, intf: Interface, bw_bps: float) -> None:
        """The port's BMv2 queues drain at the new rate (their depth stays the link's)."""
        switch = self.switches.get(intf.node)
        if switch is None:
            raise DataplaneError(f"bmv2: no running switch {intf.node}")
        try:
            switch.configure_queues({intf.port: QueueConfig.for_link(bw_bps / 1e6, intf.link.queue_packets)})
            self.rates.watch(intf.node, intf.port, link_label(intf), QueueConfig.for_link(bw_bps / 1e6).rate_pps or 0)
        except P4Error as exc:
            raise DataplaneError(f"bmv2: {exc}".splitlines()[0]) from exc

    def switch_logs(self) -> dict[str, Path]:
        with self._lock:
            switches = dict(self.switches)
        logs = {}
        for name, sw in switches.items():
            for path in (Path(sw.log_dir or ".") / f"{name}.out", Path(sw.log_dir or ".") / f"{name}-bmv2.txt"):
                if sw.log_dir and path.is_file():
                    logs[f"{name} {path.name}"] = path
        return logs

    def undo_records(self) -> list[Undo]:
        with self._lock:
            running = [(name, sw.pid) for name, sw in self.switches.items() if sw.running]
        records: list[Undo | None] = [KillProcess.of(pid, f"simple_switch_grpc {name}")
                                      for name, pid in running]
        if self.run_dir is not None:
            records.append(RemoveDirectory(str(self.run_dir)))
        return [r for r in records if r is not None]

    def check_alive(self) -> None:
        with self._lock:
            switches = dict(self.switches)
        for name, sw in switches.items():
            if not sw.running:
                tail = sw.log_tail(lines=1).strip()
                raise DataplaneError(f"bmv2: switch {name} exited while the jobs ran"
                                     + (f": {tail}" if tail and tail != "(no output)" else ""))

    def stop(self) -> None:
        try:
            self.stop_telemetry()
        finally:
            for conn in self.conns.values():
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - teardown goes on
                    pass
            self.conns.clear()
            with self._lock:
                switches = list(self.switches.values())
                self.switches.clear()
            for sw in switches:
                sw.stop()
            if self.run_dir is not None:
                shutil.rmtree(self.run_dir, ignore_errors=True)
                self.run_dir = None


def _queue_sample(s: PortSample, link: str, job_names: dict[int, str]) -> QueueSample:
    """A port's counter interval as a queue.csv row; BMv2's queue drops are invisible to the
    P4 program (the traffic manager drops before egress), so `drops` is not measured."""
    return QueueSample(s.switch, s.port, link, s.depth.mean, s.depth.max, s.depth.packets, s.marks,
                       None, {job_names[j]: n for j, n in s.job_bytes.items()},
                       {job_names[j]: n for j, n in s.job_marks.items()})

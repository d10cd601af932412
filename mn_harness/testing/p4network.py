"""A running network of BMv2 switches for P4 unit tests: the P4 test bed brought up for an
experiment file as `dataplane: bmv2` would program it, with silent hosts (no addresses) and a
packet socket on every port that faces a host (mn_harness.testing.ports).

It is what the pytest plugin's `p4` fixture hands a test (mn_harness.testing.pytest_p4), in
PTF's terms: `send(port, packet)`, `expect(port, packet_or_matcher)`, `expect_nothing(ports)`;
entries over P4Runtime by P4Info names; counters, registers and queue depths; and `reset()`,
which puts every switch back as it was brought up (pipeline pushed again: tables, counters and
registers empty; the harness's entries written again; queues set again where a test changed them;
frames not taken dropped).

A port is a host-facing switch port, named by the host (`"h1"`), by its number on the only
switch (`2`), or as `("s1", 2)`; `net.host("h1")` has the addresses a test writes into its
packets (ip, mac, and switch_mac: the MAC of the switch port the host is attached to).

    with P4Network.start_for(experiment) as net:
        h1, h2 = net.host("h1"), net.host("h2")
        net.send(h1.port, Ether(src=h1.mac, dst=h1.switch_mac) / IP(src=h1.ip, dst=h2.ip) / UDP())
        net.expect(h2.port, Masked(Ether(src=h2.switch_mac, dst=h2.mac) / IP(src=h1.ip, dst=h2.ip, ttl=63) / UDP()))
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scapy.layers.l2 import Ether
from scapy.packet import Packet

from mn_harness.config.experiment import Experiment, load_experiment_dict
from mn_harness.network.plan import NetworkPlan
from mn_harness.p4.limits import MAX_JOBS
from mn_harness.p4.runtime import CounterValue
from mn_harness.p4.telemetry import PortSample, TelemetryReader

from .p4testbed import P4Testbed, TestbedError
from .packets import Expectation, Masked, describe, differences, matches
from .ports import PortIO


@dataclass(frozen=True)
class Port:
    switch: str
    number: int
    host: str          # the host at its other end

    def __str__(self) -> str:
        return f"{self.switch}:{self.number} ({self.host})"


@dataclass(frozen=True)
class Host:
    name: str
    ip: str
    mac: str
    switch_mac: str    # the MAC of the switch port it is attached to: the destination of its frames
    port: Port


PortSpec = Port | str | int | tuple
QUIET_S = 0.05      # reset: the ports are quiet once nothing arrived for this long ...
SETTLE_MAX_S = 5.0  # ... or after this (a test's slowed queue empties at its link's rate again)


def single_switch(hosts: int = 3, bw: str = "100Mbit", queue: int = 100) -> Experiment:
    """The default test topology: switch s1, hosts h1..h<hosts> on ports 1..<hosts>, links of
    `bw` with `queue`-packet queues, s1 running ecn_telemetry.p4 (marking at the default 20
    packets). The one job over all hosts is never run (a plan needs one)."""
    names = [f"h{i}" for i in range(1, hosts + 1)]
    return load_experiment_dict({
        "experiment": "p4-unit-test", "hosts": names, "switches": ["s1"],
        "links": [{"endpoints": [h, "s1"]} for h in names], "link_defaults": {"bw": bw, "queue": queue},
        "jobs": [{"name": "j", "workers": names, "bytes_per_iteration": "1MB", "compute": "10ms",
                  "iterations": 1}], "run": {"dataplane": "bmv2"}}, "p4-unit-test")


class QueueWatch:
    """The depth distribution of one port's data queue (and its marks, bytes) since the last
    read, from the queue telemetry counters (mn_harness.p4.telemetry): every packet's depth at
    enqueue, not a point sample."""

    def __init__(self, reader: TelemetryReader):
        self.reader = reader
        reader.sample()  # baseline

    def read(self) -> PortSample:
        [sample] = self.reader.sample()
        return sample


class P4Network:
    def __init__(self, experiment: Experiment | NetworkPlan, *, program: str | Path | None = None,
                 cache_dir: str | Path | None = None, log_dir: str | Path | None = None):
        self.bed = P4Testbed.for_experiment(experiment, program=program, cache_dir=cache_dir,
                                            log_dir=log_dir, bmv2_log=log_dir is not None,
                                            host_addresses=False)
        self.plan = self.bed.plan
        self.io: PortIO | None = None
        self._hosts: dict[str, Host] = {}
        self._queues_changed: set[str] = set()

    @classmethod
    def start_for(cls, experiment: Experiment | NetworkPlan, **kw) -> P4Network:
        return cls(experiment, **kw).start()

    def start(self) -> P4Network:
        try:
            self.bed.start()
            for host, (switch, number) in self.bed.host_ports().items():
                intf = self.plan.gateway(host)
                self._hosts[host] = Host(host, intf.ip, intf.mac, intf.peer_mac, Port(switch, number, host))
            self.io = PortIO({h.port: (self.bed.netns(name), self.plan.gateway(name).name)
                              for name, h in self._hosts.items()}).start()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self.io is not None:
            self.io.close()
            self.io = None
        self.bed.close()

    def __enter__(self) -> P4Network:
        return self if self.io is not None else self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- names -------------------------------------------------------------------------------
    @property
    def switches(self) -> list[str]:
        return list(self.bed.specs)

    @property
    def hosts(self) -> list[str]:
        return list(self._hosts)

    def host(self, name: str) -> Host:
        try:
            return self._hosts[name]
        except KeyError:
            raise TestbedError(f"no host {name!r}; hosts: {', '.join(self._hosts)}") from None

    @property
    def ports(self) -> list[Port]:
        return [h.port for h in self._hosts.values()]

    def port(self, spec: PortSpec) -> Port:
        """A host-facing port from a Port, a host name, a port number on the only switch, or
        (switch, number)."""
        if isinstance(spec, Port):
            return spec
        if isinstance(spec, str):
            return self.host(spec).port
        if isinstance(spec, int) and not isinstance(spec, bool):
            if len(self.switches) != 1:
                raise TestbedError(f"port {spec}: give (switch, port) or a host: there are "
                                   f"{len(self.switches)} switches")
            spec = (self.switches[0], spec)
        if isinstance(spec, tuple) and len(spec) == 2:
            for port in self.ports:
                if (port.switch, port.number) == (spec[0], spec[1]):
                    return port
            raise TestbedError(f"{spec[0]}:{spec[1]} is not a port that faces a host; those are: "
                               f"{', '.join(map(str, self.ports))}")
        raise TestbedError(f"not a port: {spec!r} (a host name, a port number, or (switch, port))")

    def _switch(self, switch: str | None) -> str:
        if switch is None:
            if len(self.switches) != 1:
                raise TestbedError(f"there are {len(self.switches)} switches: say which (switch=...)")
            return self.switches[0]
        if switch not in self.bed.specs:
            raise TestbedError(f"no switch {switch!r}; switches: {', '.join(self.switches)}")
        return switch

    def conn(self, switch: str | None = None):
        """The P4Runtime connection of a switch (mn_harness.p4.runtime.SwitchConnection)."""
        return self.bed.conn(self._switch(switch))

    def resolve(self, value: Any) -> Any:
        """`h1.ip`, `h1.mac`, `h1.switch_mac` -> that host's address; anything else as it is."""
        if isinstance(value, str):
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)\.(ip|mac|switch_mac)", value)
            if m and m.group(1) in self._hosts:
                return getattr(self._hosts[m.group(1)], m.group(2))
        return value

    # -- packets -----------------------------------------------------------------------------
    def _io(self) -> PortIO:
        if self.io is None:
            raise TestbedError("the network is not running")
        return self.io

    def send(self, port: PortSpec, packets: Packet | bytes | Iterable[Packet | bytes]) -> None:
        """Send one frame or several (back to back, e.g. to build a queue) into `port`."""
        batch = [packets] if isinstance(packets, (Packet, bytes, bytearray)) else list(packets)
        self._io().send(self.port(port), [bytes(p) for p in batch])

    def expect(self, port: PortSpec, expected: Expectation, timeout: float = 2.0,
               ignore: Iterable[str] = ()) -> Packet:
        """The first frame out of `port` that matches `expected` (mn_harness.testing.packets;
        with `ignore`, a packet's fields such as "IP.tos" take the frame's values), taken from
        the port's queue; frames received before it stay there (expect_nothing sees them).
        AssertionError saying what came instead when none does within `timeout`."""
        __tracebackhide__ = True  # pytest shows the test's line and this message
        if ignore:
            if not isinstance(expected, Packet):
                raise TypeError("expect(..., ignore=) needs a scapy packet to expect")
            expected = Masked(expected, ignore)
        p = self.port(port)
        frame = self._io().take(p, lambda data: matches(expected, data), timeout)
        if frame is None:
            raise AssertionError(self._mismatch(p, expected, timeout))
        return Ether(frame.data)

    def expect_nothing(self, ports: Iterable[PortSpec] | None = None, timeout: float = 0.5) -> None:
        """No frame (not yet taken) out of `ports` (every host-facing port by default) within
        `timeout` seconds."""
        __tracebackhide__ = True
        time.sleep(timeout)
        wanted = self.ports if ports is None else [self.port(p) for p in ports]
        pending = self._io().pending(wanted)
        if pending:
            raise AssertionError("unexpected frames: " + "; ".join(
                f"{port}: {', '.join(Ether(f.data).summary() for f in frames)}"
                for port, frames in pending.items()))

    def received(self, port: PortSpec) -> list[Packet]:
        """The frames out of `port` not taken yet (they stay)."""
        p = self.port(port)
        return [Ether(f.data) for f in self._io().pending([p]).get(p, [])]

    def _mismatch(self, port: Port, expected: Expectation, timeout: float) -> str:
        pending = self._io().pending()
        lines = [f"nothing like {describe(expected)} out of {port} within {timeout:g} s"]
        for frame in pending.get(port, [])[:3]:
            diff = differences(expected, frame.data)
            lines.append(f"  {port} sent {Ether(frame.data).summary()}" + (f": {'; '.join(diff)}" if diff else ""))
        others = {p: frames for p, frames in pending.items() if p != port}
        for p, frames in others.items():
            lines.append(f"  {p} sent {', '.join(Ether(f.data).summary() for f in frames[:3])}")
        if len(lines) == 1:
            lines.append("  no port sent anything")
        return "\n".join(lines)

    # -- control plane -----------------------------------------------------------------------
    def insert(self, table: str, match: Mapping[str, Any] | None, action: str,
               params: Mapping[str, Any] | None = None, priority: int | None = None,
               switch: str | None = None) -> None:
        self.conn(switch).insert_table_entry(table, match, action, params, priority)

    def modify(self, table: str, match: Mapping[str, Any] | None, action: str,
               params: Mapping[str, Any] | None = None, priority: int | None = None,
               switch: str | None = None) -> None:
        self.conn(switch).modify_table_entry(table, match, action, params, priority)

    def delete(self, table: str, match: Mapping[str, Any] | None, priority: int | None = None,
               switch: str | None = None) -> None:
        self.conn(switch).delete_table_entry(table, match, priority)

    def set_default(self, table: str, action: str, params: Mapping[str, Any] | None = None,
                    switch: str | None = None) -> None:
        self.conn(switch).set_default_action(table, action, params)

    def entries(self, table: str, switch: str | None = None) -> list:
        """The table's entries as P4Runtime TableEntry messages."""
        return self.conn(switch).read_table(table)

    # -- state -------------------------------------------------------------------------------
    def counter(self, name: str, index: int, switch: str | None = None) -> CounterValue:
        """One cell of an indirect counter: CounterValue(packets, bytes)."""
        return self.conn(switch).read_counter(name, [index])[index]

    def counters(self, name: str, indices: Iterable[int] | None = None,
                 switch: str | None = None) -> dict[int, CounterValue]:
        return self.conn(switch).read_counter(name, indices)

    def register(self, name: str, index: int, switch: str | None = None) -> int:
        """One cell of a register, read over BMv2's Thrift runtime (its P4Runtime server cannot
        read registers)."""
        sw = self._switch(switch)
        full = self.bed.p4infos[sw].register(name).preamble.name
        out = self.bed.switches[sw].cli([f"register_read {full} {int(index)}"])
        m = re.search(rf"{re.escape(full)}\[{int(index)}\]\s*=\s*(\d+)", out)
        if m is None:
            raise TestbedError(f"register_read {full} {index} on {sw}: unexpected output {out.strip()!r}")
        return int(m.group(1))

    def set_queue(self, port: PortSpec, *, rate_pps: int | None = None, depth: int | None = None,
                  priority: int | None = 0) -> None:
        """The egress queue of `port` (its data queue, priority 0, by default): drain rate in
        packets per second and depth in packets. `reset()` sets them back."""
        p = self.port(port)
        sw = self.bed.switches[p.switch]
        self._queues_changed.add(p.switch)
        if depth is not None:
            sw.set_queue_depth(depth, p.number, priority)
        if rate_pps is not None:
            sw.set_queue_rate(rate_pps, p.number, priority)

    def watch_queue(self, port: PortSpec) -> QueueWatch:
        """Watch `port`'s queue from now on: `.read()` gives the PortSample (depth mean and max,
        packets, marks, bytes per job) of the interval since the previous read."""
        p = self.port(port)
        reader = TelemetryReader(self.bed.conn(p.switch), p.switch, [p.number], range(MAX_JOBS),
                                 self.bed.bucket_shifts(p.switch))
        return QueueWatch(reader)

    def reset(self) -> None:
        """Every switch as brought up (tables, counters, registers, queues) and no frame pending:
        frames still in the switches (a slowed queue empties once its rate is set back) are
        waited for until the ports are quiet, and dropped, before the pipelines are pushed
        again, so they do not count in the next test's counters."""
        for switch in sorted(self._queues_changed):
            self.bed.restore_queues(switch)
        self._queues_changed.clear()
        io = self._io()
        deadline = time.monotonic() + SETTLE_MAX_S
        while True:
            io.drain()
            time.sleep(QUIET_S)
            if not io.pending() or time.monotonic() > deadline:
                break
        for switch in self.switches:
            self.bed.reset(switch)
        io.drain()

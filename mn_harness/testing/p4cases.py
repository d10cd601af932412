"""P4 unit tests written as YAML (`*.p4test.yaml`), for the cases p4c's STF files cover: table
entries, packets sent into ports, packets expected out of ports, nothing else out, and counter
changes. The pytest plugin (mn_harness.testing.pytest_p4) collects each case as a test.

    experiment: experiment.yaml     # topology and programs, relative to this file
                                    # (default: one switch s1 with hosts h1, h2, h3)
    program: mine.p4                # optional: every switch runs this instead
    entries:                        # before every case, after the harness's own
      - {table: job_classify, match: {hdr.ipv4.dscp: [5, 63]}, action: set_job,
         params: {job: 7}, priority: 20}
    cases:
      - name: forwarded with its TTL decremented
        send:
          - port: h1
            packet: {Ether: {src: h1.mac, dst: h1.switch_mac},
                     IP: {src: h1.ip, dst: h2.ip, ttl: 64}, UDP: {dport: 9}, payload: 100}
        expect:
          - port: h2
            packet: {Ether: {src: h2.switch_mac, dst: h2.mac},
                     IP: {src: h1.ip, dst: h2.ip, ttl: 63}, UDP: {dport: 9}, payload: 100}
        counters:
          - {name: port_tx, index: 2, packets: 1}
      - name: TTL 1 is dropped
        send: [{port: h1, packet: {Ether: {...}, IP: {..., ttl: 1}}}]
        expect: []

Every case starts from the switches as brought up (P4Network.reset); `entries` (with `op:
modify` for an entry the harness wrote), `queues` ({port, rate_pps, depth}), then `send` in
order (`count` repeats a packet), then every `expect` (`count` packets alike, `ignore` fields
such as IP.chksum), then nothing else out of any port, then each counter's change over the case
(`packets`, `bytes`). Ports are host names, port numbers of the only switch, or [switch,
port]; `h1.ip`, `h1.mac` and `h1.switch_mac` stand for the host's addresses. A malformed file
is one line naming the YAML path (mn_harness.errors.ConfigError)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mn_harness.config.loader import parse_yaml, read_text_file
from mn_harness.errors import ConfigError

if TYPE_CHECKING:
    from .p4network import P4Network

SUFFIX = ".p4test.yaml"
FILE_KEYS = {"experiment", "program", "entries", "cases"}
CASE_KEYS = {"name", "entries", "queues", "send", "expect", "counters"}
NOTHING_ELSE_S = 0.3  # how long a case waits for frames nobody expected


@dataclass(frozen=True)
class EntrySpec:
    where: str
    table: str
    match: Mapping[str, Any] | None
    action: str
    params: Mapping[str, Any]
    priority: int | None
    op: str  # insert, modify


@dataclass(frozen=True)
class PacketSpec:
    where: str
    port: Any
    packet: Mapping[str, Any]
    count: int = 1
    ignore: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    name: str
    where: str
    entries: tuple[EntrySpec, ...] = ()
    queues: tuple[Mapping[str, Any], ...] = ()
    send: tuple[PacketSpec, ...] = ()
    expect: tuple[PacketSpec, ...] = ()
    counters: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class CaseFile:
    path: Path
    experiment: Path | None
    program: Path | None
    entries: tuple[EntrySpec, ...] = ()
    cases: tuple[Case, ...] = field(default_factory=tuple)


def _keys(raw: Any, where: str, allowed: set[str], required: set[str] | frozenset[str] = frozenset()) -> Mapping:
    if not isinstance(raw, Mapping):
        raise ConfigError(where, f"expected a mapping, got {raw!r}")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}" if where else unknown[0],
                          f"unknown key (allowed: {', '.join(sorted(allowed))})")
    for key in sorted(required - set(raw)):
        raise ConfigError(where, f"{key!r} is missing")
    return raw


def _list(raw: Any, where: str) -> list:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(where, f"expected a list, got {raw!r}")
    return raw


def _count(raw: Any, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise ConfigError(where, f"expected a positive number of packets, got {raw!r}")
    return raw


def _entries(raw: Any, where: str) -> tuple[EntrySpec, ...]:
    out = []
    for i, e in enumerate(_list(raw, where)):
        w = f"{where}[{i}]"
        _keys(e, w, {"table", "match", "action", "params", "priority", "op"}, {"table", "action"})
        op = e.get("op", "insert")
        if op not in ("insert", "modify"):
            raise ConfigError(f"{w}.op", f"expected insert or modify, got {op!r}")
        match = e.get("match")
        if match is not None and not isinstance(match, Mapping):
            raise ConfigError(f"{w}.match", f"expected a mapping of match fields, got {match!r}")
        out.append(EntrySpec(w, str(e["table"]), {k: _value(v) for k, v in (match or {}).items()} or None,
                             str(e["action"]), dict(e.get("params") or {}), e.get("priority"), op))
    return tuple(out)


def _value(v: Any) -> Any:
    """A match value as the entity builders take it: [value, mask] / [low, high] -> a tuple."""
    return tuple(v) if isinstance(v, list) else v


def _packets(raw: Any, where: str, expect: bool) -> tuple[PacketSpec, ...]:
    out = []
    for i, p in enumerate(_list(raw, where)):
        w = f"{where}[{i}]"
        _keys(p, w, {"port", "packet", "count"} | ({"ignore"} if expect else set()), {"port", "packet"})
        port = tuple(p["port"]) if isinstance(p["port"], list) else p["port"]
        ignore = tuple(str(x) for x in _list(p.get("ignore"), f"{w}.ignore"))
        out.append(PacketSpec(w, port, p["packet"], _count(p.get("count", 1), f"{w}.count"), ignore))
    return tuple(out)


def load_case_file(path: Path) -> CaseFile:
    """Parse and check a `*.p4test.yaml` file (the experiment it names is read when the network
    starts). ConfigError naming the file and the YAML path."""
    raw = parse_yaml(read_text_file(path), path.name)
    try:
        _keys(raw, "", FILE_KEYS, {"cases"})
        base = path.parent
        paths = {}
        for key in ("experiment", "program"):
            value = raw.get(key)
            if value is not None:
                if not isinstance(value, str) or not (base / value).is_file():
                    raise ConfigError(key, f"no such file {value!r} (relative to {path.name})")
                paths[key] = (base / value).resolve()
        cases = []
        names: set[str] = set()
        for i, c in enumerate(_list(raw["cases"], "cases")):
            w = f"cases[{i}]"
            _keys(c, w, CASE_KEYS)
            name = str(c.get("name", f"case {i}"))
            if name in names:
                raise ConfigError(f"{w}.name", f"duplicate case name {name!r}")
            names.add(name)
            queues = []
            for k, q in enumerate(_list(c.get("queues"), f"{w}.queues")):
                _keys(q, f"{w}.queues[{k}]", {"port", "rate_pps", "depth"}, {"port"})
                queues.append(q)
            counters = []
            for k, q in enumerate(_list(c.get("counters"), f"{w}.counters")):
                _keys(q, f"{w}.counters[{k}]", {"name", "index", "switch", "packets", "bytes"}, {"name", "index"})
                if "packets" not in q and "bytes" not in q:
                    raise ConfigError(f"{w}.counters[{k}]", "give the change in packets, bytes or both")
                counters.append(q)
            cases.append(Case(name, w, _entries(c.get("entries"), f"{w}.entries"), tuple(queues),
                              _packets(c.get("send"), f"{w}.send", expect=False),
                              _packets(c.get("expect"), f"{w}.expect", expect=True), tuple(counters)))
        if not cases:
            raise ConfigError("cases", "at least one case is needed")
        return CaseFile(path, paths.get("experiment"), paths.get("program"),
                        _entries(raw.get("entries"), "entries"), tuple(cases))
    except ConfigError as exc:
        raise ConfigError(f"{path.name}: {exc.path}" if exc.path else path.name, exc.detail) from None


def _write(net: P4Network, e: EntrySpec) -> None:
    try:
        write = net.insert if e.op == "insert" else net.modify
        write(e.table, e.match, e.action, e.params, e.priority)
    except Exception as exc:  # a bad name or value: the message says which
        raise AssertionError(f"{e.where}: {exc}") from None


def run_case(net: P4Network, file: CaseFile, case: Case) -> None:
    """Run one case on a started network; AssertionError saying what differed."""
    from .packets import Masked, from_mapping

    def packet(spec: PacketSpec):
        try:
            return from_mapping(spec.packet, net.resolve, f"{spec.where}.packet")
        except ValueError as exc:
            raise AssertionError(str(exc)) from None

    net.reset()
    for e in file.entries + case.entries:
        _write(net, e)
    for q in case.queues:
        net.set_queue(q["port"], rate_pps=q.get("rate_pps"), depth=q.get("depth"))
    before = {k: net.counter(c["name"], int(c["index"]), c.get("switch")) for k, c in enumerate(case.counters)}
    for spec in case.send:
        net.send(spec.port, [packet(spec)] * spec.count)
    for spec in case.expect:
        expected = Masked(packet(spec), spec.ignore) if spec.ignore else packet(spec)
        for n in range(spec.count):
            try:
                net.expect(spec.port, expected)
            except AssertionError as exc:
                which = f" (packet {n + 1} of {spec.count})" if spec.count > 1 else ""
                raise AssertionError(f"{spec.where}{which}: {exc}") from None
    try:
        net.expect_nothing(timeout=NOTHING_ELSE_S)
    except AssertionError as exc:
        raise AssertionError(f"{case.where}: {exc}") from None
    for k, c in enumerate(case.counters):
        after = net.counter(c["name"], int(c["index"]), c.get("switch"))
        change = {"packets": after.packets - before[k].packets, "bytes": after.bytes - before[k].bytes}
        wanted = {unit: c[unit] for unit in ("packets", "bytes") if unit in c}
        got = {unit: change[unit] for unit in wanted}
        if got != wanted:
            raise AssertionError(f"{case.where}.counters[{k}]: {c['name']}[{c['index']}] changed by {got}, "
                                 f"expected {wanted}")

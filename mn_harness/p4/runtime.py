"""P4Runtime controller over grpcio and the `p4runtime` protobuf bindings.

One `SwitchConnection` per switch, any number of them in one process (p4runtime-shell keeps a
single global client and cannot do that). Each connection opens its own gRPC channel and stream,
becomes primary controller by arbitration, pushes the pipeline, writes table entries and multicast
groups by P4Info *names*, and reads counters. Every gRPC failure is raised as a P4RuntimeError
whose message is one line: operation, switch, status code, the server's message and, for a Write,
the first per-update errors.

    info = P4Info.from_file(prog.p4info_path)
    with SwitchConnection("127.0.0.1:50051", device_id=1, name="s1") as sw:
        sw.set_pipeline(info, prog.read_json())
        sw.insert_table_entry("ipv4_lpm", {"hdr.ipv4.dstAddr": "10.0.0.2/32"},
                              "forward", {"port": 2, "src_mac": "..", "dst_mac": ".."})
        sw.read_counter("port_tx", [1, 2])   # {1: CounterValue(packets, bytes), ...}

`P4Info` and the entry builders need no switch and are unit-tested on their own.
"""

from __future__ import annotations

import ipaddress
import os
import queue
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The harness forks (subprocess) while the telemetry thread is inside gRPC; every child execs at
# once, so gRPC's fork handlers are not needed (and would log "skipping fork() handlers").
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc  # noqa: E402
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from .errors import EncodingError, NotPrimaryError, P4InfoLookupError, P4RuntimeError

# ---------------------------------------------------------------------------------------------
# Values


_MAC_RE = re.compile(r"^[0-9a-fA-F]{1,2}([:-][0-9a-fA-F]{1,2}){5}$")


def parse_value(value: Any) -> int:
    """An int from an int, bool, bytes (big-endian), IPv4/IPv6 address, MAC address, or a
    decimal / 0x-hex string."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, (bytes, bytearray)):
        return int.from_bytes(value, "big")
    if isinstance(value, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if _MAC_RE.match(text):
            return int("".join(part.zfill(2) for part in re.split(r"[:-]", text)), 16)
        try:
            return int(ipaddress.ip_address(text))
        except ValueError:
            pass
        try:
            return int(text, 0)
        except ValueError:
            pass
    raise EncodingError(f"cannot interpret {value!r} as a number, address or MAC")


def encode_value(value: Any, bitwidth: int, what: str = "value") -> bytes:
    """P4Runtime canonical bytestring (big-endian, no leading zero bytes, at least one byte) of
    `value`, checked against `bitwidth`."""
    number = parse_value(value)
    if number < 0:
        raise EncodingError(f"{what}: {value!r} is negative")
    if bitwidth and number >= (1 << bitwidth):
        raise EncodingError(f"{what}: {value!r} does not fit in {bitwidth} bits")
    return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")


def decode_value(data: bytes) -> int:
    return int.from_bytes(data, "big")


def format_mac(value: int | bytes) -> str:
    number = parse_value(value)
    return ":".join(f"{(number >> (8 * i)) & 0xFF:02x}" for i in range(5, -1, -1))


# ---------------------------------------------------------------------------------------------
# P4Info


_CODE_NAMES = {sc.value[0]: sc.name for sc in grpc.StatusCode}


def _pre(obj: Any) -> Any:
    return obj.preamble if hasattr(obj, "preamble") else obj


def _lookup(kind: str, name: str, objects: Sequence[Any], where: str = "") -> Any:
    """Find by full name, alias, or a unique dotted suffix ("ipv4_lpm", "hdr.ipv4.dstAddr",
    "dstAddr")."""
    for obj in objects:
        pre = _pre(obj)
        if name == pre.name or name == getattr(pre, "alias", None):
            return obj
    suffix_hits = [obj for obj in objects if _pre(obj).name.endswith("." + name)]
    if len(suffix_hits) == 1:
        return suffix_hits[0]
    place = f" of {where}" if where else ""
    if len(suffix_hits) > 1:
        raise P4InfoLookupError(f"{kind} name {name!r}{place} is ambiguous: "
                                f"{', '.join(sorted(_pre(o).name for o in suffix_hits))}")
    names = sorted(_pre(o).name for o in objects)
    raise P4InfoLookupError(f"no {kind} {name!r}{place} in the P4Info; known: "
                            f"{', '.join(names) or 'none'}")


class P4Info:
    """Name -> id / bit width lookups over a P4Info message, and builders of P4Runtime
    entities from names and plain Python values."""

    def __init__(self, proto: p4info_pb2.P4Info):
        self.proto = proto

    @classmethod
    def from_text(cls, text: str) -> P4Info:
        msg = p4info_pb2.P4Info()
        text_format.Parse(text, msg)
        return cls(msg)

    @classmethod
    def from_file(cls, path: str | Path) -> P4Info:
        path = Path(path)
        if path.suffix == ".bin":
            msg = p4info_pb2.P4Info()
            msg.ParseFromString(path.read_bytes())
            return cls(msg)
        return cls.from_text(path.read_text())

    # -- lookups ---------------------------------------------------------------------------
    def table(self, name: str) -> p4info_pb2.Table:
        return _lookup("table", name, self.proto.tables)

    def action(self, name: str) -> p4info_pb2.Action:
        return _lookup("action", name, self.proto.actions)

    def counter(self, name: str) -> p4info_pb2.Counter:
        return _lookup("counter", name, self.proto.counters)

    def direct_counter(self, name: str) -> p4info_pb2.DirectCounter:
        return _lookup("direct counter", name, self.proto.direct_counters)

    def table_id(self, name: str) -> int:
        return self.table(name).preamble.id

    def action_id(self, name: str) -> int:
        return self.action(name).preamble.id

    def counter_id(self, name: str) -> int:
        return self.counter(name).preamble.id

    def match_field(self, table: str, field: str) -> p4info_pb2.MatchField:
        t = self.table(table)
        return _lookup("match field", field, t.match_fields, where=f"table {t.preamble.name}")

    def action_param(self, action: str, param: str) -> p4info_pb2.Action.Param:
        a = self.action(action)
        return _lookup("parameter", param, a.params, where=f"action {a.preamble.name}")

    def names(self, kind: str) -> list[str]:
        return sorted(o.preamble.name for o in getattr(self.proto, kind))

    def _check_action_of_table(self, table: p4info_pb2.Table, action: p4info_pb2.Action) -> None:
        allowed = {ref.id for ref in table.action_refs}
        if action.preamble.id not in allowed:
            names = sorted(a.preamble.name for a in self.proto.actions
                           if a.preamble.id in allowed)
            raise P4InfoLookupError(f"action {action.preamble.name} is not an action of table "
                                    f"{table.preamble.name}; allowed: {', '.join(names)}")

    # -- builders ---------------------------------------------------------------------------
    def field_match(self, table: str, field: str, spec: Any) -> p4runtime_pb2.FieldMatch | None:
        """One FieldMatch, or None when the spec is a don't-care (LPM /0, ternary mask 0,
        full range), which P4Runtime requires to be omitted.

        exact / optional: value. lpm: "10.0.0.0/24", (value, prefix_len) or value (full
        length). ternary: (value, mask) or value (all ones). range: (low, high)."""
        mf = self.match_field(table, field)
        width = mf.bitwidth
        fm = p4runtime_pb2.FieldMatch(field_id=mf.id)
        what = f"{self.table(table).preamble.name}.{mf.name}"
        kind = mf.match_type
        MF = p4info_pb2.MatchField
        if kind == MF.EXACT:
            fm.exact.value = encode_value(spec, width, what)
        elif kind == MF.OPTIONAL:
            fm.optional.value = encode_value(spec, width, what)
        elif kind == MF.LPM:
            if isinstance(spec, str) and "/" in spec:
                addr, plen_text = spec.split("/", 1)
                value, plen = parse_value(addr), int(plen_text)
            elif isinstance(spec, tuple):
                value, plen = parse_value(spec[0]), int(spec[1])
            else:
                value, plen = parse_value(spec), width
            if not 0 <= plen <= width:
                raise EncodingError(f"{what}: prefix length {plen} outside 0..{width}")
            if plen == 0:
                return None
            mask = ((1 << plen) - 1) << (width - plen)
            fm.lpm.value = encode_value(value & mask, width, what)
            fm.lpm.prefix_len = plen
        elif kind == MF.TERNARY:
            if isinstance(spec, tuple):
                value, mask = parse_value(spec[0]), parse_value(spec[1])
            else:
                value, mask = parse_value(spec), (1 << width) - 1
            if mask == 0:
                return None
            fm.ternary.value = encode_value(value & mask, width, what)
            fm.ternary.mask = encode_value(mask, width, what + " mask")
        elif kind == MF.RANGE:
            low, high = (parse_value(v) for v in spec)
            if low > high:
                raise EncodingError(f"{what}: range low {low} > high {high}")
            if low == 0 and high == (1 << width) - 1:
                return None
            fm.range.low = encode_value(low, width, what)
            fm.range.high = encode_value(high, width, what)
        else:
            raise EncodingError(f"{what}: unsupported match type {kind}")
        return fm

    def action_message(self, action: str, params: Mapping[str, Any] | None = None
                       ) -> p4runtime_pb2.Action:
        a = self.action(action)
        params = dict(params or {})
        msg = p4runtime_pb2.Action(action_id=a.preamble.id)
        given = set()
        for p in a.params:
            key = next((k for k in params if k == p.name), None)
            if key is None:
                raise EncodingError(f"action {a.preamble.name} needs parameter {p.name!r} "
                                    f"({p.bitwidth} bits); given: {', '.join(params) or 'none'}")
            given.add(key)
            msg.params.add(param_id=p.id, value=encode_value(
                params[key], p.bitwidth, f"{a.preamble.name}({p.name})"))
        extra = set(params) - given
        if extra:
            raise EncodingError(f"action {a.preamble.name} has no parameter(s) "
                                f"{', '.join(sorted(extra))}; it takes "
                                f"{', '.join(p.name for p in a.params) or 'none'}")
        return msg

    def table_entry(self, table: str, match: Mapping[str, Any] | None = None,
                    action: str | None = None, params: Mapping[str, Any] | None = None,
                    priority: int | None = None, default: bool = False
                    ) -> p4runtime_pb2.TableEntry:
        t = self.table(table)
        entry = p4runtime_pb2.TableEntry(table_id=t.preamble.id)
        if default:
            if match:
                raise EncodingError(f"default entry of {t.preamble.name} takes no match")
            entry.is_default_action = True
        for field, spec in (match or {}).items():
            fm = self.field_match(table, field, spec)
            if fm is not None:
                entry.match.append(fm)
        needs_priority = any(mf.match_type in (p4info_pb2.MatchField.TERNARY,
                                               p4info_pb2.MatchField.RANGE,
                                               p4info_pb2.MatchField.OPTIONAL)
                             for mf in t.match_fields)
        if needs_priority and not default:
            if priority is None or priority <= 0:
                raise EncodingError(f"table {t.preamble.name} has ternary/range/optional "
                                    "fields: give a priority >= 1 (higher wins)")
            entry.priority = priority
        elif priority:
            raise EncodingError(f"table {t.preamble.name} takes no priority")
        if action is not None:
            a = self.action(action)
            self._check_action_of_table(t, a)
            entry.action.action.CopyFrom(self.action_message(action, params))
        return entry

    def counter_entry(self, name: str, index: int | None = None) -> p4runtime_pb2.CounterEntry:
        c = self.counter(name)
        entry = p4runtime_pb2.CounterEntry(counter_id=c.preamble.id)
        if index is not None:
            if not 0 <= index < c.size:
                raise EncodingError(f"counter {c.preamble.name}: index {index} outside "
                                    f"0..{c.size - 1}")
            entry.index.index = index
        return entry


def multicast_group_entry(group_id: int, ports: Iterable[int | tuple[int, int]]
                          ) -> p4runtime_pb2.PacketReplicationEngineEntry:
    """A PRE multicast group; `ports` are egress ports or (port, instance) pairs."""
    if group_id <= 0:
        raise EncodingError("multicast group id must be >= 1")
    entry = p4runtime_pb2.PacketReplicationEngineEntry()
    group = entry.multicast_group_entry
    group.multicast_group_id = group_id
    for item in ports:
        port, instance = item if isinstance(item, tuple) else (item, 1)
        group.replicas.add(egress_port=port, instance=instance)
    return entry


def clone_session_entry(session_id: int, ports: Iterable[int], packet_length_bytes: int = 0
                        ) -> p4runtime_pb2.PacketReplicationEngineEntry:
    entry = p4runtime_pb2.PacketReplicationEngineEntry()
    sess = entry.clone_session_entry
    sess.session_id = session_id
    sess.packet_length_bytes = packet_length_bytes
    for port in ports:
        sess.replicas.add(egress_port=port, instance=1)
    return entry


# ---------------------------------------------------------------------------------------------
# Errors


def describe_rpc_error(err: grpc.RpcError, operation: str, target: str) -> P4RuntimeError:
    """Turn a grpc.RpcError into a P4RuntimeError with a one-line message."""
    code_obj = err.code() if callable(getattr(err, "code", None)) else None
    code = code_obj.name if code_obj is not None else "UNKNOWN"
    details = (err.details() if callable(getattr(err, "details", None)) else str(err)) or ""
    details = " ".join(details.split())
    update_errors: list[tuple[int, str, str]] = []
    metadata = err.trailing_metadata() if callable(getattr(err, "trailing_metadata", None)) \
        else None
    for key, value in metadata or ():
        if key != "grpc-status-details-bin":
            continue
        try:
            from google.rpc import status_pb2
            status = status_pb2.Status.FromString(value)
        except Exception:  # noqa: BLE001 - malformed details: keep the plain message
            continue
        for i, any_msg in enumerate(status.details):
            p4err = p4runtime_pb2.Error()
            if any_msg.Unpack(p4err) and p4err.canonical_code != 0:
                update_errors.append((i, _CODE_NAMES.get(p4err.canonical_code,
                                                         str(p4err.canonical_code)),
                                      " ".join(p4err.message.split())))
    parts = [f"P4Runtime {operation} on {target} failed: {code}"]
    if details:
        parts[0] += f": {details}"
    if update_errors:
        shown = "; ".join(f"update #{i} {c}: {m}" if m else f"update #{i} {c}"
                          for i, c, m in update_errors[:3])
        more = f" (+{len(update_errors) - 3} more)" if len(update_errors) > 3 else ""
        parts.append(shown + more)
    if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") and operation in ("connect", "arbitration"):
        parts.append("is simple_switch_grpc running and listening there?")
    return P4RuntimeError(" -- ".join(parts), code=code, details=details,
                          update_errors=update_errors)


# ---------------------------------------------------------------------------------------------
# Connection


@dataclass(frozen=True)
class CounterValue:
    packets: int
    bytes: int


_UPDATE_TYPES = {"insert": p4runtime_pb2.Update.INSERT, "modify": p4runtime_pb2.Update.MODIFY,
                 "delete": p4runtime_pb2.Update.DELETE}


def _entity(obj: Any) -> p4runtime_pb2.Entity:
    if isinstance(obj, p4runtime_pb2.Entity):
        return obj
    if isinstance(obj, p4runtime_pb2.TableEntry):
        return p4runtime_pb2.Entity(table_entry=obj)
    if isinstance(obj, p4runtime_pb2.PacketReplicationEngineEntry):
        return p4runtime_pb2.Entity(packet_replication_engine_entry=obj)
    if isinstance(obj, p4runtime_pb2.CounterEntry):
        return p4runtime_pb2.Entity(counter_entry=obj)
    if isinstance(obj, p4runtime_pb2.DirectCounterEntry):
        return p4runtime_pb2.Entity(direct_counter_entry=obj)
    raise TypeError(f"not a P4Runtime entity: {type(obj).__name__}")


class SwitchConnection:
    """A P4Runtime client for one device: its own channel, stream and arbitration."""

    def __init__(self, address: str, device_id: int = 0, *, name: str | None = None,
                 election_id: int = 1, timeout: float = 10.0, p4info: P4Info | None = None):
        self.address = address
        self.device_id = device_id
        self.name = name or address
        self.election_id = election_id
        self.timeout = timeout
        self.p4info = p4info
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._requests: queue.Queue = queue.Queue()
        self._arbitration: queue.Queue = queue.Queue()
        self.packet_ins: queue.Queue = queue.Queue(maxsize=10000)
        self._stream = None
        self._reader: threading.Thread | None = None
        self._stream_error: grpc.RpcError | None = None
        self._raw_read = None

    @property
    def target(self) -> str:
        return f"{self.name} (device {self.device_id} at {self.address})"

    # -- lifecycle ---------------------------------------------------------------------------
    def connect(self, timeout: float | None = None) -> SwitchConnection:
        timeout = self.timeout if timeout is None else timeout
        self._channel = grpc.insecure_channel(self.address, options=[
            ("grpc.max_receive_message_length", 64 << 20),
            ("grpc.max_send_message_length", 64 << 20)])
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            self.close()
            raise P4RuntimeError(f"P4Runtime connect on {self.target} failed: no gRPC server "
                                 f"answered within {timeout:.0f}s -- is simple_switch_grpc "
                                 "running and listening there?", code="UNAVAILABLE") from None
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        # Same RPC with bytes in and out, for CounterReadPlan (no protobuf on the hot path).
        self._raw_read = self._channel.unary_stream("/p4.v1.P4Runtime/Read")
        self._stream = self._stub.StreamChannel(self._request_iter())
        self._reader = threading.Thread(target=self._read_stream, daemon=True,
                                        name=f"p4rt-stream-{self.name}")
        self._reader.start()
        try:
            self._arbitrate(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> SwitchConnection:
        return self.connect() if self._channel is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._requests.put(None)
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None
        if self._reader is not None:
            self._reader.join(timeout=2)
            self._reader = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        self._stub = None
        self._raw_read = None

    def _request_iter(self):
        while True:
            item = self._requests.get()
            if item is None:
                return
            yield item

    def _read_stream(self) -> None:
        try:
            for msg in self._stream:
                kind = msg.WhichOneof("update")
                if kind == "arbitration":
                    self._arbitration.put(msg.arbitration)
                elif kind == "packet":
                    try:
                        self.packet_ins.put_nowait(msg.packet)
                    except queue.Full:
                        pass
                elif kind == "error":
                    self._arbitration.put(msg.error)
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.CANCELLED:
                self._stream_error = err
                self._arbitration.put(err)

    def _arbitrate(self, timeout: float) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = 0
        req.arbitration.election_id.low = self.election_id
        self._requests.put(req)
        try:
            reply = self._arbitration.get(timeout=timeout)
        except queue.Empty:
            raise P4RuntimeError(f"P4Runtime arbitration on {self.target} failed: no answer "
                                 f"within {timeout:.0f}s", code="DEADLINE_EXCEEDED") from None
        if isinstance(reply, grpc.RpcError):
            raise describe_rpc_error(reply, "arbitration", self.target)
        if isinstance(reply, p4runtime_pb2.StreamError):
            raise P4RuntimeError(f"P4Runtime arbitration on {self.target} failed: "
                                 f"{_CODE_NAMES.get(reply.canonical_code)}: {reply.message}",
                                 code=_CODE_NAMES.get(reply.canonical_code))
        if reply.status.code != 0:
            raise NotPrimaryError(
                f"P4Runtime arbitration on {self.target}: not primary "
                f"({_CODE_NAMES.get(reply.status.code, reply.status.code)}: "
                f"{reply.status.message}); another controller holds election id "
                f"{reply.election_id.low}", code=_CODE_NAMES.get(reply.status.code))

    def _stub_or_fail(self) -> p4runtime_pb2_grpc.P4RuntimeStub:
        if self._stub is None:
            raise P4RuntimeError(f"P4Runtime on {self.target}: not connected")
        return self._stub

    def _info(self) -> P4Info:
        if self.p4info is None:
            raise P4RuntimeError(f"P4Runtime on {self.target}: no P4Info (call set_pipeline "
                                 "or pass p4info=)")
        return self.p4info

    # -- pipeline ----------------------------------------------------------------------------
    def set_pipeline(self, p4info: P4Info, device_config: bytes, cookie: int = 0) -> None:
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.election_id.low = self.election_id
        req.config.p4info.CopyFrom(p4info.proto)
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = cookie
        try:
            self._stub_or_fail().SetForwardingPipelineConfig(req, timeout=60)
        except grpc.RpcError as err:
            raise describe_rpc_error(err, "SetForwardingPipelineConfig", self.target) from None
        self.p4info = p4info

    # -- writes ------------------------------------------------------------------------------
    def write(self, entities: Iterable[Any], op: str = "insert") -> None:
        """Write entities (TableEntry, PacketReplicationEngineEntry, ... or Entity) in one
        WriteRequest."""
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        req.election_id.low = self.election_id
        try:
            utype = _UPDATE_TYPES[op]
        except KeyError:
            raise ValueError(f"op must be one of {sorted(_UPDATE_TYPES)}") from None
        for ent in entities:
            req.updates.add(type=utype, entity=_entity(ent))
        if not req.updates:
            return
        try:
            self._stub_or_fail().Write(req, timeout=self.timeout)
        except grpc.RpcError as err:
            raise describe_rpc_error(err, f"Write({op})", self.target) from None

    def insert_table_entry(self, table: str, match: Mapping[str, Any] | None, action: str,
                           params: Mapping[str, Any] | None = None,
                           priority: int | None = None) -> None:
        self.write([self._info().table_entry(table, match, action, params, priority)])

    def modify_table_entry(self, table: str, match: Mapping[str, Any] | None, action: str,
                           params: Mapping[str, Any] | None = None,
                           priority: int | None = None) -> None:
        self.write([self._info().table_entry(table, match, action, params, priority)], "modify")

    def delete_table_entry(self, table: str, match: Mapping[str, Any] | None,
                           priority: int | None = None) -> None:
        self.write([self._info().table_entry(table, match, None, None, priority)], "delete")

    def set_default_action(self, table: str, action: str,
                           params: Mapping[str, Any] | None = None) -> None:
        self.write([self._info().table_entry(table, None, action, params, default=True)],
                   "modify")

    def write_multicast_group(self, group_id: int, ports: Iterable[int | tuple[int, int]],
                              op: str = "insert") -> None:
        self.write([multicast_group_entry(group_id, ports)], op)

    def delete_multicast_group(self, group_id: int) -> None:
        entry = p4runtime_pb2.PacketReplicationEngineEntry()
        entry.multicast_group_entry.multicast_group_id = group_id
        self.write([entry], "delete")

    def write_clone_session(self, session_id: int, ports: Iterable[int],
                            packet_length_bytes: int = 0, op: str = "insert") -> None:
        self.write([clone_session_entry(session_id, ports, packet_length_bytes)], op)

    # -- reads -------------------------------------------------------------------------------
    def read(self, entities: Iterable[Any]) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        for ent in entities:
            req.entities.append(_entity(ent))
        out: list[p4runtime_pb2.Entity] = []
        try:
            for resp in self._stub_or_fail().Read(req, timeout=self.timeout):
                out.extend(resp.entities)
        except grpc.RpcError as err:
            raise describe_rpc_error(err, "Read", self.target) from None
        return out

    def read_counter(self, name: str, indices: Iterable[int] | None = None
                     ) -> dict[int, CounterValue]:
        """Counter cells by index; all cells when `indices` is None."""
        info = self._info()
        if indices is None:
            entries = [info.counter_entry(name)]
        else:
            entries = [info.counter_entry(name, i) for i in indices]
        return {e.counter_entry.index.index: CounterValue(e.counter_entry.data.packet_count,
                                                          e.counter_entry.data.byte_count)
                for e in self.read(entries)}

    def read_counters(self, wanted: Mapping[str, Iterable[int] | None]
                      ) -> dict[str, dict[int, CounterValue]]:
        """Several counters in one Read RPC: {name: indices or None} -> {name: {index: value}}.
        The keys of the answer are the names as given."""
        info = self._info()
        by_id: dict[int, str] = {}
        entries = []
        for name, indices in wanted.items():
            by_id[info.counter_id(name)] = name
            if indices is None:
                entries.append(info.counter_entry(name))
            else:
                entries.extend(info.counter_entry(name, i) for i in indices)
        result: dict[str, dict[int, CounterValue]] = {name: {} for name in wanted}
        for e in self.read(entries):
            ce = e.counter_entry
            result[by_id[ce.counter_id]][ce.index.index] = CounterValue(ce.data.packet_count,
                                                                        ce.data.byte_count)
        return result

    def counter_read_plan(self, wanted: Mapping[str, Iterable[int] | None]) -> CounterReadPlan:
        return CounterReadPlan(self, wanted)

    def read_raw(self, request: bytes) -> list[bytes]:
        """Read with a serialized ReadRequest; the serialized ReadResponses."""
        if self._channel is None:
            raise P4RuntimeError(f"P4Runtime on {self.target}: not connected")
        try:
            return list(self._raw_read(request, timeout=self.timeout))
        except grpc.RpcError as err:
            raise describe_rpc_error(err, "Read", self.target) from None

    def read_table(self, table: str) -> list[p4runtime_pb2.TableEntry]:
        entry = p4runtime_pb2.TableEntry(table_id=self._info().table_id(table))
        return [e.table_entry for e in self.read([entry])]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes, pos: int, end: int):
    """(field number, wire type, value) of a protobuf message in buf[pos:end]; value is an int
    for varints and fixed-width fields, a (start, end) slice for length-delimited ones."""
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wtype = key >> 3, key & 7
        if wtype == 0:
            value, pos = _varint(buf, pos)
        elif wtype == 2:
            length, pos = _varint(buf, pos)
            value = (pos, pos + length)
            pos += length
        elif wtype == 1:
            value = int.from_bytes(buf[pos:pos + 8], "little")
            pos += 8
        elif wtype == 5:
            value = int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        else:
            raise P4RuntimeError(f"cannot decode protobuf wire type {wtype}")
        yield number, wtype, value


def decode_counter_read_response(buf: bytes) -> list[tuple[int, int, int, int]]:
    """(counter_id, index, packets, bytes) of every CounterEntry in a serialized ReadResponse.
    A few times faster than protobuf's pure-Python parser, which is what runs on Python 3.11+
    with the protobuf 3.20 the p4runtime bindings need."""
    out = []
    for num, wt, val in _fields(buf, 0, len(buf)):
        if num != 1 or wt != 2:          # ReadResponse.entities
            continue
        for enum_, ewt, ev in _fields(buf, *val):
            if enum_ != 7 or ewt != 2:   # Entity.counter_entry
                continue
            counter_id = index = packets = nbytes = 0
            for cn, cwt, cv in _fields(buf, *ev):
                if cn == 1 and cwt == 0:
                    counter_id = cv
                elif cn == 2 and cwt == 2:
                    for n, w, v in _fields(buf, *cv):
                        if n == 1 and w == 0:
                            index = v
                elif cn == 3 and cwt == 2:
                    for n, w, v in _fields(buf, *cv):
                        if n == 1 and w == 0:
                            nbytes = v
                        elif n == 2 and w == 0:
                            packets = v
            out.append((counter_id, index, packets, nbytes))
    return out


class CounterReadPlan:
    """The same counter cells read again and again (telemetry sampling): the ReadRequest is
    serialized once, the answer decoded by `decode_counter_read_response`. Several times less
    client CPU per sample than read_counters, which matters when the collector shares the CPU
    with BMv2."""

    def __init__(self, conn: SwitchConnection, wanted: Mapping[str, Iterable[int] | None]):
        info = conn._info()
        self.conn = conn
        self.names = list(wanted)
        self._by_id: dict[int, str] = {}
        req = p4runtime_pb2.ReadRequest(device_id=conn.device_id)
        for name, indices in wanted.items():
            self._by_id[info.counter_id(name)] = name
            if indices is None:
                req.entities.append(_entity(info.counter_entry(name)))
            else:
                for i in indices:
                    req.entities.append(_entity(info.counter_entry(name, i)))
        self.request = req.SerializeToString()

    def read(self) -> dict[str, dict[int, tuple[int, int]]]:
        """{counter name: {index: (packets, bytes)}}"""
        result: dict[str, dict[int, tuple[int, int]]] = {name: {} for name in self.names}
        for chunk in self.conn.read_raw(self.request):
            for cid, index, packets, nbytes in decode_counter_read_response(chunk):
                name = self._by_id.get(cid)
                if name is not None:
                    result[name][index] = (packets, nbytes)
        return result


class P4RuntimeController:
    """Connections to several switches from one process, keyed by switch name."""

    def __init__(self):
        self.switches: dict[str, SwitchConnection] = {}

    def connect(self, name: str, address: str, device_id: int, *, timeout: float = 10.0,
                election_id: int = 1) -> SwitchConnection:
        if name in self.switches:
            raise P4RuntimeError(f"P4Runtime: already connected to {name}")
        conn = SwitchConnection(address, device_id, name=name, election_id=election_id,
                                timeout=timeout).connect()
        self.switches[name] = conn
        return conn

    def __getitem__(self, name: str) -> SwitchConnection:
        return self.switches[name]

    def close(self) -> None:
        for conn in self.switches.values():
            conn.close()
        self.switches.clear()

    def __enter__(self) -> P4RuntimeController:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

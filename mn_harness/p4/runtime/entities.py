"""P4Runtime entities built from P4Info names and plain Python values.

A table entry is written as the harness thinks of it - table "ipv4_lpm", match
{"hdr.ipv4.dstAddr": "10.0.1.0/24"}, action "forward" with {"port": 2, ...} - and turned here into
the protobuf message the server expects, with the checks the server would otherwise make later
and less readably: the action belongs to the table, every parameter is given and fits its width,
ternary/range/optional tables get a priority, and don't-care matches (LPM /0, ternary mask 0,
full range) are left out as P4Runtime requires. Needs no switch; the Write and Read requests that
carry these entities are SwitchConnection's (connection.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from mn_harness.p4.errors import EncodingError

from .p4info import P4Info
from .values import encode_value, parse_value

UPDATE_TYPES = {"insert": p4runtime_pb2.Update.INSERT, "modify": p4runtime_pb2.Update.MODIFY,
                "delete": p4runtime_pb2.Update.DELETE}

_NEEDS_PRIORITY = (p4info_pb2.MatchField.TERNARY, p4info_pb2.MatchField.RANGE,
                   p4info_pb2.MatchField.OPTIONAL)


def field_match(info: P4Info, table: str, field: str, spec: Any) -> p4runtime_pb2.FieldMatch | None:
    """One FieldMatch, or None when the spec is a don't-care (LPM /0, ternary mask 0,
    full range), which P4Runtime requires to be omitted.

    exact / optional: value. lpm: "10.0.0.0/24", (value, prefix_len) or value (full
    length). ternary: (value, mask) or value (all ones). range: (low, high)."""
    mf = info.match_field(table, field)
    width = mf.bitwidth
    fm = p4runtime_pb2.FieldMatch(field_id=mf.id)
    what = f"{info.table(table).preamble.name}.{mf.name}"
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


def action_message(info: P4Info, action: str, params: Mapping[str, Any] | None = None
                   ) -> p4runtime_pb2.Action:
    a = info.action(action)
    params = dict(params or {})
    msg = p4runtime_pb2.Action(action_id=a.preamble.id)
    for p in a.params:
        if p.name not in params:
            raise EncodingError(f"action {a.preamble.name} needs parameter {p.name!r} "
                                f"({p.bitwidth} bits); given: {', '.join(params) or 'none'}")
        msg.params.add(param_id=p.id, value=encode_value(
            params[p.name], p.bitwidth, f"{a.preamble.name}({p.name})"))
    extra = set(params) - {p.name for p in a.params}
    if extra:
        raise EncodingError(f"action {a.preamble.name} has no parameter(s) "
                            f"{', '.join(sorted(extra))}; it takes "
                            f"{', '.join(p.name for p in a.params) or 'none'}")
    return msg


def table_entry(info: P4Info, table: str, match: Mapping[str, Any] | None = None,
                action: str | None = None, params: Mapping[str, Any] | None = None,
                priority: int | None = None, default: bool = False) -> p4runtime_pb2.TableEntry:
    """A TableEntry; `default=True` makes it the table's default action (no match)."""
    t = info.table(table)
    entry = p4runtime_pb2.TableEntry(table_id=t.preamble.id)
    if default:
        if match:
            raise EncodingError(f"default entry of {t.preamble.name} takes no match")
        entry.is_default_action = True
    for field, spec in (match or {}).items():
        fm = field_match(info, table, field, spec)
        if fm is not None:
            entry.match.append(fm)
    needs_priority = any(mf.match_type in _NEEDS_PRIORITY for mf in t.match_fields)
    if needs_priority and not default:
        if priority is None or priority <= 0:
            raise EncodingError(f"table {t.preamble.name} has ternary/range/optional "
                                "fields: give a priority >= 1 (higher wins)")
        entry.priority = priority
    elif priority:
        raise EncodingError(f"table {t.preamble.name} takes no priority")
    if action is not None:
        info.table_action(table, action)
        entry.action.action.CopyFrom(action_message(info, action, params))
    return entry


def counter_entry(info: P4Info, name: str, index: int | None = None) -> p4runtime_pb2.CounterEntry:
    """A CounterEntry for one cell, or for every cell of the counter (index None)."""
    c = info.counter(name)
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


def as_entity(obj: Any) -> p4runtime_pb2.Entity:
    """Wrap a TableEntry, PacketReplicationEngineEntry, CounterEntry or DirectCounterEntry in
    the Entity a Write update or Read request carries (an Entity is returned as is)."""
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

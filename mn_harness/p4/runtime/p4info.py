"""The P4Info of a compiled program, indexed by name.

The harness names tables, actions, counters, match fields and parameters as the P4 source does
("ipv4_lpm", "hdr.ipv4.dstAddr", "port"), never by the numeric ids p4c assigns, which change when
the program does. Every lookup accepts the full name, the alias, or a unique dotted suffix, and a
miss says what does exist, so a renamed table fails with a readable line. Needs no switch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from mn_harness.p4.errors import P4InfoLookupError


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
    """Name -> P4Info object / id / bit width lookups over a P4Info message. The entity
    builders (mn_harness.p4.runtime.entities) take one of these."""

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

    def table(self, name: str) -> p4info_pb2.Table:
        return _lookup("table", name, self.proto.tables)

    def action(self, name: str) -> p4info_pb2.Action:
        return _lookup("action", name, self.proto.actions)

    def counter(self, name: str) -> p4info_pb2.Counter:
        return _lookup("counter", name, self.proto.counters)

    def register(self, name: str) -> p4info_pb2.Register:
        return _lookup("register", name, self.proto.registers)

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

    def table_action(self, table: str, action: str) -> p4info_pb2.Action:
        """`action`, checked to be one of `table`'s actions (the server would refuse it)."""
        t, a = self.table(table), self.action(action)
        allowed = {ref.id for ref in t.action_refs}
        if a.preamble.id not in allowed:
            names = sorted(x.preamble.name for x in self.proto.actions
                           if x.preamble.id in allowed)
            raise P4InfoLookupError(f"action {a.preamble.name} is not an action of table "
                                    f"{t.preamble.name}; allowed: {', '.join(names)}")
        return a

    def names(self, kind: str) -> list[str]:
        return sorted(o.preamble.name for o in getattr(self.proto, kind))

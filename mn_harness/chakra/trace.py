"""Read and write MLCommons Chakra execution traces (schema et_def.proto, proto3, package
ChakraProtoMsg), with our own decoder: no Chakra package is on PyPI.

A trace file is a sequence of length-prefixed messages (each a varint byte count, then the
message): one GlobalMetadata (version = 1, attr = 2), then Nodes, optionally gzipped. The Node
fields used here: id = 1, name = 2, type = 3, ctrl_deps = 4, data_deps = 5 (repeated uint64),
start_time_micros = 6, duration_micros = 7, attr = 10 (AttributeProto: name = 1, then one value:
double 3, float 5, int32 7, int64 9, uint32 11, uint64 13, sint32 15, sint64 17, fixed32 19,
fixed64 21, sfixed32 23, sfixed64 25, bool 27, string 29; the list variants are kept as raw
bytes). NodeType: COMP_NODE 4, COMM_SEND_NODE 5, COMM_RECV_NODE 6, COMM_COLL_NODE 7.
CollectiveCommType (attribute comm_type, comm_size in bytes): ALL_REDUCE 0, REDUCE 1,
ALL_GATHER 2, GATHER 3, SCATTER 4, BROADCAST 5, ALL_TO_ALL 6, REDUCE_SCATTER 7,
REDUCE_SCATTER_BLOCK 8, BARRIER 9."""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path

from mn_harness.chakra import protobuf as pb

METADATA_NODE, MEM_LOAD_NODE, MEM_STORE_NODE = 1, 2, 3
COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 4, 5, 6, 7
ALL_REDUCE, REDUCE, ALL_GATHER, GATHER, SCATTER, BROADCAST, ALL_TO_ALL, REDUCE_SCATTER = range(8)
MAX_TRACE_BYTES = 64 * 1024 * 1024

_INT_VARINT = {7, 9, 11, 13, 27}
_INT_ZIGZAG = {15, 17}
_FIXED = {3: "d", 5: "f", 19: "I", 21: "Q", 23: "i", 25: "q"}


@dataclass(frozen=True)
class Node:
    id: int
    name: str
    type: int
    ctrl_deps: tuple[int, ...] = ()
    data_deps: tuple[int, ...] = ()
    duration_micros: int = 0
    attrs: dict[str, object] = field(default_factory=dict)

    @property
    def deps(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(self.ctrl_deps + self.data_deps))


@dataclass(frozen=True)
class Trace:
    version: str
    nodes: tuple[Node, ...]


def _attr(raw: bytes) -> tuple[str, object]:
    fields = pb.decode(raw)
    name = fields.get(1, [(pb.LEN, b"")])[0][1]
    assert isinstance(name, bytes)
    value: object = None
    for number, values in fields.items():
        wire, v = values[-1]
        if number in _INT_VARINT:
            value = pb.signed64(int(v)) if number in (7, 9) else int(v)  # type: ignore[call-overload]
        elif number in _INT_ZIGZAG:
            value = pb.zigzag_decode(int(v))  # type: ignore[call-overload]
        elif number in _FIXED and isinstance(v, bytes):
            value = pb.fixed(wire, v, _FIXED[number])
        elif number == 29 and isinstance(v, bytes):
            value = v.decode("utf-8", "replace")
        elif number > 2:
            value = v
    return name.decode("utf-8", "replace"), value


def _str(fields: pb.Fields, number: int) -> str:
    raw = fields.get(number, [(pb.LEN, b"")])[-1][1]
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else ""


def _int(fields: pb.Fields, number: int) -> int:
    wire, raw = fields.get(number, [(pb.VARINT, 0)])[-1]
    if wire != pb.VARINT:
        raise pb.DecodeError(f"field {number}: expected a varint")
    return int(raw)  # type: ignore[call-overload]


def _node(raw: bytes) -> Node:
    f = pb.decode(raw)
    ctrl = [v for wire, raw_v in f.get(4, []) for v in pb.packed_varints(wire, raw_v)]
    data = [v for wire, raw_v in f.get(5, []) for v in pb.packed_varints(wire, raw_v)]
    attrs = dict(_attr(v) for _, v in f.get(10, []) if isinstance(v, bytes))
    return Node(_int(f, 1), _str(f, 2), _int(f, 3), tuple(ctrl), tuple(data), _int(f, 7), attrs)


def messages(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        length, pos = pb.read_varint(data, pos)
        if pos + length > len(data):
            raise pb.DecodeError("truncated message")
        out.append(data[pos:pos + length])
        pos += length
    return out


def parse(data: bytes) -> Trace:
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    msgs = messages(data)
    if not msgs:
        raise pb.DecodeError("empty trace")
    meta = pb.decode(msgs[0])
    return Trace(_str(meta, 1), tuple(_node(m) for m in msgs[1:]))


def read(path: Path) -> Trace:
    with open(path, "rb") as f:
        data = f.read(MAX_TRACE_BYTES + 1)
    if len(data) > MAX_TRACE_BYTES:
        raise pb.DecodeError(f"larger than {MAX_TRACE_BYTES // 2**20} MiB")
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return parse(data)


# -- writing (the generator, tests) ------------------------------------------------------------
def encode_attr(name: str, value: int | str | bool) -> bytes:
    body = pb.field_bytes(1, name.encode())
    if isinstance(value, bool):
        body += pb.field_varint(27, int(value))
    elif isinstance(value, int):
        body += pb.field_varint(9, value)  # int64_val
    else:
        body += pb.field_bytes(29, value.encode())
    return body


def encode_node(node: Node) -> bytes:
    body = pb.field_varint(1, node.id) + pb.field_bytes(2, node.name.encode()) + pb.field_varint(3, node.type)
    body += pb.field_packed(4, list(node.ctrl_deps)) + pb.field_packed(5, list(node.data_deps))
    if node.duration_micros:
        body += pb.field_varint(7, node.duration_micros)
    for name, value in node.attrs.items():
        assert isinstance(value, int | str | bool)
        body += pb.field_bytes(10, encode_attr(name, value))
    return body


def encode(trace: Trace) -> bytes:
    msgs = [pb.field_bytes(1, trace.version.encode())] + [encode_node(n) for n in trace.nodes]
    return b"".join(pb.varint(len(m)) + m for m in msgs)

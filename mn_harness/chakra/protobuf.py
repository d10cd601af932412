"""The protobuf wire format, as much of it as Chakra traces need, in the standard library.

A message is a sequence of fields, each a key varint (field number << 3 | wire type) and a
value: 0 varint, 1 fixed 64 bits, 2 length-delimited bytes, 5 fixed 32 bits (groups, 3 and 4,
are not used by Chakra and are refused). Decoding keeps every field's raw values by number;
the schema (mn_harness/chakra/trace.py) says what they mean."""

from __future__ import annotations

import struct
from collections import defaultdict

VARINT, I64, LEN, I32 = 0, 1, 2, 5


class DecodeError(ValueError):
    pass


def read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise DecodeError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes")


def varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 negatives are 10-byte two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


Fields = dict[int, list[tuple[int, object]]]  # field number -> [(wire type, raw value)]


def decode(data: bytes | memoryview) -> Fields:
    fields: Fields = defaultdict(list)
    pos = 0
    while pos < len(data):
        key, pos = read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0")
        value: object
        if wire == VARINT:
            value, pos = read_varint(data, pos)
        elif wire == I64:
            if pos + 8 > len(data):
                raise DecodeError("truncated fixed64")
            value, pos = bytes(data[pos:pos + 8]), pos + 8
        elif wire == LEN:
            length, pos = read_varint(data, pos)
            if pos + length > len(data):
                raise DecodeError("truncated length-delimited field")
            value, pos = bytes(data[pos:pos + length]), pos + length
        elif wire == I32:
            if pos + 4 > len(data):
                raise DecodeError("truncated fixed32")
            value, pos = bytes(data[pos:pos + 4]), pos + 4
        else:
            raise DecodeError(f"unsupported wire type {wire}")
        fields[number].append((wire, value))
    return fields


def packed_varints(wire: int, value: object) -> list[int]:
    """A repeated varint field: one value, or a packed run (proto3's default)."""
    if wire == VARINT:
        return [int(value)]  # type: ignore[call-overload]
    if wire != LEN or not isinstance(value, bytes):
        raise DecodeError("expected varints")
    out, pos = [], 0
    while pos < len(value):
        v, pos = read_varint(value, pos)
        out.append(v)
    return out


def field_varint(number: int, value: int) -> bytes:
    return varint(number << 3 | VARINT) + varint(value)


def field_bytes(number: int, value: bytes) -> bytes:
    return varint(number << 3 | LEN) + varint(len(value)) + value


def field_packed(number: int, values: list[int]) -> bytes:
    return field_bytes(number, b"".join(varint(v) for v in values)) if values else b""


def fixed(wire: int, raw: bytes, fmt: str) -> float | int:
    return struct.unpack("<" + fmt, raw)[0]

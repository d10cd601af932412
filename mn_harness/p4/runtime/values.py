"""Plain Python values <-> P4Runtime bytestrings.

Table entries are written from what the harness has at hand (ints, "10.0.0.1", "00:11:..",
ipaddress objects), so every value goes through `parse_value` first; `encode_value` then gives
the canonical form P4Runtime requires (big-endian, no leading zero bytes) and refuses what does
not fit the field's bit width, so a bad entry fails here with the field's name instead of as a
server-side INVALID_ARGUMENT."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from mn_harness.p4.errors import EncodingError

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

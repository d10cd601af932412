"""Packets in P4 unit tests: what `expect` compares a received frame with, how a mismatch is
told, and packets written as YAML mappings (the declarative test form).

An expectation is one of
    a scapy packet   the frame must be exactly its bytes (checksums and lengths computed as
                     scapy computes them for the packet as written);
    bytes            exactly these bytes;
    Masked(packet, ignore=["IP.tos", "IP.chksum"])
                     the packet's bytes once the ignored fields are taken from the frame;
    a function       called with the frame as a scapy Ether; true when it matches.

Needs scapy (the `test` extra of mn-harness)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from scapy.config import conf
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw


class Masked:
    """`packet`, except the fields in `ignore` ("Layer.field", e.g. "IP.ttl"), whose values
    are whatever the frame has."""

    def __init__(self, packet: Packet, ignore: Iterable[str] = ()):
        self.packet = packet
        self.ignore = tuple(ignore)
        for spec in self.ignore:
            layer, _, name = spec.partition(".")
            found = packet.getlayer(layer)
            if found is None or not name or name not in {f.name for f in found.fields_desc}:
                raise ValueError(f"Masked: {spec!r} is not a field of {packet.summary()!r}")

    def filled(self, frame: Packet) -> Packet | None:
        """The packet with the ignored fields set to the frame's (None: the frame lacks a layer)."""
        expected: Packet = self.packet.copy()
        for spec in self.ignore:
            layer, _, name = spec.partition(".")
            mine, theirs = expected.getlayer(layer), frame.getlayer(layer)
            if theirs is None:
                return None
            setattr(mine, name, getattr(theirs, name))
        return expected

    def matches(self, frame: Packet) -> bool:
        expected = self.filled(frame)
        return expected is not None and bytes(expected) == bytes(frame)


Expectation = Packet | bytes | Masked | Callable[[Packet], bool]


def matches(expected: Expectation, data: bytes) -> bool:
    if isinstance(expected, (bytes, bytearray)):
        return bytes(expected) == data
    if isinstance(expected, Packet):
        return bytes(expected) == data
    frame = Ether(data)
    if isinstance(expected, Masked):
        return expected.matches(frame)
    return bool(expected(frame))


def describe(expected: Expectation) -> str:
    if isinstance(expected, Packet):
        return expected.summary()
    if isinstance(expected, Masked):
        return f"{expected.packet.summary()} (ignoring {', '.join(expected.ignore)})"
    if isinstance(expected, (bytes, bytearray)):
        return f"{len(expected)} bytes {bytes(expected[:16]).hex()}..."
    return getattr(expected, "__name__", repr(expected))


def _built(packet: Packet) -> Packet:
    """The packet as it would be sent: lengths and checksums filled in."""
    return packet.__class__(bytes(packet))


def differences(expected: Expectation, data: bytes, limit: int = 6) -> list[str]:
    """How a frame differs from a packet expectation, field by field ("IP.ttl: 63 expected,
    64 received"); [] for expectations that are functions."""
    got = Ether(data)
    if isinstance(expected, Masked):
        ignored = set(expected.ignore)
        packet = expected.filled(got) or expected.packet
    elif isinstance(expected, Packet):
        ignored, packet = set(), expected
    else:
        return []
    want = _built(packet)
    out = []
    layer: Packet | None = want
    while layer is not None and not isinstance(layer, Raw):
        theirs = got.getlayer(layer.__class__)
        if theirs is None:
            out.append(f"no {layer.__class__.__name__} layer received")
            break
        for f in layer.fields_desc:
            key = f"{layer.__class__.__name__}.{f.name}"
            a, b = layer.getfieldval(f.name), theirs.getfieldval(f.name)
            if key not in ignored and a != b:
                out.append(f"{key}: {f.i2repr(layer, a)} expected, {f.i2repr(theirs, b)} received")
        payload = layer.payload
        layer = payload if isinstance(payload, Packet) and payload.__class__.__name__ != "NoPayload" else None
    if not out and bytes(want) != data:
        out.append(f"same fields, different bytes ({len(bytes(want))} expected, {len(data)} received)")
    return out[:limit]


def layer_class(name: str) -> type[Packet]:
    """A scapy layer class by name (Ether, IP, UDP, TCP, ARP, Raw, ...)."""
    for cls in conf.layers:
        if cls.__name__ == name:
            return cls
    raise ValueError(f"no scapy layer {name!r} (e.g. Ether, ARP, IP, TCP, UDP, ICMP, Raw)")


def from_mapping(spec: Mapping[str, Any], resolve: Callable[[Any], Any] = lambda v: v, where: str = "packet"
                 ) -> Packet:
    """A packet from a YAML mapping of layers in order, each with its fields:

        {Ether: {src: h1.mac, dst: h1.switch_mac}, IP: {dst: h2.ip, ttl: 64}, UDP: {dport: 9},
         payload: 100}

    `payload`: a size in bytes (that many "x"), or text. `resolve` turns a symbolic value
    (a host's address) into a real one. ValueError naming `where` for anything else."""
    if not isinstance(spec, Mapping) or not spec:
        raise ValueError(f"{where}: expected a mapping of layers, e.g. {{Ether: {{}}, IP: {{dst: h2.ip}}}}")
    packet: Packet | None = None
    for name, fields in spec.items():
        if name == "payload":
            layer: Packet = Raw(b"x" * fields if isinstance(fields, int) else str(fields).encode())
        else:
            try:
                cls = layer_class(str(name))
            except ValueError as exc:
                raise ValueError(f"{where}.{name}: {exc}") from None
            if fields is not None and not isinstance(fields, Mapping):
                raise ValueError(f"{where}.{name}: expected a mapping of fields, got {fields!r}")
            known = {f.name for f in cls.fields_desc}
            for key in fields or {}:
                if key not in known:
                    raise ValueError(f"{where}.{name}.{key}: not a field of {name} "
                                     f"({', '.join(sorted(known))})")
            layer = cls(**{k: resolve(v) for k, v in (fields or {}).items()})
        packet = layer if packet is None else packet / layer
    assert packet is not None
    return packet

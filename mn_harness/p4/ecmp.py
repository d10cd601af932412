"""The P4 programs' ECMP choice, computed in Python, so the harness knows every flow's path on
BMv2 before a packet is sent (and `validate` can print it).

`ecmp_group(base, count, seed)` in programs/include/ecn_ingress_decls.p4 takes the CRC-32 of
(srcAddr, dstAddr, protocol, l4_src, l4_dst, seed) — BMv2 concatenates the fields big-endian
into 17 bytes and takes the standard CRC-32 (zlib's) — then mixes in the seed non-linearly,
`mixed = (crc * (seed | 1) mod 2^32) >> 16`, and the member is base + mixed % count. (CRC is
affine: with the seed only inside its input, a new seed XORs one constant into every flow's
CRC, which for two next hops flips all choices at once and keeps who shares with whom.)
Members are installed in the order of the plan's next hops (by name), so member i is
`options[i]`. tests/p4/test_limits.py checks the
field list against the P4 source; tests/p4/test_ecmp_bmv2.py checks the outcome on a real BMv2."""

from __future__ import annotations

import ipaddress
import zlib
from typing import TYPE_CHECKING

from .limits import ECMP_HASH_INPUTS

if TYPE_CHECKING:
    from mn_harness.network.flows import Flow
    from mn_harness.network.plan import Chooser, NetworkPlan


def ecmp_hash(src_ip: str, dst_ip: str, proto: int, sport: int, dport: int, seed: int) -> int:
    """crc32 over the ecmp_group hash inputs, packed as BMv2 packs them."""
    values = (int(ipaddress.IPv4Address(src_ip)), int(ipaddress.IPv4Address(dst_ip)), proto, sport,
              dport, seed)
    data = b"".join(v.to_bytes(bits // 8, "big") for v, (_, bits) in zip(values, ECMP_HASH_INPUTS, strict=True))
    return zlib.crc32(data)


MIX_SHIFT = 16  # the high half of the 32-bit product


def member_index(src_ip: str, dst_ip: str, proto: int, sport: int, dport: int, seed: int,
                 count: int) -> int:
    """Which of a group's `count` members a packet with this 5-tuple takes (0-based)."""
    crc = ecmp_hash(src_ip, dst_ip, proto, sport, dport, seed)
    mixed = ((crc * (seed | 1)) & 0xFFFFFFFF) >> MIX_SHIFT
    return mixed % count


def chooser(plan: NetworkPlan, seed: int) -> Chooser:
    """NetworkPlan.resolve's chooser for BMv2 switches hashing with `seed`."""

    def choose(switch: str, came_from: str, flow: Flow, options: tuple[str, ...]) -> str:
        return options[member_index(plan.host_ip[flow.src], plan.host_ip[flow.dst], flow.proto,
                                    flow.sport, flow.dport, seed, len(options))]

    return choose

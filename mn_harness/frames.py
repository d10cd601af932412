"""A link's frames: its MTU, the Ethernet frame its shaping counts, the TCP payload one carries.

HTB (network/shaping.py) charges each dequeued skb its length at the veth, Ethernet header
included (no `overhead` or `linklayer` option is set; a GSO super-packet counts every segment's
headers), so a link at rate R moves R / 8 bytes of frames per second. A full-size TCP segment
is one frame of `frame_bytes(mtu)` carrying `tcp_payload_bytes(mtu)` bytes of payload (IPv4
and TCP headers without options, plus the 12-byte timestamp option every host negotiates:
net.ipv4.tcp_timestamps is 1 in each namespace). So no job's goodput exceeds
`payload_ceiling(mtu)` of its line rate: 1448 / 1514 = 0.956 at 1500 bytes, 8948 / 9014 =
0.993 at 9000. ACKs sharing the egress of a link that carries data both ways lower it further
(by up to 66 bytes per ACK), which this bound leaves out.

Standard library only, like mn_harness/p4/limits.py whose FRAME_BYTES is the default MTU's frame."""

from __future__ import annotations

from mn_harness.p4.limits import ETHERNET_HEADER_BYTES

DEFAULT_MTU = 1500  # real Ethernet's, and every link's unless the experiment sets `mtu`
MIN_MTU = 576   # the smallest datagram every IPv4 host must accept (RFC 791)
MAX_MTU = 9000  # the usual jumbo frame of data-centre links
IPV4_HEADER_BYTES = 20
TCP_HEADER_BYTES = 20
TCP_TIMESTAMP_OPTION_BYTES = 12  # 10 bytes of option, padded to 12, on every segment


def frame_bytes(mtu: int) -> int:
    """The bytes a full-MTU Ethernet frame takes in an HTB queue and on the link."""
    return mtu + ETHERNET_HEADER_BYTES


def tcp_payload_bytes(mtu: int) -> int:
    """The payload of a full-size TCP segment (its MSS with timestamps on)."""
    return mtu - IPV4_HEADER_BYTES - TCP_HEADER_BYTES - TCP_TIMESTAMP_OPTION_BYTES


def payload_ceiling(mtu: int) -> float:
    """The most goodput a bulk TCP flow gets of a link's rate: payload per full frame."""
    return tcp_payload_bytes(mtu) / frame_bytes(mtu)

"""Read the kernel's per-socket counters (struct tcp_info) without per-packet work in Python.

The throughput timeline samples `tcpi_bytes_acked` every bin: bytes the receiver acknowledged,
i.e. what really crossed the network, unlike bytes handed to send() which can sit in a
multi-megabyte socket buffer for tens of milliseconds."""

from __future__ import annotations

import socket
import struct

# Offsets in struct tcp_info (include/uapi/linux/tcp.h), stable since Linux 4.1.
_SND_CWND = 80
_TOTAL_RETRANS = 100
_BYTES_ACKED = 120
_INFO_LEN = 232


def bytes_acked(sock: socket.socket) -> int:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_LEN)
    return struct.unpack_from("=Q", raw, _BYTES_ACKED)[0]


def snd_cwnd(sock: socket.socket) -> int:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_LEN)
    return struct.unpack_from("=I", raw, _SND_CWND)[0]


def total_retrans(sock: socket.socket) -> int:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_LEN)
    return struct.unpack_from("=I", raw, _TOTAL_RETRANS)[0]

"""Read the kernel's per-socket counters (struct tcp_info) without per-packet work in Python.

The throughput timeline samples `tcpi_bytes_acked` every bin: bytes the receiver acknowledged,
i.e. what really crossed the network, unlike bytes handed to send() which can sit in a
multi-megabyte socket buffer for tens of milliseconds. The offsets are shared with the
sock_diag reader (sockdiag.py), which gets the same struct for sockets the worker does not own."""

from __future__ import annotations

import socket
import struct

# Offsets in struct tcp_info (include/uapi/linux/tcp.h); bytes_sent/bytes_retrans since Linux 4.19.
SND_CWND = 80
TOTAL_RETRANS = 100
BYTES_ACKED = 120
BYTES_SENT = 200
BYTES_RETRANS = 208
_INFO_LEN = 232


def bytes_acked(sock: socket.socket) -> int:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_LEN)
    return struct.unpack_from("=Q", raw, BYTES_ACKED)[0]


def snd_cwnd(sock: socket.socket) -> int:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_LEN)
    return struct.unpack_from("=I", raw, SND_CWND)[0]


def total_retrans(sock: socket.socket) -> int:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_LEN)
    return struct.unpack_from("=I", raw, TOTAL_RETRANS)[0]

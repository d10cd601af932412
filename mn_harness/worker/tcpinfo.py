"""Read the kernel's per-socket counters (struct tcp_info) without per-packet work in Python.

The throughput timeline samples `tcpi_bytes_acked` every bin: bytes the receiver acknowledged,
i.e. what really crossed the network, unlike bytes handed to send() which can sit in a
multi-megabyte socket buffer for tens of milliseconds. With it, in the same read, what limited
the sender (SenderState): its window and smoothed RTT at the bin's end, and the kernel's
"chrono" counters, the time the socket had data to send (busy) and the parts of it limited by
the receiver's window or by the send buffer. A phase that runs below the line rate with an
empty queue is then told apart: a window too small for the RTT (busy, cwnd * MSS / srtt near
the rate seen), or a sender with nothing to send (busy well below the bin: the worker, i.e.
the host's CPU). The offsets are shared with the sock_diag reader (sockdiag.py), which gets
the same struct for sockets the worker does not own."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass

# Offsets in struct tcp_info (include/uapi/linux/tcp.h); the chrono counters since Linux 4.10,
# bytes_sent/bytes_retrans since Linux 4.19.
RTT = 68  # tcpi_rtt: smoothed RTT, microseconds
SND_CWND = 80
TOTAL_RETRANS = 100
BYTES_ACKED = 120
BUSY_TIME = 168  # microseconds with data in flight or queued (includes the two below), jiffy steps
RWND_LIMITED = 176
SNDBUF_LIMITED = 184
BYTES_SENT = 200
BYTES_RETRANS = 208
_INFO_LEN = 232


@dataclass(frozen=True)
class SenderState:
    """One sender's (or several senders' summed) tcp_info fields that a throughput bin keeps:
    cumulative counters (bytes_acked and the chrono times, microseconds) and the window (cwnd,
    segments) and smoothed RTT (srtt_us) as they are now."""

    bytes_acked: int
    cwnd: int = 0
    srtt_us: int = 0
    busy_us: int = 0
    rwnd_limited_us: int = 0
    sndbuf_limited_us: int = 0


def read_u64(raw: bytes, offset: int) -> int:
    return struct.unpack_from("=Q", raw, offset)[0] if len(raw) >= offset + 8 else 0


def read_u32(raw: bytes, offset: int) -> int:
    return struct.unpack_from("=I", raw, offset)[0] if len(raw) >= offset + 4 else 0


def parse_sender_state(info: bytes) -> SenderState:
    """SenderState from a struct tcp_info (getsockopt or INET_DIAG_INFO); fields the kernel's
    struct is too short for are 0."""
    return SenderState(read_u64(info, BYTES_ACKED), read_u32(info, SND_CWND), read_u32(info, RTT),
                       read_u64(info, BUSY_TIME), read_u64(info, RWND_LIMITED), read_u64(info, SNDBUF_LIMITED))


def combined(states: Iterable[SenderState]) -> SenderState:
    """A rank's connections as one sender: counters and windows summed, the largest srtt."""
    states = list(states)
    return SenderState(sum(s.bytes_acked for s in states), sum(s.cwnd for s in states),
                       max((s.srtt_us for s in states), default=0), sum(s.busy_us for s in states),
                       sum(s.rwnd_limited_us for s in states), sum(s.sndbuf_limited_us for s in states))


def _info(sock: socket.socket) -> bytes:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_LEN)


def sender_state(sock: socket.socket) -> SenderState:
    return parse_sender_state(_info(sock))


def bytes_acked(sock: socket.socket) -> int:
    return read_u64(_info(sock), BYTES_ACKED)


def snd_cwnd(sock: socket.socket) -> int:
    return read_u32(_info(sock), SND_CWND)


def total_retrans(sock: socket.socket) -> int:
    return read_u32(_info(sock), TOTAL_RETRANS)

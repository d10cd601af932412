"""The kernel's view of every TCP socket in this network namespace, through sock_diag netlink.

Why netlink and not getsockopt: a worker that runs a framework's collective (torch/gloo) does not
own the sockets that carry its traffic, so it cannot call getsockopt(TCP_INFO) on them. An
inet_diag dump (the interface `ss -ti` uses) returns, for every TCP socket of the namespace, its
addresses, its congestion control (INET_DIAG_CONG) and its struct tcp_info (INET_DIAG_INFO),
without touching the sockets' owner. A dump walks the kernel's whole established hash table
(~2 ms of CPU here, whatever the namespace holds: 9 workers dumping every 10 ms bin took both
cores), so sockets are found with one dump and then sampled by exact lookup (a hash lookup,
one round trip each): that does not slow the job. Standard library only: the worker runs inside
an emulated host.

Layouts (include/uapi/linux/netlink.h, sock_diag.h, inet_diag.h): a request is
nlmsghdr + inet_diag_req_v2; each reply is nlmsghdr + inet_diag_msg + rtattrs."""

from __future__ import annotations

import errno
import os
import socket
import struct
from dataclasses import dataclass

from mn_harness.worker.tcpinfo import (
    BYTES_ACKED,
    BYTES_RETRANS,
    BYTES_SENT,
    SND_CWND,
    TOTAL_RETRANS,
    SenderState,
    parse_sender_state,
    read_u32,
    read_u64,
)

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
INET_DIAG_INFO, INET_DIAG_CONG, INET_DIAG_SKMEMINFO = 2, 4, 7
TCP_ESTABLISHED = 1
ALL_STATES = 0xFFF

_NLMSGHDR = struct.Struct("=IHHII")
# inet_diag_req_v2: family, protocol, ext, pad, states, then inet_diag_sockid
_REQ = struct.Struct("=BBBxI")
# inet_diag_sockid: sport, dport (big endian), src[4], dst[4] (big endian), if, cookie[2]
_SOCKID = struct.Struct("!HH16s16s")
_SOCKID_REST = struct.Struct("=III")
_MSG_HEAD = struct.Struct("=BBBB")  # family, state, timer, retrans
_MSG_TAIL = struct.Struct("=IIIII")  # expires, rqueue, wqueue, uid, inode
_MSG_LEN = _MSG_HEAD.size + _SOCKID.size + _SOCKID_REST.size + _MSG_TAIL.size  # 72
_RTA = struct.Struct("=HH")


@dataclass(frozen=True)
class TcpSocket:
    """One TCP socket as the kernel reports it. Counters are 0 when the kernel sent no tcp_info."""

    src: str
    sport: int
    dst: str
    dport: int
    state: int
    cookie: int  # unique per socket for its lifetime
    cc: str | None
    bytes_acked: int = 0
    bytes_sent: int = 0  # incl. retransmissions (tcpi_bytes_sent)
    bytes_retrans: int = 0
    cwnd: int = 0
    total_retrans: int = 0
    rcvbuf: int = 0  # SK_MEMINFO_RCVBUF (bytes the kernel allows, after autotuning)
    sndbuf: int = 0  # SK_MEMINFO_SNDBUF
    sender: SenderState = SenderState(0)  # what a throughput bin keeps (tcpinfo.py)

    @property
    def established(self) -> bool:
        return self.state == TCP_ESTABLISHED


def _request(states: int, sock: TcpSocket | None = None) -> bytes:
    """A dump of every socket in `states`, or (sock given) the exact lookup of that one socket."""
    ext = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_CONG - 1)) | (1 << (INET_DIAG_SKMEMINFO - 1))
    if sock is None:
        sockid = _SOCKID.pack(0, 0, bytes(16), bytes(16)) + _SOCKID_REST.pack(0, 0, 0)
        flags = NLM_F_REQUEST | NLM_F_DUMP
    else:
        sockid = (_SOCKID.pack(sock.sport, sock.dport, socket.inet_aton(sock.src).ljust(16, b"\0"),
                               socket.inet_aton(sock.dst).ljust(16, b"\0"))
                  + _SOCKID_REST.pack(0, sock.cookie & 0xFFFFFFFF, sock.cookie >> 32))
        flags = NLM_F_REQUEST
    body = _REQ.pack(socket.AF_INET, socket.IPPROTO_TCP, ext, states) + sockid
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY, flags, 1, 0) + body


def _parse(msg: memoryview) -> TcpSocket:
    _family, state, _timer, _retrans = _MSG_HEAD.unpack_from(msg, 0)
    sport, dport, src, dst = _SOCKID.unpack_from(msg, _MSG_HEAD.size)
    _ifindex, c0, c1 = _SOCKID_REST.unpack_from(msg, _MSG_HEAD.size + _SOCKID.size)
    info, cc, mem = b"", None, b""
    off = _MSG_LEN
    while off + _RTA.size <= len(msg):
        rta_len, rta_type = _RTA.unpack_from(msg, off)
        if rta_len < _RTA.size:
            break
        payload = bytes(msg[off + _RTA.size:off + rta_len])
        if rta_type == INET_DIAG_INFO:
            info = payload
        elif rta_type == INET_DIAG_CONG:
            cc = payload.split(b"\0", 1)[0].decode(errors="replace")
        elif rta_type == INET_DIAG_SKMEMINFO:
            mem = payload
        off += (rta_len + 3) & ~3
    return TcpSocket(
        src=socket.inet_ntoa(src[:4]), sport=sport, dst=socket.inet_ntoa(dst[:4]), dport=dport,
        state=state, cookie=c0 | (c1 << 32), cc=cc,
        bytes_acked=read_u64(info, BYTES_ACKED), bytes_sent=read_u64(info, BYTES_SENT),
        bytes_retrans=read_u64(info, BYTES_RETRANS), cwnd=read_u32(info, SND_CWND),
        total_retrans=read_u32(info, TOTAL_RETRANS), rcvbuf=read_u32(mem, 4), sndbuf=read_u32(mem, 12),
        sender=parse_sender_state(info))


class SockDiag:
    """A netlink socket kept open for repeated dumps (one per throughput bin)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
        self.sock.bind((0, 0))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> SockDiag:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def lookup(self, sock: TcpSocket) -> TcpSocket | None:
        """The socket's current state by exact lookup (a hash lookup in the kernel); None once it
        is gone (or its cookie now names another socket)."""
        self.sock.send(_request(ALL_STATES, sock))
        data = memoryview(self.sock.recv(1 << 16))
        length, kind, _flags, _seq, _pid = _NLMSGHDR.unpack_from(data, 0)
        if kind == SOCK_DIAG_BY_FAMILY:
            return _parse(data[_NLMSGHDR.size:length])
        if kind == NLMSG_ERROR:
            err = -struct.unpack_from("=i", data, _NLMSGHDR.size)[0]
            if err in (errno.ENOENT, errno.ESTALE):
                return None
            raise OSError(err, f"sock_diag: {os.strerror(err)}")
        raise OSError(errno.EPROTO, f"sock_diag: unexpected reply type {kind}")

    def tcp_sockets(self, states: int = ALL_STATES) -> list[TcpSocket]:
        """Every TCP socket of the namespace. The kernel walks its whole established hash table
        (all namespaces' sockets; ~2 ms of CPU on a 262144-bucket table): for repeated samples
        of known sockets use lookup()."""
        self.sock.send(_request(states))
        out: list[TcpSocket] = []
        while True:
            data = memoryview(self.sock.recv(1 << 16))
            off = 0
            while off + _NLMSGHDR.size <= len(data):
                length, kind, _flags, _seq, _pid = _NLMSGHDR.unpack_from(data, off)
                if length < _NLMSGHDR.size:
                    return out
                if kind == NLMSG_DONE:
                    return out
                if kind == NLMSG_ERROR:
                    err = -struct.unpack_from("=i", data, off + _NLMSGHDR.size)[0]
                    raise OSError(err, f"sock_diag: {os.strerror(err)}")
                if kind == SOCK_DIAG_BY_FAMILY:
                    out.append(_parse(data[off + _NLMSGHDR.size:off + length]))
                off += (length + 3) & ~3


def job_connections(sockets: list[TcpSocket], my_ip: str, peers: set[str],
                    exclude_ports: frozenset[int] = frozenset()) -> list[TcpSocket]:
    """Established sockets from my_ip to one of `peers`, neither end on an excluded port (e.g.
    the rendezvous store's)."""
    return [s for s in sockets if s.established and s.src == my_ip and s.dst in peers
            and s.sport not in exclude_ports and s.dport not in exclude_ports]

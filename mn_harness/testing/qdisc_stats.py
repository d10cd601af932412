"""A qdisc's own statistics as `tc -s qdisc show` prints them, read over rtnetlink in-process.

Why not `tc`: comparing the egress program's tracked depth with the qdisc's backlog "at the same
moment" needs both read within microseconds; a tc process takes milliseconds, during which a
1 Gbit/s queue moves by hundreds of frames. The reader sends the same RTM_GETQDISC dump tc does
from a netlink socket opened inside the node's network namespace (a short-lived thread enters
it with setns; the socket stays bound to that namespace) and decodes TCA_STATS2 (basic + queue
counters). Used by the tests and the tracking benchmark.

    with QdiscStatsReader(pid, "s1-eth3") as r:
        root = r.root()    # QdiscStats of the root qdisc (HTB): backlog bytes, qlen, drops ..."""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import threading
from dataclasses import dataclass

NETLINK_ROUTE = 0
RTM_NEWQDISC = 36
RTM_GETQDISC = 38
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
TCA_KIND = 1
TCA_STATS2 = 7
TCA_STATS_BASIC = 1
TCA_STATS_QUEUE = 3
TC_H_ROOT = 0xFFFFFFFF
CLONE_NEWNET = 0x40000000
_NLMSG = struct.Struct("=IHHII")
_TCMSG = struct.Struct("=BxxxiIII")
_RTA = struct.Struct("=HH")


@dataclass(frozen=True)
class QdiscStats:
    kind: str
    handle: int
    parent: int
    bytes: int       # sent
    packets: int     # sent (GSO segments count one each)
    qlen: int        # packets queued (a GSO packet counts one)
    backlog: int     # bytes queued, as the qdisc counts them
    drops: int
    overlimits: int


def _align(n: int) -> int:
    return (n + 3) & ~3


def _attrs(data: bytes, offset: int, end: int) -> dict[int, bytes]:
    out = {}
    while offset + _RTA.size <= end:
        length, kind = _RTA.unpack_from(data, offset)
        if length < _RTA.size:
            break
        out[kind & 0x7FFF] = data[offset + _RTA.size:offset + length]
        offset += _align(length)
    return out


def parse_qdiscs(data: bytes) -> tuple[list[tuple[int, QdiscStats]], bool]:
    """(ifindex, stats) of every RTM_NEWQDISC message in `data`, and whether the dump ended."""
    out: list[tuple[int, QdiscStats]] = []
    offset, done = 0, False
    while offset + _NLMSG.size <= len(data):
        length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(data, offset)
        if length < _NLMSG.size:
            break
        if kind == NLMSG_DONE:
            done = True
        elif kind == NLMSG_ERROR:
            (err,) = struct.unpack_from("=i", data, offset + _NLMSG.size)
            if err:
                raise OSError(-err, os.strerror(-err))
        elif kind == RTM_NEWQDISC:
            body = offset + _NLMSG.size
            _family, ifindex, handle, parent, _info = _TCMSG.unpack_from(data, body)
            attrs = _attrs(data, body + _TCMSG.size, offset + length)
            stats2 = attrs.get(TCA_STATS2, b"")
            nested = _attrs(stats2, 0, len(stats2))
            nbytes, npackets = struct.unpack_from("=QI", nested[TCA_STATS_BASIC]) \
                if TCA_STATS_BASIC in nested else (0, 0)
            qlen, backlog, drops, _requeues, overlimits = struct.unpack_from("=5I", nested[TCA_STATS_QUEUE]) \
                if TCA_STATS_QUEUE in nested else (0, 0, 0, 0, 0)
            kind_name = attrs.get(TCA_KIND, b"").split(b"\0", 1)[0].decode()
            out.append((ifindex, QdiscStats(kind_name, handle, parent, nbytes, npackets, qlen, backlog,
                                            drops, overlimits)))
        offset += _align(length)
    return out, done


def _in_netns(pid: int | None, fn):
    """fn() run by a thread inside the network namespace of `pid` (None: this one)."""
    if pid is None:
        return fn()
    result: dict = {}

    def enter():
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                result["error"] = OSError(ctypes.get_errno(), "setns failed")
                return
            result["value"] = fn()
        except Exception as exc:  # noqa: BLE001 - re-raised in the caller's thread
            result["error"] = exc
        finally:
            os.close(fd)

    thread = threading.Thread(target=enter, name="netns-enter")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


class QdiscStatsReader:
    def __init__(self, pid: int | None, intf: str):
        self.intf = intf

        def open_socket():
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
            sock.bind((0, 0))
            return sock, socket.if_nametoindex(intf)

        self.sock, self.ifindex = _in_netns(pid, open_socket)
        self._seq = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> QdiscStatsReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def qdiscs(self) -> list[QdiscStats]:
        """Every qdisc of the interface (root first, as the kernel lists them)."""
        self._seq += 1
        tcm = _TCMSG.pack(socket.AF_UNSPEC, self.ifindex, 0, 0, 0)
        msg = _NLMSG.pack(_NLMSG.size + len(tcm), RTM_GETQDISC, NLM_F_REQUEST | NLM_F_DUMP, self._seq, 0)
        self.sock.send(msg + tcm)
        found: list[QdiscStats] = []
        done = False
        while not done:
            items, done = parse_qdiscs(self.sock.recv(1 << 16))
            found += [q for ifindex, q in items if ifindex == self.ifindex]
        return found

    def root(self) -> QdiscStats:
        for q in self.qdiscs():
            if q.parent == TC_H_ROOT:
                return q
        raise LookupError(f"{self.intf} has no root qdisc")

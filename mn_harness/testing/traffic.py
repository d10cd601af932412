"""Test traffic for the queue and ECN tests and benchmarks, run inside emulated hosts:
`python -m mn_harness.testing.traffic MODE ...` (stdout: one JSON line with what it saw).

    udp-recv PORT IDLE_S            count datagrams and which arrived CE (IP_RECVTOS), until
                                    IDLE_S without one; {"received", "ce", "ce_seqs", "seqs"}
    udp-send HOST PORT COUNT TOS    COUNT datagrams of 1472 bytes (1514-byte frames) as fast as
                                    possible, TOS byte TOS (2 = ECT(0), 0 = not-ECT), each
                                    carrying its sequence number
    tcp-recv PORT CC                one connection, congestion control CC set on the listening
                                    socket (DCTCP's ECN handshake needs it there); {"bytes"}
    tcp-send HOST PORT CC SECONDS   a bulk flow for SECONDS; {"bytes", "seconds", "ecn": whether
                                    the connection negotiated ECN (tcpi_options)}

Why not iperf3: it cannot set the congestion control of the listening socket, so a DCTCP client
would get no ECN (the kernel refuses ECN on an ECT SYN unless the listener's CC needs it), and
it cannot report per-datagram ECN codepoints. Standard library only."""

from __future__ import annotations

import json
import socket
import struct
import sys
import time
from collections.abc import Callable

PAYLOAD = 1472  # + 8 UDP + 20 IPv4 + 14 Ethernet = 1514
ECN_MASK = 3
CE = 3
TCPI_OPT_ECN = 8  # tcp_info.tcpi_options: ECN was negotiated on the connection


def udp_recv(port: int, idle_s: float) -> dict:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    sock.bind(("0.0.0.0", port))
    print(json.dumps({"ready": True}), flush=True)
    sock.settimeout(30)
    seqs, ce = [], []
    while True:
        try:
            data, ancillary, _flags, _addr = sock.recvmsg(2048, socket.CMSG_SPACE(4))
        except TimeoutError:
            break
        sock.settimeout(idle_s)
        seq = struct.unpack_from("!I", data)[0]
        seqs.append(seq)
        for level, kind, value in ancillary:
            if level == socket.IPPROTO_IP and kind == socket.IP_TOS and value[0] & ECN_MASK == CE:
                ce.append(seq)
    return {"received": len(seqs), "ce": len(ce), "ce_seqs": ce, "seqs": seqs}


def udp_send(host: str, port: int, count: int, tos: int) -> dict:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    pad = bytes(PAYLOAD - 4)
    sent = 0
    for seq in range(count):
        try:
            sock.sendto(struct.pack("!I", seq) + pad, (host, port))
            sent += 1
        except OSError:  # a full host queue: the datagram is lost before the switch
            pass
    return {"sent": sent}


def tcp_recv(port: int, cc: str) -> dict:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    listener.bind(("0.0.0.0", port))
    listener.listen(1)
    print(json.dumps({"ready": True}), flush=True)
    conn, _ = listener.accept()
    total = 0
    while chunk := conn.recv(1 << 20):
        total += len(chunk)
    return {"bytes": total}


def tcp_send(host: str, port: int, cc: str, seconds: float) -> dict:
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    sock.connect((host, port))
    buf = bytes(1 << 20)
    start = time.monotonic()
    end = start + seconds
    total = 0
    while time.monotonic() < end:
        total += sock.send(buf)
    seconds = time.monotonic() - start
    options = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[5]  # struct tcp_info
    sock.close()
    return {"bytes": total, "seconds": seconds, "ecn": bool(options & TCPI_OPT_ECN)}


def main(argv: list[str]) -> int:
    modes: dict[str, tuple[Callable[..., dict], tuple[type, ...]]] = {
        "udp-recv": (udp_recv, (int, float)), "udp-send": (udp_send, (str, int, int, int)),
        "tcp-recv": (tcp_recv, (int, str)), "tcp-send": (tcp_send, (str, int, str, float))}
    if not argv or argv[0] not in modes or len(argv) - 1 != len(modes[argv[0]][1]):
        print(__doc__, file=sys.stderr)
        return 2
    fn, types = modes[argv[0]]
    print(json.dumps(fn(*(t(a) for t, a in zip(types, argv[1:], strict=True)))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

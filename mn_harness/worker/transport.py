"""The worker's one transport: a persistent full-duplex TCP connection per pair of ranks that
talk, as gloo keeps them, each socket with the job's congestion control (TCP_CONGESTION).

Every collective (mn_harness/worker/collective.py) and the pipeline (worker/pipeline.py) post
sends and receives here. Each connection has one sender and one receiver thread, so both
directions of a connection move at once and a rank sends to all its peers of a step in
parallel (NCCL and gloo do the same with their per-peer proxies/pairs). A posted send may wait
for posted receives (`after`): that is how a reduction step forwards what it received, segment
by segment. Both ends post a connection's operations in the same order, so the byte stream needs
no framing; the first bytes of every operation carry a tag the receiver checks, so a schedule
bug shows up as one clear error instead of silently wrong traffic.

Connection set-up: every rank listens on (its address, the job's port); for each pair the
higher rank connects to the lower one, and the acceptor knows the peer by its source address
(one rank per host). The listener and every connecting socket get the CC, buffer sizes and
Nagle setting before connecting; accepted sockets inherit them and are set again.

Standard library only: this runs inside each emulated host."""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

TAG_BYTES = 16


@dataclass(frozen=True)
class Tunables:
    """Every knob of the synthetic traffic, in one place (overridable per worker through the
    spec's `transport` mapping, e.g. by benchmarks; the defaults are what runs use).

    io_bytes       bytes per send()/recv_into() system call. The GIL is released during each
                   call; 1 MiB keeps Python's per-call cost far below the wire time at 1 Gbit/s.
    segment_bytes  pipelining: every transfer of a collective is cut into segments of at most
                   this size, and a reduction/forwarding step may send segment j as soon as
                   segment j of what it depends on has arrived (NCCL's chunked pipeline; gloo's
                   ring also pipelines chunks). Trees and the broadcast chain need it to keep
                   every link busy; 0 sends every transfer whole (a step waits for the whole
                   previous step, the ring's behaviour before this transport). 1 MiB is
                   gloo's kMaxSegmentSize: with 256 KiB the demo's BBR jobs dropped 221
                   packets per iteration against gloo's 62 and the synthetic/real mean ratios
                   left 1.00 +/- 0.10 in 2 of 15 cells; with 1 MiB 73 drops and 15 of 15
                   within (bench/fidelity.py, docs/fidelity.md).
    window         on a ring (a `lockstep` schedule, collectives/schedule.py): a rank sends
                   segment k only once it has received segment k - window, as gloo's ring
                   posts a segment's send only when the receive two segments back is in (two
                   operations in flight each way); 0: every segment posted at once, the socket
                   buffer the only limit on what runs ahead. With 0, on 3jobs-slack synthetic
                   reno locked in step far more than gloo's (1.39x of ideal against 1.26x);
                   with 2, 1.28x (bench/reproduce.py, 5 runs each; docs/fidelity.md).
    sndbuf, rcvbuf SO_SNDBUF / SO_RCVBUF in bytes; 0 leaves the kernel's autotuning
                   (net.ipv4.tcp_wmem / tcp_rmem) in charge, as gloo does.
    nodelay        TCP_NODELAY: Nagle off, as gloo and NCCL set it.
    connect_retry_s pause between connection attempts while peers start.
    """

    io_bytes: int = 1 << 20
    segment_bytes: int = 1 << 20
    window: int = 2
    sndbuf: int = 0
    rcvbuf: int = 0
    nodelay: bool = True
    connect_retry_s: float = 0.05

    @classmethod
    def from_overrides(cls, raw: Mapping[str, Any] | None) -> Tunables:
        known = {f.name: f.type for f in fields(cls)}
        changes: dict[str, Any] = {}
        for key, value in (raw or {}).items():
            if key not in known:
                raise ValueError(f"unknown transport tunable {key!r} (known: {', '.join(known)})")
            changes[key] = value
        tunables = replace(cls(), **changes)
        if tunables.io_bytes < TAG_BYTES or tunables.segment_bytes < 0 or tunables.window < 0:
            raise ValueError("io_bytes must be >= 16, segment_bytes and window >= 0")
        return tunables


class TransportError(Exception):
    pass


class Op:
    """One posted send or receive; `done` is set when it finished (or failed)."""

    __slots__ = ("nbytes", "tag", "after", "done", "error")

    def __init__(self, nbytes: int, tag: bytes, after: Iterable[Op] = ()):
        self.nbytes = nbytes
        self.tag = tag[:TAG_BYTES]
        self.after = tuple(after)
        self.done = threading.Event()
        self.error: BaseException | None = None

    def wait(self, timeout: float | None = None) -> None:
        if not self.done.wait(timeout):
            raise TimeoutError("transport operation did not finish")
        if self.error is not None:
            raise self.error


class Connection:
    """One peer: a socket and its sender and receiver threads."""

    def __init__(self, sock: socket.socket, peer: int, tunables: Tunables):
        self.sock, self.peer, self.tunables = sock, peer, tunables
        self.sends: queue.SimpleQueue[Op | None] = queue.SimpleQueue()
        self.recvs: queue.SimpleQueue[Op | None] = queue.SimpleQueue()
        self.broken: BaseException | None = None
        self.threads = [threading.Thread(target=self._send_loop, daemon=True),
                        threading.Thread(target=self._recv_loop, daemon=True)]
        for t in self.threads:
            t.start()

    def _finish(self, op: Op, error: BaseException | None) -> None:
        if error is not None and self.broken is None:
            self.broken = error
        op.error = error
        op.done.set()

    def _send_loop(self) -> None:
        buf = memoryview(bytearray(self.tunables.io_bytes))
        while (op := self.sends.get()) is not None:
            try:
                if self.broken is not None:
                    raise TransportError(f"connection to rank {self.peer} failed earlier: {self.broken}")
                for dep in op.after:
                    dep.wait()
                buf[:len(op.tag)] = op.tag
                left = op.nbytes
                while left > 0:
                    k = min(left, len(buf))
                    self.sock.sendall(buf[:k])
                    left -= k
                self._finish(op, None)
            except BaseException as exc:  # reported by Op.wait() in the thread that waits
                self._finish(op, exc)
        try:
            self.sock.shutdown(socket.SHUT_WR)  # the peer's receiver sees the end of the stream
        except OSError:
            pass

    def _recv_exact(self, view: memoryview, nbytes: int) -> None:
        got = 0
        while got < nbytes:
            k = self.sock.recv_into(view[got:nbytes], nbytes - got)
            if k == 0:
                raise TransportError(f"rank {self.peer} closed the connection")
            got += k

    def _recv_loop(self) -> None:
        buf = memoryview(bytearray(self.tunables.io_bytes))
        while (op := self.recvs.get()) is not None:
            try:
                if self.broken is not None:
                    raise TransportError(f"connection to rank {self.peer} failed earlier: {self.broken}")
                head = min(len(op.tag), op.nbytes)
                self._recv_exact(buf, head)
                if bytes(buf[:head]) != op.tag[:head]:
                    raise TransportError(f"from rank {self.peer}: expected tag {op.tag[:head].hex()}, got "
                                         f"{bytes(buf[:head]).hex()} (the ranks disagree on the schedule)")
                left = op.nbytes - head
                while left > 0:
                    k = self.sock.recv_into(buf, min(left, len(buf)))
                    if k == 0:
                        raise TransportError(f"rank {self.peer} closed the connection")
                    left -= k
                self._finish(op, None)
            except BaseException as exc:
                self._finish(op, exc)
        # drain until the peer closes its side, so nobody's last bytes are reset
        try:
            while self.sock.recv_into(buf):
                pass
        except OSError:
            pass


def set_cc(sock: socket.socket, cc: str) -> None:
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    except OSError as exc:
        raise TransportError(f"congestion control {cc!r} not available: {exc.strerror}") from None


class Transport:
    def __init__(self, rank: int, addresses: tuple[str, ...], port: int, cc: str,
                 tunables: Tunables | None = None, src_port: int = 0):
        self.rank, self.addresses, self.port, self.cc = rank, addresses, port, cc
        # the port every connection is made from (network.flows: a fixed 5-tuple, which ECMP
        # hashes to the same path every run); 0: an ephemeral port
        self.src_port = src_port
        self.tunables = tunables or Tunables()
        self.connections: dict[int, Connection] = {}

    def _prepare(self, sock: socket.socket) -> None:
        set_cc(sock, self.cc)
        if self.tunables.sndbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.tunables.sndbuf)
        if self.tunables.rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.tunables.rcvbuf)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(self.tunables.nodelay))

    def connect(self, peers: Iterable[int], timeout_s: float) -> None:
        """One connection to every peer: connect to lower ranks, accept the higher ones."""
        peers = sorted(set(peers) - {self.rank})
        deadline = time.monotonic() + timeout_s
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._prepare(listener)
            listener.bind((self.addresses[self.rank], self.port))
            listener.listen(len(peers) + 8)
            for peer in (p for p in peers if p < self.rank):
                self._add(peer, self._dial(peer, deadline))
            expected = {self.addresses[p]: p for p in peers if p > self.rank}
            while expected:
                listener.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    sock, (address, _) = listener.accept()
                except TimeoutError:
                    raise TransportError(f"ranks {sorted(expected.values())} never connected") from None
                if address not in expected:
                    sock.close()  # not one of ours
                    continue
                sock.settimeout(None)
                self._prepare(sock)
                self._add(expected.pop(address), sock)
        finally:
            listener.close()

    def _dial(self, peer: int, deadline: float) -> socket.socket:
        while True:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._prepare(sock)
            try:
                if self.src_port:  # one local port for every peer: the 4-tuples still differ
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((self.addresses[self.rank], self.src_port))
                sock.connect((self.addresses[peer], self.port))
                return sock
            except OSError:
                sock.close()
                if time.monotonic() > deadline:
                    raise TransportError(f"cannot connect to rank {peer} at "
                                         f"{self.addresses[peer]}:{self.port}") from None
                time.sleep(self.tunables.connect_retry_s)

    def _add(self, peer: int, sock: socket.socket) -> None:
        self.connections[peer] = Connection(sock, peer, self.tunables)

    def _connection(self, peer: int) -> Connection:
        try:
            return self.connections[peer]
        except KeyError:
            raise TransportError(f"rank {self.rank} has no connection to rank {peer}") from None

    def send(self, peer: int, nbytes: int, tag: bytes, after: Iterable[Op] = ()) -> Op:
        op = Op(nbytes, tag, after)
        self._connection(peer).sends.put(op)
        return op

    def recv(self, peer: int, nbytes: int, tag: bytes) -> Op:
        op = Op(nbytes, tag)
        self._connection(peer).recvs.put(op)
        return op

    def sockets(self) -> list[socket.socket]:
        return [c.sock for c in self.connections.values()]

    def finish(self, timeout_s: float = 30.0) -> None:
        """Finish what was posted, half-close every connection, drain until the peers close.
        The sockets stay open (their TCP_INFO is still readable) until release()."""
        for c in self.connections.values():
            c.sends.put(None)
            c.recvs.put(None)
        deadline = time.monotonic() + timeout_s
        for c in self.connections.values():
            for t in c.threads:
                t.join(max(0.0, deadline - time.monotonic()))

    def release(self) -> None:
        for c in self.connections.values():
            c.sock.close()

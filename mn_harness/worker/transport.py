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

With `Tunables.recv_ready` (worker/tunables.py) the stream is framed, as gloo's is: every message starts with one
byte, DATA (an operation's bytes follow) or READY (the peer has posted one more handshake
receive). A handshake send is written only once the peer's matching READY has arrived, and a
READY waits behind the data already being written on its connection: gloo's send-ready /
receive-ready protocol (`transport/tcp/pair.cc`), which couples each direction of a ring to
the progress of the other.

Connection set-up: every rank listens on (its address, the job's port); for each pair the
higher rank connects to the lower one, and the acceptor knows the peer by its source address
(one rank per host). The listener and every connecting socket get the CC, buffer sizes and
Nagle setting before connecting; accepted sockets inherit them and are set again.

Standard library only: this runs inside each emulated host."""

from __future__ import annotations

import functools
import os
import queue
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable

from mn_harness.worker.threads import RECV, SEND, name_thread
from mn_harness.worker.transport_op import TransportOp, when_all
from mn_harness.worker.tunables import Tunables

DATA, READY = b"D", b"R"  # message kinds of a framed stream (Tunables.recv_ready)


class TransportError(Exception):
    pass


class Connection:
    """One peer: a socket and its sender and receiver threads. The sender writes, in order,
    the posted sends whose dependencies are done (and, framed, whose peer is ready) and, between
    them, the READY notifications due; everything it waits for wakes it through `cv`."""

    def __init__(self, sock: socket.socket, peer: int, tunables: Tunables):
        self.sock, self.peer, self.tunables = sock, peer, tunables
        self.framed = tunables.recv_ready
        self.cv = threading.Condition()
        self.outbox: deque[TransportOp | None] = deque()  # posted sends; None: finish
        self.notes = 0       # READY notifications due to the peer, not yet written
        self.peer_ready = 0  # READYs the peer sent: handshake sends it has posted receives for
        self.hs_sent = 0     # handshake sends taken for writing
        self.peer_closed = False  # framed: the peer's stream ended (no READY will come)
        self.ready_at: deque[float] = deque()  # when each READY not yet used by a handshake send came
        self.lags: list[float] = []  # per send: from what it waited for (data received, READY) to its writing
        self.recvs: queue.SimpleQueue[TransportOp | None] = queue.SimpleQueue()
        self.broken: BaseException | None = None
        self.threads = [threading.Thread(target=self._send_loop, daemon=True),
                        threading.Thread(target=self._recv_loop, daemon=True)]
        for t in self.threads:
            t.start()

    def post_send(self, op: TransportOp | None) -> None:
        with self.cv:
            self.outbox.append(op)
            self.cv.notify()

    def note_ready(self) -> None:
        """One more handshake receive from the peer is posted: tell it (after the data the
        sender is writing, as gloo's pair queues the notification behind its pending writes)."""
        with self.cv:
            self.notes += 1
            self.cv.notify()

    def _wake(self) -> None:
        with self.cv:
            self.cv.notify()

    def _finish(self, op: TransportOp, error: BaseException | None) -> None:
        if error is not None and self.broken is None:
            self.broken = error
            self._wake()
        op.finish(error)

    def _writable(self, op: TransportOp) -> bool:
        if self.broken is not None:
            return True  # to fail it
        for dep in op.after:
            if dep.on_done(self._wake):  # not done: woken when it is
                return False
        return not op.handshake or self.peer_ready > self.hs_sent or self.peer_closed

    def _next(self) -> TransportOp | int | None:
        """The next thing to write: READY notifications (their count), a send, None (finish)."""
        with self.cv:
            while True:
                if self.notes:
                    n, self.notes = self.notes, 0
                    return n
                if self.outbox:
                    op = self.outbox[0]
                    if op is None:
                        return None
                    if self._writable(op):
                        self.outbox.popleft()
                        self.hs_sent += op.handshake
                        return op
                self.cv.wait()

    def _send_loop(self) -> None:
        name_thread(SEND)
        buf = memoryview(bytearray(self.tunables.io_bytes))
        filler = filler_fd() if self.tunables.zero_copy else None
        free_at = 0.0  # when the previous write on this connection ended: a send queues behind it
        while (item := self._next()) is not None:
            if isinstance(item, int):
                try:
                    self.sock.sendall(READY * item)
                except OSError as exc:
                    self.broken = self.broken or exc
            else:
                self._lag(item, free_at)
                self._write(item, buf, filler)
            free_at = time.monotonic()
        try:
            self.sock.shutdown(socket.SHUT_WR)  # the peer's receiver sees the end of the stream
        except OSError:
            pass

    def _splice(self, op: TransportOp, filler: int) -> None:
        """Zero copy: the kind and tag (held back with MSG_MORE so they leave with the first
        payload, not as a packet of their own), then the filler's pages."""
        head = op.tag[:op.nbytes]
        self.sock.sendall((DATA if self.framed else b"") + head, socket.MSG_MORE if op.nbytes > len(head) else 0)
        left, fd = op.nbytes - len(head), self.sock.fileno()
        while left > 0:
            k = os.sendfile(fd, filler, 0, min(left, FILLER_BYTES))
            if k == 0:
                raise TransportError(f"rank {self.peer} closed the connection")
            left -= k

    def _write(self, op: TransportOp, buf: memoryview, filler: int | None) -> None:
        """Write one send's bytes (its failure is reported by TransportOp.wait() in the thread
        that waits)."""
        try:
            if self.broken is not None:
                raise TransportError(f"connection to rank {self.peer} failed earlier: {self.broken}")
            for dep in op.after:
                if dep.error is not None:
                    raise dep.error
            if op.handshake and self.peer_ready < self.hs_sent:
                raise TransportError(f"rank {self.peer} closed the connection before posting the receive")
            if filler is not None:
                self._splice(op, filler)
            else:
                if self.framed:
                    self.sock.sendall(DATA)
                buf[:len(op.tag)] = op.tag
                left = op.nbytes
                while left > 0:
                    k = min(left, len(buf))
                    self.sock.sendall(buf[:k])
                    left -= k
            self._finish(op, None)
        except BaseException as exc:
            self._finish(op, exc)

    def _lag(self, op: TransportOp, free_at: float) -> None:
        """How long the send waited to be written once it could be (the workers' invariant: a
        real NIC's sender is not delayed by a busy host): from the latest of its posting, its
        dependencies' completion, (handshake) its READY's arrival and the end of the write before
        it on this connection (a NIC serializes too: waiting behind one's own bytes is the
        link's time, not the host's)."""
        start = time.monotonic()
        ready = max([op.posted_at, free_at, *(dep.done_at for dep in op.after)])
        if op.handshake:
            with self.cv:
                came = self.ready_at.popleft() if self.ready_at else 0.0
            ready = max(ready, came)
        self.lags.append(max(0.0, start - ready))

    def _recv_exact(self, view: memoryview, nbytes: int) -> None:
        got = 0
        while got < nbytes:
            k = self.sock.recv_into(view[got:nbytes], nbytes - got)
            if k == 0:
                raise TransportError(f"rank {self.peer} closed the connection")
            got += k

    def _kind(self) -> bytes:
        """Framed: the next message's kind, READYs counted on the way; b"" at the end."""
        while True:
            try:
                kind = self.sock.recv(1)
            except OSError:
                kind = b""
            if kind != READY:
                if not kind:
                    with self.cv:
                        self.peer_closed = True
                        self.cv.notify()
                return kind
            with self.cv:
                self.peer_ready += 1
                self.ready_at.append(time.monotonic())
                self.cv.notify()

    def _recv_loop(self) -> None:
        name_thread(RECV)
        buf = memoryview(bytearray(self.tunables.io_bytes))
        while True:
            kind = self._kind() if self.framed else DATA
            if (op := self.recvs.get()) is None:
                break
            try:
                if self.broken is not None:
                    raise TransportError(f"connection to rank {self.peer} failed earlier: {self.broken}")
                if kind != DATA:
                    raise TransportError(f"rank {self.peer} closed the connection" if not kind else
                                         f"from rank {self.peer}: unknown message kind {kind!r}")
                head = min(len(op.tag), op.nbytes)
                self._recv_exact(buf, head)
                if bytes(buf[:head]) != op.tag[:head]:
                    raise TransportError(f"from rank {self.peer}: expected tag {op.tag[:head].hex()}, got "
                                         f"{bytes(buf[:head]).hex()} (the ranks disagree on the schedule)")
                left = op.nbytes - head
                while left > 0:
                    if self.tunables.zero_copy:  # dropped by the kernel as it is consumed: no copy
                        k = len(self.sock.recv(min(left, FILLER_BYTES), socket.MSG_TRUNC | socket.MSG_WAITALL))
                    else:
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


FILLER_BYTES = 4 << 20  # the memory file a zero-copy sender splices from; also the receiver's largest discard


@functools.cache
def filler_fd() -> int:
    """The process's memory file of FILLER_BYTES zeros that every zero-copy sender splices from
    (sendfile with an offset: no shared file position); its pages are allocated here, once."""
    fd = os.memfd_create("mnh-filler")
    os.write(fd, bytes(FILLER_BYTES))
    return fd


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

    def take_lags(self) -> list[float]:
        """Every send's lag (Connection._lag) since the last call, over all connections."""
        out: list[float] = []
        for conn in self.connections.values():
            lags, conn.lags = conn.lags, []
            out += lags
        return out

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

    def send(self, peer: int, nbytes: int, tag: bytes, after: Iterable[TransportOp] = (),
             handshake: bool = False) -> TransportOp:
        """Post a send; a `handshake` send (framed transports only) also waits for the peer's
        READY for it."""
        if handshake and not self.tunables.recv_ready:
            raise TransportError("a handshake send needs Tunables.recv_ready")
        op = TransportOp(nbytes, tag, after, handshake)
        self._connection(peer).post_send(op)
        return op

    def ready(self, peer: int, after: Iterable[TransportOp] = ()) -> None:
        """Announce one more handshake receive from `peer` once every op in `after` is done
        (the receive itself must be posted already)."""
        when_all(after, self._connection(peer).note_ready)

    def recv(self, peer: int, nbytes: int, tag: bytes) -> TransportOp:
        op = TransportOp(nbytes, tag)
        self._connection(peer).recvs.put(op)
        return op

    def sockets(self) -> list[socket.socket]:
        return [c.sock for c in self.connections.values()]

    def finish(self, timeout_s: float = 30.0) -> None:
        """Finish what was posted, half-close every connection, drain until the peers close.
        The sockets stay open (their TCP_INFO is still readable) until release()."""
        for c in self.connections.values():
            c.post_send(None)
            c.recvs.put(None)
        deadline = time.monotonic() + timeout_s
        for c in self.connections.values():
            for t in c.threads:
                t.join(max(0.0, deadline - time.monotonic()))

    def release(self) -> None:
        for c in self.connections.values():
            c.sock.close()

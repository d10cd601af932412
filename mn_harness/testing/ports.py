"""Frames into and out of the test bed's switch ports, from this process.

Every switch port that faces a host is one end of a veth pair whose other end sits in the
host's network namespace. A raw packet socket (AF_PACKET) on that other end, opened inside the
namespace, is the port as PTF sees one: what the test sends on it enters the switch on that
port, and what the switch sends out of the port is received on it. The sockets are opened from a
short-lived thread that joins the namespace (setns), so this process stays where it is; one
reader thread queues every frame that arrives, per port, until the test takes it. Frames the
socket itself sent (PACKET_OUTGOING) are not queued.

    io = PortIO({"h1": ("p4t1a2b-h1", "h1-eth0"), "h2": ("p4t1a2b-h2", "h2-eth0")})
    io.send("h1", frame_bytes)
    frame = io.take("h2", lambda data: data[12:14] == b"\\x08\\x00", timeout=2)
    io.close()
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass

from mn_harness.p4.errors import P4Error

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"  # where `ip netns add` puts a namespace's handle
MAX_FRAME = 65535


class PortIOError(P4Error):
    pass


@dataclass(frozen=True)
class Frame:
    time: float     # time.monotonic() when it was read
    data: bytes


def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def open_port_socket(netns: str | None, interface: str) -> socket.socket:
    """A raw packet socket bound to `interface` of network namespace `netns` (None: this
    process's own). The socket keeps its namespace, whatever thread uses it later."""
    result: dict[str, object] = {}

    def work() -> None:
        try:
            if netns is not None:
                _setns(os.path.join(NETNS_DIR, netns))  # only this thread moves
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            sock.bind((interface, ETH_P_ALL))
            sock.setblocking(False)
            result["sock"] = sock
        except OSError as exc:
            result["error"] = exc

    thread = threading.Thread(target=work, name=f"port-socket-{interface}")
    thread.start()
    thread.join()
    if "error" in result:
        where = f" in namespace {netns}" if netns else ""
        raise PortIOError(f"cannot open a packet socket on {interface}{where}: {result['error']}")
    sock = result["sock"]
    assert isinstance(sock, socket.socket)
    return sock


class PortIO:
    """Packet sockets on several ports (key -> (namespace, interface)), a reader thread, and
    per-port queues of the frames received."""

    def __init__(self, endpoints: Mapping[Hashable, tuple[str | None, str]]):
        self.endpoints = dict(endpoints)
        self._socks: dict[Hashable, socket.socket] = {}
        self._queues: dict[Hashable, deque[Frame]] = {key: deque() for key in self.endpoints}
        self._cond = threading.Condition()
        self._stop_r, self._stop_w = os.pipe()
        self._thread: threading.Thread | None = None

    def start(self) -> PortIO:
        try:
            for key, (netns, interface) in self.endpoints.items():
                self._socks[key] = open_port_socket(netns, interface)
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._read, name="port-io", daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        by_fd = {sock.fileno(): key for key, sock in self._socks.items()}
        poller = select.poll()
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        while True:
            ready = poller.poll()
            if any(fd == self._stop_r for fd, _ in ready):
                return
            for fd, _ in ready:
                key = by_fd[fd]
                while True:
                    try:
                        data, addr = self._socks[key].recvfrom(MAX_FRAME)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        return  # closed under us
                    if addr[2] == PACKET_OUTGOING:
                        continue
                    with self._cond:
                        self._queues[key].append(Frame(time.monotonic(), data))
                        self._cond.notify_all()

    def _sock(self, key: Hashable) -> socket.socket:
        try:
            return self._socks[key]
        except KeyError:
            raise PortIOError(f"no port {key!r}; ports: {', '.join(map(str, self.endpoints))}") from None

    def send(self, key: Hashable, frames: bytes | Iterable[bytes]) -> int:
        """Send one frame or several, back to back; returns how many."""
        sock = self._sock(key)
        batch = [frames] if isinstance(frames, (bytes, bytearray)) else list(frames)
        for data in batch:
            while True:
                try:
                    sock.send(bytes(data))
                    break
                except BlockingIOError:  # the socket's send buffer is full: wait for room
                    select.select([], [sock], [], 1.0)
        return len(batch)

    def take(self, key: Hashable, match: Callable[[bytes], bool] | None = None,
             timeout: float = 2.0) -> Frame | None:
        """The first frame received on `key` that `match`es (any frame when None), removed from
        its queue; frames before it stay. None when none came within `timeout` seconds."""
        self._sock(key)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                queue = self._queues[key]
                for i, frame in enumerate(queue):
                    if match is None or match(frame.data):
                        del queue[i]
                        return frame
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def collect(self, key: Hashable, count: int, match: Callable[[bytes], bool] | None = None,
                timeout: float = 5.0) -> list[Frame]:
        """Up to `count` matching frames from `key`, in arrival order, waiting at most `timeout`."""
        out: list[Frame] = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            frame = self.take(key, match, max(0.0, deadline - time.monotonic()))
            if frame is None:
                break
            out.append(frame)
        return out

    def pending(self, keys: Iterable[Hashable] | None = None) -> dict[Hashable, list[Frame]]:
        """The frames received and not taken, per port (all ports when `keys` is None)."""
        with self._cond:
            return {k: list(self._queues[k]) for k in (self.endpoints if keys is None else keys)
                    if self._queues.get(k)}

    def drain(self) -> None:
        with self._cond:
            for queue in self._queues.values():
                queue.clear()

    def close(self) -> None:
        if self._thread is not None:
            os.write(self._stop_w, b"x")
            self._thread.join(timeout=5)
            self._thread = None
        for sock in self._socks.values():
            sock.close()
        self._socks.clear()
        for fd in (self._stop_r, self._stop_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._stop_r = self._stop_w = -1

    def __enter__(self) -> PortIO:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

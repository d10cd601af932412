"""One posted transport operation (a send or a receive) and the completion hooks the
transport's threads wait on: a connection's sender sleeps on one condition and is woken by
whatever it waits for (a dependency done, a READY come, a note due), not by polling.

Standard library only: this runs inside each emulated host."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

TAG_BYTES = 16  # the tag at the start of every operation's bytes (mn_harness/worker/collective.py)
_CALLBACKS = threading.Lock()  # guards every TransportOp's done flag against its callbacks


class TransportOp:
    """One posted send or receive; `done` is set when it finished (or failed). A `handshake`
    send waits for the peer's READY (Tunables.recv_ready)."""

    __slots__ = ("nbytes", "tag", "after", "handshake", "done", "error", "posted_at", "done_at", "_callbacks")

    def __init__(self, nbytes: int, tag: bytes, after: Iterable[TransportOp] = (), handshake: bool = False):
        self.nbytes = nbytes
        self.tag = tag[:TAG_BYTES]
        self.after = tuple(after)
        self.handshake = handshake
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.posted_at = time.monotonic()
        self.done_at = 0.0  # when it finished (CLOCK_MONOTONIC)
        self._callbacks: list[Callable[[], None]] = []

    def on_done(self, fn: Callable[[], None]) -> bool:
        """Have fn() called (once) when this op finishes; False, and fn not kept, if it has."""
        with _CALLBACKS:
            if self.done.is_set():
                return False
            if fn not in self._callbacks:
                self._callbacks.append(fn)
            return True

    def finish(self, error: BaseException | None) -> None:
        with _CALLBACKS:
            self.error = error
            self.done_at = time.monotonic()
            self.done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn()

    def wait(self, timeout: float | None = None) -> None:
        if not self.done.wait(timeout):
            raise TimeoutError("transport operation did not finish")
        if self.error is not None:
            raise self.error


def when_all(ops: Iterable[TransportOp], fn: Callable[[], None]) -> None:
    """Call fn() once every op in ops has finished (at once if they all have)."""
    ops = list(ops)
    left = [len(ops) + 1]
    lock = threading.Lock()

    def one() -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            fn()

    for op in ops:
        if not op.on_done(one):
            one()
    one()

"""Run one rank's share of a collective schedule (mn_harness/collectives) on the transport, and
the communication stream that runs collectives one after another.

Posting follows the schedule's execution rule (collectives/schedule.py): the rank walks its
transfers in wire order, posts every receive, then every send with the receives it must
wait for — for a dependent schedule, per peer the latest earlier-step receive on the same
channel, segment by segment (segment j of a send waits for the received segment covering the
same share of the block). Per-peer order is FIFO, so the latest receive from a peer implies the
earlier ones. The collective is done on this rank when all its sends are handed to the kernel
and all its receives are in.

Tags (16 bytes at the start of each segment): iteration, operation id, step, channel, chunk,
segment — the same on both ends, checked by the receiver."""

from __future__ import annotations

import queue
import struct
import threading
import time
from collections.abc import Callable, Sequence

from mn_harness.collectives.schedule import Schedule, Transfer
from mn_harness.worker.threads import STREAM, name_thread
from mn_harness.worker.transport import Transport
from mn_harness.worker.transport_op import TransportOp

TAG = struct.Struct("!IHHHHI")


def tag(iteration: int, op_id: int, step: int, channel: int, chunk: int, segment: int) -> bytes:
    return TAG.pack(iteration & 0xFFFFFFFF, op_id & 0xFFFF, step & 0xFFFF, channel & 0xFFFF,
                    chunk & 0xFFFF, segment & 0xFFFFFFFF)


def segments(nbytes: int, segment_bytes: int) -> list[int]:
    if segment_bytes <= 0 or nbytes <= segment_bytes:
        return [nbytes]
    full, rest = divmod(nbytes, segment_bytes)
    return [segment_bytes] * full + ([rest] if rest else [])


def post(transport: Transport, schedule: Schedule, me: int, ranks: Sequence[int], iteration: int,
         op_id: int) -> tuple[list[TransportOp], int]:
    """Post local rank `me`'s transfers (`ranks[local]` = the job rank to talk to). Returns the
    posted operations and the bytes this rank sends.

    Every receive is posted first (each connection keeps its own FIFO per direction, so this
    changes no byte order), then the sends: a send may then wait for any receive. On a lockstep
    schedule with `Tunables.window` W > 0, the k-th segment sent waits for the (k-W)-th
    segment received, as gloo's ring posts segment k only once segment k-2 is in. With
    `Tunables.recv_ready` as well, the k-th receive is announced to its sender when gloo would
    post it (the (k-W)-th receive and send done) and every send waits for its announcement."""
    seg_bytes = transport.tunables.segment_bytes
    window = transport.tunables.window if schedule.lockstep else 0
    handshake = transport.tunables.recv_ready and schedule.lockstep
    mine = sorted(x for x in schedule.transfers if me in (x.src, x.dst))
    # (channel, peer) -> [(step, segment ops)] of receives, in order
    received: dict[tuple[int, int], list[tuple[int, list[TransportOp]]]] = {}
    arrivals: list[TransportOp] = []  # every segment this rank receives, in posting order
    senders: list[int] = []  # ... and the job rank each comes from
    for t in (x for x in mine if x.dst == me):
        got = [transport.recv(ranks[t.src], size, tag(iteration, op_id, t.step, t.channel, t.chunk, j))
               for j, size in enumerate(segments(t.nbytes, seg_bytes))]
        received.setdefault((t.channel, t.src), []).append((t.step, got))
        arrivals += got
        senders += [ranks[t.src]] * len(got)
    sends: list[TransportOp] = []
    sent = 0
    for t in (x for x in mine if x.src == me):
        sizes = segments(t.nbytes, seg_bytes)
        for j, size in enumerate(sizes):
            after = _depends(received, t, j, len(sizes)) if schedule.dependent else []
            if window and window <= len(sends) < len(arrivals) + window:
                after.append(arrivals[len(sends) - window])
            sends.append(transport.send(ranks[t.dst], size, tag(iteration, op_id, t.step, t.channel, t.chunk, j),
                                        after, handshake))
        sent += t.nbytes
    for k, peer in enumerate(senders if handshake else []):
        gate = [arrivals[k - window], *sends[k - window:k - window + 1]] if window and k >= window else []
        transport.ready(peer, gate)  # gloo posts receive k with send k: after both `window` back
    return arrivals + sends, sent


def _depends(received: dict[tuple[int, int], list[tuple[int, list[TransportOp]]]], t: Transfer, j: int,
             n_segments: int) -> list[TransportOp]:
    after = []
    for (channel, _peer), recvs in received.items():
        if channel != t.channel:
            continue
        earlier = [segs for step, segs in recvs if step < t.step]
        if earlier:
            segs = earlier[-1]
            after.append(segs[min(len(segs) - 1, -(-(j + 1) * len(segs) // n_segments) - 1)])
    return after


class Handle:
    """A collective submitted to the stream: when it ran and what this rank sent."""

    def __init__(self, run: Callable[[], int]):
        self.run = run
        self.done = threading.Event()
        self.t_start = self.t_end = 0.0
        self.bytes_sent = 0
        self.error: BaseException | None = None

    def wait(self) -> None:
        self.done.wait()
        if self.error is not None:
            raise self.error


class CommStream(threading.Thread):
    """Runs submitted collectives one at a time, in submission order, like a CUDA stream: every
    rank therefore posts to its connections in program order."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.todo: queue.SimpleQueue[Handle | None] = queue.SimpleQueue()

    def submit(self, run: Callable[[], int]) -> Handle:
        handle = Handle(run)
        self.todo.put(handle)
        return handle

    def run(self) -> None:
        name_thread(STREAM)
        while (handle := self.todo.get()) is not None:
            handle.t_start = time.monotonic()
            try:
                handle.bytes_sent = handle.run()
            except BaseException as exc:  # reported by Handle.wait()
                handle.error = exc
            handle.t_end = time.monotonic()
            handle.done.set()

    def stop(self) -> None:
        self.todo.put(None)
        self.join()


def runner(transport: Transport, schedule: Schedule, me: int, ranks: Sequence[int], iteration: int,
           op_id: int) -> Callable[[], int]:
    """What the stream runs for one collective: post, then wait for all of it."""
    def run() -> int:
        ops, sent = post(transport, schedule, me, ranks, iteration, op_id)
        for op in ops:
            op.wait()
        return sent
    return run

"""The synthetic traffic's knobs (Tunables): the defaults are what runs use; benchmarks
override them per worker through the spec's `transport` mapping (MN_HARNESS_TRANSPORT).

Standard library only: this runs inside each emulated host."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from mn_harness.worker.transport_op import TAG_BYTES


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
    recv_ready     gloo's handshake: on a ring, a rank announces each receive when it posts it
                   (at the window's release: the receive and the send `window` segments back
                   done) and a send moves only once the peer announced the matching receive;
                   the announcement is queued behind the data its connection is writing.
                   Frames the stream (a 1-byte kind per message, worker/transport.py's
                   docstring). On by default because without it a rank that ends its
                   compute first sends into a peer still computing, so a job's two directions
                   drift apart. On 4jobs-ecn-sync-q400 with DCTCP (a held-back scenario, 5
                   runs per side) a job's two ranks ended their phase 12-15 ms apart on
                   average without it, 3-4 ms with gloo, 4-6 ms with it; the synthetic/gloo
                   slowdown ratio went from 1.034 +/- 0.011 to 1.009 +/- 0.022 (heavy
                   mltcp-cubic's p99 ratio from 1.11 to 1.06). On the 20 cells of
                   bench/fidelity.py, measured with an earlier sender and 3 runs, it had
                   changed no ratio beyond noise (docs/fidelity.md).
    sndbuf, rcvbuf SO_SNDBUF / SO_RCVBUF in bytes; 0 leaves the kernel's autotuning
                   (net.ipv4.tcp_wmem / tcp_rmem) in charge, as gloo does.
    nodelay        TCP_NODELAY: Nagle off, as gloo and NCCL set it.
    connect_retry_s pause between connection attempts while peers start.
    zero_copy      move the payload without copying it between the worker and the kernel: the
                   sender writes each operation's first bytes (kind, tag) and then splices the
                   pages of a memory file into the socket (sendfile), the receiver checks the tag
                   and has the kernel drop the rest as it consumes it (recv with MSG_TRUNC |
                   MSG_WAITALL: one call per operation, no buffer). The bytes on the wire, their
                   order and when an operation counts as sent or received are the same; the
                   payload is filler either way (nothing is reduced). Off (the default): send
                   from and receive into a buffer, io_bytes per call, as gloo does, copying
                   every byte in and out of the kernel.
    """

    io_bytes: int = 1 << 20
    segment_bytes: int = 1 << 20
    window: int = 2
    recv_ready: bool = True
    sndbuf: int = 0
    rcvbuf: int = 0
    nodelay: bool = True
    connect_retry_s: float = 0.05
    zero_copy: bool = False

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

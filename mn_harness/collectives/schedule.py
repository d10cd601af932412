"""The one shape of every collective's schedule: who sends which block to whom in which step.

A schedule lists `Transfer`s between the collective's local ranks 0..n-1 (the phase's
participants in order; mn_harness/jobs maps them to the job's ranks). The same object answers
the arithmetic (bytes each rank sends, the directed pairs that talk, the load each network
link carries) and drives the synthetic worker (mn_harness/worker/collective.py), so what the
worker puts on the wire and what jobs/ideal.py and summary.json count cannot drift apart.

Execution rule, shared by the worker and the tests that check a schedule's meaning:

* the transfers of one step run at the same time;
* when the schedule is `dependent` (a reduction or a forwarding collective), a rank's sends of
  step k on channel c wait for that rank's receives of channel c in steps < k — a rank forwards
  or reduces what it has received. Pipelining splits each transfer into segments and applies the
  rule segment by segment (segment j waits for segment j of the earlier receives), which is how
  NCCL's trees and chains keep every link busy;
* on one directed pair (src -> dst) transfers go in `wire_order` — (step, channel, chunk) — so
  both ends of a connection agree on what the next bytes are without any header;
* when the schedule is `lockstep` (a ring: every rank sends to one neighbour and receives from
  the other, segment for segment), the k-th segment a rank sends and the k-th it receives stand
  at the same place of the pipeline, so a worker may hold a rank to at most W segments sent
  ahead of those received (gloo's ring keeps two sends and two receives in flight; the
  worker's `Tunables.window`). Elsewhere such a rule could deadlock (a tree's leaf sends its
  whole block up before anything comes down), so it applies to lockstep schedules only.

Standard library only: the worker imports this inside each emulated host."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Transfer:
    """`nbytes` of block `chunk` from local rank `src` to `dst` in `step` on `channel`.

    `reduce`: the receiver adds the block to its own copy (reduce-scatter, the tree's way up, a
    parameter server's push); otherwise it stores it (all-gather, broadcast, pulls)."""

    step: int
    channel: int
    chunk: int
    src: int
    dst: int
    nbytes: int
    reduce: bool = False


@dataclass(frozen=True)
class Schedule:
    collective: str
    n: int  # local ranks 0..n-1
    total_bytes: int  # S in the nccl-tests sense (see bandwidth.py)
    transfers: tuple[Transfer, ...]
    dependent: bool = True
    lockstep: bool = False

    @property
    def steps(self) -> int:
        return 1 + max((t.step for t in self.transfers), default=-1)

    def sent_by(self, rank: int) -> int:
        return sum(t.nbytes for t in self.transfers if t.src == rank)

    def received_by(self, rank: int) -> int:
        return sum(t.nbytes for t in self.transfers if t.dst == rank)

    def bytes_sent_per_rank(self) -> list[int]:
        return [self.sent_by(r) for r in range(self.n)]

    def directed_pairs(self) -> list[tuple[int, int]]:
        """(src, dst) pairs that carry data, sorted."""
        return sorted({(t.src, t.dst) for t in self.transfers})

    def peers_of(self, rank: int) -> set[int]:
        """Ranks `rank` exchanges data with in either direction (one connection each)."""
        return {t.dst if t.src == rank else t.src for t in self.transfers if rank in (t.src, t.dst)}

    def wire_order(self, src: int, dst: int) -> list[Transfer]:
        """What goes over src -> dst, in the order both ends use."""
        return sorted(t for t in self.transfers if t.src == src and t.dst == dst)

    def at_step(self, step: int) -> list[Transfer]:
        return sorted(t for t in self.transfers if t.step == step)

    def link_loads(self, path: Callable[[int, int], Iterable[str]]) -> dict[str, int]:
        """Bytes per network link: `path(src, dst)` names the directed links a transfer
        crosses (mn_harness/jobs/ideal.py passes the network plan's routes)."""
        loads: dict[str, int] = defaultdict(int)
        paths: dict[tuple[int, int], list[str]] = {}
        for t in self.transfers:
            hops = paths.setdefault((t.src, t.dst), list(path(t.src, t.dst)))
            for link in hops:
                loads[link] += t.nbytes
        return dict(loads)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def need_ranks(collective: str, n: int, least: int = 2) -> None:
    if n < least:
        raise ValueError(f"{collective} needs at least {least} ranks, got {n}")

"""Ring collectives: all-reduce, reduce-scatter, all-gather, and the broadcast chain.

S bytes on n ranks, rank r sends to r+1 and receives from r-1 (mod n); the buffer is cut into
n blocks of ceil(S/n) bytes (rounded up so every step moves the same amount, as the worker
always did):

* reduce-scatter: n-1 steps; in step k rank r sends block (r-k-1) mod n and adds the block it
  receives to its own, so rank r ends with block r fully reduced (NCCL's convention);
* all-gather: n-1 steps; rank r starts with block r and in step k sends block (r-k) mod n,
  forwarding what it received the step before;
* all-reduce: reduce-scatter then all-gather, 2(n-1) steps of S/n: 2(n-1)/n * S per rank;
* broadcast (NCCL runs it on a ring, i.e. a chain from the root): in step k rank k sends the
  whole buffer to rank k+1; pipelined by segments this takes ~S / link rate, not (n-1) S / rate.
"""

from __future__ import annotations

from mn_harness.collectives.bandwidth import allreduce_factor, share_factor, unit_factor
from mn_harness.collectives.registry import Collective
from mn_harness.collectives.schedule import Schedule, Transfer, ceil_div, need_ranks


def chunk_bytes(total_bytes: int, n: int) -> int:
    need_ranks("a ring collective", n)
    return ceil_div(total_bytes, n)


def steps(n: int) -> int:
    """Steps of ring all-reduce."""
    need_ranks("ring all-reduce", n)
    return 2 * (n - 1)


def _reduce_scatter(total_bytes: int, n: int, first_step: int = 0) -> list[Transfer]:
    chunk = chunk_bytes(total_bytes, n)
    return [Transfer(first_step + k, 0, (r - k - 1) % n, r, (r + 1) % n, chunk, reduce=True)
            for k in range(n - 1) for r in range(n)]


def _all_gather(total_bytes: int, n: int, first_step: int = 0) -> list[Transfer]:
    chunk = chunk_bytes(total_bytes, n)
    return [Transfer(first_step + k, 0, (r - k) % n, r, (r + 1) % n, chunk)
            for k in range(n - 1) for r in range(n)]


def reduce_scatter(total_bytes: int, n: int) -> Schedule:
    return Schedule("reduce_scatter", n, total_bytes, tuple(_reduce_scatter(total_bytes, n)),
                    lockstep=True)


def all_gather(total_bytes: int, n: int) -> Schedule:
    return Schedule("all_gather", n, total_bytes, tuple(_all_gather(total_bytes, n)), lockstep=True)


def ring_allreduce(total_bytes: int, n: int) -> Schedule:
    transfers = _reduce_scatter(total_bytes, n) + _all_gather(total_bytes, n, first_step=n - 1)
    return Schedule("ring_allreduce", n, total_bytes, tuple(transfers), lockstep=True)


def broadcast(total_bytes: int, n: int) -> Schedule:
    """From local rank 0 (the phase puts its root first) down the chain 0 -> 1 -> ... -> n-1."""
    need_ranks("broadcast", n)
    return Schedule("broadcast", n, total_bytes,
                    tuple(Transfer(k, 0, 0, k, k + 1, total_bytes) for k in range(n - 1)))


def bytes_sent_per_worker(total_bytes: int, n: int) -> int:
    """Ring all-reduce: 2(n-1) * ceil(S/n), the per-step rounding the worker really does."""
    return steps(n) * chunk_bytes(total_bytes, n)


RING_ALLREDUCE = Collective("ring_allreduce", lambda c: ring_allreduce(c.nbytes, c.ranks), allreduce_factor,
                            bucketable=True)
REDUCE_SCATTER = Collective("reduce_scatter", lambda c: reduce_scatter(c.nbytes, c.ranks), share_factor)
ALL_GATHER = Collective("all_gather", lambda c: all_gather(c.nbytes, c.ranks), share_factor)
# `root: h2` puts h2 first among the participants (config.workload)
BROADCAST = Collective("broadcast", lambda c: broadcast(c.nbytes, c.ranks), unit_factor, phase_keys=("root",))

"""Ring all-reduce arithmetic (nccl-tests conventions).

S bytes on n workers: reduce-scatter then all-gather, 2(n-1) steps, each worker sends S/n per
step to its right neighbour and receives S/n from its left one. The chunk is rounded up to a
whole byte so every step moves the same amount."""

from __future__ import annotations

import math


def chunk_bytes(total_bytes: int, n: int) -> int:
    if n < 2:
        raise ValueError("ring all-reduce needs at least 2 workers")
    return math.ceil(total_bytes / n)


def steps(n: int) -> int:
    if n < 2:
        raise ValueError("ring all-reduce needs at least 2 workers")
    return 2 * (n - 1)


def bytes_sent_per_worker(total_bytes: int, n: int) -> int:
    """2(n-1)/n * S, with the per-step rounding the worker really does."""
    return steps(n) * chunk_bytes(total_bytes, n)


def bus_bandwidth(total_bytes: int, n: int, seconds: float) -> float:
    """nccl-tests busbw in bytes/s: algbw * 2(n-1)/n."""
    return (total_bytes / seconds) * 2 * (n - 1) / n

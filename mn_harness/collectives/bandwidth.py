"""Bandwidth conventions of nccl-tests (doc/PERFORMANCE.md), per collective.

algbw = S / t, with S the collective's size as nccl-tests counts it (for reduce-scatter and
all-gather the full, all-ranks buffer). busbw = algbw * factor, the factor chosen so that busbw
is comparable to a link's peak rate whatever n is:

  all-reduce (ring or tree)   2(n-1)/n
  reduce-scatter, all-gather  (n-1)/n
  all-to-all                  (n-1)/n
  broadcast                   1
  parameter server            1   (ours: S = gradient bytes; a worker's link carries S each way)
  pipeline                    1   (ours: S = m * activation bytes of one stage boundary)

`bound_fraction` is the busbw an ideal run reaches as a fraction of the link rate when every
rank's host has one link of that rate: busbw factor * S over the busiest rank's bytes. It is 1
for the ring family and below 1 where one rank sends more than the convention assumes (the
tree's inner ranks, a parameter server with fewer servers than workers)."""

from __future__ import annotations

ALLREDUCE = ("ring_allreduce", "tree_allreduce")


def busbw_factor(collective: str, n: int) -> float:
    """n = participating ranks (for the parameter server: its workers)."""
    if collective in ALLREDUCE:
        return 2 * (n - 1) / n
    if collective in ("reduce_scatter", "all_gather", "all_to_all"):
        return (n - 1) / n
    if collective in ("broadcast", "parameter_server", "pipeline"):
        return 1.0
    raise ValueError(f"no bus bandwidth convention for {collective!r}")


def algbw(total_bytes: int, seconds: float) -> float:
    """Bytes per second."""
    return total_bytes / seconds


def busbw(collective: str, total_bytes: int, n: int, seconds: float) -> float:
    """Bytes per second, comparable to a link's rate."""
    return algbw(total_bytes, seconds) * busbw_factor(collective, n)


def bound_fraction(collective: str, total_bytes: int, n: int, busiest_rank_bytes: int) -> float:
    """Best busbw / link rate when each rank's host has one link: factor * S / max bytes."""
    return busbw_factor(collective, n) * total_bytes / busiest_rank_bytes

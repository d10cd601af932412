"""Bandwidth conventions of nccl-tests (doc/PERFORMANCE.md), per collective.

algbw = S / t, with S the collective's size as nccl-tests counts it (for reduce-scatter and
all-gather the full, all-ranks buffer). busbw = algbw * factor, the factor chosen so that busbw
is comparable to a link's peak rate whatever n is. Each collective's record names its factor
(registry.py), one of:

  all-reduce (ring or tree)   2(n-1)/n    allreduce_factor
  reduce-scatter, all-gather  (n-1)/n     share_factor
  all-to-all                  (n-1)/n     share_factor
  broadcast                   1           unit_factor
  parameter server            1   (ours: S = gradient bytes; a worker's link carries S each way)
  pipeline                    1   (ours: S = m * activation bytes of one stage boundary)
  torch_*                     those of the collective it is (its record's counterpart)

`bound_fraction` is the busbw an ideal run reaches as a fraction of the link rate when every
rank's host has one link of that rate: busbw factor * S over the busiest rank's bytes. It is 1
for the ring family and below 1 where one rank sends more than the convention assumes (the
tree's inner ranks, a parameter server with fewer servers than workers)."""

from __future__ import annotations

from mn_harness.collectives import registry


def allreduce_factor(n: int) -> float:
    return 2 * (n - 1) / n


def share_factor(n: int) -> float:
    """Each rank moves the (n-1)/n of S that is not its own."""
    return (n - 1) / n


def unit_factor(n: int) -> float:
    return 1.0


def busbw_factor(collective: str, n: int) -> float:
    """n = participating ranks (for the parameter server: its workers)."""
    record = registry.find(collective)
    if record is None:
        raise ValueError(f"no bus bandwidth convention for {collective!r}")
    return record.busbw_factor(n)


def algbw(total_bytes: int, seconds: float) -> float:
    """Bytes per second."""
    return total_bytes / seconds


def busbw(collective: str, total_bytes: int, n: int, seconds: float) -> float:
    """Bytes per second, comparable to a link's rate."""
    return algbw(total_bytes, seconds) * busbw_factor(collective, n)


def bound_fraction(collective: str, total_bytes: int, n: int, busiest_rank_bytes: int) -> float:
    """Best busbw / link rate when each rank's host has one link: factor * S / max bytes."""
    return busbw_factor(collective, n) * total_bytes / busiest_rank_bytes

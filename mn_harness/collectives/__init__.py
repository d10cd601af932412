"""Every collective's arithmetic and schedule, in one place (standard library only).

The synthetic worker executes these schedules, jobs/ideal.py turns them into ideal times and
bottlenecks, and summary.json reports their bytes, so the three always agree. Each collective
has one record in the registry (registry.py: schedule, ideal time, busbw factor, where the YAML
may name it, ...), made next to its schedule and registered below, in the order messages list
them:

  ring_allreduce    ring.py      2(n-1) steps of S/n
  tree_allreduce    tree.py      NCCL's double binary tree
  reduce_scatter    ring.py      n-1 steps of S/n (ZeRO / FSDP)
  all_gather        ring.py      n-1 steps of S/n
  broadcast         ring.py      chain from the root, pipelined
  all_to_all        pairwise.py  n-1 steps, one block per peer (expert parallelism)
  parameter_server  pairwise.py  push shards to server hosts, pull them back
  pipeline          pipeline.py  point-to-point activations / gradients, micro-batches, 1F1B
  inc_allreduce     inc.py       in-network aggregation: no TCP schedule, each worker sends S
                                 once to the switch (mn_harness/worker/inc.py)
  torch_*           gloo.py      what PyTorch's gloo backend sends (real traffic: torch runs
                                 these, mn_harness/worker/torch_worker.py; short form only)

Bandwidth conventions (algbw, busbw): bandwidth.py."""

from __future__ import annotations

from mn_harness.collectives import gloo, inc, pairwise, pipeline, ring, tree
from mn_harness.collectives.bandwidth import algbw, bound_fraction, busbw, busbw_factor
from mn_harness.collectives.registry import (
    INC,
    SYNTHETIC,
    TORCH,
    Call,
    Collective,
    Ideal,
    Network,
    find,
    get,
    names,
    register,
)
from mn_harness.collectives.schedule import Schedule, Transfer

for _record in (ring.RING_ALLREDUCE, tree.TREE_ALLREDUCE, ring.REDUCE_SCATTER, ring.ALL_GATHER, ring.BROADCAST,
                pairwise.ALL_TO_ALL, pairwise.PARAMETER_SERVER, pipeline.PIPELINE, inc.INC_ALLREDUCE, *gloo.RECORDS):
    register(_record)


def schedule(collective: str, total_bytes: int, n: int, *, servers: int = 0,
             micro_batches: int = 1, grad_bytes: int | None = None) -> Schedule:
    """The schedule of `collective` on n local ranks. `servers`: the parameter server's (the
    last `servers` of the n ranks); `micro_batches` and `grad_bytes`: the pipeline's (its
    total_bytes are the activation bytes of one micro-batch)."""
    return get(collective).transfers(Call(total_bytes, n, servers, micro_batches, grad_bytes))


__all__ = ["INC", "SYNTHETIC", "TORCH", "Call", "Collective", "Ideal", "Network", "Schedule", "Transfer",
           "algbw", "bound_fraction", "busbw", "busbw_factor", "find", "get", "names", "register", "schedule"]

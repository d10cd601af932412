"""Every collective's arithmetic and schedule, in one place (standard library only).

The synthetic worker executes these schedules, jobs/ideal.py turns them into ideal times and
bottlenecks, and summary.json reports their bytes, so the three always agree. Collectives by
their YAML name (`collective:` of a job or a phase):

  ring_allreduce    ring.py      2(n-1) steps of S/n
  tree_allreduce    tree.py      NCCL's double binary tree
  reduce_scatter    ring.py      n-1 steps of S/n (ZeRO / FSDP)
  all_gather        ring.py      n-1 steps of S/n
  broadcast         ring.py      chain from the root, pipelined
  all_to_all        pairwise.py  n-1 steps, one block per peer (expert parallelism)
  parameter_server  pairwise.py  push shards to server hosts, pull them back
  pipeline          pipeline.py  point-to-point activations / gradients, micro-batches, 1F1B

inc_allreduce (in-network aggregation, mn_harness/worker/inc.py) is not a TCP schedule: each
worker sends S once to the switch (inc.bytes_sent_per_iteration).
Bandwidth conventions (algbw, busbw): bandwidth.py."""

from __future__ import annotations

from mn_harness.collectives import pairwise, pipeline, ring, tree
from mn_harness.collectives.bandwidth import algbw, bound_fraction, busbw, busbw_factor
from mn_harness.collectives.schedule import Schedule, Transfer

SCHEDULED = ("ring_allreduce", "tree_allreduce", "reduce_scatter", "all_gather", "broadcast",
             "all_to_all", "parameter_server", "pipeline")
INC = "inc_allreduce"
NAMES = SCHEDULED + (INC,)
# Collectives that may be split into DDP-style buckets issued during backward (overlap).
BUCKETABLE = ("ring_allreduce", "tree_allreduce")


def schedule(collective: str, total_bytes: int, n: int, *, servers: int = 0,
             micro_batches: int = 1, grad_bytes: int | None = None) -> Schedule:
    """The schedule of `collective` on n local ranks. `servers`: the parameter server's (the
    last `servers` of the n ranks); `micro_batches` and `grad_bytes`: the pipeline's (its
    total_bytes are the activation bytes of one micro-batch)."""
    if collective == "ring_allreduce":
        return ring.ring_allreduce(total_bytes, n)
    if collective == "tree_allreduce":
        return tree.tree_allreduce(total_bytes, n)
    if collective == "reduce_scatter":
        return ring.reduce_scatter(total_bytes, n)
    if collective == "all_gather":
        return ring.all_gather(total_bytes, n)
    if collective == "broadcast":
        return ring.broadcast(total_bytes, n)
    if collective == "all_to_all":
        return pairwise.all_to_all(total_bytes, n)
    if collective == "parameter_server":
        return pairwise.parameter_server(total_bytes, n, servers)
    if collective == "pipeline":
        return pipeline.pipeline(total_bytes, n, micro_batches, grad_bytes)
    raise ValueError(f"unknown collective {collective!r} (known: {', '.join(NAMES)})")


__all__ = ["BUCKETABLE", "INC", "NAMES", "SCHEDULED", "Schedule", "Transfer", "algbw",
           "bound_fraction", "busbw", "busbw_factor", "schedule"]

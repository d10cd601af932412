"""Make a small Chakra trace of one data-parallel training iteration (the project's own trace
generator; the test trace under topologies/traces/ is its output).

The iteration: forward (one compute node), backward in `buckets` compute nodes, after each an
all-reduce of that bucket's gradients that depends only on it (so it runs while the rest of
backward computes, as DDP does), an optimizer step that depends on every all-reduce, and an
all-gather of parameters (ZeRO-style) at the end. Durations in microseconds, sizes in bytes.

Usage: python -m mn_harness.chakra.generate OUT.et [--forward-us 30000] [--backward-us 60000]
       [--buckets 3] [--bucket-bytes 1000000] [--gather-bytes 500000] [--optimizer-us 5000]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mn_harness.chakra.trace import ALL_GATHER, ALL_REDUCE, COMM_COLL_NODE, COMP_NODE, Node, Trace, encode


def ddp_iteration(forward_us: int = 30_000, backward_us: int = 60_000, buckets: int = 3,
                  bucket_bytes: int = 1_000_000, gather_bytes: int = 500_000, optimizer_us: int = 5_000) -> Trace:
    nodes = [Node(1, "forward", COMP_NODE, duration_micros=forward_us)]
    previous, reduces = 1, []
    for b in range(buckets):
        compute = Node(len(nodes) + 1, f"backward.{b}", COMP_NODE, data_deps=(previous,),
                       duration_micros=backward_us // buckets)
        nodes.append(compute)
        reduce = Node(len(nodes) + 1, f"all_reduce.bucket{b}", COMM_COLL_NODE, data_deps=(compute.id,),
                      attrs={"is_cpu_op": False, "comm_type": ALL_REDUCE, "comm_size": bucket_bytes})
        nodes.append(reduce)
        reduces.append(reduce.id)
        previous = compute.id
    optimizer = Node(len(nodes) + 1, "optimizer", COMP_NODE, data_deps=(previous, *reduces),
                     duration_micros=optimizer_us)
    nodes.append(optimizer)
    nodes.append(Node(len(nodes) + 1, "all_gather.params", COMM_COLL_NODE, data_deps=(optimizer.id,),
                      attrs={"is_cpu_op": False, "comm_type": ALL_GATHER, "comm_size": gather_bytes}))
    return Trace("0.0.4", tuple(nodes))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--forward-us", type=int, default=30_000)
    parser.add_argument("--backward-us", type=int, default=60_000)
    parser.add_argument("--buckets", type=int, default=3)
    parser.add_argument("--bucket-bytes", type=int, default=1_000_000)
    parser.add_argument("--gather-bytes", type=int, default=500_000)
    parser.add_argument("--optimizer-us", type=int, default=5_000)
    args = parser.parse_args(argv)
    trace = ddp_iteration(args.forward_us, args.backward_us, args.buckets, args.bucket_bytes,
                          args.gather_bytes, args.optimizer_us)
    Path(args.out).write_bytes(encode(trace))
    print(f"{args.out}: {len(trace.nodes)} nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())

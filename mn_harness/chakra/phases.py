"""A Chakra trace as a job's phase list: every rank of the job runs the trace's iteration.

Nodes are taken in dependency order (ties by id). A compute node (COMP_NODE) becomes a compute
phase of its duration that first waits for the collectives it depends on; a collective
(COMM_COLL_NODE, attributes comm_type and comm_size) becomes a non-blocking communication
phase — the phases after it run while it communicates, unless they depend on it — which is how
a trace says that DDP's all-reduces overlap backward. All-reduce runs as ring_allreduce;
all-gather, reduce-scatter, broadcast and all-to-all as themselves. Other node types (memory,
metadata) are skipped; point-to-point send/recv nodes, the rooted collectives (reduce, gather,
scatter) and barriers are refused with one line naming the node."""

from __future__ import annotations

import heapq
from pathlib import Path

from mn_harness.chakra import protobuf
from mn_harness.chakra import trace as et
from mn_harness.config.workload import MAX_PHASES, CommPhase, ComputePhase, ComputeSpec, Phase
from mn_harness.errors import ConfigError

COLLECTIVES = {et.ALL_REDUCE: "ring_allreduce", et.ALL_GATHER: "all_gather", et.BROADCAST: "broadcast",
               et.ALL_TO_ALL: "all_to_all", et.REDUCE_SCATTER: "reduce_scatter"}
SKIPPED = (et.METADATA_NODE, et.MEM_LOAD_NODE, et.MEM_STORE_NODE)


def ordered(nodes: tuple[et.Node, ...], where: str) -> list[et.Node]:
    by_id = {n.id: n for n in nodes}
    if len(by_id) != len(nodes):
        raise ConfigError(where, "two nodes share an id")
    waiting = {n.id: {d for d in n.deps if d in by_id} for n in nodes}
    users: dict[int, list[int]] = {}
    for nid, deps in waiting.items():
        for d in deps:
            users.setdefault(d, []).append(nid)
    ready = [nid for nid, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    out = []
    while ready:
        nid = heapq.heappop(ready)
        out.append(by_id[nid])
        for u in users.get(nid, []):
            waiting[u].discard(nid)
            if not waiting[u]:
                heapq.heappush(ready, u)
    if len(out) != len(nodes):
        raise ConfigError(where, "the trace's dependencies form a cycle")
    return out


def phases_from_trace(path: Path, where: str, workers: tuple[str, ...]) -> tuple[Phase, ...]:
    try:
        trace = et.read(path)
    except OSError as exc:
        raise ConfigError(where, f"cannot read trace {str(path)!r}: {exc.strerror or exc}") from None
    except (protobuf.DecodeError, EOFError, ValueError) as exc:  # gzip raises EOFError/BadGzipFile
        raise ConfigError(where, f"{str(path)!r} is not a Chakra trace: {exc}") from None
    phases: list[Phase] = []
    comm_index: dict[int, int] = {}  # node id -> phase index of its collective
    comm_of: dict[int, set[int]] = {}  # node id -> collectives it depends on (through skipped nodes)
    for node in ordered(trace.nodes, where):
        deps: set[int] = set()
        for d in node.deps:
            deps |= {comm_index[d]} if d in comm_index else comm_of.get(d, set())
        label = f"node {node.id} ({node.name!r})"
        if node.type == et.COMP_NODE:
            phases.append(ComputePhase(node.name or f"compute{node.id}",
                                       ComputeSpec(node.duration_micros / 1e6), waits=tuple(sorted(deps))))
        elif node.type == et.COMM_COLL_NODE:
            kind, size = node.attrs.get("comm_type"), node.attrs.get("comm_size")
            if kind not in COLLECTIVES:
                raise ConfigError(where, f"{label}: collective type {kind!r} is not supported "
                                  f"(supported: all-reduce, all-gather, reduce-scatter, broadcast, all-to-all)")
            if not isinstance(size, int) or size <= 0:
                raise ConfigError(where, f"{label}: comm_size must be a positive byte count, got {size!r}")
            comm_index[node.id] = len(phases)
            phases.append(CommPhase(node.name or COLLECTIVES[kind], COLLECTIVES[kind], size, workers,
                                    blocking=False))
        elif node.type in SKIPPED:
            comm_of[node.id] = deps
            continue
        else:
            raise ConfigError(where, f"{label}: node type {node.type} is not supported (point-to-point "
                              "send/recv: write a pipeline phase instead)")
        if len(phases) > MAX_PHASES:
            raise ConfigError(where, f"more than {MAX_PHASES} phases per iteration")
    return tuple(phases)

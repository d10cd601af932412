"""A job's phases as the list of operations every worker runs per iteration (its "program").

One builder for the worker (which runs it, mn_harness/worker/program.py) and for the ideal
time (jobs/ideal.py, which plays it with ideal durations), so both see the same overlap.
Operations, plain dicts so they travel in the worker spec's JSON:

* `compute`  sleep `fraction` of compute phase `k`'s duration this iteration (phase `phase`);
* `comm`     a collective on job ranks `ranks` (in the collective's order); `async`: issued on
  the worker's communication stream while the next operations run, as CUDA streams and DDP do;
* `pipeline` a pipeline pass (1F1B, its own compute) on `ranks`;
* `wait`     until the async collectives `ids` have finished.

Every collective goes through one stream in program order, so every rank posts them to its
connections in the same order. DDP overlap (`overlap` on a communication phase): the compute
phase before it becomes forward ((1 - backward) of it) and backward in slices; after the slice
that produces bucket j (gradients are produced evenly over backward, the small first bucket
first), bucket j's all-reduce is issued async; after backward the worker waits for all buckets
(the optimizer needs them). A ranks's compute operations are skipped by ranks that do not
compute (parameter servers) and its collectives by ranks that do not take part."""

from __future__ import annotations

from typing import Any

from mn_harness.config import JobConfig
from mn_harness.config.workload import CommPhase, ComputePhase

Op = dict[str, Any]


def comm_op(job: JobConfig, phase: CommPhase, index: int, op_id: int, *, name: str | None = None,
            nbytes: int | None = None, is_async: bool = False) -> Op:
    op: Op = {"op": "comm", "name": name or phase.name, "phase": index, "id": op_id,
              "collective": phase.collective, "bytes": phase.bytes if nbytes is None else nbytes,
              "ranks": [job.rank_of(h) for h in phase.participants], "servers": phase.servers,
              "async": is_async}
    if phase.collective == "pipeline":
        op.update(op="pipeline", micro_batches=phase.micro_batches, forward_s=phase.forward_s,
                  backward_s=phase.backward_s, grad_bytes=phase.grad_bytes, **{"async": False})
    return op


def job_program(job: JobConfig) -> list[Op]:
    ops: list[Op] = []
    pending: list[int] = []  # async collectives not yet waited for
    ids_of: dict[int, list[int]] = {}  # phase index -> its collectives' ids
    next_id = 0

    def wait(ids: list[int]) -> None:
        ids = [i for i in ids if i in pending]
        if ids:
            ops.append({"op": "wait", "ids": ids})
            for i in ids:
                pending.remove(i)

    k = -1
    for index, phase in enumerate(job.phases):
        if isinstance(phase, ComputePhase):
            k += 1
            wait(list(pending) if phase.waits is None else [i for p in phase.waits for i in ids_of.get(p, [])])
            nxt = job.phases[index + 1] if index + 1 < len(job.phases) else None
            if not (isinstance(nxt, CommPhase) and nxt.overlap):
                ops.append({"op": "compute", "name": phase.name, "phase": index, "k": k, "fraction": 1.0})
                continue
            overlap = nxt.overlap
            if overlap.backward < 1:
                ops.append({"op": "compute", "name": f"{phase.name}.forward", "phase": index, "k": k,
                            "fraction": 1 - overlap.backward})
            buckets = overlap.buckets(nxt.bytes)
            for j, size in enumerate(buckets):
                ops.append({"op": "compute", "name": f"{phase.name}.backward", "phase": index, "k": k,
                            "fraction": overlap.backward * size / nxt.bytes})
                ops.append(comm_op(job, nxt, index + 1, next_id, name=f"{nxt.name}.bucket{j}",
                                   nbytes=size, is_async=True))
                pending.append(next_id)
                ids_of.setdefault(index + 1, []).append(next_id)
                next_id += 1
            if nxt.blocking:
                wait(ids_of[index + 1])
        elif not phase.overlap:
            if phase.collective == "pipeline":
                wait(list(pending))  # a pipeline pass posts from the main thread: stream idle first
            ops.append(comm_op(job, phase, index, next_id, is_async=not phase.blocking))
            if not phase.blocking:
                pending.append(next_id)
            ids_of.setdefault(index, []).append(next_id)
            next_id += 1
    wait(list(pending))
    return ops


def comm_ops(program: list[Op]) -> list[Op]:
    return [op for op in program if op["op"] in ("comm", "pipeline")]

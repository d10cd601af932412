"""A job's phases as the list of operations every worker runs per iteration (its "program").

One builder for the worker (which runs it, mn_harness/worker/program.py) and for the ideal
time (jobs/ideal.py, which plays it with ideal durations), so both see the same overlap. The
operations are mn_harness/worker/program_ops.py's (compute, collective, pipeline pass, wait).

Every collective goes through one stream in program order, so every rank posts them to its
connections in the same order. DDP overlap (`overlap` on a communication phase): the compute
phase before it becomes forward ((1 - backward) of it) and backward in slices; after the slice
that produces bucket j (gradients are produced evenly over backward, the small first bucket
first), bucket j's all-reduce is issued async; after backward the worker waits for all buckets
(the optimizer needs them). A ranks's compute operations are skipped by ranks that do not
compute (parameter servers) and its collectives by ranks that do not take part."""

from __future__ import annotations

from mn_harness.config import JobConfig
from mn_harness.config.workload import CommPhase, ComputePhase
from mn_harness.worker.program_ops import CollectiveOp, ComputeOp, PipelineOp, ProgramOp, WaitOp


def collective_op(job: JobConfig, phase: CommPhase, index: int, op_id: int, *, name: str | None = None,
                  nbytes: int | None = None, is_async: bool = False) -> CollectiveOp:
    ranks = tuple(job.rank_of(h) for h in phase.participants)
    if phase.record.pipeline_pass:
        return PipelineOp(name or phase.name, index, op_id, phase.collective, phase.bytes, ranks, phase.servers,
                          False, phase.micro_batches, phase.forward_s, phase.backward_s, phase.grad_bytes)
    return CollectiveOp(name or phase.name, index, op_id, phase.collective, phase.bytes if nbytes is None else nbytes,
                        ranks, phase.servers, is_async)


def job_program(job: JobConfig) -> list[ProgramOp]:
    require_scaled(job)
    ops: list[ProgramOp] = []
    pending: list[int] = []  # async collectives not yet waited for
    ids_of: dict[int, list[int]] = {}  # phase index -> its collectives' ids
    next_id = 0

    def wait(ids: list[int]) -> None:
        ids = [i for i in ids if i in pending]
        if ids:
            ops.append(WaitOp(tuple(ids)))
            for i in ids:
                pending.remove(i)

    k = -1
    for index, phase in enumerate(job.phases):
        if isinstance(phase, ComputePhase):
            k += 1
            wait(list(pending) if phase.waits is None else [i for p in phase.waits for i in ids_of.get(p, [])])
            nxt = job.phases[index + 1] if index + 1 < len(job.phases) else None
            if not (isinstance(nxt, CommPhase) and nxt.overlap):
                ops.append(ComputeOp(phase.name, index, k, 1.0))
                continue
            overlap = nxt.overlap
            if overlap.backward < 1:
                ops.append(ComputeOp(f"{phase.name}.forward", index, k, 1 - overlap.backward))
            buckets = overlap.buckets(nxt.bytes)
            for j, size in enumerate(buckets):
                ops.append(ComputeOp(f"{phase.name}.backward", index, k, overlap.backward * size / nxt.bytes))
                ops.append(collective_op(job, nxt, index + 1, next_id, name=f"{nxt.name}.bucket{j}",
                                         nbytes=size, is_async=True))
                pending.append(next_id)
                ids_of.setdefault(index + 1, []).append(next_id)
                next_id += 1
            if nxt.blocking:
                wait(ids_of[index + 1])
        elif not phase.overlap:
            if phase.record.pipeline_pass:
                wait(list(pending))  # a pipeline pass posts from the main thread: stream idle first
            ops.append(collective_op(job, phase, index, next_id, is_async=not phase.blocking))
            if not phase.blocking:
                pending.append(next_id)
            ids_of.setdefault(index, []).append(next_id)
            next_id += 1
    wait(list(pending))
    return ops


def require_scaled(job: JobConfig) -> None:
    """A job's bytes are what runs only once its scale rule is applied (a step after loading)."""
    if job.unscaled:
        raise ValueError(f"job {job.name!r}: its scale rule is not applied yet "
                         "(mn_harness.jobs.scaling.apply_scaling after loading the experiment)")


def collective_ops(program: list[ProgramOp]) -> list[CollectiveOp]:
    return [op for op in program if isinstance(op, CollectiveOp)]

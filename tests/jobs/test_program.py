"""A job's program: the operations every rank runs per iteration (DDP buckets, traces' waits),
and their JSON form in the worker spec."""

import pytest

from mn_harness.config import Experiment
from mn_harness.jobs.program import job_program
from mn_harness.worker.program_ops import CollectiveOp, ComputeOp, PipelineOp, WaitOp, op_from_json
from tests.config.test_workload import BASE


def job(phases, workers=("h1", "h2")):
    raw = {**BASE, "jobs": [{"name": "j", "workers": list(workers), "iterations": 1, "phases": phases}]}
    return Experiment.from_dict(raw).jobs[0]


def kinds(ops):
    return [(type(o).__name__, getattr(o, "name", None)) for o in ops]


def test_sequential_phases_are_blocking_in_order():
    ops = job_program(job([{"compute": "10ms"}, {"collective": "all_gather", "bytes": 100},
                           {"compute": "5ms"}, {"collective": "ring_allreduce", "bytes": 200}]))
    assert kinds(ops) == [("ComputeOp", "compute"), ("CollectiveOp", "all_gather"),
                          ("ComputeOp", "compute"), ("CollectiveOp", "ring_allreduce")]
    assert [o.k for o in ops if isinstance(o, ComputeOp)] == [0, 1]
    assert not any(o.is_async for o in ops if isinstance(o, CollectiveOp))
    assert ops[1].ranks == (0, 1)


def test_ddp_overlap_issues_buckets_during_backward_then_waits():
    ops = job_program(job([{"compute": "90ms"},
                           {"collective": "ring_allreduce", "bytes": "3MB",
                            "overlap": {"bucket": "1MB", "first_bucket": "500KB", "backward": 0.5}}]))
    assert kinds(ops) == [("ComputeOp", "compute.forward"),
                          ("ComputeOp", "compute.backward"), ("CollectiveOp", "ring_allreduce.bucket0"),
                          ("ComputeOp", "compute.backward"), ("CollectiveOp", "ring_allreduce.bucket1"),
                          ("ComputeOp", "compute.backward"), ("CollectiveOp", "ring_allreduce.bucket2"),
                          ("ComputeOp", "compute.backward"), ("CollectiveOp", "ring_allreduce.bucket3"),
                          ("WaitOp", None)]
    fractions = [o.fraction for o in ops if isinstance(o, ComputeOp)]
    assert fractions == pytest.approx([0.5, 0.5 * 0.5 / 3, 0.5 / 3, 0.5 / 3, 0.5 * 0.5 / 3])
    assert sum(fractions) == pytest.approx(1.0)
    buckets = [o for o in ops if isinstance(o, CollectiveOp)]
    assert [b.bytes for b in buckets] == [500_000, 1_000_000, 1_000_000, 500_000]
    assert all(b.is_async and b.phase == 1 for b in buckets)
    assert ops[-1] == WaitOp(tuple(b.id for b in buckets))


def test_pipeline_waits_for_the_stream_first():
    ops = job_program(job([{"compute": "90ms"},
                           {"collective": "ring_allreduce", "bytes": "3MB", "overlap": {"bucket": "1MB"}},
                           {"collective": "pipeline", "bytes": "1MB", "micro_batches": 2}]))
    assert isinstance(ops[-1], PipelineOp) and not ops[-1].is_async
    assert (ops[-1].micro_batches, ops[-1].grad_bytes) == (2, 1_000_000)
    assert isinstance(ops[-2], WaitOp)


def test_every_operation_survives_its_json_form():
    ops = job_program(job([{"compute": "90ms"},
                           {"collective": "ring_allreduce", "bytes": "3MB", "overlap": {"bucket": "1MB"}},
                           {"collective": "pipeline", "bytes": "1MB", "micro_batches": 2, "forward": "1ms"},
                           {"collective": "all_to_all", "bytes": "1MB", "blocking": False}, {"compute": "1ms"}]))
    assert {type(o) for o in ops} == {ComputeOp, CollectiveOp, PipelineOp, WaitOp}
    for op in ops:
        raw = op.to_json()
        assert op_from_json(raw) == op
        # the worker spec's keys (raw/*.spec.json): `op` names the kind, `async` the stream
        assert raw["op"] == {ComputeOp: "compute", CollectiveOp: "comm", PipelineOp: "pipeline",
                             WaitOp: "wait"}[type(op)]
        if isinstance(op, CollectiveOp):
            assert raw["async"] is op.is_async and raw["ranks"] == list(op.ranks)

"""A job's program: the operations every rank runs per iteration (DDP buckets, traces' waits)."""

import pytest

from mn_harness.config import Experiment
from mn_harness.jobs.program import job_program
from tests.config.test_workload import BASE


def job(phases, workers=("h1", "h2")):
    raw = {**BASE, "jobs": [{"name": "j", "workers": list(workers), "iterations": 1, "phases": phases}]}
    return Experiment.from_dict(raw).jobs[0]


def test_sequential_phases_are_blocking_in_order():
    ops = job_program(job([{"compute": "10ms"}, {"collective": "all_gather", "bytes": 100},
                           {"compute": "5ms"}, {"collective": "ring_allreduce", "bytes": 200}]))
    assert [(o["op"], o.get("name")) for o in ops] == [("compute", "compute"), ("comm", "all_gather"),
                                                        ("compute", "compute"), ("comm", "ring_allreduce")]
    assert [o["k"] for o in ops if o["op"] == "compute"] == [0, 1]
    assert not any(o.get("async") for o in ops) and ops[1]["ranks"] == [0, 1]


def test_ddp_overlap_issues_buckets_during_backward_then_waits():
    ops = job_program(job([{"compute": "90ms"},
                           {"collective": "ring_allreduce", "bytes": "3MB",
                            "overlap": {"bucket": "1MB", "first_bucket": "500KB", "backward": 0.5}}]))
    kinds = [(o["op"], o.get("name")) for o in ops]
    assert kinds == [("compute", "compute.forward"),
                     ("compute", "compute.backward"), ("comm", "ring_allreduce.bucket0"),
                     ("compute", "compute.backward"), ("comm", "ring_allreduce.bucket1"),
                     ("compute", "compute.backward"), ("comm", "ring_allreduce.bucket2"),
                     ("compute", "compute.backward"), ("comm", "ring_allreduce.bucket3"),
                     ("wait", None)]
    fractions = [o["fraction"] for o in ops if o["op"] == "compute"]
    assert fractions == pytest.approx([0.5, 0.5 * 0.5 / 3, 0.5 / 3, 0.5 / 3, 0.5 * 0.5 / 3])
    assert sum(fractions) == pytest.approx(1.0)
    buckets = [o for o in ops if o["op"] == "comm"]
    assert [b["bytes"] for b in buckets] == [500_000, 1_000_000, 1_000_000, 500_000]
    assert all(b["async"] and b["phase"] == 1 for b in buckets)
    assert ops[-1]["ids"] == [b["id"] for b in buckets]


def test_pipeline_waits_for_the_stream_first():
    ops = job_program(job([{"compute": "90ms"},
                           {"collective": "ring_allreduce", "bytes": "3MB", "overlap": {"bucket": "1MB"}},
                           {"collective": "pipeline", "bytes": "1MB", "micro_batches": 2}]))
    assert [o["op"] for o in ops][-1] == "pipeline"
    assert ops[-2]["op"] == "wait"

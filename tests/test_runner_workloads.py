"""Real runs of the workloads (Mininet hosts, Linux routers, HTB, kernel TCP): every collective,
DDP overlap, seeded stragglers, a Chakra trace. Small bytes; they need root and take seconds.

What is checked here is what does not depend on the machine's speed: every row present, every
byte the arithmetic says on the wire (tcpi_bytes_acked within 1%), the phases' order in time,
delays reproduced by seed. How close the times come to ideal is measured by bench/collectives.py
and bench/overlap.py (no timed assertions in tests)."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from mn_harness import collectives
from mn_harness.config import Experiment, load_experiment
from mn_harness.runner import run_experiment
from tests.helpers import TOPOLOGIES

pytestmark = [pytest.mark.root, pytest.mark.slow]


def dumbbell(jobs: list[dict], bw: str = "300Mbit", seed: int = 1) -> Experiment:
    raw = yaml.safe_load((TOPOLOGIES / "dumbbell-2jobs.yaml").read_text())
    raw["link_defaults"]["bw"] = bw
    raw["links"][2]["bw"] = bw
    raw["jobs"] = jobs
    raw["run"].update(dataplane="linux", seed=seed)
    return Experiment.from_dict(raw, "workloads")


def read(results: Path, name: str) -> list[dict]:
    with open(results / name) as f:
        return list(csv.DictReader(f))


def check_rows_and_bytes(exp: Experiment, results: Path) -> dict:
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "completed"
    rows = read(results, "iterations.csv")
    for job in exp.jobs:
        keys = {(int(r["rank"]), int(r["iteration"])) for r in rows if r["job"] == job.name}
        assert keys == {(r, i) for r in range(job.n_ranks) for i in range(job.iterations)}, job.name
        info = summary["jobs"][job.name]
        assert info["missing_rows"] == 0 and info["iterations"] == job.iterations
        # bytes really acknowledged by the peers, all the rank's sockets, vs the arithmetic
        for rank, expected in enumerate(info["bytes_sent_per_rank"]):
            acked = info["bytes_acked_per_rank"].get(str(rank), 0)
            # (+ a sequence number each for a connection's SYN and FIN: a few bytes)
            assert acked == pytest.approx(expected * job.iterations, rel=0.01, abs=16), (job.name, rank)
    return summary


@pytest.mark.parametrize("collective", collectives.names(engine=collectives.SYNTHETIC, pipeline_pass=False))
def test_every_collective_runs_with_every_row_and_its_bytes(tmp_path, collective):
    job: dict = {"name": "j", "workers": ["h1", "h3"], "iterations": 3, "cc": "cubic",
                 "phases": [{"compute": "20ms"}, {"collective": collective, "bytes": "1MB"}]}
    if collective == "parameter_server":
        job["servers"] = ["h2"]
    if collective in ("tree_allreduce", "all_to_all"):  # more than one peer per rank
        job["workers"] = ["h1", "h3", "h2", "h4"]
    exp = dumbbell([job])
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    check_rows_and_bytes(exp, results)
    phases = read(results, "phases.csv")
    n_ranks = exp.jobs[0].n_ranks
    comm = [p for p in phases if p["kind"] == "comm"]
    assert len(comm) == n_ranks * 3 and {p["collective"] for p in comm} == {collective}
    compute = [p for p in phases if p["kind"] == "compute"]
    assert len(compute) == exp.jobs[0].n_workers * 3  # servers do not compute


def test_pipeline_and_a_sequence_of_collectives(tmp_path):
    job = {"name": "j", "workers": ["h1", "h3", "h2"], "iterations": 3, "cc": "cubic",
           "phases": [{"compute": "10ms"}, {"collective": "all_gather", "bytes": "600KB"},
                      {"collective": "pipeline", "bytes": "100KB", "micro_batches": 4, "forward": "2ms",
                       "backward": "4ms"},
                      {"compute": "5ms"}, {"collective": "reduce_scatter", "bytes": "600KB"}]}
    exp = dumbbell([job])
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    check_rows_and_bytes(exp, results)
    phases = read(results, "phases.csv")
    for rank in range(3):
        for it in range(3):
            mine = sorted((p for p in phases if p["rank"] == str(rank) and p["iteration"] == str(it)),
                          key=lambda p: float(p["t_start"]))
            assert [p["name"] for p in mine] == ["compute", "all_gather", "pipeline", "compute", "reduce_scatter"]
            for a, b in zip(mine, mine[1:], strict=False):
                assert float(a["t_end"]) <= float(b["t_start"]) + 1e-6  # in order, no overlap
    it = read(results, "iterations.csv")[0]
    assert float(it["iter_time"]) >= float(it["t_comm_end"]) - float(it["t_start"])


def test_ddp_overlap_communicates_during_backward(tmp_path):
    job = {"name": "j", "workers": ["h1", "h3"], "iterations": 4, "cc": "cubic",
           "bytes_per_iteration": "4MB", "compute": "90ms",
           "overlap": {"bucket": "1MB", "first_bucket": "1MB"}}
    exp = dumbbell([job])
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    check_rows_and_bytes(exp, results)
    phases = read(results, "phases.csv")
    for rank in (0, 1):
        for it in range(4):
            mine = [p for p in phases if p["rank"] == str(rank) and p["iteration"] == str(it)]
            backward = next(p for p in mine if p["name"] == "compute.backward")
            buckets = sorted((p for p in mine if p["kind"] == "comm"), key=lambda p: float(p["t_start"]))
            assert [b["name"] for b in buckets] == [f"ring_allreduce.bucket{j}" for j in range(4)]
            # the first buckets start while backward still computes: communication overlaps compute
            assert float(buckets[0]["t_start"]) < float(backward["t_end"])
            assert float(buckets[0]["t_start"]) > float(backward["t_start"])
    rows = read(results, "iterations.csv")
    assert all(float(r["t_comm_start"]) < float(r["t_start"]) + 0.09 for r in rows)


def straggler_run(tmp_path: Path, seed: int) -> list[tuple]:
    job = {"name": "j", "workers": ["h1", "h3"], "iterations": 6, "cc": "cubic", "bytes_per_iteration": "500KB",
           "compute": {"mean": "30ms", "jitter": "20%"},
           "stragglers": [{"ranks": [1], "delay": "40ms", "probability": 0.5}]}
    results = run_experiment(dumbbell([job], seed=seed), out_root=tmp_path / str(seed), log=lambda *_: None)
    return [(p["rank"], p["iteration"], p["planned_s"], p["delay_s"])
            for p in read(results, "phases.csv") if p["kind"] == "compute"]


def test_straggler_delays_repeat_with_the_seed_and_differ_with_another(tmp_path):
    first, again, other = (straggler_run(tmp_path / name, seed) for name, seed in
                           (("a", 1), ("b", 1), ("c", 2)))
    assert first == again
    assert first != other
    assert len(first) == 12 and any(float(d) >= 0.04 * 0.5 for r, _, _, d in first if r == "1")


def test_a_chakra_trace_job(tmp_path):
    exp = load_experiment(TOPOLOGIES / "ddp-trace.yaml")
    exp = exp.with_jobs([dataclasses.replace(exp.jobs[0], iterations=3)]).with_run(dataplane="linux")
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    check_rows_and_bytes(exp, results)
    names = {p["name"] for p in read(results, "phases.csv")}
    assert {"forward", "optimizer", "all_reduce.bucket2", "all_gather.params"} <= names

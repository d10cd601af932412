"""Real runs in network namespaces: Mininet hosts, Linux routers, HTB queues, kernel TCP.

These are the harness's end-to-end checks; they need root and take a few seconds each."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from mn_harness.collectives import ring
from mn_harness.config import Experiment
from mn_harness.runner import run_experiment
from tests.helpers import small_demo

pytestmark = [pytest.mark.root, pytest.mark.slow]


def read_rows(results: Path) -> list[dict]:
    with open(results / "iterations.csv") as f:
        return list(csv.DictReader(f))


def test_demo_topology_completes_with_every_row(tmp_path, state_dir):
    exp = Experiment.from_dict(small_demo(), "demo-small")
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    rows = read_rows(results)
    keys = {(r["job"], int(r["rank"]), int(r["iteration"])) for r in rows}
    expected = {(j.name, rank, it) for j in exp.jobs for rank in range(j.n_workers) for it in range(j.iterations)}
    assert keys == expected and len(rows) == len(expected)
    for r in rows:
        assert float(r["iter_time"]) >= 0.060 - 1e-3  # never faster than the compute phase
        assert float(r["t_comm_start"]) - float(r["t_start"]) >= 0.060 - 1e-3
        assert int(r["bytes_sent"]) == ring.bytes_sent_per_worker(2_000_000, 2)
        # the worker's CPU time: moving 2 MB over TCP costs some, the sleeping compute none
        assert 0 < float(r["cpu_s"]) < float(r["iter_time"]) - 0.050
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "completed"
    warmup = exp.warmup_of(exp.jobs[0])
    measured = [float(r["cpu_s"]) for r in rows if r["job"] == "job1" and int(r["iteration"]) >= warmup]
    assert summary["jobs"]["job1"]["worker_cpu"]["per_iteration_s"] == pytest.approx(statistics.mean(measured),
                                                                                       abs=1e-5)
    # the machine's CPU while the jobs ran: one /proc/stat read per 100 ms of the ~0.5 s run
    load = summary["cpu_load"]
    assert load["samples"] >= 3 and 0 < load["busy_mean"] <= 1 and 0 <= load["saturated_share"] <= 1
    assert 0 <= load["steal_mean"] <= load["busy_mean"]
    with open(results / "cpu.csv") as f:
        assert len(list(csv.DictReader(f))) == load["samples"]
    assert summary["jobs"]["job1"]["iterations"] == 4 and summary["jobs"]["job1"]["missing_rows"] == 0
    # job2 starts 20 ms after job1: the common start time makes offsets exact
    first = {r["job"]: float(r["t_start"]) for r in rows if r["iteration"] == "0" and r["rank"] == "0"}
    assert first["job2"] - first["job1"] == pytest.approx(0.020, abs=0.005)
    assert (results / "throughput.csv").stat().st_size > 100
    assert (results / "config.yaml").is_file()
    assert not list(state_dir.glob("*.json"))  # teardown finished: nothing left to undo
    # the kernel's TCP counters of each host over the jobs: a segment carries at most one MSS
    # (1448 bytes with timestamps at MTU 1500), so the job's hosts sent at least this many
    counters = summary["tcp_counters"]
    assert set(counters["hosts"]) == set(exp.hosts)
    for job in exp.jobs:
        sent = sum(int(r["bytes_sent"]) for r in rows if r["job"] == job.name)
        assert counters["jobs"][job.name]["TcpOutSegs"] >= sent / 1448
        assert counters["jobs"][job.name]["TcpOutSegs"] == sum(
            counters["hosts"][h]["TcpOutSegs"] for h in job.workers)


def test_isolated_job_communicates_at_link_rate(tmp_path, state_dir):
    """One job alone on a 300 Mbit/s path: its communication phase must take bytes/rate,
    within 15% (TCP/IP headers alone cost ~4.5%); below, the worker would be the bottleneck.
    A VM's host can take a fifth of its CPU for seconds (docs/troubleshooting.md#the-vms-host-
    took-its-cpu), which stops the emulated link as well as the worker: on 3 December 2026 runs
    here took 1.18-1.27x with 10-26% steal. So the bound is widened by the share of the CPU the
    VM kept (1.15 / (1 - steal)), and a slow run is run again, up to three times: a worker that
    is the bottleneck stays slow when the host leaves the VM its cores."""
    raw = small_demo(iterations=6)
    raw["jobs"] = raw["jobs"][:1]
    raw["jobs"][0].update(bytes_per_iteration="6MB", compute="50ms")
    raw["link_defaults"]["bw"] = "300Mbit"
    raw["links"][2]["bw"] = "300Mbit"
    ideal = ring.bytes_sent_per_worker(6_000_000, 2) * 8 / 300e6
    seen = []
    for attempt in range(3):
        results = run_experiment(Experiment.from_dict(raw, "iso"), out_root=tmp_path / str(attempt),
                                 log=lambda *_: None)
        rows = [r for r in read_rows(results) if r["iteration"] != "0"]  # first iteration ramps up
        comm = statistics.median(float(r["comm_time"]) for r in rows)
        steal = json.loads((results / "summary.json").read_text())["cpu_load"]["steal_mean"]
        bound = ideal * 1.15 / (1 - min(steal, 0.3))  # at most 1.64x: a 2x worker still fails
        seen.append(f"comm {comm:.4f}s (steal {steal:.0%}, bound {bound:.4f}s)")
        if comm <= bound:
            break
    assert ideal * 0.98 <= comm <= bound, f"{'; '.join(seen)} vs ideal {ideal:.4f}s"

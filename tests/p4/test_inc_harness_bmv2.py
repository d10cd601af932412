"""inc_allreduce end to end through the harness on `dataplane: bmv2`: four workers on one
switch running aggregation.p4; every worker checks every iteration's sum against the sum of all
workers' seeded inputs (a mismatch makes it exit non-zero, which fails the run)."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from mn_harness.config import Experiment
from mn_harness.runner import run_experiment
from mn_harness.worker import inc

pytestmark = [pytest.mark.bmv2, pytest.mark.root]


def experiment(topologies: Path, iterations=4, size="64KB", ring_job=False) -> Experiment:
    raw = yaml.safe_load((topologies / "inc-vs-ring-bmv2.yaml").read_text())
    raw["jobs"][0].update(iterations=iterations, bytes_per_iteration=size, compute="50ms")
    if ring_job:  # an ordinary TCP ring job through the same switch at the same time
        raw["hosts"] += ["h5", "h6"]
        raw["links"] += [{"endpoints": ["h5", "s1"]}, {"endpoints": ["h6", "s1"]}]
        raw["jobs"].append({"name": "ring", "workers": ["h5", "h6"], "bytes_per_iteration": size,
                            "compute": "50ms", "iterations": iterations})
    return Experiment.from_dict(raw, "inc-e2e")


def test_inc_allreduce_verified_every_iteration_beside_a_ring_job(topologies, tmp_path):
    exp = experiment(topologies, ring_job=True)
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "completed"
    rows = [json.loads(line) for p in sorted((results / "raw").glob("train-r*.iterations.jsonl"))
            for line in p.read_text().splitlines()]
    assert {(r["rank"], r["iteration"]) for r in rows} == {(r, i) for r in range(4) for i in range(4)}
    per_iteration = inc.bytes_sent_per_iteration(64_000)
    for r in rows:
        assert r["t_comm_end"] > r["t_comm_start"] >= r["t_start"]
        assert r["saturated"] == 0 and r["sat_chunks"] == 0
        assert r["bytes_sent"] == per_iteration + r["retransmits"] * inc.PAYLOAD_BYTES
    with open(results / "iterations.csv") as fh:
        ring_rows = [r for r in csv.DictReader(fh) if r["job"] == "ring"]
    assert len(ring_rows) == 2 * 4
    # the switch counted the aggregation results per job (telemetry job id 1 = train)
    with open(results / "queue.csv") as fh:
        assert sum(float(r["bytes_train"]) for r in csv.DictReader(fh)) >= 4 * 4 * 250 * 310
    ps = subprocess.run(["pgrep", "-af", "simple_switch_grpc"], capture_output=True, text=True)
    assert "mn-harness-bmv2-" not in ps.stdout


def test_wrong_result_fails_the_run(topologies, tmp_path, monkeypatch):
    """A worker whose expected sum differs (another seed on one rank) exits with one line."""
    import dataclasses

    from mn_harness.jobs import launcher

    exp = experiment(topologies, iterations=2)
    # rank 0 converts its inputs with twice the scale the others assume: its contribution is
    # not what the other workers' check expects, so they (and it) see a wrong sum
    specs = launcher.JobLauncher.specs

    def patched(self):
        out = specs(self)
        host, spec = out[0]
        out[0] = (host, dataclasses.replace(spec, inc_scale=spec.inc_scale * 2))
        return out

    monkeypatch.setattr(launcher.JobLauncher, "specs", patched)
    with pytest.raises(Exception) as info:
        run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    assert "result mismatch" in str(info.value)

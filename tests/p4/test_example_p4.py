"""examples/p4: a program of one's own (dequeue_ecn.p4, marking at dequeue) in a full experiment
on `dataplane: bmv2`. Its unit tests are examples/p4 itself (pytest's testpaths); here the
experiment file validates against the contract and runs: every iteration row, queue.csv from the
program's counters with the bottleneck's depth, marks and bytes per job."""

import csv
import json
import subprocess
import sys

import pytest
import yaml

from mn_harness.config import load_experiment
from mn_harness.runner import run_experiment
from tests.helpers import ROOT

EXAMPLE = ROOT / "examples/p4"
BOTTLENECK = ("s1", "3")  # s1's port towards s2 (ports in link order: h1=1, h2=2, s2=3)


@pytest.mark.bmv2
def test_the_example_experiment_validates_against_the_contract():
    out = subprocess.run([sys.executable, "-m", "mn_harness.cli", "validate", str(EXAMPLE / "experiment.yaml")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    for switch in ("s1", "s2"):
        assert (f"  program {switch}: dequeue_ecn.p4 meets the contract for forwarding, ECN marking, "
                "queue telemetry\n") in out.stdout, out.stdout


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
def test_the_example_experiment_runs_its_program_with_every_row_and_queue_telemetry(tmp_path):
    exp = load_experiment(EXAMPLE / "experiment.yaml")
    assert exp.run.dataplane == "bmv2"
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["dataplane"] == "bmv2"
    config = yaml.safe_load((results / "config.yaml").read_text())
    assert {s["program"] for s in config["switches"]} == {str((EXAMPLE / "dequeue_ecn.p4").resolve())}

    with open(results / "iterations.csv") as fh:
        keys = {(r["job"], int(r["rank"]), int(r["iteration"])) for r in csv.DictReader(fh)}
    assert keys == {(j.name, r, i) for j in exp.jobs for r in range(j.n_workers) for i in range(j.iterations)}

    with open(results / "queue.csv") as fh:
        rows = list(csv.DictReader(fh))
    bottleneck = [r for r in rows if (r["switch"], r["port"]) == BOTTLENECK]
    print(f"\nbottleneck {summary['queue']['s1:3']}; marks {summary['ecn_marks']}; "
          f"telemetry {summary['telemetry']}")
    assert bottleneck and {r["link"] for r in bottleneck} == {"s1->s2"}
    assert summary["telemetry"]["samples_per_s"] >= 50
    assert max(float(r["depth_max"]) for r in bottleneck) > 0
    assert sum(int(r["marks"]) for r in bottleneck) == summary["queue"]["s1:3"]["marks"] > 0
    assert sum(int(r["bytes_job1"]) for r in bottleneck) > 0 and sum(int(r["bytes_job2"]) for r in bottleneck) > 0
    assert summary["ecn"]["thresholds"]["s1:3"] == "20 packets"

"""`mn-harness compare` and the isolated baseline, on real small runs."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mn_harness.config import Experiment
from mn_harness.runner import run_experiment
from tests import helpers
from tests.helpers import ROOT

pytestmark = [pytest.mark.root, pytest.mark.slow]


def small_demo(iterations=3) -> dict:
    return helpers.small_demo(iterations, bytes_per_iteration="1MB", compute="40ms")


def test_compare_two_ccs_repeat_2_has_ci_per_metric(tmp_path):
    config = tmp_path / "demo.yaml"
    config.write_text(yaml.safe_dump(small_demo()))
    out = subprocess.run([sys.executable, "-m", "mn_harness.cli", "compare", str(config), "--cc", "reno,cubic",
                          "--repeat", "2", "--out", str(tmp_path), "--no-plots"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    compare_dir = next(tmp_path.glob("dumbbell-2jobs-compare-*"))
    with open(compare_dir / "compare.csv") as f:
        rows = list(csv.DictReader(f))
    labels = {r["label"] for r in rows}
    assert labels == {"reno", "cubic"}
    mean_rows = [r for r in rows if r["metric"] == "mean_iter_s" and r["scope"] in ("job1", "job2")]
    assert len(mean_rows) == 4
    for r in mean_rows:
        assert r["runs"] == "2" and r["n"] == "2"
        assert float(r["ci95_low"]) <= float(r["mean"]) <= float(r["ci95_high"])
        assert float(r["mean"]) >= 0.040  # never below compute
    plan = json.loads((compare_dir / "plan.json").read_text())
    assert all(Path(run["results_dir"], "iterations.csv").is_file() for run in plan["runs"])
    summaries = [json.loads(Path(run["results_dir"], "summary.json").read_text()) for run in plan["runs"]]
    assert [s["cc"]["job1"] for s in summaries] == ["reno", "reno", "cubic", "cubic"]


def test_resume_skips_finished_runs(tmp_path):
    config = tmp_path / "demo.yaml"
    config.write_text(yaml.safe_dump(small_demo(iterations=2)))
    cmd = [sys.executable, "-m", "mn_harness.cli", "compare", str(config), "--set", "jobs[0].compute=20ms,60ms",
           "--out", str(tmp_path), "--no-plots"]
    assert subprocess.run(cmd, capture_output=True, timeout=300, cwd=ROOT).returncode == 0
    compare_dir = next(tmp_path.glob("dumbbell-2jobs-compare-*"))
    plan = json.loads((compare_dir / "plan.json").read_text())
    # pretend the second run was cut off: resume must run exactly that one again
    first, second = plan["runs"][0]["results_dir"], plan["runs"][1]["results_dir"]
    plan["runs"][1]["results_dir"] = None
    (compare_dir / "plan.json").write_text(json.dumps(plan))
    out = subprocess.run([sys.executable, "-m", "mn_harness.cli", "compare", "--resume", str(compare_dir),
                          "--no-plots"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("== run") == 1
    plan = json.loads((compare_dir / "plan.json").read_text())
    assert plan["runs"][0]["results_dir"] == first and plan["runs"][1]["results_dir"] not in (None, second)
    computes = [json.loads(Path(r["results_dir"], "summary.json").read_text())["jobs"]["job1"]["compute_s"]
                for r in plan["runs"]]
    assert computes == [0.02, 0.06]


def test_isolated_baseline_is_measured(tmp_path):
    raw = small_demo(iterations=3)
    raw["run"]["isolated"] = True
    results = run_experiment(Experiment.from_dict(raw, "iso-base"), out_root=tmp_path, log=lambda *_: None)
    summary = json.loads((results / "summary.json").read_text())
    for job in ("job1", "job2"):
        iso = summary["jobs"][job]["isolated_iter_s"]
        assert iso is not None and iso >= 0.040
        assert iso >= summary["jobs"][job]["ideal_iter_s"] * 0.98
    assert len(list((tmp_path / "dumbbell-2jobs-isolated").iterdir())) == 2

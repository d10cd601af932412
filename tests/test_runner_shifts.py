"""Root test: CASSINI's time shifts in a real harness run (`run.shifts: cassini`, jobs/shifts.py).

Why: the scheduler's unit tests feed it hand-made communication starts; this checks what a run
does with it. Two 2-worker jobs on the dumbbell, each communicating 40% of its iteration, started
together: the second starts at CASSINI's shift (about half a period later), one rank of the first
job is delayed 120 ms in a quarter of its iterations (a straggler), which puts the jobs' phases off their shifts, the
scheduler holds a job's iteration, and every hold it decided is taken by every rank of the job at
the iteration it named (iterations.csv `hold_s`, counted in its iteration time)."""

from __future__ import annotations

import csv
import re
from collections import defaultdict

import pytest
import yaml

from mn_harness.config import Experiment
from mn_harness.jobs.shifts import job_shifts
from mn_harness.network.plan import NetworkPlan
from mn_harness.runner import run_experiment
from tests.helpers import ROOT

pytestmark = [pytest.mark.root, pytest.mark.slow]
ITERATIONS = 16


def shifted_experiment() -> Experiment:
    raw = yaml.safe_load((ROOT / "topologies/dumbbell-2jobs.yaml").read_text())
    for job in raw["jobs"]:
        # 1 Gbit/s: 25 MB go out in 200 ms each way, 300 ms of compute: a = 0.4
        job.update(bytes_per_iteration="25MB", compute="300ms", iterations=ITERATIONS, cc="reno",
                   start_offset="0ms")
    raw["jobs"][0]["stragglers"] = [{"ranks": [1], "delay": "120ms", "probability": 0.25}]
    raw["run"].update(dataplane="linux", shifts="cassini", seed=3)
    return Experiment.from_dict(raw, "shifts-tiny")


def test_shifts_applied_drift_detected_and_reapplied(tmp_path):
    exp = shifted_experiment()
    shifts = job_shifts(exp, NetworkPlan(exp))
    assert shifts["job1"].shift_s == 0.0 and shifts["job2"].shift_s == pytest.approx(0.25, abs=0.01)
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    rows: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    with open(results / "iterations.csv") as f:
        for r in csv.DictReader(f):
            rows[r["job"]][int(r["iteration"])].append(r)
    assert all(len(rows[j]) == ITERATIONS for j in ("job1", "job2"))

    # applied: job2's first iteration starts at its shift, job1's at once
    start = {j: min(float(r["t_start"]) for r in rows[j][0]) for j in rows}
    assert start["job1"] < 0.01 and start["job2"] == pytest.approx(shifts["job2"].shift_s, abs=0.01)

    # detected and re-applied: the stragglers put the phases off; some iteration was held, and
    # the hold is inside its iteration time
    held = [(j, k, float(r["hold_s"]), float(r["iter_time"])) for j in rows for k in rows[j] for r in rows[j][k]
            if float(r["hold_s"] or 0) > 0]
    assert held, "no iteration was held"
    assert all(t >= h for _, _, h, t in held)
    log = (results / "harness.log").read_text()
    assert "off its CASSINI shift" in log

    # re-applied: every hold the scheduler logged is in iterations.csv at the iteration it named
    # (or the next, when the line came after that one began), for every rank, with its delay
    logged = re.findall(r"shifts: (\S+) off its CASSINI shift, held (\d+) ms at iteration (\d+)", log)
    for job, ms, iteration in logged:
        if int(iteration) >= ITERATIONS - 1:
            continue  # the job may have ended before it
        got = [float(r["hold_s"]) for k in (int(iteration), int(iteration) + 1)
               for r in rows[job][k] if float(r["hold_s"]) > 0]
        assert len(got) == 2 and all(abs(h * 1e3 - int(ms)) <= 1 for h in got), (job, ms, iteration, got)

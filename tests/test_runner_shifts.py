"""Root test: CASSINI's time shifts in a real harness run (`run.shifts: cassini`, jobs/shifts.py).

Why: the scheduler's unit tests feed it hand-made communication starts; this checks what a run
does with it. Two 2-worker jobs on the dumbbell, each communicating 40% of its iteration, started
together: the second starts at CASSINI's shift (about half a period later), one rank of the first
job is delayed 120 ms in a quarter of its iterations (a straggler), which puts the jobs' phases off their shifts, the
scheduler holds a job's iteration (iterations.csv `hold_s`, counted in its iteration time) and the
phases are back on their shifts by the end."""

from __future__ import annotations

import csv
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
    assert shifts["job1"].shift_s == 0.0 and 0.2 <= shifts["job2"].shift_s <= 0.3
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

    # on their shifts at the end: job2's last communication start is about half a period after
    # job1's (modulo the period), within the drift
    period = sum(float(r["iter_time"]) for k in range(ITERATIONS - 4, ITERATIONS) for r in rows["job1"][k]) / 8
    c1 = min(float(r["t_comm_start"]) for r in rows["job1"][ITERATIONS - 1])
    c2 = min(float(r["t_comm_start"]) for r in rows["job2"][ITERATIONS - 1])
    offset = (c2 - c1) % period
    target = shifts["job2"].shift_s % period
    assert min(abs(offset - target), period - abs(offset - target)) <= 0.2 * period, (offset, target, period)

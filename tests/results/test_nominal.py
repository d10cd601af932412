"""results/nominal.py: every number field of the workers' rows is either a time (divided by K)
or not; a dilated run's folder is written in the experiment's times, its slowdowns those of the
same rows at K = 1."""

import copy
import csv
import dataclasses
import json
import typing

import pytest

from mn_harness.config import Experiment
from mn_harness.config.time_scale import dilate
from mn_harness.network.plan import NetworkPlan
from mn_harness.results.nominal import NOT_TIMES, TIME_FIELDS, nominal_csvs, nominal_rows
from mn_harness.results.schema import CPU_CSV, QUEUE_CSV, IterationRow, RunFacts
from mn_harness.results.summary import write_run_results

K = 4


def test_every_number_field_of_the_rows_is_a_time_or_not():
    for cls in TIME_FIELDS:
        hints = typing.get_type_hints(cls)
        numbers = {name for name, hint in hints.items()
                   if {int, float} & set(typing.get_args(hint) or (hint,))}
        assert numbers == set(TIME_FIELDS[cls]) | set(NOT_TIMES[cls]), cls.__name__
        assert not set(TIME_FIELDS[cls]) & set(NOT_TIMES[cls])


def test_rows_become_nominal():
    row = IterationRow("j", 0, 3, 8.0, 10.0, 12.0, 4.0, 2.0, 1000, cpu_s=0.8, send_lag_mean_s=None,
                       send_lag_max_s=0.004, hold_s=0.0)
    (out,) = nominal_rows([row], K)
    assert (out.t_start, out.iter_time, out.comm_time, out.cpu_s, out.send_lag_max_s) == (2.0, 1.0, 0.5, 0.2, 0.001)
    assert (out.rank, out.iteration, out.bytes_sent, out.send_lag_mean_s) == (0, 3, 1000, None)
    assert nominal_rows([row], 1) == [row]


RAW = {
    "experiment": "nominal", "hosts": ["h1", "h2"], "switches": ["s1"],
    "link_defaults": {"bw": "100Mbit", "queue": 50},
    "links": [{"endpoints": ["h1", "s1"]}, {"endpoints": ["s1", "h2"]}],
    "jobs": [{"name": "j", "workers": ["h1", "h2"], "bytes_per_iteration": "5MB", "compute": "100ms",
              "iterations": 4, "cc": "cubic"}],
    "run": {"warmup": 1, "emulation": {"time_scale": K}},
}


def _worker_lines(raw_dir, exp: Experiment, scale: float) -> None:
    """What the workers of a run at `scale` would write: each iteration the ideal time x scale."""
    raw_dir.mkdir()
    ideal = 0.1 + 5e6 * 8 / 100e6  # compute + the ring's 5 MB each way at 100 Mbit/s
    for rank in (0, 1):
        lines = []
        for it in range(4):
            t0 = it * ideal * 1.2 * scale
            lines.append({"job": "j", "rank": rank, "iteration": it, "t_start": t0,
                          "t_comm_start": t0 + 0.1 * scale, "t_comm_end": t0 + ideal * 1.2 * scale,
                          "bytes_sent": 5_000_000, "phases": [
                              {"phase": 0, "name": "compute", "kind": "compute", "t_start": t0,
                               "t_end": t0 + 0.1 * scale, "planned_s": 0.1 * scale, "delay_s": 0.0}]})
        (raw_dir / f"j.{rank}.iterations.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


@pytest.mark.parametrize("scale", [1, K])
def test_a_dilated_runs_folder_is_nominal_and_its_slowdown_the_same(tmp_path, scale):
    raw = copy.deepcopy(RAW)
    raw["run"]["emulation"]["time_scale"] = scale
    exp = Experiment.from_dict(raw)
    machine = NetworkPlan(dilate(exp))
    _worker_lines(tmp_path / "raw", exp, scale)
    (tmp_path / QUEUE_CSV).write_text("t,switch,port,depth\n2.0,s1,2,3\n")
    (tmp_path / CPU_CSV).write_text("t,interval_s,busy,steal\n0.4,0.1,0.5,0.0\n")
    summary = write_run_results(exp, machine.for_experiment(exp), tmp_path, {}, RunFacts(status="completed"))
    job = summary.jobs["j"]
    assert summary.time_scale == scale and summary.link_bps["h1->s1"] == 100e6
    assert job.ideal_iter_s == pytest.approx(0.1 + 0.4)
    assert job.mean_iter_s == pytest.approx(1.2 * 0.5) and job.slowdown_mean == pytest.approx(1.2)
    assert job.compute_s == pytest.approx(0.1)
    with open(tmp_path / "iterations.csv") as fh:
        assert float(list(csv.DictReader(fh))[2]["t_start"]) == pytest.approx(0.6)
    with open(tmp_path / "phases.csv") as fh:
        assert float(next(csv.DictReader(fh))["planned_s"]) == pytest.approx(0.1)
    with open(tmp_path / QUEUE_CSV) as fh:
        assert float(next(csv.DictReader(fh))["t"]) == pytest.approx(2.0 / scale)
    with open(tmp_path / CPU_CSV) as fh:
        row = next(csv.DictReader(fh))
        assert (float(row["t"]), float(row["interval_s"]), row["busy"]) == (0.4 / scale, 0.1 / scale, "0.5")


def test_csvs_without_the_files_are_left_alone(tmp_path):
    nominal_csvs(tmp_path, K)
    assert list(tmp_path.iterdir()) == []


def test_the_schema_reads_older_folders_without_k():
    from mn_harness.results.schema import RunSummary

    assert {f.name: f.default for f in dataclasses.fields(RunSummary)}["time_scale"] is None  # older folders

"""results.load(): DataFrames of one run, many runs and a comparison folder."""

import csv
import json

import pytest

from mn_harness.errors import UsageError
from mn_harness.results import load
from tests.helpers import write_folder

pd = pytest.importorskip("pandas", reason="the analysis extra (scripts/setup.sh installs it)")


def test_one_run_rows_match_iterations_csv(tmp_path):
    folder = write_folder(tmp_path / "run-a")
    frames = load(folder)
    with open(folder / "iterations.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(frames.iterations) == len(rows)
    assert list(frames.iterations.iteration) == [int(r["iteration"]) for r in rows]
    assert set(frames.iterations.run) == {"run-a"} and set(frames.iterations.label) == {"demo"}
    assert set(zip(frames.iterations.job, frames.iterations.cc, strict=True)) == {("A", "reno"), ("B", "reno")}
    assert (frames.throughput.rate_bps == frames.throughput.bytes * 8 / frames.throughput.bin_s).all()
    assert len(frames.queue) == 40 and "bytes_A" in frames.queue.columns
    assert list(frames.metrics.job) == ["A", "B"] and frames.metrics.mean_iter_s.notna().all()


def test_many_runs_concatenate_with_their_labels(tmp_path):
    a = write_folder(tmp_path / "a", extra={"label": "fast"})
    b = write_folder(tmp_path / "b", comm=0.8, queue=False)
    frames = load([a, b], labels={"b": "slow"})
    assert frames.metrics.groupby("label").mean_iter_s.mean().to_dict() == pytest.approx({"fast": 1.0, "slow": 1.4})
    assert set(frames.queue.run) == {"a"}


def test_a_comparison_folder_gives_its_labels_and_repetitions(tmp_path):
    cmp = tmp_path / "x-compare"
    runs = []
    for i, (label, rep) in enumerate([("reno", 0), ("reno", 1), ("cubic", 0)]):
        folder = write_folder(cmp / "runs" / f"r{i}")
        runs.append({"label": label, "cc": label, "set": [], "repetition": rep,
                     "results_dir": f"elsewhere/runs/r{i}"})  # recorded relative to another cwd
    runs.append({"label": "cubic", "cc": "cubic", "set": [], "repetition": 1, "results_dir": None})
    (cmp / "plan.json").write_text(json.dumps({"experiment": "x", "raw": {}, "runs": runs}))
    frames = load(cmp)
    assert sorted(set(zip(frames.metrics.label, frames.metrics.repetition, strict=True))) == [
        ("cubic", 0), ("reno", 0), ("reno", 1)]
    assert len(frames.iterations) == 3 * len(load(folder).iterations)


def test_not_a_results_folder_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="neither a results folder"):
        load(tmp_path)

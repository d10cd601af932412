"""The runner's summary.json and CSVs from hand-written worker files (no network), and the one
definition of iteration time / missing rows / slowdown shared with the report."""

import csv
import json
from pathlib import Path

import pytest

from mn_harness.config import load_experiment
from mn_harness.network.plan import NetworkPlan
from mn_harness.report.metrics import compute_metrics
from mn_harness.results.loaders import load_run
from mn_harness.results.schema import ITERATION_COLUMNS, THROUGHPUT_COLUMNS, RunFacts
from mn_harness.results.summary import write_run_results
from tests.helpers import TOPOLOGIES


def experiment(iterations=3, warmup=0):
    exp = load_experiment(TOPOLOGIES / "dumbbell-2jobs.yaml").with_run(warmup=warmup)
    return exp.with_jobs(j.__class__(**{**j.__dict__, "iterations": iterations}) for j in exp.jobs)


def line(job, rank, it, t0, dur_compute, dur_comm, nbytes=25_000_000):
    return json.dumps({"job": job, "rank": rank, "iteration": it, "t_start": t0,
                       "t_comm_start": t0 + dur_compute, "t_comm_end": t0 + dur_compute + dur_comm,
                       "bytes_sent": nbytes})


def write_raw(raw: Path, rows: dict[tuple[str, int], list[str]], tail: dict | None = None):
    raw.mkdir(parents=True)
    for (job, rank), lines in rows.items():
        text = "\n".join(lines) + "\n" + (tail or {}).get((job, rank), "")
        (raw / f"{job}-r{rank}.iterations.jsonl").write_text(text)
        (raw / f"{job}-r{rank}.throughput.jsonl").write_text(json.dumps(
            {"job": job, "rank": rank, "iteration": 0, "bin_s": 0.01, "bins": [[0.3, 1000], [0.31, 2000]]}) + "\n")


def test_summary_iteration_time_is_the_slowest_rank_and_rows_are_counted(tmp_path):
    exp = experiment()
    plan = NetworkPlan(exp)
    write_raw(tmp_path / "raw", {
        ("job1", 0): [line("job1", 0, i, i * 1.0, 0.3, 0.5) for i in range(3)],
        ("job1", 1): [line("job1", 1, i, i * 1.0, 0.3, 0.6) for i in range(3)],
        ("job2", 0): [line("job2", 0, 0, 0.02, 0.3, 0.4), line("job2", 0, 0, 0.02, 0.3, 0.4)],  # duplicate
        ("job2", 1): [line("job2", 1, 0, 0.02, 0.3, 0.45)],
    }, tail={("job2", 1): '{"job": "job2", "rank": 1, "itera'})  # a line cut by a kill
    summary = write_run_results(exp, plan, tmp_path, {"job1": "cubic", "job2": "cubic"},
                                RunFacts(status="interrupted"))
    j1, j2 = summary.jobs["job1"], summary.jobs["job2"]
    assert j1.iterations == 3 and j1.missing_rows == 0
    assert j1.mean_iter_s == pytest.approx(0.9) and j1.p99_iter_s == pytest.approx(0.9)
    ideal = 0.3 + 25e6 * 8 / 1e9  # 2(n-1)/n * S = S for n = 2
    assert j1.ideal_iter_s == pytest.approx(ideal)
    assert j1.slowdown_mean == pytest.approx(0.9 / ideal)
    # the duplicate row does not hide the 4 missing ones (iterations 1 and 2 of both ranks)
    assert j2.iterations == 1 and j2.missing_rows == 4
    assert j2.mean_iter_s == pytest.approx(0.75)
    assert summary.status == "interrupted" and summary.link_jobs["s1->s2"] == ["job1", "job2"]
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["jobs"]["job2"]["missing_rows"] == 4
    with open(tmp_path / "iterations.csv") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == ITERATION_COLUMNS
        rows = list(reader)
    assert len(rows) == 6 + 2 + 1  # everything the workers flushed, the duplicate too
    assert {r["iter_time"] for r in rows if r["job"] == "job1" and r["rank"] == "1"} == {"0.9"}
    with open(tmp_path / "throughput.csv") as f:
        assert tuple(csv.DictReader(f).fieldnames) == THROUGHPUT_COLUMNS


def test_no_complete_iteration_gives_null_statistics(tmp_path):
    exp = experiment()
    write_raw(tmp_path / "raw", {("job1", 0): [line("job1", 0, 0, 0.0, 0.3, 0.5)]})
    summary = write_run_results(exp, NetworkPlan(exp), tmp_path, {}, RunFacts(status="failed: x"))
    j1 = summary.jobs["job1"]
    assert j1.iterations == 0 and j1.missing_rows == 5
    assert j1.mean_iter_s is None and j1.slowdown_mean is None
    json.loads((tmp_path / "summary.json").read_text())  # strict JSON: no NaN


def test_report_and_summary_agree(tmp_path):
    """One implementation: the report's per-job numbers are the summary's."""
    exp = experiment()
    write_raw(tmp_path / "raw", {
        ("job1", 0): [line("job1", 0, i, i * 1.1, 0.3, 0.5 + 0.1 * i) for i in range(3)],
        ("job1", 1): [line("job1", 1, i, i * 1.1, 0.3, 0.55) for i in range(2)],
        ("job2", 0): [line("job2", 0, i, 0.02 + i, 0.3, 0.4) for i in range(3)],
        ("job2", 1): [line("job2", 1, i, 0.02 + i, 0.3, 0.42) for i in range(3)],
    })
    summary = write_run_results(exp, NetworkPlan(exp), tmp_path, {}, RunFacts(status="completed"))
    run = load_run(tmp_path)
    metrics = compute_metrics(run.summary, run.iterations, run.throughput)
    for job in ("job1", "job2"):
        s, m = summary.jobs[job], metrics.jobs[job]
        assert (m.n_iterations, m.missing_rows) == (s.iterations, s.missing_rows)
        for key in ("mean_iter_s", "p50_iter_s", "p99_iter_s", "slowdown_mean", "slowdown_p99"):
            assert getattr(m, key) == pytest.approx(getattr(s, key)), (job, key)


def test_warmup_iterations_are_left_out_and_shown_on_their_own(tmp_path):
    """run.warmup 2: iterations 0 and 1 are warm-up (their mean reported apart), the statistics
    are over 2..4 only, in summary.json and the report alike."""
    exp = experiment(iterations=5, warmup=2)
    times = [2.0, 1.5, 0.6, 0.7, 0.8]
    write_raw(tmp_path / "raw", {(job, rank): [line(job, rank, i, sum(times[:i]), 0.3, t - 0.3)
                                               for i, t in enumerate(times)]
                                 for job in ("job1", "job2") for rank in (0, 1)})
    summary = write_run_results(exp, NetworkPlan(exp), tmp_path, {}, RunFacts(status="completed"))
    j1 = summary.jobs["job1"]
    assert j1.warmup == 2 and j1.iterations == 5
    assert j1.mean_iter_s == pytest.approx(0.7) and j1.p99_iter_s == pytest.approx(0.798)
    assert j1.warmup_mean_iter_s == pytest.approx(1.75)
    run = load_run(tmp_path)
    m = compute_metrics(run.summary, run.iterations, run.throughput).jobs["job1"]
    assert m.mean_iter_s == pytest.approx(0.7) and m.warmup_iterations == 2
    assert m.warmup_mean_iter_s == pytest.approx(1.75)
    assert [p["warmup"] for p in m.per_iteration] == [True, True, False, False, False]


def test_warmup_is_reduced_so_one_iteration_is_measured():
    exp = experiment(iterations=2, warmup=5)
    assert [exp.warmup_of(j) for j in exp.jobs] == [1, 1]
    assert any("warm-up" in w for w in exp.warnings())
    assert experiment(iterations=1, warmup=2).warmup_of(exp.jobs[0].__class__(
        **{**exp.jobs[0].__dict__, "iterations": 1})) == 0

"""The headline figures (report.headline): apart by 10 and the last 20 iterations, per run
(report.md, the printed table) and over repetitions (compare, bench/repro_table.py)."""

import pytest

from mn_harness.report.aggregate import aggregate, flatten_metrics
from mn_harness.report.compare import write_compare
from mn_harness.report.headline import apart_text, headline, headline_row, span_stats
from mn_harness.report.markdown import format_table, write_report
from mn_harness.report.metrics import JobMetrics, RunMetrics, Separation, compute_metrics
from mn_harness.results.loaders import load_run
from mn_harness.results.stats import percentile
from tests.helpers import write_folder
from tests.report.test_metrics import LINK_AB, periodic, summary


def _run(times_by_job: dict[str, list[float]], baseline: float = 1.0, warmup: int = 2):
    """RunMetrics with the given iteration times per job (the only fields span_stats reads;
    tests/bench/test_repro_table.py uses it too)."""
    jobs = {name: JobMetrics(
        job=name, cc=None, n_iterations=len(times), incomplete_iterations=0, missing_rows=0,
        mean_iter_s=None, p50_iter_s=None, p99_iter_s=None, baseline_iter_s=baseline, baseline="ideal",
        slowdown_mean=None, slowdown_p99=None, rivals=[], contended_iterations=0, overlap_mean=None,
        convergence_iteration=None, warmup=warmup,
        per_iteration=[{"iteration": i, "iter_time": t, "warmup": i < warmup} for i, t in enumerate(times)])
        for name, times in times_by_job.items()}
    return RunMetrics(jobs=jobs, links={}, missing_rows_total=0, convergence_threshold=0.1)


def test_span_stats_first_n_is_what_a_run_of_n_iterations_would_have_measured():
    """first=N keeps iterations warm-up..N-1 of each job (a job doing more iterations in the same
    time keeps proportionally more), last=N the run's last N; p99 as the metrics compute it."""
    a = [9.0, 9.0, 1.6, 1.4, 1.2] + [1.0] * 95
    b = [9.0, 9.0, 1.3] + [1.1] * 197  # twice as many iterations in the same run
    m = _run({"A": a, "B": b})
    first10 = span_stats(m, first=10)
    assert first10.mean_s == pytest.approx((sum(a[2:10]) / 8 + sum(b[2:20]) / 18) / 2)
    assert first10.p99_s == pytest.approx((percentile(a[2:10], 99) + percentile(b[2:20], 99)) / 2)
    assert first10.slowdown_p99 == pytest.approx(first10.p99_s)  # baseline 1 s
    whole = span_stats(m, first=100)
    assert whole.mean_s == pytest.approx((sum(a[2:]) / 98 + sum(b[2:]) / 198) / 2)
    last = span_stats(m, last=20)
    assert last.p99_s == pytest.approx((1.0 + 1.1) / 2)
    assert span_stats(_run({"A": [1.0, 1.0]}), first=2) is None  # only warm-up: no value
    assert span_stats(_run({"A": [1.0, 1.0, 1.0]}, baseline=0.0)) is None  # no baseline


def test_apart_text_counts_runs_apart_by_iteration_10_and_the_relapses():
    """Over runs: those whose jobs first stood apart by iteration 10 (of all runs, with the
    Wilson interval), the median first iteration with never as later than any, and the median
    relapses of the runs that did stand apart."""
    seps = [Separation(7, 0), Separation(11, 4), Separation(None, 0), Separation(3, 2)]
    assert apart_text(seps) == "2 of 4 [15–85]; first 9; relapses 2"
    assert apart_text([Separation(None, 0)] * 3) == "0 of 3 [0–56]; first never; relapses -"
    assert apart_text([]) == "-"


def test_a_runs_headline_apart_late_never_and_alone():
    """B slides 0.1 s per iteration until it is apart at iteration 4 and stays there (30
    iterations of 1.0 s against an ideal 0.8 s); starting 11 iterations later it is apart only
    at 15: not by 10. In step: never; alone: n/a."""
    slide = [min(0.1 * i, 0.4) for i in range(30)]
    rows = periodic("A", 30) + periodic("B", 30, shifts=slide)
    apart = headline(compute_metrics(summary({"A": 1, "B": 1}, LINK_AB, ideal=0.8), rows))
    assert apart.separation == Separation(4, 0) and apart.apart is True
    assert apart.last.slowdown == pytest.approx(1.0 / 0.8) and apart.last.slowdown_p99 == pytest.approx(1.25)
    assert headline_row(apart) == ["yes", "4", "0", "1.25", "1.25"]
    late = [0.0] * 11 + slide[:19]
    rows = periodic("A", 30) + periodic("B", 30, shifts=late)
    assert headline_row(headline(compute_metrics(summary({"A": 1, "B": 1}, LINK_AB, ideal=0.8), rows)))[:3] == \
        ["no", "15", "0"]
    locked = headline(compute_metrics(summary({"A": 1, "B": 1}, LINK_AB), periodic("A", 5) + periodic("B", 5)))
    assert headline_row(locked) == ["no", "never", "-", "-", "-"]  # no baseline: no slowdown
    alone = headline(compute_metrics(summary({"A": 1}, {}, ideal=1.0), periodic("A", 5)))
    assert headline_row(alone) == ["n/a", "n/a", "-", "1.00", "1.00"]


def test_report_and_its_printed_table_show_the_headline(tmp_path):
    root = write_folder(tmp_path / "run", offset_b=0.5)
    text = write_report(root).read_text()
    assert "## Headline" in text and "| yes | 0 | 0 | 1.25 | 1.25 |" in text
    run = load_run(root)
    table = format_table(compute_metrics(run.summary, run.iterations, run.throughput))
    assert "apart by 10" in table and "last 20: slowdown" in table


def test_compare_aggregates_the_headline_over_repetitions(tmp_path):
    """Two runs apart from iteration 0, one in step: apart by 10 in 2 of 3 with its Wilson
    interval, first apart median 0 (never counts as later), the last-20 slowdowns averaged."""
    runs = [("x", 0, write_folder(tmp_path / "a0", offset_b=0.5)),
            ("x", 1, write_folder(tmp_path / "a1", offset_b=0.5)),
            ("x", 2, write_folder(tmp_path / "s", offset_b=0.0))]
    rows = {r.metric: r for r in aggregate(runs) if r.scope == "all"}
    apart = rows["apart_by_10"]
    assert (apart.n, apart.mean) == (3, pytest.approx(2 / 3)) and apart.interval[0] < 2 / 3 < apart.interval[1]
    assert (rows["first_apart"].median, rows["first_apart"].n, rows["first_apart"].of) == (0.0, 2, 3)
    assert rows["relapses"].values == [0.0, 0.0]
    assert rows["last_20_slowdown_mean"].mean == pytest.approx(1.25)
    run = load_run(runs[2][2])
    flat = flatten_metrics(compute_metrics(run.summary, run.iterations, run.throughput))
    assert flat[("all", "apart_by_10")] == 0.0 and flat[("all", "first_apart")] is None
    text = write_compare(runs, tmp_path / "cmp", plots=False).md.read_text()
    assert "| apart_by_10 (%) | 67% [" in text and "| first_apart (median) | 0.0 (2/3 apart) |" in text

"""write_report on results folders: plots, report.md, summary.json's metrics."""

import json

import pytest

from mn_harness.report.markdown import write_report
from tests.helpers import ITER_HEADER, write_folder


def test_write_report_full_folder(tmp_path):
    root = write_folder(tmp_path / "run", offset_b=0.5)
    report = write_report(root)
    assert report == root / "report.md"
    text = report.read_text()
    for name in ("throughput", "iteration_times", "iteration_cdf", "queue"):
        png = root / "plots" / f"{name}.png"
        assert png.exists() and png.stat().st_size > 1000
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"(plots/{name}.png)" in text
    summary = json.loads((root / "summary.json").read_text())
    assert summary["status"] == "completed"  # the runner's keys are kept
    metrics = summary["metrics"]
    # B is offset by half a period: A comm [i+0.6, i+1.0], B comm [i+1.1, i+1.5]
    assert metrics["jobs"]["A"]["overlap_mean"] == 0.0
    assert metrics["jobs"]["A"]["convergence_iteration"] == 0
    assert metrics["jobs"]["A"]["mean_iter_s"] == pytest.approx(1.0)
    assert metrics["jobs"]["A"]["slowdown_mean"] == pytest.approx(1.0 / 0.8)
    # every full window of A holds 40 bins of 1000 bytes per rank: 80 kB for A (2 ranks);
    # B's phase in A's window [i, i+1.0] is the previous one [i+0.1, i+0.5]: 40 kB
    link = metrics["links"]["s1-s2"]
    assert link["windows"] == 3  # A's iteration 0 [0, 1.0] starts before B (0.5)
    assert link["jain_mean"] == pytest.approx(120_000**2 / (2 * (80_000**2 + 40_000**2)))
    assert "| A |" in text and "s1-s2" in text


def test_write_report_without_queue_or_plots(tmp_path):
    root = write_folder(tmp_path / "run", queue=False)
    text = write_report(root).read_text()
    assert "queue.png" not in text
    assert not (root / "plots" / "queue.png").exists()
    assert (root / "plots" / "throughput.png").exists()

    root2 = write_folder(tmp_path / "run2")
    text2 = write_report(root2, plots=False).read_text()
    assert not (root2 / "plots").exists()
    assert ".png" not in text2
    assert "metrics" in json.loads((root2 / "summary.json").read_text())


def test_write_report_killed_worker(tmp_path):
    root = write_folder(tmp_path / "run")
    lines = (root / "iterations.csv").read_text().splitlines()
    # drop rank 1 of A from iteration 2 on, and leave a truncated line behind
    kept = [ln for ln in lines if not (ln.startswith("A,1,2") or ln.startswith("A,1,3"))]
    (root / "iterations.csv").write_text("\n".join(kept) + "\nA,1,2,2.0,2.6\n")
    text = write_report(root).read_text()
    metrics = json.loads((root / "summary.json").read_text())["metrics"]
    assert metrics["jobs"]["A"]["missing_rows"] == 2
    assert metrics["jobs"]["A"]["n_iterations"] == 2
    assert metrics["missing_rows_total"] == 2
    assert "A: 2 missing row(s)" in text
    assert "iterations.csv: 1 malformed" in text


def test_write_report_on_a_run_that_produced_nothing(tmp_path):
    root = write_folder(tmp_path / "run", queue=False)
    (root / "iterations.csv").write_text(ITER_HEADER + "\n")
    (root / "throughput.csv").write_text("job,rank,t,bin_s,bytes\n")
    text = write_report(root).read_text()
    metrics = json.loads((root / "summary.json").read_text())["metrics"]
    # 4 planned iterations x (2 + 1) ranks, none written
    assert metrics["missing_rows_total"] == 12
    assert metrics["jobs"]["A"]["mean_iter_s"] is None
    assert ".png" not in text


def test_report_shows_the_cassini_prediction_next_to_the_measurement(tmp_path):
    cassini = {"jobs": {"A": {"slowdown": 1.0, "aligned_slowdown": 1.4}, "B": {"slowdown": 1.17,
                                                                             "aligned_slowdown": 1.39}},
               "links": {"s1-s2": {"jobs": ["A", "B"], "score": 1.0, "joint_score": 0.83, "aligned_score": 0.6,
                                   "shifts_s": {"A": 0.0, "B": 0.2}}},
               "loops": [["A", "l1", "B", "l2", "A"]]}
    root = write_folder(tmp_path / "run", offset_b=0.5, extra={"cassini": cassini})
    text = write_report(root, plots=False).read_text()
    row = next(line for line in text.splitlines() if line.startswith("| A |"))
    assert "| 1.25 |" in row and "| 1.00 (1.40) |" in row  # measured slowdown, then CASSINI's
    assert "## CASSINI prediction" in text and "| s1-s2 | A, B | 1.000 | 0.830 | 0.600 | A 0 ms, B 200 ms |" in text
    assert "circular dependency: A – l1 – B – l2 – A" in text
    metrics = json.loads((root / "summary.json").read_text())["metrics"]["jobs"]
    assert metrics["B"]["predicted_slowdown"] == 1.17


def test_phase_table_lists_phases_of_jobs_beyond_the_short_form():
    from mn_harness.report.markdown import phase_rows
    from mn_harness.results.loaders import parse_summary

    summary = parse_summary({"jobs": {
        "plain": {"phase_stats": [{"name": "compute", "kind": "compute", "collective": None, "mean_s": 0.3},
                                  {"name": "ring_allreduce", "kind": "comm", "collective": "ring_allreduce",
                                   "mean_s": 0.2, "busbw_Bps": 1e8}]},
        "fsdp": {"phase_stats": [{"name": "compute", "kind": "compute", "collective": None, "mean_s": 0.1,
                                  "mean_delay_s": 0.004},
                                 {"name": "all_gather", "kind": "comm", "collective": "all_gather",
                                  "mean_s": 0.05, "busbw_Bps": 1.125e8}]}}})
    rows = phase_rows(summary)
    assert rows == [["fsdp", "compute", "compute", "-", "100.0", "-", "4.0"],
                    ["fsdp", "all_gather", "comm", "all_gather", "50.0", "0.900", "-"]]


def test_report_shows_the_fidelity_verdict_and_the_judged_links(tmp_path):
    fidelity = {
        "verdict": "unfaithful", "reason": "link s1->s2: 54.6% of 142507 backlogged gaps within ±10%",
        "violations": [{"invariant": "link", "where": "s1->s2", "measured": 0.546, "threshold": 0.9,
                        "text": "link s1->s2: 54.6% ..."},
                       {"invariant": "host", "where": "all cores", "measured": 0.2, "threshold": 0.05,
                        "text": "host: every core saturated in 20.0% of the intervals (at most 5%)"}],
        "thresholds": {"link_within": 0.9, "link_tolerance": 0.1, "link_min_gaps": 500},
        "links": {"s1->s2": {"kind": "qdisc", "gaps": 142507, "within_share": 0.546, "late_share": 0.228,
                             "early_share": 0.226, "p99_excess_us": 61.4, "rate_ratio": 0.9944},
                  "s1->h1": {"kind": "qdisc", "gaps": 0, "within_share": None}},
        "link_monitor": "on",
        "host": {"all_saturated_share": 0.2, "steal_mean": 0.0, "softirq_mean": 0.13, "run_queue_mean": 4.2},
        "workers": {"compute_phases": 80, "compute_overshoot_p99_ms": 2.15, "compute_overshoot_max_ms": 2.7}}
    folder = write_folder(tmp_path / "run", extra={"fidelity": fidelity})
    text = write_report(folder, plots=False).read_text()
    section = text.split("## Fidelity", 1)[1]
    assert section.lstrip().startswith("**unfaithful**: link s1->s2: 54.6% of 142507")
    assert "- host: every core saturated in 20.0%" in section
    assert "| s1->s2 | 142507 | 54.6% | 22.8% | 22.6% | 61.4 | 0.994 |" in section
    assert "s1->h1" not in section.split("Host:")[0]  # no gap judged there: not in the table
    assert "Workers: compute phases overslept by 2.15 ms at the p99" in section
    old = write_report(write_folder(tmp_path / "old"), plots=False).read_text()
    assert "## Fidelity\n\nNot recorded" in old

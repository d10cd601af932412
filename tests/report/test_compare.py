"""Comparisons of repeated runs: mean ± 95% CI per label and metric."""

import csv
import json
import math

import pytest

from mn_harness.report.aggregate import aggregate, flatten_metrics
from mn_harness.report.compare import write_compare
from mn_harness.report.metrics import compute_metrics
from mn_harness.results.loaders import load_run
from tests.helpers import write_folder


def test_compare_aggregates_with_ci(tmp_path):
    # "reno": compute 0.6/0.8/1.0 s + comm 0.4 s -> iteration times 1.0, 1.2, 1.4 s
    # "mltcp": 0.5, 0.7 -> 0.9, 1.1 s
    runs = []
    for rep, compute in enumerate((0.6, 0.8, 1.0)):
        runs.append(("reno", rep, write_folder(tmp_path / f"reno-{rep}", compute=compute)))
    for rep, compute in enumerate((0.5, 0.7)):
        runs.append(("mltcp", rep, write_folder(tmp_path / f"mltcp-{rep}", compute=compute)))
    runs.append(("mltcp", 2, tmp_path / "never-ran"))
    rows = {(r.label, r.scope, r.metric): r for r in aggregate(runs)}

    reno = rows[("reno", "A", "mean_iter_s")]
    assert (reno.runs, reno.n) == (3, 3)
    assert reno.mean == pytest.approx(1.2)
    assert reno.ci95_half == pytest.approx(4.303 * 0.2 / math.sqrt(3))
    assert reno.ci95_low == pytest.approx(1.2 - 4.303 * 0.2 / math.sqrt(3))
    mltcp = rows[("mltcp", "all", "mean_iter_s")]
    assert mltcp.mean == pytest.approx(1.0)
    assert mltcp.std == pytest.approx(math.sqrt(0.02))
    assert mltcp.ci95_half == pytest.approx(12.706 * math.sqrt(0.02) / math.sqrt(2))
    # in-phase jobs never converge: the convergence metric has no value in any run
    conv = rows[("reno", "all", "convergence_iteration")]
    assert conv.n == 0 and conv.mean is None
    assert rows[("reno", "link:s1-s2", "overlap_mean")].mean == pytest.approx(1.0)

    md = write_compare(runs, tmp_path / "cmp").md
    text = md.read_text()
    assert "1200.0 ± 496.9 (n=3/3)" in text  # 4.303 * 0.2 / sqrt(3) = 0.4969 s
    assert "never-ran" in text
    for png in ("compare_metrics.png", "compare_throughput.png"):
        assert (tmp_path / "cmp" / png).stat().st_size > 1000
        assert f"({png})" in text
    with (tmp_path / "cmp" / "compare.csv").open() as fh:
        table = list(csv.DictReader(fh))
    hit = [r for r in table if (r["label"], r["scope"], r["metric"]) == ("reno", "A", "mean_iter_s")]
    assert len(hit) == 1
    assert float(hit[0]["ci95_high"]) == pytest.approx(1.2 + 4.303 * 0.2 / math.sqrt(3))
    assert json.loads(hit[0]["values"]) == pytest.approx([1.0, 1.2, 1.4])


def test_flatten_all_scope_convergence(tmp_path):
    run = load_run(write_folder(tmp_path / "r", offset_b=0.5))
    flat = flatten_metrics(compute_metrics(run.summary, run.iterations, run.throughput))
    assert flat[("all", "convergence_iteration")] == 0.0
    assert flat[("A", "overlap_mean")] == 0.0
    assert flat[("all", "mean_iter_s")] == pytest.approx(1.0)


def test_convergence_is_the_fraction_converged_and_the_median_over_all_runs(tmp_path):
    """Three runs interleave from iteration 0, two stay in phase (never): 3/5 converged, the
    median over all five is 0 (never sorts last); the old mean over converged runs hides the
    two that never converged."""
    runs = [("x", rep, write_folder(tmp_path / f"x{rep}", offset_b=off))
            for rep, off in enumerate((0.5, 0.5, 0.5, 0.0, 0.0))]
    rows = {(r.label, r.scope, r.metric): r for r in aggregate(runs)}
    conv = rows[("x", "all", "convergence_iteration")]
    assert (conv.n, conv.of, conv.median) == (3, 5, 0.0)
    frac = rows[("x", "all", "converged")]
    assert frac.mean == pytest.approx(0.6) and frac.n == 5
    assert frac.ci95_low == pytest.approx(0.2307, abs=1e-3) and frac.ci95_high == pytest.approx(0.8824, abs=1e-3)
    never = [("y", rep, write_folder(tmp_path / f"y{rep}", offset_b=off)) for rep, off in enumerate((0.5, 0, 0))]
    conv_y = {(r.scope, r.metric): r for r in aggregate(never)}[("all", "convergence_iteration")]
    assert conv_y.median is None and conv_y.of == 3  # the median run never converged
    text = write_compare(runs + never, tmp_path / "cmp", plots=False).md.read_text()
    assert "0.0 (3/5 converged)" in text and "never (1/3 converged)" in text
    assert "60% [23–88] (n=5/5)" in text


def test_the_faithful_share_and_faithful_only(tmp_path):
    """Each run's fidelity verdict: `faithful` is the share of checked runs that were (Wilson
    interval); only_faithful leaves the others out of every row and names them."""
    def verdict(v):
        return {"fidelity": {"verdict": v, "reason": None if v == "faithful" else "link s1->s2: ..."}}
    runs = [("reno", i, write_folder(tmp_path / f"r{i}", compute=0.6 + 0.1 * i, extra=verdict(v)))
            for i, v in enumerate(("faithful", "unfaithful", "faithful", "unchecked"))]
    runs.append(("reno", 4, write_folder(tmp_path / "old", compute=1.0)))  # from before the checks
    every = write_compare(runs, tmp_path / "all", plots=False)
    rows = {(r.scope, r.metric): r for r in every.rows}
    share = rows[("all", "faithful")]
    assert (share.n, share.runs, share.mean) == (3, 5, pytest.approx(2 / 3))
    assert share.interval is not None and share.interval[0] < 2 / 3 < share.interval[1]
    assert rows[("A", "mean_iter_s")].n == 5 and every.left_out == []
    kept = write_compare(runs, tmp_path / "kept", plots=False, only_faithful=True)
    rows = {(r.scope, r.metric): r for r in kept.rows}
    assert rows[("A", "mean_iter_s")].n == 2
    assert rows[("A", "mean_iter_s")].mean == pytest.approx((1.0 + 1.2) / 2)
    assert len(kept.left_out) == 3 and "reno #1 (r1): unfaithful" in kept.left_out
    assert "reno #4 (old): not checked" in kept.left_out
    text = kept.md.read_text()
    assert "Faithful runs only: 3 run(s) left out" in text and "- reno #3 (r3): unchecked" in text

"""bench/repro_table.py, the reproduce bench's table (no runs, no root): its columns on
hand-built summaries and metrics, and the table by run length. Its headline columns' figures
are report.headline's (tests/report/test_headline.py)."""

import pytest

from tests.helpers import bench_module
from tests.report.test_headline import _run


def test_host_steal_column_reads_each_runs_summary_and_leaves_old_runs_out():
    """The table's last column: the VM host's share of the cores' time over a CC's runs, from
    summary.json cpu_load.steal_mean; runs recorded before it existed give no value, not 0."""
    from mn_harness.results.schema import RunSummary
    table = bench_module("repro_table")
    assert table.host_steal(RunSummary(cpu_load={"steal_mean": 0.132})) == 0.132
    assert table.host_steal(RunSummary(cpu_load={"busy_mean": 0.5})) is None
    assert table.host_steal(RunSummary()) is None
    row = {"scenario": "2jobs", "cc": "reno", "runs": 2, "slowdown": [1.2, 1.3], "slowdown_p99": [1.5, 1.6],
           "converged": None, "median_conv": None, "cassini": "-", "steady": [], "steady_p99": [],
           "rtos": [0.0, 0.1], "steal": [0.10, 0.20]}
    cells = table.format_row(row)
    assert len(cells) == len(table.HEADERS) and table.HEADERS[-1] == "host steal"
    assert cells[-1].startswith("0.150 ± ")
    assert table.format_row({**row, "steal": []})[-1] == "-"

def test_cassini_column_averages_the_jobs_of_the_first_summary_that_has_a_prediction():
    """The CASSINI column comes from the summaries the table already read: runs without a
    prediction (an old run, an error) are passed over, and the column is the mean over the jobs
    that share a link of the best-shift and the aligned slowdown."""
    from mn_harness.config import Experiment
    from mn_harness.jobs.cassini import predict
    from mn_harness.network.plan import NetworkPlan
    from mn_harness.results.schema import RunSummary
    table = bench_module("repro_table")
    exp = Experiment.from_dict(bench_module("reproduce").scenario_raw("3jobs", [], 10))
    pred = predict(exp, NetworkPlan(exp)).to_dict()
    shared = [j for j in pred["jobs"].values() if j["links"]]
    assert len(shared) == 3
    best = sum(j["slowdown"] for j in shared) / 3
    aligned = sum(j["aligned_slowdown"] for j in shared) / 3
    assert aligned > best  # three compatible jobs: aligned phases cost, the best shifts do not
    values = table.prediction_values([RunSummary(), RunSummary(cassini={"error": "x"}), RunSummary(cassini=pred)])
    assert values == pytest.approx((best, aligned))
    assert table.prediction_values([RunSummary(), RunSummary(cassini=None)]) is None

def test_length_rows_show_the_p99_gain_a_short_run_hides():
    """A variant slow for 3 iterations after the warm-up, then 1.0 s, against a base at 1.5 s
    with 1.6-s tails: over the first 20 iterations its p99 is a transient one, over 300 the
    top 1% is the base's tail against the variant's steady state. Lengths not shorter than the
    runs are left out; the whole run comes last; gains pair the runs of the same round."""
    from mn_harness.report.aggregate import RunRef
    from mn_harness.results.stats import percentile
    table = bench_module("repro_table")
    n = 300
    base = [1.5] * n
    for i in range(5, n, 25):
        base[i] = 1.6  # 12 tail iterations
    variant = [1.6, 1.6, 1.6, 1.5, 1.4] + [1.0] * (n - 5)
    results = [(RunRef("dctcp", rep, f"/b{rep}"), _run({"A": base, "B": base})) for rep in range(2)]
    results += [(RunRef("mltcp-dctcp:slope=32", rep, f"/v{rep}"), _run({"A": variant, "B": variant}))
                for rep in range(2)]
    rows = table.length_rows("s", results, ["dctcp", "mltcp-dctcp:slope=32"], [20, 100, 300, 500])
    assert [(r["cc"], r["iterations"], r["whole"]) for r in rows] == [
        ("dctcp", 20, False), ("dctcp", 100, False), ("dctcp", 300, True),
        ("mltcp-dctcp:slope=32", 20, False), ("mltcp-dctcp:slope=32", 100, False),
        ("mltcp-dctcp:slope=32", 300, True)]
    assert "gain_mean" not in rows[0]
    short, whole = rows[3], rows[5]
    assert short["runs"] == 2 and len(short["gain_p99"]) == 2
    assert short["gain_p99"][0] < 1.2 < 1.5 < whole["gain_p99"][0]
    assert whole["gain_p99"][0] == pytest.approx(percentile(base[2:], 99) / percentile(variant[2:], 99))
    assert whole["gain_mean"][0] == pytest.approx((sum(base[2:]) / 298) / (sum(variant[2:]) / 298))
    cells = table.format_length_row(whole)
    assert len(cells) == len(table.LENGTH_HEADERS) and cells[3] == "300 (whole run)"
    assert table.format_length_row(rows[0])[-1] == "-"


def test_rows_with_cassinis_shifts_gain_over_their_base_cc():
    """`CC+cassini` runs CC with run.shifts: cassini; every row but a base CC alone has a gain
    over the base CC of its family (MLTCP variants, CASSINI's shifts, the two together)."""
    table = bench_module("repro_table")
    assert table.row_cc("mltcp-dctcp:slope=32+cassini") == ("mltcp-dctcp:slope=32", True)
    assert table.row_cc("dctcp") == ("dctcp", False)
    assert [table.base_of(label) for label in ("dctcp", "mltcp-dctcp", "dctcp+cassini", "mltcp-dctcp+cassini",
                                               "mltcp-reno:slope=32:restart=on", "cubic+cassini")] == \
        [None, "dctcp", "dctcp", "dctcp", "reno", "cubic"]
    reproduce = bench_module("reproduce")
    plan = reproduce.round_robin(["dctcp", "dctcp+cassini"], 2)
    assert [(e["label"], e["cc"], e["set"], e["repetition"]) for e in plan] == [
        ("dctcp", "dctcp", [], 0), ("dctcp+cassini", "dctcp", [["run.shifts", "cassini"]], 0),
        ("dctcp", "dctcp", [], 1), ("dctcp+cassini", "dctcp", [["run.shifts", "cassini"]], 1)]


def test_a_scenarios_sweep_with_cassini_rows_validates_every_run(tmp_path):
    """Every scenario file takes `run.shifts` from the bench (off), so a CC+cassini row's --set
    applies to any scenario; the runs are validated when the sweep is made."""
    reproduce = bench_module("reproduce")
    state = {"ccs": ["reno", "mltcp-reno+cassini"], "repeat": 1, "iterations": 4,
             "scenarios": {"partial": {"set": [], "sweep": None}}}
    sweep = reproduce._sweep(tmp_path, "partial", state["scenarios"]["partial"], state)
    plain, shifted = sweep.experiments()
    assert not plain.run.shifts.enabled and shifted.run.shifts.enabled
    assert {j.cc.name for j in shifted.jobs} == {"mltcp-reno"}


def test_faithful_and_prediction_error_columns():
    """How many runs were faithful (unchecked runs count as runs, not as faithful), and the
    measured mean slowdown against CASSINI's best-shift prediction as a signed percentage."""
    table = bench_module("repro_table")
    assert table.faithful_text(["faithful", "unfaithful", None, "faithful"]) == "2 of 4"
    assert table.faithful_text([]) == "-"
    assert table.pct_ci([0.12]) == "+12%"
    assert table.pct_ci([0.10, 0.14]).startswith("+12 ± ")
    assert table.pct_ci([-0.05, -0.05]) == "-5 ± 0%"
    row = {"scenario": "s", "cc": "dctcp+cassini", "runs": 2, "slowdown": [1.2, 1.3], "slowdown_p99": [1.5, 1.6],
           "converged": None, "median_conv": None, "cassini": "1.00 / 1.53", "steady": [], "steady_p99": [],
           "rtos": [], "faithful": ["faithful", "unfaithful"], "vs_cassini": [0.2, 0.3]}
    cells = dict(zip(table.HEADERS, table.format_row(row), strict=True))
    assert cells["faithful"] == "1 of 2" and cells["vs CASSINI best"].startswith("+25 ± ")

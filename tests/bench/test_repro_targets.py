"""bench/repro_targets.py, the targets read off the reproduce bench's rows (no runs, no root):
the verdict at and just under a bound, a missing row or cell, the share apart within 10
iterations with its Wilson interval, the faithful count, and that every target names a
scenario of the suite."""

import pytest

from tests.helpers import bench_module


def _target(measure="gain_mean", bound=1.3):
    targets = bench_module("repro_targets")
    return targets.Target("4jobs-ecn-sync-q400-500m", "mltcp-dctcp", measure, bound, "test")


def _row(**cells):
    return {"scenario": "4jobs-ecn-sync-q400-500m", "cc": "mltcp-dctcp", **cells}


def test_a_mean_at_its_bound_is_met_and_just_under_it_is_not():
    targets = bench_module("repro_targets")
    target = _target(bound=1.3)
    at = targets.evaluate(target, [_row(gain_mean=[1.29, 1.31, 1.30])])
    assert at.verdict == targets.MET and at.value == pytest.approx(1.3) and at.runs == 3
    under = targets.evaluate(target, [_row(gain_mean=[1.299, 1.299, 1.299])])
    assert under.verdict == targets.NOT_MET and under.value == pytest.approx(1.299)
    assert targets.format_verdict(under)[4] == "not met"


def test_a_mean_over_its_bound_whose_ci_is_not_reads_met_and_says_so():
    targets = bench_module("repro_targets")
    verdict = targets.evaluate(_target(bound=1.2), [_row(gain_mean=[1.05, 1.21, 1.37])])
    assert verdict.verdict == targets.MET
    low, high = verdict.interval
    assert low < 1.2 < 1.21 < high and verdict.ci_clears is False
    tight = targets.evaluate(_target(bound=1.2), [_row(gain_mean=[1.30, 1.31, 1.32])])
    assert tight.ci_clears is True
    one = targets.evaluate(_target(bound=1.2), [_row(gain_mean=[1.25])])
    assert one.verdict == targets.MET and one.interval is None and one.ci_clears is None


def test_a_missing_row_or_cell_is_not_measured():
    targets = bench_module("repro_targets")
    target = _target("gain_p99", 0.95)
    for rows in ([], [{**_row(gain_p99=[1.0]), "scenario": "partial"}], [_row(gain_p99=[])],
                 [_row(slowdown=[1.1])]):
        verdict = targets.evaluate(target, rows)
        assert verdict.verdict == targets.NOT_MEASURED and verdict.value is None
        cells = targets.format_verdict(verdict)
        assert cells[3] == "-" and cells[4] == "not measured" and cells[-1] == "-"


def test_apart_within_10_is_the_share_of_runs_with_its_wilson_interval():
    """Separation.first is the first iteration the jobs stood apart: 10 counts, 11 and never do
    not; a run without rivals (None) is no run of this measure."""
    from mn_harness.report.metrics import Separation
    from mn_harness.results.stats import wilson_ci95
    targets = bench_module("repro_targets")
    target = _target("apart", 0.8)
    seps = [Separation(5, 0), Separation(10, 2), Separation(8, 0), Separation(7, 1), Separation(11, 0)]
    met = targets.evaluate(target, [_row(apart=seps)])
    assert met.verdict == targets.MET and met.value == pytest.approx(0.8) and met.runs == 5
    assert met.interval == pytest.approx(wilson_ci95(4, 5))
    under = targets.evaluate(target, [_row(apart=[*seps, Separation(None, 0)])])
    assert under.verdict == targets.NOT_MET and under.value == pytest.approx(4 / 6)
    assert targets.evaluate(target, [_row(apart=[None])]).verdict == targets.NOT_MEASURED


def test_the_faithful_count_is_of_the_rows_runs():
    targets = bench_module("repro_targets")
    row = _row(gain_mean=[1.4, 1.5, 1.3], faithful=["faithful", "unfaithful", None])
    verdict = targets.evaluate(_target(), [row])
    assert verdict.faithful == 1 and targets.format_verdict(verdict)[-1] == "1 of 3"


def test_every_target_names_a_suite_scenario_and_a_variant_with_a_base():
    """A target whose scenario left the suite, or whose row would have no gain, could never be
    measured."""
    targets = bench_module("repro_targets")
    reproduce = bench_module("reproduce")
    table = bench_module("repro_table")
    for target in targets.TARGETS:
        assert target.scenario in reproduce.SUITE
        assert table.base_of(target.cc) is not None
    assert {t.measure for t in targets.TARGETS} == {"gain_mean", "gain_p99", "apart"}


def test_a_target_of_a_cc_that_needs_ecn_names_a_scenario_whose_bottleneck_marks():
    """DCTCP's variants react to the switch's CE marks (without them they run but see only
    losses), so their targets name a scenario that marks, and so does the base CC their gain
    is over."""
    from mn_harness.cc.variants import BPF_VARIANTS

    targets = bench_module("repro_targets")
    reproduce = bench_module("reproduce")
    table = bench_module("repro_table")
    ecn_targets = [t for t in targets.TARGETS if BPF_VARIANTS.get(t.cc) and BPF_VARIANTS[t.cc].needs_ecn]
    assert {t.scenario for t in ecn_targets} >= {"partial-ecn", "overload-ecn"}
    for target in ecn_targets:
        assert BPF_VARIANTS[table.base_of(target.cc)].needs_ecn
        raw = reproduce.scenario_raw(target.scenario, [], None)
        marking = [*raw.get("links", []), *raw.get("switches", [])]
        assert any(entry.get("ecn_threshold") for entry in marking), target.scenario

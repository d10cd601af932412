"""Metrics on hand-built timelines whose answers are worked out by hand in each test."""

import pytest

from mn_harness.report.markdown import convergence_text, format_table
from mn_harness.report.metrics import (
    Separation,
    compute_metrics,
    convergence_iteration,
    overlap_fraction,
    rivals,
    separation,
    union_intervals,
)
from mn_harness.results.iterations import count_missing_rows, job_iterations
from mn_harness.results.schema import IterationRow, JobSummary, RunSummary, ThroughputRow
from mn_harness.results.stats import percentile


def row(job, rank, it, t_start, c0, c1, nbytes=1000):
    return IterationRow(job, rank, it, t_start, c0, c1, c1 - t_start, c1 - c0, nbytes)


def summary(jobs, link_jobs, ideal=None, iterations=None, cc=None):
    return RunSummary(
        experiment="t",
        cc=cc or {},
        jobs={
            name: JobSummary(hosts=[f"h{r}" for r in range(n)], iterations=iterations, ideal_iter_s=ideal)
            for name, n in jobs.items()
        },
        link_jobs=link_jobs,
    )


def periodic(job, n_iter, ranks=1, offset=0.0, compute=0.6, comm=0.4, shifts=None):
    """Iteration i starts at i*(compute+comm) + offset + shifts[i], computes, then communicates."""
    out = []
    period = compute + comm
    for i in range(n_iter):
        t0 = i * period + offset + (shifts[i] if shifts else 0.0)
        for r in range(ranks):
            out.append(row(job, r, i, t0, t0 + compute, t0 + compute + comm))
    return out


# ----------------------------------------------------------------- building blocks


def test_percentile_linear_interpolation():
    xs = [4.0, 1.0, 3.0, 2.0]
    assert percentile(xs, 50) == pytest.approx(2.5)
    # h = 3 * 0.99 = 2.97 -> 3 + 0.97 * (4 - 3)
    assert percentile(xs, 99) == pytest.approx(3.97)
    assert percentile(xs, 0) == 1.0
    assert percentile(xs, 100) == 4.0
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_union_and_overlap_fraction():
    assert union_intervals([(3, 4), (0, 1), (0.5, 2), (4, 5), (6, 6)]) == [(0, 2), (3, 5)]
    # [0.6, 1.0] against [0.5, 0.7] and [0.65, 0.8]: covered [0.6, 0.8] = 0.2 of 0.4, not the
    # 0.25 a per-interval sum would give.
    assert overlap_fraction((0.6, 1.0), [(0.5, 0.7), (0.65, 0.8)]) == pytest.approx(0.5)
    assert overlap_fraction((0.6, 1.0), []) == 0.0
    assert overlap_fraction((1.0, 1.0), [(0, 2)]) is None


def test_job_iteration_spans_ranks():
    rows = [row("A", 0, 0, 0.0, 0.6, 0.9), row("A", 1, 0, 0.05, 0.65, 1.0)]
    (it,) = job_iterations(rows)["A"]
    assert (it.t_start, it.t_comm_start, it.t_comm_end) == (0.0, 0.6, 1.0)
    # slowest rank: rank 0 took 0.9 s, rank 1 0.95 s (not the 1.0 s span of the job)
    assert it.iter_time == pytest.approx(0.95)
    assert it.complete


def test_rivals_from_link_jobs():
    links = {"s1-s2": ["A", "B"], "s2-s3": ["A", "C"], "s3-s4": ["C"]}
    assert rivals(links, "A") == ["B", "C"]
    assert rivals(links, "B") == ["A"]
    assert rivals(links, "D") == []


def test_convergence_iteration():
    ovs = [(0, 0.9), (1, 0.5), (2, 0.05), (3, 0.2), (4, 0.1), (5, 0.0)]
    assert convergence_iteration(ovs) == 4  # 0.1 is "≤ 10%"
    assert convergence_iteration([(0, 0.0), (1, 0.0)]) == 0
    assert convergence_iteration([(0, 0.0), (1, 0.5)]) is None
    assert convergence_iteration([]) is None
    assert convergence_iteration([(0, None), (1, 0.05), (2, None), (3, 0.0)]) == 1
    # one low last iteration is no convergence; nor a stretch under 10% of the iterations
    assert convergence_iteration([(0, 0.5), (1, 0.05)]) is None
    assert convergence_iteration([(i, 0.8) for i in range(47)] + [(47, 0.0), (48, 0.0), (49, 0.0)]) is None
    assert convergence_iteration([(i, 0.8) for i in range(45)] + [(i, 0.0) for i in range(45, 50)]) == 45
    assert convergence_iteration([(0, 0.3), (1, 0.25)], threshold=0.3) == 0


# ----------------------------------------------------------------- whole timelines

LINK_AB = {"s1-s2": ["A", "B"]}


def test_fully_overlapping():
    rows = periodic("A", 3, ranks=2) + periodic("B", 3, ranks=2)
    m = compute_metrics(summary({"A": 2, "B": 2}, LINK_AB, ideal=0.8), rows)
    for job in "AB":
        jm = m.jobs[job]
        assert jm.n_iterations == 3
        assert jm.mean_iter_s == pytest.approx(1.0)
        assert jm.slowdown_mean == pytest.approx(1.25)
        assert [p["overlap"] for p in jm.per_iteration] == pytest.approx([1.0, 1.0, 1.0])
        assert jm.contended_iterations == 3
        assert jm.overlap_mean == pytest.approx(1.0)
        assert jm.convergence_iteration is None
        assert convergence_text(jm) == "never"
    assert m.links["s1-s2"].overlap_mean == pytest.approx(1.0)


def test_fully_interleaved():
    # A communicates in [i+0.6, i+1.0]; B starts 0.5 s later: [i+1.1, i+1.5].
    rows = periodic("A", 3) + periodic("B", 3, offset=0.5)
    m = compute_metrics(summary({"A": 1, "B": 1}, LINK_AB), rows)
    a, b = m.jobs["A"], m.jobs["B"]
    assert [p["overlap"] for p in a.per_iteration] == [0.0, 0.0, 0.0]
    assert a.convergence_iteration == 0
    # B's last phase [3.1, 3.5] is after A ended (3.0): not contended, left out.
    assert [p["contended"] for p in b.per_iteration] == [True, True, False]
    assert b.contended_iterations == 2
    assert b.overlap_mean == 0.0
    assert b.convergence_iteration == 0


def test_partial_overlap_hand_computed():
    rows = [
        row("A", 0, 0, 0.0, 0.6, 0.9),
        row("A", 1, 0, 0.0, 0.62, 1.0),  # job interval [0.6, 1.0]
        row("B", 0, 0, 0.3, 0.8, 1.3),  # [0.8, 1.3]
    ]
    m = compute_metrics(summary({"A": 2, "B": 1}, LINK_AB), rows)
    assert m.jobs["A"].overlap_mean == pytest.approx(0.2 / 0.4)
    assert m.jobs["B"].overlap_mean == pytest.approx(0.2 / 0.5)
    assert m.links["s1-s2"].overlap_mean == pytest.approx((0.5 + 0.4) / 2)


def test_overlap_unions_rivals_on_different_links():
    rows = [
        row("A", 0, 0, 0.0, 0.6, 1.0),
        row("B", 0, 0, 0.0, 0.5, 0.7),
        row("C", 0, 0, 0.0, 0.65, 0.8),
    ]
    links = {"s1-s2": ["A", "B"], "s2-s3": ["A", "C"]}
    m = compute_metrics(summary({"A": 1, "B": 1, "C": 1}, links), rows)
    assert m.jobs["A"].rivals == ["B", "C"]
    assert m.jobs["A"].overlap_mean == pytest.approx(0.2 / 0.4)
    # B and C share no link: B only sees A ([0.6, 0.7] of [0.5, 0.7]).
    assert m.jobs["B"].overlap_mean == pytest.approx(0.5)
    assert m.jobs["C"].overlap_mean == pytest.approx(1.0)
    # Per link only that link's pair counts: s1-s2 = (A vs B: 0.1/0.4, B: 0.5).
    assert m.links["s1-s2"].overlap_mean == pytest.approx((0.25 + 0.5) / 2)


def test_drifting_phases_converge():
    # B's phase slides 0.1 s later each iteration until it stops at 0.4 (MLTCP-like).
    # A_i comm [i+0.6, i+1.0], B_i comm [i+0.6+d, i+1.0+d]: overlap (0.4 - d) / 0.4.
    d = [0.0, 0.1, 0.2, 0.3, 0.4, 0.4, 0.4]
    rows = periodic("A", 7) + periodic("B", 7, shifts=d)
    m = compute_metrics(summary({"A": 1, "B": 1}, LINK_AB), rows)
    a, b = m.jobs["A"], m.jobs["B"]
    expected = [1.0, 0.75, 0.5, 0.25, 0.0, 0.0, 0.0]
    assert [p["overlap"] for p in a.per_iteration] == pytest.approx(expected)
    assert a.convergence_iteration == 4
    assert a.overlap_mean == pytest.approx(sum(expected) / 7)
    # B's last phase [7.0, 7.4] starts when A has ended: uncontended.
    assert b.contended_iterations == 6
    assert b.overlap_mean == pytest.approx(sum(expected[:6]) / 6)
    assert b.convergence_iteration == 4
    # link overlap: contended iterations of both jobs, 7 of A and 6 of B
    assert m.links["s1-s2"].overlap_mean == pytest.approx((2.5 + 2.5) / 13)
    # one interleaved contended iteration at the end is not convergence (the stretch rule)
    short = compute_metrics(summary({"A": 1, "B": 1}, LINK_AB),
                            periodic("A", 6) + periodic("B", 6, shifts=d[:6]))
    assert short.jobs["B"].contended_iterations == 5 and short.jobs["B"].convergence_iteration is None


def test_separation_first_apart_and_relapses():
    # B slides 0.1 s per iteration until its phase sits after A's (apart from iteration 4); at
    # iteration 6 A is 0.4 s late and lands on B (a relapse), at 7 B is 0.4 s later too, apart
    # again: first 4, one relapse.
    a = [0.0] * 6 + [0.4] * 3
    b = [0.0, 0.1, 0.2, 0.3, 0.4, 0.4, 0.4, 0.8, 0.8]
    rows = periodic("A", 9, shifts=a) + periodic("B", 9, shifts=b)
    m = compute_metrics(summary({"A": 1, "B": 1}, LINK_AB), rows)
    assert separation(m) == Separation(first=4, relapses=1)
    assert m.jobs["A"].convergence_iteration == 7  # convergence waits for the relapse to end
    assert [round(p["overlap"], 6) for p in m.jobs["A"].per_iteration][:7] == [1, 0.75, 0.5, 0.25, 0, 0, 1]
    # a looser threshold: overlap 0.25 at iteration 3 counts as apart
    assert separation(m, threshold=0.3) == Separation(first=3, relapses=1)
    # never apart
    locked = compute_metrics(summary({"A": 1, "B": 1}, LINK_AB), periodic("A", 5) + periodic("B", 5))
    assert separation(locked) == Separation(first=None, relapses=0)
    # no rival: nothing to be apart from
    alone = compute_metrics(summary({"A": 1}, {"s1-s2": ["A"]}), periodic("A", 5))
    assert separation(alone) is None


def test_separation_needs_every_contended_job_apart_at_once():
    # three jobs: C stays on top of A throughout, so although B separates, the run never does
    d = [0.0, 0.4, 0.4, 0.4]
    rows = periodic("A", 4) + periodic("B", 4, shifts=d) + periodic("C", 4)
    links = {"s1-s2": ["A", "B", "C"]}
    m = compute_metrics(summary({"A": 1, "B": 1, "C": 1}, links), rows)
    assert separation(m).first is None


def test_straggler_iteration():
    rows = periodic("A", 5, ranks=2)
    # rank 1 of iteration 2 ends its communication 0.5 s late
    rows = [r for r in rows if not (r.rank == 1 and r.iteration == 2)]
    rows.append(row("A", 1, 2, 2.0, 2.6, 3.5))
    m = compute_metrics(summary({"A": 2}, {}, ideal=0.8), rows)
    a = m.jobs["A"]
    # job times [1, 1, 1.5, 1, 1]
    assert [p["iter_time"] for p in a.per_iteration] == pytest.approx([1, 1, 1.5, 1, 1])
    assert a.mean_iter_s == pytest.approx(1.1)
    assert a.p50_iter_s == pytest.approx(1.0)
    assert a.p99_iter_s == pytest.approx(1.0 + 0.96 * 0.5)  # h = 4 * 0.99 = 3.96
    assert a.slowdown_mean == pytest.approx(1.1 / 0.8)
    assert a.slowdown_p99 == pytest.approx(1.48 / 0.8)
    assert a.baseline == "ideal"


def test_isolated_baseline_preferred():
    s = RunSummary(experiment="t", jobs={"A": JobSummary(hosts=["h0"], iterations=2, ideal_iter_s=0.8,
                                                         isolated_iter_s=0.9)})
    m = compute_metrics(s, periodic("A", 2))
    assert m.jobs["A"].baseline == "isolated"
    assert m.jobs["A"].slowdown_mean == pytest.approx(1.0 / 0.9)


# ----------------------------------------------------------------- edge cases


def test_one_job_has_no_overlap_or_convergence():
    m = compute_metrics(summary({"A": 2}, {"s1-s2": ["A"]}), periodic("A", 4, ranks=2))
    a = m.jobs["A"]
    assert a.rivals == []
    assert a.contended_iterations == 0
    assert a.overlap_mean is None
    assert a.convergence_iteration is None
    assert convergence_text(a) == "n/a"
    assert m.links == {}  # a link with one job is not shared
    assert "n/a" in format_table(m)


def test_one_iteration():
    m = compute_metrics(summary({"A": 1, "B": 1}, LINK_AB), periodic("A", 1) + periodic("B", 1))
    a = m.jobs["A"]
    assert a.n_iterations == 1
    assert a.mean_iter_s == a.p50_iter_s == a.p99_iter_s == pytest.approx(1.0)
    assert a.overlap_mean == pytest.approx(1.0)
    assert a.convergence_iteration is None


def test_no_rows_at_all():
    m = compute_metrics(summary({"A": 2}, {}, iterations=3), [])
    a = m.jobs["A"]
    assert a.n_iterations == 0
    assert a.mean_iter_s is None and a.p99_iter_s is None and a.slowdown_mean is None
    assert a.missing_rows == 6
    assert m.missing_rows_total == 6
    format_table(m)  # renders with dashes, does not raise


def test_missing_rows_from_killed_worker():
    # rank 1 of A was killed after iteration 1: its rows for iterations 2 and 3 are missing
    rows = [r for r in periodic("A", 4, ranks=2) if not (r.rank == 1 and r.iteration >= 2)]
    # B communicates in [3.7, 3.9], inside A's partial iteration 3 ([3.6, 4.0], rank 0 only)
    rows.append(row("B", 0, 0, 3.3, 3.7, 3.9))
    assert count_missing_rows(rows, "A", 2, 4) == 2
    m = compute_metrics(summary({"A": 2, "B": 1}, LINK_AB, iterations=None), rows, [])
    a, b = m.jobs["A"], m.jobs["B"]
    assert a.missing_rows == 2
    assert a.n_iterations == 2  # only iterations 0, 1 have both ranks
    assert a.incomplete_iterations == 2
    assert [p["iteration"] for p in a.per_iteration] == [0, 1]
    assert a.mean_iter_s == pytest.approx(1.0)
    # the partial iteration still counts as A communicating when B's overlap is measured
    assert b.overlap_mean == pytest.approx(1.0)
    assert m.missing_rows_total == 2
    assert any("A: 2 missing" in n for n in m.notes)


def test_malformed_rows_become_notes():
    m = compute_metrics(summary({"A": 1}, {}), periodic("A", 1), malformed_rows={"x.csv": 3})
    assert any("x.csv: 3 malformed" in n for n in m.notes)


# ----------------------------------------------------------------- fairness


def tp(job, rank, t, nbytes, bin_s=0.1):
    return ThroughputRow(job, rank, t, bin_s, nbytes)


def test_jain_per_iteration_window():
    # A has 3 iterations [0,1], [1,2], [2,3]; B only the first two; equal medians -> A is the
    # reference (job order). Window 0: A 500 B 300 bytes; window 1: 500/500; window 2 lies
    # outside B's active span and is dropped.
    rows = periodic("A", 3, compute=0.5, comm=0.5) + periodic("B", 2, ranks=2, compute=0.5, comm=0.5)
    thr = [tp("A", 0, 0.5 + 0.1 * k, 100) for k in range(5)]
    thr += [tp("A", 0, 1.5 + 0.1 * k, 100) for k in range(5)]
    thr += [tp("A", 0, 2.5, 999)]
    thr += [tp("B", 0, 0.7, 200), tp("B", 1, 0.7, 100)]
    thr += [tp("B", 0, 1.6, 250), tp("B", 1, 1.6, 250)]
    m = compute_metrics(summary({"A": 1, "B": 2}, LINK_AB), rows, thr)
    link = m.links["s1-s2"]
    j0 = 800**2 / (2 * (500**2 + 300**2))  # 0.941...
    assert link.reference_job == "A"
    assert link.windows == 2
    assert link.jain == pytest.approx([j0, 1.0])
    assert link.jain_mean == pytest.approx((j0 + 1.0) / 2)
    assert link.jain_min == pytest.approx(j0)


def test_jain_reference_is_longest_job():
    # B's iterations (2 s) are longer than A's (1 s): windows are B's [0, 2] and [2, 4].
    rows = periodic("A", 4) + periodic("B", 2, compute=1.0, comm=1.0)
    thr = [tp("A", 0, 0.7, 100), tp("A", 0, 1.7, 100), tp("B", 0, 1.2, 100)]
    thr += [tp("A", 0, 2.7, 100), tp("B", 0, 3.2, 400)]
    m = compute_metrics(summary({"A": 1, "B": 1}, LINK_AB), rows, thr)
    link = m.links["s1-s2"]
    assert link.reference_job == "B"
    # window 0: A 200, B 100; window 1: A 100, B 400
    assert link.jain == pytest.approx([300**2 / (2 * (200**2 + 100**2)), 500**2 / (2 * (100**2 + 400**2))])


def test_no_throughput_no_jain():
    m = compute_metrics(summary({"A": 1, "B": 1}, LINK_AB), periodic("A", 2) + periodic("B", 2))
    assert m.links["s1-s2"].jain_mean is None
    assert m.links["s1-s2"].windows == 0
    assert any("Jain" in n for n in m.notes)


def test_missing_rows_counted_against_planned_iterations():
    # the runner's "iterations" is the complete count (2); "iterations_planned" is 5
    info = JobSummary(hosts=["h0", "h1"], iterations=2, iterations_planned=5)
    rows = [r for r in periodic("A", 4, ranks=2) if not (r.rank == 1 and r.iteration >= 2)]
    m = compute_metrics(RunSummary(experiment="t", jobs={"A": info}), rows)
    assert m.jobs["A"].missing_rows == 5 * 2 - 6

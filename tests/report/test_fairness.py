"""Jain's index and the per-job throughput series, on hand-computed values."""

import pytest

from mn_harness.report.fairness import jain_index, job_throughput
from mn_harness.results.schema import ThroughputRow


def tp(job, rank, t, nbytes, bin_s=0.1):
    return ThroughputRow(job, rank, t, bin_s, nbytes)


def test_jain_index():
    assert jain_index([5.0, 5.0]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0]) == pytest.approx(0.5)
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert jain_index([0.0, 0.0]) is None
    assert jain_index([]) is None


def test_job_throughput_sums_ranks_per_bin():
    rows = [tp("A", 0, 0.1, 5), tp("A", 1, 0.1000000001, 7), tp("A", 0, 0.2, 1)]
    (b1, b2) = job_throughput(rows)["A"]
    assert b1[2] == 12 and b2[2] == 1


def test_bins_half_a_bin_off_the_grid_stay_apart():
    # rank bins at 0.005, 0.015, 0.025 s: t / bin_s = 0.5, 1.5, 2.5 must stay three bins
    rows = [tp("A", 0, 0.005 + 0.01 * k, 10 + k, bin_s=0.01) for k in range(3)]
    assert [b[2] for b in job_throughput(rows)["A"]] == [10, 11, 12]

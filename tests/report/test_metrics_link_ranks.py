"""Throughput on a link counts only the ranks whose sending sockets cross it."""

from mn_harness.report.fairness import job_throughput
from mn_harness.results.loaders import parse_summary
from mn_harness.results.schema import ThroughputRow


def test_job_throughput_filters_ranks_on_a_link():
    summary = parse_summary({
        "experiment": "x", "jobs": {"a": {"workers": ["h1", "h2"]}},
        "link_jobs": {"s1->s2": ["a"], "s2->s1": ["a"]},
        "link_ranks": {"s1->s2": {"a": [0]}, "s2->s1": {"a": [1]}},
        "link_bps": {"s1->s2": 1e9},
    })
    rows = [ThroughputRow("a", 0, 0.0, 0.01, 100), ThroughputRow("a", 1, 0.0, 0.01, 7),
            ThroughputRow("a", 0, 0.01, 0.01, 50)]
    assert job_throughput(rows) == {"a": [(0.0, 0.01, 107), (0.01, 0.01, 50)]}
    assert job_throughput(rows, summary.ranks_on("s1->s2")) == {"a": [(0.0, 0.01, 100), (0.01, 0.01, 50)]}
    assert job_throughput(rows, summary.ranks_on("s2->s1")) == {"a": [(0.0, 0.01, 7)]}
    assert summary.ranks_on("nowhere") is None
    assert summary.busiest_link() in ("s1->s2", "s2->s1")

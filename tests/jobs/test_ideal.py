"""Ideal iteration time: compute + bytes one worker sends / the slowest link of its paths."""

import pytest

from mn_harness.config import load_experiment
from mn_harness.jobs.ideal import bytes_sent_per_worker, ideal_iteration_s
from mn_harness.network.plan import NetworkPlan
from tests.helpers import TOPOLOGIES


def test_ideal_time_of_inc_counts_s_once_and_ring_2_n_minus_1_over_n():
    exp = load_experiment(TOPOLOGIES / "inc-vs-ring-bmv2.yaml")
    plan = NetworkPlan(exp)
    for job in exp.jobs:
        expected = job.bytes_per_iteration if job.collective == "inc_allreduce" else \
            2 * (job.n - 1) * -(-job.bytes_per_iteration // job.n)
        assert bytes_sent_per_worker(job) == expected
        ideal, rate = ideal_iteration_s(job, plan)
        assert ideal == pytest.approx(job.compute_s + expected * 8 / rate)

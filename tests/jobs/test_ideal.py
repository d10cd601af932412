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
            2 * (job.n_workers - 1) * -(-job.bytes_per_iteration // job.n_workers)
        assert bytes_sent_per_worker(job) == expected
        ideal, rate = ideal_iteration_s(job, plan)
        assert ideal == pytest.approx(job.compute_s + expected * 8 / rate)


def star(phases, workers=("h1", "h2", "h3", "h4"), servers=(), bw="1Gbit"):
    from mn_harness.config import Experiment

    hosts = ["h1", "h2", "h3", "h4", "h5"]
    raw = {"experiment": "star", "hosts": hosts, "switches": ["s1"], "link_defaults": {"bw": bw},
           "links": [{"endpoints": [h, "s1"]} for h in hosts],
           "jobs": [{"name": "j", "workers": list(workers), "iterations": 1, "phases": phases}]}
    if servers:
        raw["jobs"][0]["servers"] = list(servers)
    exp = Experiment.from_dict(raw)
    return exp.jobs[0], NetworkPlan(exp)


@pytest.mark.parametrize("collective,per_link", [
    ("ring_allreduce", 1.5), ("tree_allreduce", 2.0), ("reduce_scatter", 0.75), ("all_gather", 0.75),
    ("broadcast", 1.0), ("all_to_all", 0.75)])
def test_collective_ideal_is_the_busiest_links_bytes_over_its_rate(collective, per_link):
    s = 8_000_000  # 4 ranks on a star: a host link carries what its rank sends
    job, plan = star([{"compute": "10ms"}, {"collective": collective, "bytes": s}])
    ideal, rate = ideal_iteration_s(job, plan)
    assert rate == 1e9
    assert ideal == pytest.approx(0.01 + per_link * s * 8 / 1e9, rel=1e-5)


def test_parameter_server_ideal_is_bound_by_the_servers_link():
    job, plan = star([{"compute": "10ms"}, {"collective": "parameter_server", "bytes": 8_000_000}],
                     workers=("h1", "h2", "h3"), servers=("h4",))
    assert bytes_sent_per_worker(job) == 3 * 8_000_000  # the server sends every worker its shard
    assert ideal_iteration_s(job, plan)[0] == pytest.approx(0.01 + 3 * 8_000_000 * 8 / 1e9)


def test_ddp_overlap_hides_communication_behind_backward():
    s = 6_000_000  # 48 ms of ring all-reduce on 2 ranks at 1 Gbit/s
    plain, plan = star([{"compute": "90ms"}, {"collective": "ring_allreduce", "bytes": s}], workers=("h1", "h2"))
    overlapped, _ = star([{"compute": "90ms"}, {"collective": "ring_allreduce", "bytes": s,
                                                "overlap": {"bucket": "2MB", "first_bucket": "2MB"}}],
                         workers=("h1", "h2"))
    assert ideal_iteration_s(plain, plan)[0] == pytest.approx(0.09 + 0.048)
    # buckets ready at 30 + 20, 40, 60 ms of backward; each 16 ms; the last one ends at 90 + 16 ms
    assert ideal_iteration_s(overlapped, plan)[0] == pytest.approx(0.09 + 0.016)


def test_pipeline_ideal_plays_1f1b():
    job, plan = star([{"collective": "pipeline", "bytes": 1_000_000, "micro_batches": 4, "forward": "10ms",
                       "backward": "20ms"}, {"compute": "5ms"}], workers=("h1", "h2"))
    # 2 stages, 4 micro-batches, 8 ms per transfer, worked by hand: stage 0 runs F0 0-10, F1 10-20,
    # B0 56-76 (gradient 0 arrives at 48 + 8), F2 76-86, B1 86-106, F3 106-116, B2 132-152,
    # B3 162-182 (stage 1's B3 ends at 154); then 5 ms of compute
    assert ideal_iteration_s(job, plan)[0] == pytest.approx(0.187)

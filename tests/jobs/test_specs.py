"""What every worker is told, built from the experiment and the plan (no processes)."""

from pathlib import Path

from mn_harness.config import Experiment, load_experiment
from mn_harness.config.dump import experiment_to_raw
from mn_harness.jobs.specs import worker_specs
from mn_harness.network.flows import BASE_PORT
from mn_harness.network.plan import NetworkPlan
from mn_harness.p4.entries import job_ids
from tests.helpers import TOPOLOGIES


def specs_of(name, cc="cubic"):
    exp = load_experiment(TOPOLOGIES / name)
    plan = NetworkPlan(exp)
    return exp, plan, worker_specs(exp, plan, Path("/r/raw"), {j.name: f"k-{j.name}" for j in exp.jobs})


def test_ring_workers_know_their_ring_port_and_files():
    exp, plan, specs = specs_of("dumbbell-2jobs.yaml")
    assert [(h, s.job, s.rank) for h, s in specs] == [("h1", "job1", 0), ("h3", "job1", 1),
                                                      ("h2", "job2", 0), ("h4", "job2", 1)]
    by_job = {}
    for host, s in specs:
        job = next(j for j in exp.jobs if j.name == s.job)
        assert s.ips == tuple(plan.host_ip[w] for w in job.workers) and s.ips[s.rank] == plan.host_ip[host]
        assert (s.bytes_per_iteration, s.compute_s, s.iterations) == (25_000_000, 0.3, 30)
        assert s.start_offset_s == job.start_offset_s and s.cc == f"k-{s.job}"
        assert s.iterations_path == f"/r/raw/{s.job}-r{s.rank}.iterations.jsonl"
        assert s.throughput_path == f"/r/raw/{s.job}-r{s.rank}.throughput.jsonl"
        assert s.agg_job_id == 0  # not an aggregation job
        by_job.setdefault(s.job, set()).add(s.port)
    assert by_job == {"job1": {BASE_PORT + 1}, "job2": {BASE_PORT + 2}}


def test_inc_workers_use_the_p4_job_id_and_their_gateway():
    exp, plan, specs = specs_of("inc-vs-ring-bmv2.yaml")
    ids = job_ids(plan)  # what the switch's entries use
    inc = [(h, s) for h, s in specs if s.collective == "inc_allreduce"]
    assert inc
    for host, s in inc:
        job = next(j for j in exp.jobs if j.name == s.job)
        assert s.agg_job_id == ids[s.job] and s.port == BASE_PORT + ids[s.job]
        assert s.agg_switch_ip == plan.gateway(host).peer_ip
        assert (s.inc_slots, s.inc_scale, s.inc_seed) == (job.inc.slots, job.inc.scale, exp.run.seed)


def specs_with(name, main_thread):
    raw = experiment_to_raw(load_experiment(TOPOLOGIES / name))
    raw["run"].setdefault("emulation", {})["worker_main_thread"] = main_thread
    exp = Experiment.from_dict(raw)
    return worker_specs(exp, NetworkPlan(exp), Path("/r/raw"), {j.name: "cubic" for j in exp.jobs})


def test_the_real_time_choice_reaches_every_worker():
    """run.emulation.worker_main_thread reaches every worker's spec, whatever its engine: with
    realtime (the default) each sleeps through its compute phases in the real-time class
    (worker/threads.py)."""
    for name in ("dumbbell-2jobs.yaml", "inc-vs-ring-bmv2.yaml"):
        assert all(s.realtime_main for _, s in specs_of(name)[2])  # the default
        assert all(s.realtime_main for _, s in specs_with(name, "realtime"))
        assert not any(s.realtime_main for _, s in specs_with(name, "fair"))

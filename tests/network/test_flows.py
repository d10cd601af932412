"""The jobs' flows and their fixed 5-tuples (what ECMP hashes), and the hash seed."""

from mn_harness.config import Experiment, load_experiment
from mn_harness.jobs.specs import worker_specs
from mn_harness.network.flows import (
    BASE_PORT,
    MAX_HASH_SEED,
    SOURCE_PORT_BASE,
    Flow,
    ecmp_hash_seed,
    job_flows,
)
from mn_harness.network.plan import NetworkPlan
from tests.helpers import TOPOLOGIES, small_demo


def test_one_flow_per_direction_of_each_connection_with_the_job_ports():
    """A 2-worker ring keeps one connection, opened by rank 1: its data goes source port ->
    listening port, rank 0's data the other way."""
    exp = load_experiment(TOPOLOGIES / "dumbbell-2jobs.yaml")
    flows = job_flows(exp)
    assert flows[:2] == (Flow("job1", 0, "h1", "h3", BASE_PORT + 1, SOURCE_PORT_BASE + 1),
                         Flow("job1", 1, "h3", "h1", SOURCE_PORT_BASE + 1, BASE_PORT + 1))
    assert [(f.job, f.rank) for f in flows] == [("job1", 0), ("job1", 1), ("job2", 0), ("job2", 1)]


def test_a_three_rank_ring_has_the_wrap_around_connection_from_the_highest_rank():
    raw = small_demo()
    raw["hosts"] += ["h5"]
    raw["links"].append({"endpoints": ["h5", "s2"]})
    raw["jobs"][0]["workers"] = ["h1", "h3", "h5"]
    flows = [f for f in job_flows(Experiment.from_dict(raw)) if f.job == "job1"]
    listen, source = BASE_PORT + 1, SOURCE_PORT_BASE + 1
    assert [(f.rank, f.src, f.dst, f.sport, f.dport) for f in flows] == [
        (0, "h1", "h3", listen, source), (1, "h3", "h5", listen, source), (2, "h5", "h1", source, listen)]


def test_workers_use_the_flow_ports():
    """The 5-tuple the plan hashes is the one the workers use: the higher rank of a pair
    connects from its source port to the lower rank's listening port (worker.transport)."""
    exp = load_experiment(TOPOLOGIES / "leaf-spine.yaml")
    plan = NetworkPlan(exp)
    specs = {(s.job, plan.experiment.jobs[[j.name for j in exp.jobs].index(s.job)].hosts[s.rank]): s
             for _, s in worker_specs(exp, plan, TOPOLOGIES, {j.name: "cubic" for j in exp.jobs})}
    for flow in plan.flows:
        sender, receiver = specs[(flow.job, flow.src)], specs[(flow.job, flow.dst)]
        assert sender.rank == flow.rank and sender.ips[sender.rank] == plan.host_ip[flow.src]
        dialer, listener = (sender, receiver) if sender.rank > receiver.rank else (receiver, sender)
        ports = (dialer.src_port, listener.port) if dialer is sender else (listener.port, dialer.src_port)
        assert (flow.sport, flow.dport) == ports


def test_hash_seed_is_32_bit_and_never_zero():
    """0 means "random" to Linux's fib_multipath_hash_seed."""
    seeds = [ecmp_hash_seed(s) for s in (-5, -1, 0, 1, 2, MAX_HASH_SEED - 1, MAX_HASH_SEED, 10**12)]
    assert all(1 <= s <= MAX_HASH_SEED for s in seeds)
    assert ecmp_hash_seed(1) != ecmp_hash_seed(2) and ecmp_hash_seed(7) == ecmp_hash_seed(7)

"""The jobs' flows and their fixed 5-tuples (what ECMP hashes), and the hash seed."""

from mn_harness.config import load_experiment
from mn_harness.jobs.specs import worker_specs
from mn_harness.network.flows import (
    BASE_PORT,
    MAX_HASH_SEED,
    SOURCE_PORT_BASE,
    Flow,
    ecmp_hash_seed,
    job_flows,
    ring_hops,
)
from mn_harness.network.plan import NetworkPlan
from tests.helpers import TOPOLOGIES


def test_one_flow_per_ring_hop_with_the_job_ports():
    exp = load_experiment(TOPOLOGIES / "dumbbell-2jobs.yaml")
    flows = job_flows(exp)
    assert flows[:2] == (Flow("job1", 0, "h1", "h3", SOURCE_PORT_BASE + 1, BASE_PORT + 1),
                         Flow("job1", 1, "h3", "h1", SOURCE_PORT_BASE + 1, BASE_PORT + 1))
    assert [(f.job, f.rank) for f in flows] == [("job1", 0), ("job1", 1), ("job2", 0), ("job2", 1)]
    assert ring_hops(("a", "b", "c")) == [("a", "b"), ("b", "c"), ("c", "a")]


def test_workers_connect_from_the_flow_source_port():
    """The 5-tuple the plan hashes is the one the workers use."""
    exp = load_experiment(TOPOLOGIES / "leaf-spine.yaml")
    plan = NetworkPlan(exp)
    specs = worker_specs(exp, plan, TOPOLOGIES, {j.name: "cubic" for j in exp.jobs})
    for flow in plan.flows:
        host, spec = next((h, s) for h, s in specs if s.job == flow.job and s.rank == flow.rank)
        assert host == flow.src and spec.src_port == flow.sport and spec.port == flow.dport
        assert spec.ips[(spec.rank + 1) % spec.n] == plan.host_ip[flow.dst]


def test_hash_seed_is_32_bit_and_never_zero():
    """0 means "random" to Linux's fib_multipath_hash_seed."""
    seeds = [ecmp_hash_seed(s) for s in (-5, -1, 0, 1, 2, MAX_HASH_SEED - 1, MAX_HASH_SEED, 10**12)]
    assert all(1 <= s <= MAX_HASH_SEED for s in seeds)
    assert ecmp_hash_seed(1) != ecmp_hash_seed(2) and ecmp_hash_seed(7) == ecmp_hash_seed(7)

"""mn_harness.p4.aggregation without a switch: slot allocation in the shared pool, jobs per
aggregation switch from the plan, and the entries / multicast replicas of a job. aggregation.p4
itself runs in test_aggregation_bmv2.py."""

import pytest

from mn_harness.p4.aggregation import (
    AggJob,
    AggregationError,
    agg_udp_port,
    allocate_slots,
    job_entries,
    plan_agg_jobs,
    plan_worker,
    replicas,
    stats_indices,
)
from mn_harness.p4.limits import AGG_MAX_WORKERS, AGG_POOL, AGG_PORT_BASE, AGG_STATS_KINDS
from mn_harness.testing import make_plan


def star(n=4):
    hosts = [f"h{i}" for i in range(1, n + 1)]
    return make_plan(hosts, ["s1"], [(h, "s1") for h in hosts])


def job(plan, job_id, hosts, slots):
    return AggJob(job_id, tuple(plan_worker(plan, h, r) for r, h in enumerate(hosts)), slots)


def test_slots_are_packed_in_order_two_per_window_slot():
    plan = star()
    jobs = allocate_slots([job(plan, 1, ["h1", "h2"], 4), job(plan, 2, ["h3", "h4"], 10)])
    assert [(j.slot_base, j.physical_slots) for j in jobs] == [(0, 8), (8, 20)]
    full = allocate_slots([job(plan, 3, ["h1", "h2"], AGG_POOL // 2)])
    assert full[0].physical_slots == AGG_POOL


def test_allocation_errors_are_one_line():
    plan = star()
    with pytest.raises(AggregationError, match=f"the switch has {AGG_POOL}"):
        allocate_slots([job(plan, 1, ["h1", "h2"], AGG_POOL // 2), job(plan, 2, ["h3", "h4"], 1)])
    with pytest.raises(AggregationError, match="outside 1..63"):
        allocate_slots([job(plan, 64, ["h1", "h2"], 1)])
    with pytest.raises(AggregationError, match=f"2..{AGG_MAX_WORKERS} supported"):
        allocate_slots([job(plan, 1, ["h1"], 1)])


def test_plan_agg_jobs_per_switch_with_the_telemetry_job_id():
    plan = star()
    [agg] = plan_agg_jobs(plan, {"j": 3})["s1"]
    assert agg.job_id == 1 and agg.slots == 3 and agg.slot_base == 0
    assert [w.rank for w in agg.workers] == [0, 1, 2, 3]
    w = agg.workers[2]
    assert (w.ip, w.mac) == (plan.host_ip["h3"], plan.gateway("h3").mac)
    assert (w.gateway_ip, w.port_mac) == (plan.gateway("h3").peer_ip, plan.gateway("h3").peer_mac)
    assert plan_agg_jobs(plan, {}) == {}


def test_workers_on_two_switches_are_refused():
    plan = make_plan(["h1", "h2"], ["s1", "s2"], [("h1", "s1"), ("s1", "s2"), ("s2", "h2")])
    with pytest.raises(AggregationError, match="one aggregation switch"):
        plan_agg_jobs(plan, {"j": 1})


def test_job_entries_and_replicas():
    [agg] = plan_agg_jobs(star(3), {"j": 2})["s1"]
    entries = job_entries(agg)
    assert entries[0].table == "agg_job"
    assert entries[0].match == {"hdr.agg.job": 1, "udp_dst": AGG_PORT_BASE + 1}
    assert entries[0].params == {"slot_base": 0, "slot_count": 4, "nworkers": 3, "mcast_group": 1}
    results = [e for e in entries if e.table == "agg_result_dst"]
    assert [e.match["standard_metadata.egress_rid"] for e in results] == [1, 2, 3]
    assert replicas(agg) == [(w.port, w.rank + 1) for w in agg.workers]
    assert agg_udp_port(5) == AGG_PORT_BASE + 5
    assert stats_indices(2)[0] == 2 * AGG_STATS_KINDS

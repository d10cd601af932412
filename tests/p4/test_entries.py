"""mn_harness.p4.entries: table entries for ecn_telemetry.p4 from a NetworkPlan (no switch)."""

import pytest

from mn_harness.network.plan import NetworkPlan
from mn_harness.p4.entries import (
    JobRule,
    TopologyError,
    job_entries,
    job_ids,
    plan_job_rules,
    qbucket_shift,
    switch_entries,
    switch_specs,
)
from mn_harness.p4.limits import NO_MARKING
from mn_harness.p4.runtime import P4Info, table_entry
from mn_harness.testing import make_plan
from tests.p4.fake_p4info import P4INFO_TEXT


def line3():
    """h1 - s1 - s2 - s3 - h2, plus h3 on s1 (ports in link order: s1: h1=1, h3=2, s2=3)."""
    return make_plan(["h1", "h2", "h3"], ["s1", "s2", "s3"],
                     [("h1", "s1"), ("h3", "s1"), ("s1", "s2"), ("s2", "s3"), ("s3", "h2")])


def by_table(entries, table):
    return [e for e in entries if e.table == table]


def lpm(entries):
    return {e.match["hdr.ipv4.dstAddr"]: e.params for e in by_table(entries, "ipv4_lpm")}


def test_specs_follow_the_plan_routes():
    plan = line3()
    specs = switch_specs(plan)
    assert [s.device_id for s in specs.values()] == [1, 2, 3]
    for name, spec in specs.items():
        routes = {r.dst_host: r for r in plan.routes[name]}
        assert {r.dst_host for r in spec.routes} == set(plan.experiment.hosts)
        for r in spec.routes:
            assert (r.port, r.src_mac, r.dst_mac) == (routes[r.dst_host].out.port,
                                                      routes[r.dst_host].out.mac,
                                                      routes[r.dst_host].next_hop_mac)
    assert specs["s1"].port_to("s2") == 3 and specs["s2"].port_to("s1") == 1


def test_routes_rewrite_macs_hop_by_hop():
    plan = line3()
    ip = plan.host_ip
    s2 = lpm(switch_entries(switch_specs(plan)["s2"]))
    s2_to_s3 = next(i for i in plan.interfaces["s2"] if i.peer_node == "s3")
    s3_from_s2 = next(i for i in plan.interfaces["s3"] if i.peer_node == "s2")
    assert s2[f"{ip['h2']}/32"] == {"port": s2_to_s3.port, "src_mac": s2_to_s3.mac,
                                    "dst_mac": s3_from_s2.mac}
    s3 = lpm(switch_entries(switch_specs(plan)["s3"]))
    assert s3[f"{ip['h2']}/32"]["dst_mac"] == plan.gateway("h2").mac  # last hop: the host
    assert len(s3) == 3
    s1 = lpm(switch_entries(switch_specs(plan)["s1"]))
    assert s1[f"{ip['h3']}/32"]["port"] == 2 and s1[f"{ip['h1']}/32"]["port"] == 1


def test_shortest_path_in_a_ring_and_deterministic_ties():
    # ring sa - sb - sc - sd - sa: two equal paths from sa to sc; ties go to the smaller name
    plan = make_plan(["ha", "hc"], ["sa", "sb", "sc", "sd"],
                     [("ha", "sa"), ("hc", "sc"), ("sa", "sb"), ("sb", "sc"), ("sc", "sd"),
                      ("sd", "sa")])
    specs = switch_specs(plan)
    to_hc = lpm(switch_entries(specs["sa"]))[f"{plan.host_ip['hc']}/32"]
    assert to_hc["port"] == specs["sa"].port_to("sb")  # "sb" < "sd"
    to_ha = lpm(switch_entries(specs["sd"]))[f"{plan.host_ip['ha']}/32"]
    assert to_ha["port"] == specs["sd"].port_to("sa")


def test_too_many_ports_is_an_error():
    hosts = [f"h{i}" for i in range(32)]
    plan = make_plan(hosts, ["s1"], [(h, "s1") for h in hosts])
    with pytest.raises(TopologyError, match="port 32"):
        switch_specs(plan)


def test_job_rules_from_the_plan():
    from mn_harness.config.experiment import load_experiment_dict
    exp = load_experiment_dict({
        "hosts": ["h1", "h2", "h3", "h4", "h5"], "switches": ["s1"],
        "links": [{"endpoints": [h, "s1"]} for h in ("h1", "h2", "h3", "h4", "h5")],
        "link_defaults": {"bw": "1Gbit"},
        "jobs": [{"name": "a", "workers": ["h1", "h2"], "bytes_per_iteration": "1MB",
                  "compute": "1ms", "iterations": 1},
                 {"name": "b", "workers": ["h3", "h4", "h5"], "bytes_per_iteration": "1MB",
                  "compute": "1ms", "iterations": 1}]})
    plan = NetworkPlan(exp)
    assert job_ids(plan) == {"a": 1, "b": 2}
    ip = plan.host_ip
    rules = {(r.src, r.dst): r for r in plan_job_rules(plan)}
    # job a: the ring h1->h2->h1, both directions, once
    assert rules[(ip["h1"], ip["h2"])].job == 1 and rules[(ip["h2"], ip["h1"])].job == 1
    # job b: ring hops h3->h4, h4->h5, h5->h3 and the reverse (ACK) directions
    b = [(s, d) for (s, d), r in rules.items() if r.job == 2]
    assert len(b) == 6 and (ip["h5"], ip["h3"]) in b and (ip["h3"], ip["h5"]) in b
    assert all(r.protocol == 6 for r in rules.values())
    assert len(rules) == 8
    entries = job_entries(plan_job_rules(plan))
    info = P4Info.from_text(P4INFO_TEXT)
    for e in entries:
        table_entry(info, e.table, e.match, e.action, e.params, e.priority)


def test_arp_and_ecn_entries_per_port():
    plan = line3()
    s1 = switch_specs(plan)["s1"]
    es = switch_entries(s1, ecn_threshold=20, port_thresholds={2: 5}, queue_depths={2: 200})
    arp = by_table(es, "arp_responder")
    assert [(e.match["standard_metadata.ingress_port"], e.params["port_mac"]) for e in arp] == \
        [(i.port, i.mac) for i in plan.interfaces["s1"]]
    cfg = {e.match["standard_metadata.egress_port"]: e.params
           for e in by_table(es, "egress_port_cfg")}
    assert cfg[1] == {"threshold": 20, "bucket_shift": 1}   # BMv2 default queue: 64
    assert cfg[2] == {"threshold": 5, "bucket_shift": 2}   # 200 >> 2 = 50 <= 63
    none = switch_entries(s1)
    assert all(e.params["threshold"] == NO_MARKING for e in by_table(none, "egress_port_cfg"))


def test_entries_encode_against_p4info():
    info = P4Info.from_text(P4INFO_TEXT)
    rules = [JobRule(job=2, src="10.0.0.1", dst_port=5201, protocol=6),
             JobRule(job=3, src="10.0.1.0/24", priority=5)]
    es = switch_entries(switch_specs(line3())["s2"], ecn_threshold=10, job_rules=rules)
    for e in es:
        msg = table_entry(info, e.table, e.match, e.action, e.params, e.priority)
        assert msg.table_id
    jc = [table_entry(info, e.table, e.match, e.action, e.params, e.priority)
          for e in by_table(es, "job_classify")]
    assert jc[0].priority == 10 and len(jc[0].match) == 3
    assert jc[1].match[0].ternary.mask == b"\xff\xff\xff\x00"


def test_job_entries_validate_job_id():
    with pytest.raises(TopologyError, match="job id 64"):
        job_entries([JobRule(job=64)])


def test_qbucket_shift():
    assert qbucket_shift(None) == 1   # BMv2 default 64 packets: 64 >> 1 = 32
    assert qbucket_shift(63) == 0
    assert qbucket_shift(64) == 1
    assert qbucket_shift(127) == 1
    assert qbucket_shift(128) == 2
    assert qbucket_shift(1000) == 4

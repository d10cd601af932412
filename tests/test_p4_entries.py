"""Entry computation for ecn_telemetry.p4 from a topology, and telemetry delta math."""

import pytest
from test_p4_fixtures import P4INFO_TEXT

from mn_harness.network.plan import NetworkPlan
from mn_harness.p4.entries import (
    NO_MARKING,
    Entry,
    JobRule,
    TopologyError,
    install_entries,
    job_entries,
    job_ids,
    job_port_index,
    plan_job_rules,
    qbucket_shift,
    qdepth_index,
    switch_entries,
    switch_specs,
)
from mn_harness.p4.runtime import P4Info
from mn_harness.p4.telemetry import (
    DepthStats,
    Snapshot,
    TelemetryReader,
    bucket_value,
    histogram_stats,
    samples_between,
)
from mn_harness.p4.testbed import make_plan


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
        info.table_entry(e.table, e.match, e.action, e.params, e.priority)


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
        msg = info.table_entry(e.table, e.match, e.action, e.params, e.priority)
        assert msg.table_id
    jc = [info.table_entry(e.table, e.match, e.action, e.params, e.priority)
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


class RecordingConn:
    def __init__(self):
        self.p4info = P4Info.from_text(P4INFO_TEXT)
        self.writes = []
        self.defaults = []

    def write(self, entries, op="insert"):
        self.writes.append(list(entries))

    def set_default_action(self, table, action, params):
        self.defaults.append((table, action, params))


def test_install_entries_batches_and_defaults():
    conn = RecordingConn()
    es = switch_entries(switch_specs(line3())["s1"], ecn_threshold=3)
    es.append(Entry("egress_port_cfg", None, "set_port_cfg",
                    {"threshold": 7, "bucket_shift": 0}, default=True))
    n = install_entries(conn, es, batch=4)
    assert n == len(es)
    assert [len(w) for w in conn.writes] == [4, 4, 1]
    assert conn.defaults == [("egress_port_cfg", "set_port_cfg",
                              {"threshold": 7, "bucket_shift": 0})]


# -- telemetry -----------------------------------------------------------------------------

def test_histogram_stats_exact_and_bucketed():
    counts = [0] * 64
    counts[0], counts[10] = 3, 1
    assert histogram_stats(counts, 0) == DepthStats(4, 2.5, 10.0)
    assert bucket_value(10, 2) == 41.5
    assert bucket_value(63, 2) == 252.0
    assert histogram_stats([0] * 64, 0) == DepthStats(0, 0.0, 0.0)


def snap(t, **cells):
    base = {n: {} for n in ("port_enq", "port_tx", "port_marks", "qdepth_hist", "job_tx",
                            "job_marks")}
    for k, v in cells.items():
        base[k] = v
    return Snapshot(t, base)


def test_samples_between_deltas():
    old = snap(10.0, port_tx={2: (100, 150000)}, port_marks={2: (5, 0)},
               qdepth_hist={qdepth_index(2, 0): (90, 0), qdepth_index(2, 4): (10, 0)},
               job_tx={job_port_index(1, 2): (50, 75000)})
    new = snap(10.02, port_tx={2: (110, 165000)}, port_enq={2: (112, 0)},
               port_marks={2: (8, 0)},
               qdepth_hist={qdepth_index(2, 0): (92, 0), qdepth_index(2, 4): (14, 0),
                            qdepth_index(2, 6): (4, 0)},
               job_tx={job_port_index(1, 2): (60, 90000)}, job_marks={job_port_index(1, 2):
                                                                         (3, 0)})
    [s] = samples_between(old, new, "s1", [2], [1, 2], {2: 0})
    assert s.port == 2 and abs(s.interval - 0.02) < 1e-9
    assert (s.tx_packets, s.tx_bytes, s.enq_packets, s.marks) == (10, 15000, 112, 3)
    assert s.depth.packets == 10 and s.depth.max == 6.0
    assert s.depth.mean == pytest.approx((2 * 0 + 4 * 4 + 4 * 6) / 10)
    assert s.job_bytes == {1: 15000, 2: 0} and s.job_marks == {1: 3, 2: 0}


def test_counter_reset_counts_from_zero():
    old = snap(1.0, port_tx={1: (1000, 10**6)})
    new = snap(2.0, port_tx={1: (7, 7000)})
    [s] = samples_between(old, new, "s1", [1], [], {})
    assert (s.tx_packets, s.tx_bytes) == (7, 7000)


def test_reader_asks_only_for_watched_cells():
    class Plan:
        def __init__(self, wanted):
            self.wanted = wanted

        def read(self):
            return {n: {i: (1, 2) for i in idx} for n, idx in self.wanted.items()}

    class Conn:
        def __init__(self):
            self.asked = None

        def counter_read_plan(self, wanted):
            self.asked = wanted
            return Plan(wanted)

    conn = Conn()
    r = TelemetryReader(conn, "s1", ports=[2, 1], jobs=[0, 3], bucket_shift={1: 0})
    assert r.sample() == []
    assert conn.asked["port_tx"] == [1, 2]
    assert len(conn.asked["qdepth_hist"]) == 2 * 64
    assert conn.asked["job_tx"] == [0 * 32 + 1, 0 * 32 + 2, 3 * 32 + 1, 3 * 32 + 2]
    samples = r.sample()
    assert [s.port for s in samples] == [1, 2]
    assert samples[0].tx_packets == 0

"""Entry computation for ecn_telemetry.p4 from a topology, and telemetry delta math."""

import pytest
from test_p4_fixtures import P4INFO_TEXT

from mn_harness.p4.entries import (
    NO_MARKING,
    Entry,
    JobRule,
    Topology,
    TopologyError,
    install_entries,
    job_entries,
    job_port_index,
    next_hops,
    port_mac,
    qbucket_shift,
    qdepth_index,
    switch_entries,
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


def line3():
    """h1 - s1 - s2 - s3 - h2, plus h3 on s1."""
    t = Topology()
    t.add_host("h1", "10.0.0.1", "00:00:00:00:00:01")
    t.add_host("h2", "10.0.0.2", "00:00:00:00:00:02")
    t.add_host("h3", "10.0.0.3", "00:00:00:00:00:03")
    for i in (1, 2, 3):
        t.add_switch(f"s{i}", i)
    t.add_link("h1", "s1", None, 1)
    t.add_link("h3", "s1", None, 3)
    t.add_link("s1", "s2", 2, 1)
    t.add_link("s2", "s3", 2, 1)
    t.add_link("s3", "h2", 2, None)
    t.validate()
    return t


def by_table(entries, table):
    return [e for e in entries if e.table == table]


def test_port_mac_unique_and_local():
    assert port_mac(1, 2) == "02:00:00:01:00:02"
    assert port_mac(258, 31) == "02:00:01:02:00:1f"
    with pytest.raises(TopologyError):
        port_mac(1, 256)


def test_next_hops_on_line():
    t = line3()
    assert next_hops(t, "s1") == {"h1": (1, "h1"), "h2": (2, "s2"), "h3": (3, "h3")}
    assert next_hops(t, "s2") == {"h1": (1, "s1"), "h2": (2, "s3"), "h3": (1, "s1")}
    assert next_hops(t, "s3") == {"h1": (1, "s2"), "h2": (2, "h2"), "h3": (1, "s2")}


def test_routes_rewrite_macs_hop_by_hop():
    t = line3()
    s2 = by_table(switch_entries(t, "s2"), "ipv4_lpm")
    to_h2 = next(e for e in s2 if e.match["hdr.ipv4.dstAddr"] == "10.0.0.2/32")
    assert to_h2.action == "forward"
    assert to_h2.params == {"port": 2, "src_mac": port_mac(2, 2), "dst_mac": port_mac(3, 1)}
    s3 = by_table(switch_entries(t, "s3"), "ipv4_lpm")
    last = next(e for e in s3 if e.match["hdr.ipv4.dstAddr"] == "10.0.0.2/32")
    assert last.params["dst_mac"] == "00:00:00:00:00:02"
    assert len(s3) == 3


def test_shortest_path_in_a_ring_and_deterministic_ties():
    t = Topology()
    t.add_host("ha", "10.0.0.1", "00:00:00:00:00:01")
    t.add_host("hc", "10.0.0.3", "00:00:00:00:00:03")
    for i, n in enumerate("abcd", 1):
        t.add_switch(f"s{n}", i)
    t.add_link("ha", "sa", None, 1)
    t.add_link("hc", "sc", None, 1)
    # ring sa - sb - sc - sd - sa: two equal paths from sa to sc
    t.add_link("sa", "sb", 2, 2)
    t.add_link("sb", "sc", 3, 2)
    t.add_link("sc", "sd", 3, 2)
    t.add_link("sd", "sa", 3, 3)
    t.validate()
    assert next_hops(t, "sa")["hc"] == (2, "sb")  # "sb" < "sd"
    assert next_hops(t, "sb")["hc"] == (3, "sc")
    assert next_hops(t, "sd")["ha"] == (3, "sa")


def test_disconnected_topology_is_an_error():
    t = line3()
    t.add_switch("s9", 9)
    t.add_host("h9", "10.0.0.9", "00:00:00:00:00:09")
    t.add_link("h9", "s9", None, 1)
    with pytest.raises(TopologyError, match="cannot reach host\\(s\\) h9"):
        switch_entries(t, "s1")


def test_validate_rejects_bad_ports_and_duplicates():
    t = line3()
    t.add_link("s1", "s3", None, 5)
    with pytest.raises(TopologyError, match="switch s1 needs a port number"):
        t.validate()
    t = line3()
    t.add_link("s1", "s3", 2, 5)
    with pytest.raises(TopologyError, match="s1 port 2 used by two links"):
        t.validate()
    t = line3()
    t.add_switch("s4", 1)
    with pytest.raises(TopologyError, match="duplicate switch device ids"):
        t.validate()


def test_arp_and_ecn_entries_per_port():
    t = line3()
    es = switch_entries(t, "s1", ecn_threshold=20, port_thresholds={2: 5},
                        queue_depths={2: 200})
    arp = by_table(es, "arp_responder")
    assert [(e.match["standard_metadata.ingress_port"], e.params["port_mac"]) for e in arp] == \
        [(1, port_mac(1, 1)), (2, port_mac(1, 2)), (3, port_mac(1, 3))]
    cfg = {e.match["standard_metadata.egress_port"]: e.params
           for e in by_table(es, "egress_port_cfg")}
    assert cfg[1] == {"threshold": 20, "bucket_shift": 1}   # BMv2 default queue: 64
    assert cfg[2] == {"threshold": 5, "bucket_shift": 2}   # 200 >> 2 = 50 <= 63
    none = switch_entries(t, "s1")
    assert all(e.params["threshold"] == NO_MARKING for e in by_table(none, "egress_port_cfg"))


def test_entries_encode_against_p4info():
    info = P4Info.from_text(P4INFO_TEXT)
    rules = [JobRule(job=2, src="10.0.0.1", dst_port=5201, protocol=6),
             JobRule(job=3, src="10.0.1.0/24", priority=5)]
    es = switch_entries(line3(), "s2", ecn_threshold=10, job_rules=rules)
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
    es = switch_entries(line3(), "s1", ecn_threshold=3)
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

"""mn_harness.p4.telemetry: depth statistics from the histogram counters, per-port deltas
between two reads, and the cells a reader asks for (no switch)."""

import pytest

from mn_harness.p4.entries import job_port_index, qdepth_index
from mn_harness.p4.telemetry import (
    DepthStats,
    Snapshot,
    TelemetryReader,
    bucket_value,
    histogram_stats,
    samples_between,
)


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

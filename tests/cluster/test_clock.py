"""Clock offsets: the shortest probe wins, the bound holds, drift is corrected, the invariant
flags a bound larger than its share of an iteration."""

from __future__ import annotations

import json
import random

from mn_harness.cluster.clock import ClockEstimate, ClockTrack, correct_file, estimate, probe
from mn_harness.cluster.merge import clock_limit_s, merge_fidelity
from mn_harness.config.fidelity import FidelityThresholds


def test_the_shortest_round_trip_gives_the_estimate_and_its_bound():
    samples = [(0.0, 5.0030, 0.004), (1.0, 6.0006, 1.001), (2.0, 7.0100, 2.009)]
    est = estimate(samples)
    assert abs(est.offset_s - 5.0001) < 1e-9 and abs(est.error_s - 0.0005) < 1e-12 and est.probes == 3


def test_a_simulated_server_clock_is_found_within_the_bound():
    rng = random.Random(3)
    true_offset, clock = 123.456, [0.0]

    def now() -> float:
        clock[0] += rng.uniform(1e-5, 1e-3)  # the head's clock: time passes between reads
        return clock[0]

    def ask() -> float:
        t = now()  # the server reads its clock somewhere on the way
        return t + true_offset

    est = probe(ask, now, n=30)
    assert abs(est.offset_s - true_offset) <= est.error_s


def test_drift_is_corrected_by_the_line_through_both_estimates(tmp_path):
    before = ClockEstimate(offset_s=0.010, error_s=1e-4, rtt_s=2e-4, at_s=100.0, probes=20)
    after = ClockEstimate(offset_s=0.012, error_s=2e-4, rtt_s=4e-4, at_s=200.0, probes=20)
    track = ClockTrack(before, after)
    assert abs(track.drift - 2e-5) < 1e-12 and track.error_s == 2e-4
    t0_head = 100.0  # the server started its workers at t0_head + 0.010 on its clock
    # 50 s into the run the server's clock is 1 ms further ahead than at the start: its times read
    # 1 ms long, and the correction takes that off
    assert abs(track.shift_s(50.0, t0_head) - (-0.001)) < 1e-12
    path = tmp_path / "job1-r0.iterations.jsonl"
    path.write_text(json.dumps({"t_start": 50.0, "t_end": 50.5, "phases": [{"t_start": 50.0, "t_end": 50.1}]})
                    + "\n{not json")
    assert correct_file(path, track, t0_head) == 1
    first, rest = path.read_text().split("\n", 1)
    row = json.loads(first)
    assert abs(row["t_start"] - 49.999) < 1e-9 and abs(row["phases"][0]["t_end"] - (50.1 - 2e-5 * 50.1)) < 1e-9
    assert rest == "{not json"


def test_the_clock_invariant_breaks_above_its_share_of_the_shortest_iteration():
    t = FidelityThresholds(clock_error=0.01)
    assert clock_limit_s(t, [0.5, 0.2, 0.0]) == 0.002
    good = ClockTrack(ClockEstimate(0.0, 5e-4, 1e-3, 0.0, 20))
    bad = ClockTrack(ClockEstimate(0.0, 5e-3, 1e-2, 0.0, 20))
    block = merge_fidelity(t, {}, {"a": good, "b": bad}, [0.2], [], [])
    assert block.verdict == "unfaithful"
    assert [(v.invariant, v.where) for v in block.violations] == [("clock", "server b")]
    assert block.servers is not None and block.servers["a"].clock.error_ms == 0.5

"""The host and worker invariants from hand-built /proc/stat reads and phase rows."""

from __future__ import annotations

import pytest

from mn_harness.fidelity.cpu_load import CoreTimes, CpuTimes, StatSample, read_stat
from mn_harness.fidelity.host import host_summary
from mn_harness.fidelity.workers import compute_overshoots, workers_summary
from mn_harness.results.schema import PhaseRow


def sample(cores: list[tuple[int, int, int, int]], running: int) -> StatSample:
    """cores: (total, idle, steal, softirq) jiffies of each core."""
    per = tuple(CoreTimes(*c) for c in cores)
    return StatSample(CpuTimes(sum(c.total for c in per), sum(c.idle for c in per), sum(c.steal for c in per)),
                      per, running)


def test_per_core_shares_and_the_share_of_intervals_with_every_core_saturated():
    reads = [
        (0.0, sample([(0, 0, 0, 0), (0, 0, 0, 0)], 1)),
        # both cores busy 100% (core 0: 20 of 100 jiffies in softirq, 10 stolen)
        (0.1, sample([(100, 0, 10, 20), (100, 0, 0, 0)], 5)),
        # core 0 idle half the time, core 1 still busy
        (0.2, sample([(200, 50, 10, 20), (200, 0, 0, 10)], 2)),
    ]
    host = host_summary(reads)
    assert host.intervals == 2
    assert host.all_saturated_share == 0.5
    c0, c1 = host.cores
    assert c0.busy_mean == pytest.approx(0.75) and c0.softirq_mean == pytest.approx(0.1)
    assert c0.steal_mean == pytest.approx(0.05) and c0.saturated_share == 0.5
    assert c1.saturated_share == 1.0 and c1.softirq_mean == pytest.approx(0.05)
    assert host.run_queue_mean == pytest.approx(8 / 3, abs=1e-4)
    assert host.run_queue_over_cores_share == pytest.approx(1 / 3, abs=1e-4)


def test_this_kernels_stat_has_every_core_and_the_run_queue():
    s = read_stat()
    assert len(s.cores) >= 1 and s.running >= 1  # this reader runs
    assert s.all.total >= sum(c.total for c in s.cores) * 0.99


def phase(kind: str, duration: float, planned: float | None, delay: float | None, job: str = "j") -> PhaseRow:
    return PhaseRow(job, 0, 0, 0, kind, kind, "", None, 1.0, 1.0 + duration, duration, 0, planned, delay)


def test_overshoot_is_beyond_the_planned_and_jittered_duration():
    rows = [phase("compute", 0.1035, 0.100, 0.002),   # asked 102 ms, took 103.5: 1.5 ms over
            phase("compute", 0.099, 0.100, 0.0),      # early by rounding: 0
            phase("comm", 0.5, None, None),           # not a compute phase
            phase("compute", 0.205, 0.200, None, job="k")]
    assert compute_overshoots(rows) == pytest.approx([0.0015, 0.0, 0.005])
    summary = workers_summary(rows)
    assert summary.compute_phases == 3 and summary.compute_overshoot_max_ms == pytest.approx(5.0)
    assert summary.jobs["j"].compute_overshoot_max_ms == pytest.approx(1.5)
    assert summary.jobs["k"].compute_phases == 1
    assert workers_summary([]).compute_overshoot_p99_ms is None

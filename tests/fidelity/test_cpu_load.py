"""The machine's CPU load while the jobs run (mn_harness.fidelity.cpu_load): /proc/stat arithmetic on
hand-made counters, the real file of this kernel, and the thread."""

from __future__ import annotations

import csv
import statistics
import time

import pytest

from mn_harness.fidelity import cpu_load
from mn_harness.results.schema import CPU_COLUMNS, CPU_CSV


def test_busy_shares_and_summary_from_hand_counted_jiffies():
    # (t, (total, idle, steal)): 100 jiffies with 50 idle, 100 with 2 idle of which 30 stolen,
    # 0 (no tick: left out), 100 with 100 idle
    T = cpu_load.CpuTimes
    times = [(0.0, T(0, 0, 0)), (0.1, T(100, 50, 0)), (0.2, T(200, 52, 30)), (0.25, T(200, 52, 30)),
             (0.4, T(300, 152, 30))]
    intervals = cpu_load.busy_shares(times)
    assert [i.t for i in intervals] == [0.1, 0.2, 0.4]
    assert [i.length for i in intervals] == pytest.approx([0.1, 0.1, 0.15])
    assert [i.busy for i in intervals] == pytest.approx([0.5, 0.98, 0.0])
    assert [i.steal for i in intervals] == pytest.approx([0.0, 0.3, 0.0])
    load = cpu_load.summarise(intervals, 0.1, 2)
    assert load == {"cores": 2, "interval_s": 0.1, "samples": 3, "busy_mean": pytest.approx(0.4933, abs=1e-4),
                    "saturated_share": pytest.approx(0.3333, abs=1e-4), "steal_mean": pytest.approx(0.1)}
    line = cpu_load.warning(load)
    assert line is not None and line.startswith("cpu: the machine's 2 cores were saturated in 33% of the jobs' 100 ms")
    assert "the VM's host took 10% of its cores' time (steal)" in line and "\n" not in line
    calm = cpu_load.summarise([cpu_load.Interval(0.1, 0.1, 0.5, 0.0), cpu_load.Interval(0.2, 0.1, 0.9, 0.04)], 0.1, 2)
    assert cpu_load.warning(calm) is None  # 2% steal, nothing saturated
    stolen = cpu_load.warning({**calm, "steal_mean": cpu_load.WARN_STEAL})
    assert stolen is not None and stolen.startswith("cpu: the VM's host took") and "saturated" not in stolen
    empty = cpu_load.summarise([], 0.1, 2)
    assert empty["busy_mean"] is None and empty["steal_mean"] is None and cpu_load.warning(empty) is None


def test_read_times_of_this_kernel_and_of_a_wrong_file(tmp_path):
    total, idle, steal = cpu_load.read_times()
    assert 0 <= idle <= total and 0 <= steal <= total - idle
    bad = tmp_path / "stat"
    bad.write_text("intr 1 2 3\n")
    with pytest.raises(ValueError, match="not the all-cores 'cpu' line"):
        cpu_load.read_times(str(bad))
    # idle + iowait count as idle; steal is the eighth field; guest fields beyond it are not
    # added twice; an old kernel's shorter line reads as no steal
    bad.write_text("cpu  10 0 10 60 10 0 0 10 5 5\n")
    assert cpu_load.read_times(str(bad)) == (100, 70, 10)
    bad.write_text("cpu  10 0 10 70 10\n")
    assert cpu_load.read_times(str(bad)) == (100, 80, 0)


def test_the_sampler_sees_a_busy_loop_and_writes_its_timeline(tmp_path):
    t0 = time.monotonic()
    sampler = cpu_load.CpuLoadSampler(interval_s=0.05).start()
    end = time.monotonic() + 0.5
    while time.monotonic() < end:  # one core busy: at least 1/cores of the machine
        pass
    load = sampler.stop(tmp_path, t0)
    assert load["samples"] >= 4  # the loop holds the GIL: the thread reads less often than asked
    # the first and last intervals hold the sampler's own start and stop, not the loop: 3/4 of a core
    assert load["busy_mean"] >= 0.75 / load["cores"]
    with open(tmp_path / CPU_CSV) as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CPU_COLUMNS and len(rows) == load["samples"]
    times = [float(r["t"]) for r in rows]
    assert times == sorted(times) and 0 < times[0] and times[-1] == pytest.approx(0.5, abs=0.1)
    assert statistics.mean(float(r["busy"]) for r in rows) == pytest.approx(load["busy_mean"], abs=1e-3)
    assert statistics.mean(float(r["steal"]) for r in rows) == pytest.approx(load["steal_mean"], abs=1e-3)
    assert all(0 <= float(r["steal"]) <= float(r["busy"]) for r in rows)

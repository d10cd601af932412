"""bench/common.py (no runs, no root): the measurement lock excludes another holder and is given
up once a chunk is over; the mean ± CI texts the benches print."""

import fcntl

import pytest

from mn_harness.results.stats import mean_ci95
from tests.helpers import bench_module


def held_elsewhere(path) -> bool:
    """Whether another open file of `path` cannot take the lock now."""
    with open(path, "a") as other:
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(other, fcntl.LOCK_UN)
        return False


def test_the_lock_is_held_across_runs_until_the_chunk_is_over(tmp_path):
    common = bench_module("common")
    path = tmp_path / "measure.lock"
    lock = common.ChunkedLock(str(path), chunk_s=3600, gap_s=0)
    assert not lock.held
    with lock.run():
        assert held_elsewhere(path) and lock.held
    assert held_elsewhere(path) and lock.held  # the chunk goes on: kept for the next run
    lock.release()
    assert not held_elsewhere(path) and not lock.held
    short = common.ChunkedLock(str(path), chunk_s=0, gap_s=0)
    with short.run():
        assert held_elsewhere(path)
    assert not held_elsewhere(path)  # the chunk is over: given up after the run
    with common.ChunkedLock("", chunk_s=0).run():  # no lock
        assert not held_elsewhere(path)


def test_mean_and_ci_texts():
    common = bench_module("common")
    values = [1.0, 1.5, 2.5]
    m, _, half = mean_ci95(values)
    assert common.mean_ci(values) == f"{m:.3f} ± {half:.3f}"
    assert common.mean_ci(values, 1, scale=1e3, n=True) == f"{m * 1e3:.1f} ± {half * 1e3:.1f} (n=3)"
    assert common.mean_ci([2.0]) == "2.000" and common.mean_ci([]) == "-"
    assert common.pm(1.0, None, alone=" (1 rep)") == "1.000 (1 rep)"
    assert common.pm(1.25, 0.5, 1, sign=" +-") == "1.2 +-0.5"
    assert common.ci_interval(m, half) == f"[{m - half:.3f}, {m + half:.3f}]"
    assert common.ci_interval(m, None) == "(n=1)"
    assert common.topology()["experiment"] == "dumbbell-2jobs"
    with pytest.raises(FileNotFoundError):
        common.topology("no-such-file")

"""phases.csv from the workers' lines, per-phase statistics, and iteration time to the end."""

import json

import pytest

from mn_harness.results.collect import phase_rows
from mn_harness.results.iterations import job_iterations
from mn_harness.results.loaders import load_phases
from mn_harness.results.phases import bytes_acked_per_rank, phase_stats
from mn_harness.results.schema import PHASE_COLUMNS, IterationRow, ThroughputRow, write_csv


def worker_line(rank, it, t0, comm_s, collective="all_gather", nbytes=3_000_000, delay=0.0):
    compute_end = t0 + 0.1 + delay
    return {"job": "j", "rank": rank, "iteration": it, "t_start": t0, "t_comm_start": compute_end,
            "t_comm_end": compute_end + comm_s, "t_end": compute_end + comm_s + 0.01, "bytes_sent": 2_000_000,
            "phases": [
                {"phase": 0, "name": "compute", "kind": "compute", "collective": "", "bytes": None,
                 "t_start": t0, "t_end": compute_end, "bytes_sent": 0, "planned_s": 0.1, "delay_s": delay},
                {"phase": 1, "name": collective, "kind": "comm", "collective": collective, "bytes": nbytes,
                 "t_start": compute_end, "t_end": compute_end + comm_s, "bytes_sent": 2_000_000,
                 "planned_s": None, "delay_s": None},
                {"phase": 2, "name": "optimizer", "kind": "compute", "collective": "", "bytes": None,
                 "t_start": compute_end + comm_s, "t_end": compute_end + comm_s + 0.01, "bytes_sent": 0,
                 "planned_s": 0.01, "delay_s": 0.0}]}


def test_phase_rows_round_trip_and_statistics(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for rank in range(3):
        lines = [worker_line(rank, it, it * 1.0, 0.02 if rank else 0.03, delay=0.01 * rank) for it in range(2)]
        (raw / f"j-r{rank}.iterations.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    rows = phase_rows(raw)
    assert len(rows) == 3 * 2 * 3
    write_csv(tmp_path / "phases.csv", PHASE_COLUMNS, rows)
    loaded, bad = load_phases(tmp_path / "phases.csv")
    assert bad == 0 and loaded == rows
    stats = phase_stats(rows, "j")
    assert [s["name"] for s in stats] == ["compute", "all_gather", "optimizer"]
    comm = stats[1]
    # job-level phase: the first rank's start to the last rank's end: rank 0 starts at 0.1
    # (no delay), rank 2 (20 ms delayed, 20 ms of communication) ends at 0.14
    assert comm["mean_s"] == pytest.approx(0.04)
    assert comm["algbw_Bps"] == pytest.approx(3_000_000 / comm["mean_s"])
    assert comm["busbw_Bps"] == pytest.approx(comm["algbw_Bps"] * 2 / 3)
    assert stats[0]["mean_delay_s"] == pytest.approx(0.01)


def test_iteration_time_runs_to_the_end_of_a_trailing_compute_phase():
    line = worker_line(0, 0, 0.0, 0.02)
    row = IterationRow.from_worker(line)
    assert row.iter_time == pytest.approx(0.1 + 0.02 + 0.01) and row.comm_time == pytest.approx(0.02)
    old = {k: v for k, v in line.items() if k != "t_end"}  # an old worker's line
    assert IterationRow.from_worker(old).iter_time == pytest.approx(0.12)
    assert job_iterations([row])["j"][0].iter_time == pytest.approx(0.13)


def test_bytes_acked_per_rank_sums_the_bins():
    bins = [ThroughputRow("j", 0, 0.0, 0.01, 100), ThroughputRow("j", 0, 0.01, 0.01, 50),
            ThroughputRow("j", 1, 0.0, 0.01, 7), ThroughputRow("k", 0, 0.0, 0.01, 9)]
    assert bytes_acked_per_rank(bins, "j") == {0: 150, 1: 7}

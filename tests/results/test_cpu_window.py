"""The CPU of a run's measured iterations, from a hand-built results folder."""

import pytest

from mn_harness.results.cpu_window import iteration_window, load_cpu, run_window_load, window_load
from mn_harness.results.schema import CPU_COLUMNS, CPU_CSV, ITERATION_COLUMNS, ITERATIONS_CSV, write_csv


def iteration(job, rank, i, t_start, iter_time):
    return {"job": job, "rank": rank, "iteration": i, "t_start": t_start, "t_comm_start": t_start,
            "t_comm_end": t_start + iter_time, "iter_time": iter_time, "comm_time": iter_time,
            "bytes_sent": 1000, "cpu_s": "", "send_lag_mean_s": "", "send_lag_max_s": "", "hold_s": ""}


@pytest.fixture
def folder(tmp_path):
    # 1 s of start-up at 10% busy, then the jobs' seconds at 80% busy (5% of it steal), 0.5 s at 10% after
    rows = [{"t": round(0.1 * k, 1), "interval_s": 0.1, "busy": 0.1, "steal": 0.0} for k in range(1, 11)]
    rows += [{"t": round(1.0 + 0.1 * k, 1), "interval_s": 0.1, "busy": 0.8, "steal": 0.05} for k in range(1, 31)]
    rows += [{"t": round(4.0 + 0.1 * k, 1), "interval_s": 0.1, "busy": 0.1, "steal": 0.0} for k in range(1, 6)]
    write_csv(tmp_path / CPU_CSV, CPU_COLUMNS, rows)
    # two jobs, 2 ranks each, 0.5 s iterations from t = 1.0; the first two (warm-up) end at 2.0
    its = [iteration(job, rank, i, 1.0 + 0.5 * i + (0.1 if job == "j1" else 0.0), 0.5 if job == "j0" else 0.4)
           for job in ("j0", "j1") for rank in (0, 1) for i in range(6)]
    write_csv(tmp_path / ITERATIONS_CSV, ITERATION_COLUMNS, its)
    return tmp_path


def test_the_window_leaves_the_warm_up_out_and_spans_every_job(folder):
    from mn_harness.results.loaders import load_iterations

    rows = load_iterations(folder / ITERATIONS_CSV)[0]
    assert iteration_window(rows, 2) == pytest.approx((2.0, 4.0))  # j0's third start .. j0's last end
    assert iteration_window(rows, 0) == pytest.approx((1.0, 4.0))
    assert iteration_window(rows, 6) is None


def test_busy_cores_in_the_window_not_the_whole_run(folder):
    load = run_window_load(folder, warmup=2)
    assert load is not None and load.covered == pytest.approx(2.0)
    assert load.busy == pytest.approx(0.8) and load.steal == pytest.approx(0.05)
    assert load.busy_cores(2) == pytest.approx(1.5)
    everything = window_load(load_cpu(folder / CPU_CSV), 0.0, 4.5)
    assert everything is not None and everything.busy < 0.6  # what the whole run's mean said


def test_intervals_are_weighted_by_their_overlap(folder):
    # [0.95, 1.05]: half of a 10% interval, half of an 80% one
    load = window_load(load_cpu(folder / CPU_CSV), 0.95, 1.05)
    assert load is not None and load.busy == pytest.approx(0.45) and load.covered == pytest.approx(0.1)
    assert window_load(load_cpu(folder / CPU_CSV), 10.0, 11.0) is None


def test_a_folder_without_cpu_csv_has_no_window(folder):
    (folder / CPU_CSV).unlink()
    assert run_window_load(folder, 2) is None

"""Results folders on disk read back: bad rows counted, optional files."""

from mn_harness.results.iterations import worker_cpu
from mn_harness.results.loaders import load_iterations, load_run
from mn_harness.results.schema import ITERATION_COLUMNS, IterationRow, write_csv
from tests.helpers import ITER_HEADER, write_folder


def test_truncated_and_bad_rows_are_counted_not_fatal(tmp_path):
    p = tmp_path / "iterations.csv"
    p.write_text(
        ITER_HEADER + "\n"
        "A,0,0,0.0,0.6,1.0,1.0,0.4,4000\n"
        "A,0,1,1.0,x,2.0,1.0,0.4,4000\n"  # not a number
        "A,0,2,2.0,2.6\n"  # cut by a kill
    )
    rows, bad = load_iterations(p)
    assert len(rows) == 1 and rows[0].t_comm_end == 1.0
    assert bad == 2


def test_load_run_optional_files(tmp_path):
    root = write_folder(tmp_path / "r", queue=False)
    (root / "throughput.csv").unlink()
    run = load_run(root)
    assert run.queue is None and run.throughput == []
    assert len(run.iterations) == 4 * 3
    assert run.summary.jobs["A"].hosts == ["h1", "h2"]  # the key of summaries before version 2: workers
    assert run.job_order() == ["A", "B"]


def test_cpu_column_round_trips_and_older_folders_have_none(tmp_path):
    rows = [IterationRow("A", 0, i, float(i), i + 0.6, i + 1.0, 1.0, 0.4, 4000, 0.25 * (i + 1)) for i in range(4)]
    write_csv(tmp_path / "iterations.csv", ITERATION_COLUMNS, rows)
    back, bad = load_iterations(tmp_path / "iterations.csv")
    assert back == rows and bad == 0
    # warm-up left out: iterations 2 and 3 took 0.75 and 1.0 s of CPU in 1.0 s each
    assert worker_cpu(back, "A", warmup=2) == {"per_iteration_s": 0.875, "share": 0.875}
    assert worker_cpu(back, "B") is None
    old = tmp_path / "old.csv"
    old.write_text(ITER_HEADER + "\nA,0,0,0.0,0.6,1.0,1.0,0.4,4000\n")
    (row,), _ = load_iterations(old)
    assert row.cpu_s is None and worker_cpu([row], "A") is None

"""Results folders on disk read back: bad rows counted, optional files."""



from mn_harness.results.loaders import load_iterations, load_run
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
    assert run.summary.jobs["A"].workers == ["h1", "h2"]
    assert run.job_order() == ["A", "B"]

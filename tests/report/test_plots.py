"""Plots as PNG and PDF with a caption line; the throughput timeline in a time window."""

from mn_harness.report.markdown import write_report
from mn_harness.report.plots import caption, in_window
from mn_harness.results.loaders import load_run
from tests.helpers import write_folder


def test_every_plot_is_also_a_pdf_and_names_scenario_cc_and_data_plane(tmp_path):
    folder = write_folder(tmp_path / "run", extra={"dataplane": "linux"})
    write_report(folder, plots=True, window=(0.5, 2.0))
    pngs = sorted(p.stem for p in (folder / "plots").glob("*.png"))
    assert pngs and pngs == sorted(p.stem for p in (folder / "plots").glob("*.pdf"))
    assert (folder / "plots" / "throughput.pdf").read_bytes().startswith(b"%PDF")
    assert caption(load_run(folder)) == "scenario: demo · CC: reno · data plane: linux · run"


def test_caption_lists_ccs_per_job_when_they_differ(tmp_path):
    folder = write_folder(tmp_path / "r", extra={"cc": {"A": "reno", "B": "mlreno_ab12cd"}, "label": "x"})
    assert caption(load_run(folder)).startswith("scenario: demo (x) · CC: A=reno, B=mlreno_ab12cd · data plane: ?")


def test_the_window_keeps_points_inside_it():
    assert in_window([0.0, 1.0, 2.0, 3.0], [1, 2, 3, 4], (1.0, 3.0)) == ([1.0, 2.0], [2, 3])
    assert in_window([0.0, 1.0], [5, 6], None) == ([0.0, 1.0], [5, 6])

from mn_harness.progress import format_eta, run_eta_s, sweep_eta_s


def test_run_eta_is_the_slowest_job_at_its_own_pace():
    assert run_eta_s({"a": 0, "b": 3}, {"a": 10, "b": 10}, 5.0) is None  # a has no pace yet
    assert run_eta_s({"a": 5, "b": 2}, {"a": 10, "b": 4}, 10.0) == 10.0  # a: 5 left at 2 s each
    assert run_eta_s({"a": 4}, {"a": 4}, 3.0) == 0.0


def test_sweep_eta_and_format():
    assert sweep_eta_s(0, 5, 10.0) is None
    assert sweep_eta_s(2, 5, 60.0) == 90.0
    assert [format_eta(s) for s in (0.4, 42, 185, -3)] == ["0s", "42s", "3m05s", "0s"]

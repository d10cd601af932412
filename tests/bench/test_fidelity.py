"""bench/fidelity.py's scenarios (no runs, no root): every scenario makes a valid experiment in
each mode, with the CC, the collective and the iterations the bench asks for, so a scenario
that drifts from the config schema fails here and not an hour into a measurement."""

import pytest

from tests.helpers import bench_module


@pytest.mark.parametrize("scenario", ["demo", "three_jobs", "heavy", "three_slack"])
def test_every_scenario_is_a_valid_experiment(scenario):
    fidelity = bench_module("fidelity")
    exp = fidelity.experiment(scenario, "mltcp-reno", "synthetic", 7)
    assert exp.jobs and all(j.iterations == 7 and j.collective == "ring_allreduce" for j in exp.jobs)
    assert {j.cc.name for j in exp.jobs} == {"mltcp-reno"}


def test_set_changes_every_run_of_a_scenario():
    fidelity = bench_module("fidelity")
    plain = fidelity.experiment("three_jobs", "reno", "synthetic", 5)
    changed = fidelity.experiment("three_jobs", "reno", "synthetic", 5, ["run.emulation.worker_main_thread=fair"])
    assert plain.run.emulation.worker_main_thread == "realtime"
    assert changed.run.emulation.worker_main_thread == "fair"
    assert [(j.name, j.iterations) for j in changed.jobs] == [(j.name, 5) for j in plain.jobs]


def test_three_slack_is_the_3jobs_slack_scenario():
    """bench/reproduce.py's `3jobs-slack`: 3 jobs, 25 MB / 500 ms each."""
    exp = bench_module("fidelity").experiment("three_slack", "reno", "synthetic", 40)
    assert len(exp.jobs) == 3
    assert {(j.bytes_per_iteration, j.compute_s) for j in exp.jobs} == {(25_000_000, 0.5)}


def test_ratio_ci_is_the_delta_method_and_takes_a_zero_numerator():
    fidelity = bench_module("fidelity")
    r, h = fidelity.ratio_ci([1.0, 1.2, 1.1], [1.0, 1.0, 1.0])
    assert abs(r - 1.1) < 1e-9
    # the real side has no spread: the half-width is the synthetic SE (sd 0.1 over 3 runs)
    # relative to the real mean, with Student t at 3 + 3 - 2 degrees of freedom
    assert abs(h - fidelity.t_critical_95(4) * (0.1 / 3 ** 0.5)) < 1e-9
    r0, h0 = fidelity.ratio_ci([0.0, 0.0, 0.0], [0.3, 0.5, 0.4])  # a synthetic overlap of 0
    assert r0 == 0.0 and h0 == 0.0


def test_interleaved_tells_phases_apart_from_phases_in_step(tmp_path):
    """The per-run flag the table counts: A and B communicate 0.4 s of each 1.0 s period; B 0.5 s
    later communicates inside A's compute, B at the same time never leaves A's phase."""
    from mn_harness.results.loaders import load_run
    from tests.helpers import write_folder
    fidelity = bench_module("fidelity")
    apart = write_folder(tmp_path / "apart", offset_b=0.5, n_iter=12)
    in_step = write_folder(tmp_path / "in_step", offset_b=0.0, n_iter=12)
    assert fidelity.interleaved(load_run(apart)) is True
    assert fidelity.interleaved(load_run(in_step)) is False
    # run files from before these fields are read again from their results folders
    runs = [{"interleaved": True, "stalled": 0.5}, {"results": str(in_step)}, {"results": str(apart)}]
    # no kernel counters in these folders: no timeouts column (None), not a count of 0
    assert fidelity.run_flags(runs, warmup=2) == ("2/3", 0.5 / 3, None)
    runs = [{"interleaved": True, "stalled": 0.0, "timeouts": 0.5},
            {"interleaved": False, "stalled": 0.0, "timeouts": 0.1}]
    assert fidelity.run_flags(runs, warmup=2) == ("1/2", 0.0, 0.3)


def test_stalled_share_counts_phases_with_a_timeout_sized_gap(tmp_path):
    """write_folder's ranks get 1000 bytes acked in every 10 ms bin of their 0.4 s phases: no
    stall. Remove 200 ms of rank 0's bins in one phase of A (3 ranks x 6 iterations after a
    warm-up of 2 = 18 phases): 1 of 18 stalled. 100 ms is a loss recovered, not a timeout."""
    from mn_harness.results.loaders import load_run
    from tests.helpers import write_folder
    fidelity = bench_module("fidelity")
    root = write_folder(tmp_path / "run", n_iter=8)
    assert fidelity.stalled_share(load_run(root), warmup=2) == 0.0
    lines = (root / "throughput.csv").read_text().splitlines()

    def without(t0, t1):  # A rank 0's bins of iteration 4 (comm 4.6-5.0 s) in [t0, t1) removed
        keep = [x for x in lines if not (x.startswith("A,0,") and t0 <= float(x.split(",")[2]) < t1)]
        (root / "throughput.csv").write_text("\n".join(keep) + "\n")
        return fidelity.stalled_share(load_run(root), warmup=2)

    assert without(4.7, 4.9) == 1 / 18
    assert without(4.7, 4.8) == 0.0


def test_cpu_columns_read_worker_cpu_and_cpu_load(tmp_path):
    """The CPU columns: a worker's CPU seconds per iteration (mean over the run's jobs) and the
    cores' busy share, from summary.json; unknown (None) as soon as one run lacks them."""
    import json

    from tests.helpers import write_folder
    fidelity = bench_module("fidelity")
    roots = [write_folder(tmp_path / f"run{k}", n_iter=4) for k in range(2)]
    assert fidelity.run_cpu([{"results": str(r)} for r in roots]) == (None, None)
    for k, root in enumerate(roots):
        summary = json.loads((root / "summary.json").read_text())
        for j, job in enumerate(summary["jobs"].values()):
            job["worker_cpu"] = {"per_iteration_s": 0.08 + 0.02 * j + 0.01 * k, "share": 0.1}
        summary["cpu_load"] = {"busy_mean": 0.4 + 0.2 * k}
        (root / "summary.json").write_text(json.dumps(summary))
    n_jobs = len(json.loads((roots[0] / "summary.json").read_text())["jobs"])
    per_iter, busy = fidelity.run_cpu([{"results": str(r)} for r in roots])
    assert abs(per_iter - (0.08 + 0.01 * (n_jobs - 1) + 0.005)) < 1e-9
    assert abs(busy - 0.5) < 1e-9
    assert fidelity.run_cpu([{"results": str(roots[0])}, {"mean_s": 1.0}]) == (None, None)


def test_a_bbr_run_lasts_several_of_bbrs_min_rtt_windows():
    """BBR probes its minimum RTT every 10 s: a BBR run is long enough (30 s of ideal
    iterations) to meet that probe about three times in either traffic; other CCs keep the
    scenario's default, and --iterations still decides."""
    fidelity = bench_module("fidelity")
    assert fidelity.iterations_for("demo", "reno") == 20
    assert fidelity.iterations_for("three_slack", "cubic") == 40
    demo = fidelity.iterations_for("demo", "bbr")  # 300 ms compute + 25 MB at 1 Gbit/s ~ 0.5 s
    assert 55 <= demo <= 62
    for scenario in ("three_jobs", "heavy", "three_slack"):
        n = fidelity.iterations_for(scenario, "bbr")
        exp = fidelity.experiment(scenario, "bbr", "synthetic", n)
        period = max(fidelity.ideal_iteration_s(j, fidelity.NetworkPlan(exp))[0] for j in exp.jobs)
        assert n * period >= 30.0 and (n - 1) * period < 30.0 or n == fidelity.ITERATIONS.get(scenario, 20)
    assert fidelity.iterations_for("demo", "bbr", 7) == 7


@pytest.mark.torch
def test_the_real_traffic_has_the_synthetic_ideal_iteration():
    """iterations_for sizes a run by the synthetic traffic's ideal iteration, which must be the
    real (gloo) traffic's too."""
    fidelity = bench_module("fidelity")
    for scenario in fidelity.SCENARIOS:
        ideal = {}
        for mode in ("synthetic", "real"):
            exp = fidelity.experiment(scenario, "bbr", mode, 5)
            plan = fidelity.NetworkPlan(exp)
            ideal[mode] = [fidelity.ideal_iteration_s(j, plan)[0] for j in exp.jobs]
        assert ideal["real"] == pytest.approx(ideal["synthetic"]), scenario

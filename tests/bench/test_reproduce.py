"""bench/reproduce.py (no runs, no root): its restart logic (`--resume DIR --repeat N` adds the
missing repetitions round-robin after the planned ones and keeps what already ran) and its
scenario suite."""

from tests.helpers import bench_module


def test_resume_with_more_repetitions_appends_them_round_robin(tmp_path):
    reproduce = bench_module("reproduce")
    ccs = ["reno", "mltcp-reno:slope=12"]
    state = {"ccs": ccs, "repeat": 2, "iterations": 4, "scenarios": {"2jobs": {"set": [], "sweep": None}}}
    sweep = reproduce._sweep(tmp_path, "2jobs", state["scenarios"]["2jobs"], state)
    assert [(e["cc"], e["repetition"]) for e in sweep.runs] == [
        ("reno", 0), ("mltcp-reno:slope=12", 0), ("reno", 1), ("mltcp-reno:slope=12", 1)]
    sweep.runs[0]["results_dir"] = str(tmp_path / "ran")  # as if repetition 1 of reno had run
    sweep.save()

    state["repeat"] = 3
    again = reproduce._sweep(tmp_path, "2jobs", state["scenarios"]["2jobs"], state)
    assert [(e["cc"], e["repetition"]) for e in again.runs][4:] == [("reno", 2), ("mltcp-reno:slope=12", 2)]
    assert again.runs[0]["results_dir"] == str(tmp_path / "ran")
    reloaded = reproduce.load_sweep(state["scenarios"]["2jobs"]["sweep"])
    assert len(reloaded.runs) == 6  # saved, so a second resume does not add them again
    state["repeat"] = 2  # fewer than planned: nothing removed
    assert len(reproduce._sweep(tmp_path, "2jobs", state["scenarios"]["2jobs"], state).runs) == 6


def test_every_suite_scenario_is_a_valid_experiment():
    """A SUITE entry whose change no longer fits its file fails here, not an hour into a sweep;
    the probes of what clusters vary change exactly what their names say."""
    import pytest

    from mn_harness.config import Experiment
    reproduce = bench_module("reproduce")
    for name in reproduce.SUITE:
        try:
            Experiment.from_dict(reproduce.scenario_raw(name, [], 10))
        except Exception as exc:  # noqa: BLE001 - name the scenario
            pytest.fail(f"{name}: {exc}")
    sync = Experiment.from_dict(reproduce.scenario_raw("2jobs-ssai-sync", [], 10))
    assert [j.start_offset_s for j in sync.jobs] == [0.0, 0.0] and sync.run.slow_start_after_idle
    for name, queue in (("2jobs-ssai-q20", 20), ("2jobs-ssai-q400", 400)):
        raw = reproduce.scenario_raw(name, [], 10)
        assert raw["links"][2]["endpoints"] == ["s1", "s2"] and raw["links"][2]["queue"] == queue
    slack = Experiment.from_dict(reproduce.scenario_raw("3jobs-slack-ssai", [], 10))
    assert {j.compute_s for j in slack.jobs} == {0.5} and slack.run.slow_start_after_idle
    raw = reproduce.scenario_raw("3jobs-slack-sync-q20", [], 10)
    assert raw["links"][0]["endpoints"] == ["s1", "s2"] and raw["links"][0]["queue"] == 20
    shallow = Experiment.from_dict(raw)
    assert {(j.compute_s, j.start_offset_s) for j in shallow.jobs} == {(0.5, 0.0)}
    assert not shallow.run.slow_start_after_idle


def test_the_demo_is_the_bench_scenario_of_four_ecn_jobs_in_time_at_half_the_packet_rate():
    """`make demo` runs the bench's 4jobs-ecn-sync-q400-500m file, and that scenario is
    4jobs-ecn-sync-q400 at half the rate: the same ideal iteration, buffer and marking
    threshold in time, so the two rates measure one scenario."""
    import re

    from mn_harness.config import Experiment
    from mn_harness.jobs.ideal import ideal_iteration_s
    from mn_harness.network.plan import NetworkPlan
    from tests.helpers import ROOT
    reproduce = bench_module("reproduce")
    demo = re.search(r"^DEMO \?= topologies/(\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert demo and reproduce.SUITE["4jobs-ecn-sync-q400-500m"] == (demo.group(1), [])
    half, full = (Experiment.from_dict(reproduce.scenario_raw(n, [], 10))
                  for n in ("4jobs-ecn-sync-q400-500m", "4jobs-ecn-sync-q400"))

    def in_time(exp):
        plan = NetworkPlan(exp)
        periods = [round(ideal_iteration_s(job, plan)[0], 6) for job in exp.jobs]
        neck = next(link for link in exp.links if {link.a, link.b} == {"s1", "s2"})
        in_ns = [round(packets / neck.bw_bps * 1e9, 3) for packets in (neck.queue_packets, neck.ecn_threshold.packets)]
        return periods, [(j.compute_s, j.start_offset_s) for j in exp.jobs], in_ns

    assert in_time(half) == in_time(full)
    assert {j.start_offset_s for j in half.jobs} == {0.0}


def test_set_may_name_an_option_the_scenario_leaves_at_its_default():
    """--set run.emulation.worker_main_thread=... on a file without run.emulation, as compare --set."""
    reproduce = bench_module("reproduce")
    raw = reproduce.scenario_raw("4jobs-ecn-sync-q400-500m", [("run.emulation.worker_main_thread", "fair")], 10)
    assert raw["run"]["emulation"] == {"worker_main_thread": "fair"}

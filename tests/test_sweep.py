"""mn_harness.sweep without running anything: two comparisons started in the same second get
their own folders, a plan that is not one is named in one line, the run count is bounded."""

from __future__ import annotations

import json

import pytest

from mn_harness.errors import ConfigError
from mn_harness.sweep import MAX_RUNS, build_plan, load_sweep, new_sweep
from tests.cli.bad_inputs import BASE


def test_two_sweeps_in_the_same_second_get_two_folders(tmp_path):
    runs = build_plan(["reno"], [], 1)
    folders = {new_sweep(tmp_path, BASE, "corpus", runs).folder for _ in range(3)}
    assert len(folders) == 3 and all((f / "plan.json").is_file() for f in folders)
    again = load_sweep(sorted(folders)[0])
    assert again.runs[0]["cc"] == "reno" and [e.name for e in again.experiments()] == ["corpus"]


def test_the_run_count_is_bounded_before_any_combination_is_built():
    many = ",".join(str(i) for i in range(1, 1001))
    with pytest.raises(ConfigError, match=f"at most {MAX_RUNS}"):
        build_plan(["reno", "cubic"], [f"jobs[0].iterations={many}", f"jobs[1].iterations={many}"], 3)


def test_a_variant_error_names_the_variant():
    sweep_runs = build_plan([None], ["jobs[0].compute=10ms,-1ms"], 1)
    from mn_harness.sweep import Sweep

    with pytest.raises(ConfigError) as info:
        Sweep(None, "corpus", BASE, sweep_runs).experiments()  # type: ignore[arg-type]
    assert str(info.value).startswith("jobs[0].compute: ") and "(variant --set jobs[0].compute=-1ms)" in str(info.value)


@pytest.mark.parametrize("plan,words", [
    ({"experiment": "x", "raw": {}, "runs": []}, "no runs"),
    ({"experiment": "x", "raw": {}, "runs": [{"label": "a", "cc": None, "set": [], "repetition": -1}]},
     "runs[0]: repetition"),
    ({"experiment": "x", "raw": {}, "runs": [{"label": "a", "cc": None, "set": [["p"]], "repetition": 0}]},
     "runs[0]: set"),
])
def test_a_plan_that_is_not_one_is_named(tmp_path, plan, words):
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(ConfigError) as info:
        load_sweep(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'plan.json'}: ") and words in str(info.value)


def test_an_option_the_file_leaves_at_its_default_can_be_swept_and_a_typo_cannot():
    from mn_harness.sweep import Sweep

    assert "emulation" not in BASE.get("run", {})
    runs = build_plan([None], ["run.emulation.host_queue=link,txqueuelen"], 1)
    exps = Sweep(None, "corpus", BASE, runs).experiments()  # type: ignore[arg-type]
    assert [e.run.emulation.host_queue for e in exps] == ["link", "txqueuelen"]
    assert "emulation" not in BASE.get("run", {})  # the plan's file is not edited
    typo = build_plan([None], ["run.emulation.host_queues=link"], 1)
    with pytest.raises(ConfigError, match="run.emulation.host_queues does not exist"):
        Sweep(None, "corpus", BASE, typo).experiments()  # type: ignore[arg-type]

"""Rounds of a comparison without running one: every CC of a repetition in one round, and what
merging refuses (another plan, another version, a round that failed, rounds missing), one line
each; a merged plan points at every round's runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mn_harness.cluster.rounds import ROUND_FILE, load_rounds, merge_rounds, plan_rounds, write_rounds
from mn_harness.cluster.version import identity
from mn_harness.errors import ConfigError, RunError
from mn_harness.sweep import build_plan, new_sweep
from tests.cli.bad_inputs import BASE


def test_a_round_holds_every_cc_of_one_repetition():
    runs = build_plan(["reno", "cubic", "mltcp-reno"], [], 3)
    rounds = plan_rounds(runs)
    assert list(rounds) == ["r001", "r002", "r003"]
    for rep, name in enumerate(rounds):
        assert sorted(runs[i]["cc"] for i in rounds[name]) == ["cubic", "mltcp-reno", "reno"]
        assert {runs[i]["repetition"] for i in rounds[name]} == {rep}


def test_variants_get_rounds_of_their_own():
    runs = build_plan(["reno", "cubic"], ["jobs[0].compute=10ms,20ms"], 2)
    rounds = plan_rounds(runs)
    assert list(rounds) == ["r001-v1", "r001-v2", "r002-v1", "r002-v2"]
    assert all(len(idx) == 2 for idx in rounds.values())


def fake_round(folder: Path, name: str, indices: list[int], runs: list[dict], plan: str,
               status: str = "completed", **override) -> Path:
    target = folder / "rounds" / name
    target.mkdir(parents=True)
    record = {"plan_id": plan, "round": name, **identity(), "status": status,
              "runs": [{"index": i, "label": runs[i]["label"], "repetition": runs[i]["repetition"],
                        "results_dir": f"runs/x-{i}"} for i in indices], **override}
    (target / ROUND_FILE).write_text(json.dumps(record))
    return target


@pytest.fixture
def planned(tmp_path):
    sweep = new_sweep(tmp_path, BASE, "corpus", build_plan(["reno", "cubic"], [], 2))
    rounds = write_rounds(sweep)
    return sweep, rounds, load_rounds(sweep.folder)["plan_id"]


def test_merging_fills_the_plan_with_every_rounds_runs(planned, tmp_path):
    sweep, rounds, plan_id = planned
    fake_round(sweep.folder, "r001", rounds["r001"], sweep.runs, plan_id)
    elsewhere = fake_round(tmp_path / "other-machine", "r002", rounds["r002"], sweep.runs, plan_id)
    merged = merge_rounds(sweep.folder, [elsewhere])
    assert all(e["results_dir"] for e in merged.runs)
    assert (sweep.folder / "rounds" / "r002" / ROUND_FILE).is_file()  # brought home
    assert (sweep.folder / "rounds.txt").read_text() == "r001\nr002\n"


@pytest.mark.parametrize("override,words", [
    ({"plan_id": "0000"}, "a round of another plan"),
    ({"digest": "0000"}, "every round needs the version"),
    ({"status": "failed: boom"}, "did not complete (failed: boom): run it again with `mn-harness compare --round"),
])
def test_merging_refuses_a_foreign_or_failed_round(planned, override, words):
    sweep, rounds, plan_id = planned
    fake_round(sweep.folder, "r001", rounds["r001"], sweep.runs, plan_id)
    fake_round(sweep.folder, "r002", rounds["r002"], sweep.runs, plan_id, **override)
    with pytest.raises(ConfigError) as info:
        merge_rounds(sweep.folder)
    assert words in str(info.value) and "r002" in str(info.value)


def test_merging_names_the_missing_rounds(planned):
    sweep, rounds, plan_id = planned
    fake_round(sweep.folder, "r002", rounds["r002"], sweep.runs, plan_id)
    with pytest.raises(RunError, match=r"1 of 2 rounds missing \(r001\)"):
        merge_rounds(sweep.folder)


def test_a_comparison_without_rounds_is_named(tmp_path):
    sweep = new_sweep(tmp_path, BASE, "corpus", build_plan(["reno"], [], 1))
    with pytest.raises(ConfigError, match="not a comparison planned into rounds"):
        merge_rounds(sweep.folder)

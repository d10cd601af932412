"""`mn-harness validate` and `run` check a switch's own P4 program against the contract
(mn_harness/dataplane/bmv2_setup.py): one line naming the YAML path that chose the program,
what it lacks and the setting that needs it, exit 2; without p4c one line saying it cannot
check, exit 0. The programs are the shipped ecn_telemetry.p4 (copied with its includes) with a
table or a counter taken out."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mn_harness.config import load_experiment
from mn_harness.dataplane.bmv2_setup import feature_reasons, switch_setups
from mn_harness.network.plan import NetworkPlan
from mn_harness.p4 import PROGRAMS_DIR
from tests.helpers import ROOT


def cli(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "mn_harness.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300, env=env)


def program(folder: Path, edit=lambda text: text) -> Path:
    """ecn_telemetry.p4 and its includes copied into `folder` as mine.p4, `edit` applied to
    every file."""
    shutil.copytree(PROGRAMS_DIR / "include", folder / "include")
    shutil.copy(PROGRAMS_DIR / "ecn_telemetry.p4", folder / "mine.p4")
    for path in [folder / "mine.p4", *(folder / "include").iterdir()]:
        path.write_text(edit(path.read_text()))
    return folder / "mine.p4"


def experiment(folder: Path, **run) -> Path:
    """The BMv2 demo with s1 running mine.p4 (a path relative to the experiment file)."""
    raw = yaml.safe_load((ROOT / "topologies/dumbbell-2jobs-bmv2.yaml").read_text())
    raw["switches"][0]["program"] = "mine.p4"
    raw["run"].update(run)
    path = folder / "exp.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def no_qdepth_hist(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if "qdepth_hist" not in ln)


def no_port_cfg_table(text: str) -> str:
    """egress_port_cfg renamed: the harness cannot find the table it writes thresholds to."""
    return text.replace("egress_port_cfg", "port_settings")


@pytest.mark.bmv2
def test_validate_names_a_missing_counter_and_the_setting_that_needs_it(tmp_path):
    program(tmp_path, no_qdepth_hist)
    out = cli("validate", str(experiment(tmp_path)))
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == ""
    assert out.stderr == ("mn-harness: switches[0].program: mine.p4 lacks counter 'qdepth_hist' (queue "
                          "telemetry: run.queue_telemetry samples s1->h1; false or a list of links without "
                          "it turns that off); the contract: docs/p4.md#the-program-contract\n")


@pytest.mark.bmv2
def test_validate_and_run_name_a_missing_table(tmp_path):
    program(tmp_path, no_port_cfg_table)
    path = experiment(tmp_path)
    for command in ("validate", "run"):  # run refuses it before anything is built
        out = cli(command, str(path))
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr == ("mn-harness: switches[0].program: mine.p4 lacks table 'egress_port_cfg' (ECN "
                              "marking: s1->h1 marks at 20 packets; ecn_threshold: off turns marking off); "
                              "the contract: docs/p4.md#the-program-contract\n")


@pytest.mark.bmv2
def test_a_program_is_only_asked_for_what_the_experiment_uses(tmp_path):
    """Without the port table, s1 may still run with marking off and its ports not sampled."""
    program(tmp_path, no_port_cfg_table)
    raw = yaml.safe_load(experiment(tmp_path, queue_telemetry=["s2-h3"]).read_text())
    raw["switches"][0]["ecn_threshold"] = "off"
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(raw))
    out = cli("validate", "exp.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "  program s1: mine.p4 meets the contract for forwarding\n" in out.stdout
    plan = NetworkPlan(load_experiment(tmp_path / "exp.yaml"))
    setup = switch_setups(plan, only={"s1"})["s1"]
    assert setup.features() == ["forwarding"]
    assert {e.table for e in setup.entries()} == {"arp_responder", "ipv4_lpm"}


@pytest.mark.bmv2
def test_a_program_that_does_not_compile_is_one_line_naming_p4cs_first_error(tmp_path):
    program(tmp_path, lambda text: text.replace("apply {\n#include \"include/ecn_ingress_apply.p4\"",
                                                 "apply {\n    undeclared_table.apply();\n"
                                                 "#include \"include/ecn_ingress_apply.p4\""))
    out = cli("validate", str(experiment(tmp_path)))
    assert out.returncode == 2
    assert re.fullmatch(r"mn-harness: switches\[0\]\.program: p4c failed on \S+mine\.p4 \(exit 1\): .*"
                        r"undeclared_table.*\n", out.stderr), out.stderr


def test_without_p4c_validate_says_in_one_line_that_it_cannot_check(tmp_path):
    program(tmp_path, no_qdepth_hist)
    env = {**os.environ, "P4_TOOLCHAIN": str(tmp_path / "none"), "P4_TOOLCHAIN_ONLY": "1"}
    out = cli("validate", str(experiment(tmp_path)), env=env)
    assert out.returncode == 0, out.stderr
    notes = [ln for ln in out.stdout.splitlines() if "note:" in ln]
    assert len(notes) == 1 and notes[0].startswith(
        "  note: cannot check switches[0].program against the program contract here: BMv2/p4c not found")
    # unrelated files are not affected, and neither are files on the Linux data plane
    assert cli("validate", "topologies/dumbbell-2jobs-bmv2.yaml", env=env).stdout.count("note:") == 0
    linux = cli("validate", str(experiment(tmp_path)), "--dataplane", "linux", env=env)
    assert linux.returncode == 0 and "note:" not in linux.stdout


def test_a_program_path_is_relative_to_the_experiment_file(tmp_path):
    program(tmp_path)
    exp = load_experiment(experiment(tmp_path))
    assert exp.switches[0].program == str((tmp_path / "mine.p4").resolve())
    (tmp_path / "mine.p4").unlink()
    out = cli("validate", str(tmp_path / "exp.yaml"))
    assert out.returncode == 2
    assert out.stderr.startswith("mn-harness: switches[0].program: no P4 program 'mine.p4' (shipped: ")


def test_reasons_name_the_settings_that_ask_for_each_feature(tmp_path):
    raw = yaml.safe_load((ROOT / "topologies/dumbbell-2jobs-bmv2.yaml").read_text())
    raw["switches"][1]["ecn_threshold"] = "off"
    raw["run"]["queue_telemetry"] = ["s1->s2"]
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(raw))
    plan = NetworkPlan(load_experiment(tmp_path / "exp.yaml"))
    assert feature_reasons(plan, "s1") == {
        "ecn_marking": "s1->h1 marks at 20 packets; ecn_threshold: off turns marking off",
        "queue_telemetry": "run.queue_telemetry samples s1->s2; false or a list of links without it "
                           "turns that off"}
    assert feature_reasons(plan, "s2") == {}


@pytest.mark.bmv2
def test_a_cache_that_cannot_be_written_is_a_note_not_a_traceback(tmp_path):
    program(tmp_path)
    (tmp_path / "a-file").write_text("")
    env = {**os.environ, "MN_HARNESS_P4_CACHE": str(tmp_path / "a-file" / "cache")}
    out = cli("validate", str(experiment(tmp_path)), env=env)
    assert out.returncode == 0, out.stderr
    assert "  note: cannot check switches[0].program against the program contract here: cannot write p4c's " \
           "cache (" in out.stdout and "MN_HARNESS_P4_CACHE names another folder)" in out.stdout

"""`mn-harness p4 new`: the starting folder for a program of one's own. Its program is the shipped
ecn_telemetry.p4 flattened, it compiles and meets the contract; its unit tests pass unchanged on
a real BMv2 and are clean for ruff; the command refuses a folder in use and a bad name."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mn_harness.p4 import PROGRAMS_DIR
from mn_harness.p4.starter import flatten, new_program_folder
from tests.helpers import ROOT


def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "mn_harness.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_the_folder_has_the_program_its_experiment_and_its_tests(tmp_path):
    out = cli("p4", "new", str(tmp_path / "mine"), "--name", "mine")
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == [
        "README.md", "experiment.yaml", "mine.p4", "mine.p4test.yaml", "test_mine.py"]
    text = (tmp_path / "mine/experiment.yaml").read_text()
    assert "program: mine.p4" in text and "$" not in text


def test_the_program_is_the_shipped_one_with_its_includes_inlined():
    text = flatten(PROGRAMS_DIR / "ecn_telemetry.p4")
    assert '#include "' not in text and "#include <v1model.p4>" in text
    parts = sorted((PROGRAMS_DIR / "include").glob("ecn_*.p4"))
    assert len(parts) == 7
    for part in parts:  # its code is there, its note on being a shared part is not
        code = part.read_text().split("*/", 1)[1].strip().splitlines()[0]
        assert f"/* --- {part.name} --- */\n{code}" in text
    assert "shared with aggregation.p4" not in text


def test_a_folder_in_use_or_a_bad_name_is_refused(tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("mine\n")
    out = cli("p4", "new", str(tmp_path / "used"))
    assert out.returncode == 2 and out.stderr.endswith("exists and is not an empty folder (give a new one)\n")
    out = cli("p4", "new", str(tmp_path / "x"), "--name", "My-Program")
    assert out.returncode == 2 and out.stderr.startswith("mn-harness: --name: 'My-Program' is not a program name")
    assert not (tmp_path / "x").exists()


@pytest.mark.bmv2
def test_the_program_compiles_and_meets_the_contract(tmp_path):
    new_program_folder(tmp_path / "mine", "mine")
    out = cli("validate", "experiment.yaml", cwd=tmp_path / "mine")
    assert out.returncode == 0, out.stderr
    for switch in ("s1", "s2"):
        assert (f"  program {switch}: mine.p4 meets the contract for forwarding, ECN marking, queue telemetry\n"
                in out.stdout), out.stdout


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
def test_its_tests_pass_unchanged_and_are_clean_for_ruff(tmp_path):
    folder = tmp_path / "mine"
    new_program_folder(folder, "mine")
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=folder,
                          capture_output=True, text=True, timeout=120)
    assert lint.returncode == 0, lint.stdout
    env = {k: v for k, v in os.environ.items() if k != "MN_HARNESS_REQUIRE_BMV2"}
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(folder),
                          "."], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().splitlines()[-1].startswith("8 passed"), out.stdout


def test_the_templates_are_package_data():
    from mn_harness.p4.starter import STARTER_DIR, TEMPLATES

    assert sorted(p.name for p in Path(STARTER_DIR).iterdir()) == sorted(TEMPLATES)

"""The bmv2 gating of mn-harness's pytest plugin (mn_harness/testing/pytest_p4.py), which the
project's tests and users' P4 tests share: bmv2 tests - marked, or using the plugin's P4
fixtures - skip with the reason where BMv2 is missing, and fail instead where
MN_HARNESS_REQUIRE_BMV2=1 says they must run (CI with the toolchain bundle). Runs pytest on a
small test file outside the project (the plugin comes from its entry point), on a simulated
machine (P4_TOOLCHAIN_ONLY=1): without BMv2 (an empty prefix), or with stand-in binaries so that
the tests themselves run and skip from inside."""

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path
from xml.etree import ElementTree

from mn_harness.testing.pytest_p4 import REQUIRE_BMV2_ENV
from tests.helpers import ROOT
from tests.p4.fake_tools import script

CASES = '''
import pytest

@pytest.mark.bmv2
def test_needs_bmv2():
    pass

@pytest.mark.bmv2
def test_bmv2_skipping_inside():
    pytest.skip("no iperf3 here")

@pytest.mark.bmv2
@pytest.mark.xfail(reason="known", strict=True)
def test_bmv2_xfail():
    assert False

def test_plain_skip():
    pytest.skip("unrelated")

def test_uses_the_compile_fixture(p4_compile):
    pass

def p4():  # a helper of the same name as the plugin's fixture: not a bmv2 test
    return 1

@pytest.fixture
def p4_network():  # a fixture of its own with the plugin's name: not a bmv2 test
    return "mine"

def test_uses_its_own_fixture(p4_network):
    assert p4_network == "mine"
'''


YAML_CASES = """
cases:
  - name: a declarative case
    send: [{port: h1, packet: {Ether: {}}}]
    expect: []
"""


def run_cases(tmp_path: Path, require: bool, toolchain: bool) -> tuple[dict[str, str], str, int]:
    """{test name: PASSED/FAILED/ERROR/SKIPPED/XFAIL}, pytest's output, its exit code. Without
    the toolchain a *.p4test.yaml case is run too."""
    (tmp_path / "test_cases.py").write_text(CASES)
    yaml_file = tmp_path / "cases.p4test.yaml"
    if toolchain:
        yaml_file.unlink(missing_ok=True)
    else:
        yaml_file.write_text(YAML_CASES)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    bmv2: BMv2\n")
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    if toolchain:
        for name in ("simple_switch_grpc", "simple_switch_CLI", "p4c-bm2-ss"):
            script(prefix / "bin" / name, "exit 0\n")
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_BMV2_ENV}
    env.update(P4_TOOLCHAIN=str(prefix), P4_TOOLCHAIN_ONLY="1", PYTHONPATH=str(ROOT))
    if require:
        env[REQUIRE_BMV2_ENV] = "1"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-rA", "-q", "--junitxml=report.xml", "."], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    outcomes = {}
    for case in ElementTree.parse(tmp_path / "report.xml").iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        skipped = case.find("skipped")
        if skipped is not None and skipped.get("type") == "pytest.xfail":
            kinds = ["xfail"]
        outcomes[case.get("name", "")] = {"failure": "FAILED", "error": "ERROR", "skipped": "SKIPPED",
                                          "xfail": "XFAIL"}[kinds[0]] if kinds else "PASSED"
    return outcomes, proc.stdout, proc.returncode


def test_the_plugin_is_registered_for_pytest():
    [plugin] = [e for e in entry_points(group="pytest11") if e.name == "mn_harness_p4"]
    assert plugin.value == "mn_harness.testing.pytest_p4"


def test_bmv2_tests_skip_with_the_reason_without_bmv2(tmp_path):
    out, text, code = run_cases(tmp_path, require=False, toolchain=False)
    assert code == 0, text
    assert set(out.values()) == {"SKIPPED", "PASSED"}, text
    assert out["test_uses_its_own_fixture"] == "PASSED" and out["a declarative case"] == "SKIPPED", text
    assert "BMv2/p4c not found" in text, text


def test_required_bmv2_tests_fail_without_bmv2(tmp_path):
    out, text, code = run_cases(tmp_path, require=True, toolchain=False)
    assert code == 1, text
    # skipped before they ran (at setup): reported as errors; the plain test still skips
    assert out == {"test_needs_bmv2": "ERROR", "test_bmv2_skipping_inside": "ERROR",
                   "test_bmv2_xfail": "ERROR", "test_plain_skip": "SKIPPED",
                   "test_uses_the_compile_fixture": "ERROR", "test_uses_its_own_fixture": "PASSED",
                   "a declarative case": "ERROR"}, text
    assert f"{REQUIRE_BMV2_ENV}=1 and this bmv2 test would be skipped" in text, text


def test_required_bmv2_tests_fail_when_they_skip_themselves(tmp_path):
    out, text, code = run_cases(tmp_path, require=False, toolchain=True)
    assert code == 0 and out == {"test_needs_bmv2": "PASSED", "test_bmv2_skipping_inside": "SKIPPED",
                                 "test_bmv2_xfail": "XFAIL", "test_plain_skip": "SKIPPED",
                                 "test_uses_the_compile_fixture": "PASSED",
                                 "test_uses_its_own_fixture": "PASSED"}, text
    out, text, code = run_cases(tmp_path, require=True, toolchain=True)
    assert code == 1, text
    assert out == {"test_needs_bmv2": "PASSED", "test_bmv2_skipping_inside": "FAILED",
                   "test_bmv2_xfail": "XFAIL", "test_plain_skip": "SKIPPED",
                   "test_uses_the_compile_fixture": "PASSED", "test_uses_its_own_fixture": "PASSED"}, text
    assert "would be skipped: Skipped: no iperf3 here" in text, text

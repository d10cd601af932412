"""The CLI's contract: one line and exit 2 for bad input, no traceback; sudo hint when not root."""

import subprocess
import sys

import pytest

from tests.helpers import ROOT


def cli(*args, user=None):
    cmd = [sys.executable, "-m", "mn_harness.cli", *args]
    if user:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]  # numeric ids
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_validate_ok_lists_shared_links():
    out = cli("validate", "topologies/dumbbell-2jobs.yaml")
    assert out.returncode == 0, out.stderr
    assert "shared link s1->s2: job1, job2" in out.stdout


def test_bad_experiment_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    text = (ROOT / "topologies/dumbbell-2jobs.yaml").read_text().replace("workers: [h2, h4]", "workers: [h2, h9]")
    bad.write_text(text)
    for command in ("validate", "run"):
        out = cli(command, str(bad))
        assert out.returncode == 2
        assert out.stderr.strip() == "mn-harness: jobs[1].workers[1]: unknown host 'h9'"
        assert "Traceback" not in out.stderr


def test_missing_file_is_one_line():
    out = cli("validate", "topologies/nope.yaml")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "cannot read" in out.stderr


def test_cc_override_is_validated():
    out = cli("run", "topologies/dumbbell-2jobs.yaml", "--cc", "warp-speed")
    assert out.returncode == 2 and "--cc" in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.root
def test_not_root_gets_sudo_hint():
    out = cli("run", "topologies/dumbbell-2jobs.yaml", user=65534)
    if "Permission denied" in out.stderr or "ModuleNotFoundError" in out.stderr:
        pytest.skip("the checkout is not readable by user nobody")
    assert out.returncode == 2
    assert "run it with sudo" in out.stderr and len(out.stderr.strip().splitlines()) == 1

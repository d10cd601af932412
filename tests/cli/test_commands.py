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


def test_validate_prints_cassini_loops_and_warnings(tmp_path):
    out = cli("validate", "topologies/leaf-spine.yaml")
    assert out.returncode == 0, out.stderr
    assert "CASSINI leaf1->spine1, spine1->leaf1 (jobA, jobC): compatibility 1.000" in out.stdout
    assert "circular dependency (affinity-graph loop): " in out.stdout
    assert "predicted per job (best shifts / aligned): jobA 1.06x / 1.39x" in out.stdout
    text = (ROOT / "topologies/dumbbell-2jobs.yaml").read_text().replace(
        "    cc: cubic\n  - name: job2", "    cc: {name: mltcp-reno, idle_gap: 300ms}\n  - name: job2")
    (tmp_path / "gap.yaml").write_text(text)
    out = cli("validate", str(tmp_path / "gap.yaml"))
    assert out.returncode == 0 and out.stdout.count("warning:") == 1
    assert "warning: jobs[0].cc.idle_gap: 300 ms is not below the job's compute time (300 ms)" in out.stdout


def test_validate_ecmp_shows_bmv2_paths_and_linux_candidates(tmp_path):
    text = (ROOT / "topologies/leaf-spine.yaml").read_text().replace("run:\n", "routing: ecmp\nrun:\n")
    (tmp_path / "ecmp.yaml").write_text(text)
    linux = cli("validate", str(tmp_path / "ecmp.yaml"))
    assert linux.returncode == 0, linux.stderr
    assert "routing ecmp (hash seed 2): 6 of 6 flows have equal-cost paths; the Linux routers' hash" in linux.stdout
    assert "shared link leaf1->spine2: may share jobA, jobC" in linux.stdout and "CASSINI leaf" not in linux.stdout
    bmv2 = cli("validate", str(tmp_path / "ecmp.yaml"), "--dataplane", "bmv2")
    assert bmv2.returncode == 0, bmv2.stderr
    assert "BMv2's hash sends them: jobA r0 h1-leaf1-" in bmv2.stdout and "may share" not in bmv2.stdout
    assert "CASSINI leaf" in bmv2.stdout

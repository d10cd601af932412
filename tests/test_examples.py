"""The examples run as a user runs them (`sudo .venv/bin/python examples/<x>.py`), small."""

import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = [pytest.mark.root, pytest.mark.slow]


def run_example(name: str, *args: str, tmp_path) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / name), "--small", "--out", str(tmp_path), *args],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_dumbbell(tmp_path):
    out = run_example("dumbbell.py", "--cc", "reno", tmp_path=tmp_path)
    assert "job1" in out and "job2" in out and "reno" in out and "results:" in out


def test_sweep_collects_one_dataframe(tmp_path):
    out = run_example("sweep.py", "--rates", "100Mbit,300Mbit", tmp_path=tmp_path)
    lines = [ln.split() for ln in out.splitlines() if ln.split()[:1] in (["100Mbit"], ["300Mbit"]) and "job1" in ln]
    assert {ln[0] for ln in lines} == {"100Mbit", "300Mbit"}
    mean = {ln[0]: float(ln[4]) for ln in lines}
    assert mean["100Mbit"] > mean["300Mbit"]  # a slower bottleneck, longer iterations


def test_mid_run_changes_the_link(tmp_path):
    out = run_example("mid_run.py", "--at", "3", "--rate", "100Mbit", tmp_path=tmp_path)
    assert "h1 routes: default via 10.0.0.2" in out and "s1-s2 set to 100 Mbit/s" in out
    after = next(ln for ln in out.splitlines() if ln.strip().startswith("after:"))
    assert int(after.split()[-2]) < 100

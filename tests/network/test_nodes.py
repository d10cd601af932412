"""A node whose shell fails to start ends the set-up in one line instead of blocking forever:
real Mininet nodes, with a `bash` on PATH that exits at once or never gives a prompt."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT, small_demo

pytestmark = pytest.mark.root

FAKE_BASH = {"exits": "#!/bin/sh\necho 'no shell today' >&2\nexit 3\n",
             "hangs": "#!/bin/sh\nexec sleep 297\n"}


@pytest.fixture
def broken_bash(tmp_path, monkeypatch, request):
    """PATH with a `bash` that behaves as request.param says (mnexec runs `env ... bash`)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bash"
    fake.write_text(FAKE_BASH[request.param])
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("MN_HARNESS_SHELL_TIMEOUT", "2")
    return fake


def processes_running(path: Path) -> list[int]:
    """Pids whose command line mentions `path` (the fake bash, or the `sleep 297` it became)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if str(path).encode() in cmdline or b"sleep\x00297" in cmdline:
                pids.append(int(entry))
    return pids


@pytest.mark.parametrize("broken_bash", ["exits", "hangs"], indirect=True)
def test_a_shell_that_does_not_start_is_one_line_not_a_hang(broken_bash):
    from mn_harness.network.nodes import HarnessHost, ShellStartError

    started = time.monotonic()
    with pytest.raises(ShellStartError) as info:
        HarnessHost("h1")
    message = str(info.value)
    assert message.startswith("node h1: its shell ") and "\n" not in message, message
    assert ("exited with code 3" if broken_bash.read_text().endswith("exit 3\n") else "no prompt within 2s") in message
    assert time.monotonic() - started < 30
    time.sleep(0.2)
    assert not processes_running(broken_bash), "the failed shell was left running"


def test_a_working_shell_still_starts():
    from mn_harness.network.nodes import HarnessHost

    node = HarnessHost("h1")
    try:
        assert node.cmd("echo $((6 * 7))").strip() == "42"
    finally:
        node.terminate()


@pytest.mark.slow
@pytest.mark.parametrize("broken_bash", ["hangs"], indirect=True)
def test_run_with_a_hanging_shell_fails_in_one_line(broken_bash, tmp_path, state_dir):
    config = tmp_path / "demo.yaml"
    config.write_text(yaml.safe_dump(small_demo(iterations=2)))
    out = subprocess.run([sys.executable, "-m", "mn_harness.cli", "run", str(config), "--out", str(tmp_path),
                          "--no-plots"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 1, out.stderr
    assert out.stderr.count("\n") == 1 and "node h1: its shell gave no prompt within 2s" in out.stderr, out.stderr
    assert not processes_running(broken_bash)
    assert not list(state_dir.glob("*.json"))

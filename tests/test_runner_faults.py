"""Faults on real runs (root, slow; run under the measurement lock): Ctrl-C from a script's
background job, SIGTERM, a second Ctrl-C during teardown, SIGKILL then `mn-harness clean`, a
worker that dies, a worker that hangs, a BMv2 switch killed, two runs at once, a full results
file system. Each ends in one line on stderr, keeps the rows measured so far, and leaves no
process, namespace, veth, registered congestion control or struct_ops map behind (after
`clean` where the harness itself could not finish)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from mn_harness.config import Experiment
from mn_harness.runner import run_experiment
from tests import helpers
from tests.helpers import (
    ROOT,
    TOPOLOGIES,
    assert_nothing_left,
    netns_inode,
    root_veths,
    rows_written,
    small_demo,
    wait_for_state,
    workers_of,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]


def experiment_file(tmp_path: Path, iterations: int, cc: str = "cubic", job: dict | None = None, **run) -> Path:
    raw = small_demo(iterations=iterations)
    for j in raw["jobs"]:
        j.update(cc=cc, **(job or {}))
    raw["run"].update(run)
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def start_run(config: Path, out: Path, ignore_sigint: bool = False) -> subprocess.Popen:
    def as_background_job() -> None:  # what a non-interactive shell does for `cmd &`
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.Popen([sys.executable, "-m", "mn_harness.cli", "run", str(config), "--out", str(out),
                             "--no-plots"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            preexec_fn=as_background_job if ignore_sigint else None)


def running(state, rows: int = 5) -> bool:
    """Every worker started and job1's rank 0 has written `rows` iterations."""
    return len(workers_of(state)) == 4 and rows_written(state) >= rows


def namespaces_of(state) -> set[int]:
    return {ns for p in state.processes() if (ns := netns_inode(p.pid)) is not None}


def one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def clean(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mn_harness.cli", "clean", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=180)


def summary_of(state) -> dict:
    return json.loads((Path(state.results_dir) / "summary.json").read_text())


def iteration_rows(state) -> int:
    text = (Path(state.results_dir) / "iterations.csv").read_text()
    return len(text.splitlines()) - 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint-background-job", "sigterm"])
def test_a_signal_mid_run_tears_down_and_keeps_rows(tmp_path, state_dir, sig):
    """SIGINT to a run started as a script's background job (SIGINT inherited as ignored: the CLI
    restores it), or SIGTERM, halfway through an MLTCP run: exit 130, one line, rows kept."""
    veths = root_veths()
    proc = start_run(experiment_file(tmp_path, 40, cc="mltcp-reno"), tmp_path, ignore_sigint=True)
    state = wait_for_state(state_dir, str(proc.pid), running, proc=proc)
    namespaces = namespaces_of(state)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in one_line(err)
    assert_nothing_left(state, namespaces, veths)
    assert not list(state_dir.glob("*.json"))
    assert 5 * 2 <= iteration_rows(state) < 40 * 4
    summary = summary_of(state)
    assert summary["status"] == "interrupted" and summary["jobs"]["job1"]["missing_rows"] > 0
    assert "teardown" not in summary


def test_a_second_ctrl_c_during_network_teardown_keeps_the_state_for_clean(tmp_path, state_dir):
    """h1's shell is stopped, so Mininet's link teardown (a command in that shell) waits; a second
    Ctrl-C cuts it short. The run says so in one line and keeps its state file; `clean` then
    finishes, and nothing is left."""
    veths = root_veths()
    proc = start_run(experiment_file(tmp_path, 200), tmp_path)
    state = wait_for_state(state_dir, str(proc.pid), running, proc=proc)
    namespaces = namespaces_of(state)
    h1 = next(p for p in state.processes() if p.label == "mininet:h1")
    os.kill(h1.pid, signal.SIGSTOP)
    proc.send_signal(signal.SIGINT)
    # the jobs are stopped (their section is done) and the network teardown is waiting
    wait_for_state(state_dir, str(proc.pid), lambda s: "jobs" not in s.sections, proc=proc)
    time.sleep(2.0)
    assert proc.poll() is None, "the network teardown did not wait for the stopped shell"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    line = one_line(err)
    assert "teardown incomplete (network" in line and "mn-harness clean" in line, line
    kept = helpers.load_states(state_dir, str(proc.pid))
    assert len(kept) == 1 and "network" in kept[0].sections
    assert summary_of(state)["teardown"].startswith("incomplete: network")
    out = clean()
    assert out.returncode == 0, out.stderr
    assert f"cleaned run {state.run_id}" in out.stdout
    assert_nothing_left(state, namespaces, veths)
    assert not list(state_dir.glob("*.json"))


def test_clean_after_sigkill_removes_everything_and_frees_the_cc(tmp_path, state_dir):
    """No teardown at all: the workers live on (node shells die with the harness's terminals),
    orphaned sockets hold the BPF congestion control; `clean` kills exactly what the run
    recorded, unregisters the CC and waits until the kernel has freed its struct_ops map."""
    veths = root_veths()
    proc = start_run(experiment_file(tmp_path, 400, cc="mltcp-reno"), tmp_path)
    state = wait_for_state(state_dir, str(proc.pid), running, proc=proc)
    namespaces = namespaces_of(state)
    proc.kill()
    proc.wait()
    assert any(p.alive() for p in workers_of(state)), "expected leftovers after SIGKILL"
    ccs = state.sections["cc"]
    assert ccs and all(cc.map_id for cc in ccs)
    out = clean()
    assert out.returncode == 0, out.stderr
    assert f"cleaned run {state.run_id}" in out.stdout
    assert f"unregistered congestion control {ccs[0].name}" in out.stdout
    assert_nothing_left(state, namespaces, veths, timeout=0)  # at once: clean waited for the map
    assert not list(state_dir.glob("*.json"))


def test_a_dead_worker_fails_the_run_in_one_line_and_tears_down(tmp_path, state_dir):
    from mn_harness.jobs.launcher import JobError

    veths = root_veths()
    exp = Experiment.from_dict(small_demo(iterations=200), "dies")
    outcome: dict = {}

    def run():
        try:
            run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
        except JobError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    state = wait_for_state(state_dir, str(os.getpid()), running)
    namespaces = namespaces_of(state)
    os.kill(workers_of(state)[0].pid, signal.SIGKILL)
    thread.join(120)
    assert not thread.is_alive()
    message = str(outcome["error"])
    assert "died (exit -9)" in message and "\n" not in message
    assert_nothing_left(state, namespaces, veths)
    summary = summary_of(state)
    assert summary["status"].startswith("failed: ") and summary["jobs"]["job1"]["iterations"] > 0


def test_a_hung_worker_ends_at_the_run_timeout(tmp_path, state_dir):
    """A worker that hangs (stopped, not dead): its ring stalls, the run's timeout fires."""
    veths = root_veths()
    proc = start_run(experiment_file(tmp_path, 200, timeout="12s"), tmp_path)
    state = wait_for_state(state_dir, str(proc.pid), running, proc=proc)
    namespaces = namespaces_of(state)
    os.kill(workers_of(state)[1].pid, signal.SIGSTOP)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "run timed out after 12s" in one_line(err)
    assert_nothing_left(state, namespaces, veths)
    assert iteration_rows(state) >= 5 and summary_of(state)["status"].startswith("failed: run timed out")


def test_a_full_results_file_system_is_one_line_and_tears_down(tmp_path, state_dir):
    """The results folder is on a small tmpfs that fills up while the jobs run."""
    mount = tmp_path / "full"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], check=True)
    try:
        # ~150 KiB left: config.yaml, harness.log and the workers' spec and stderr files fit
        # (tmpfs gives each file at least a 4 KiB page), the rows of 2000 iterations do not
        (mount / "filler").write_bytes(b"\0" * (100 << 10))
        veths = root_veths()
        proc = start_run(experiment_file(tmp_path, 2000, job={"compute": "5ms", "bytes_per_iteration": "64KB"}), mount)
        state = wait_for_state(state_dir, str(proc.pid), lambda s: len(workers_of(s)) == 4, proc=proc)
        namespaces = namespaces_of(state)
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 1, err
        assert "No space left on device" in one_line(err)
        assert_nothing_left(state, namespaces, veths)
        assert not list(state_dir.glob("*.json"))
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def bmv2_file(tmp_path: Path, iterations: int, name: str = "bmv2.yaml") -> Path:
    raw = yaml.safe_load((TOPOLOGIES / "dumbbell-2jobs-bmv2.yaml").read_text())
    for job in raw["jobs"]:
        job.update(iterations=iterations, bytes_per_iteration="250KB", compute="50ms")
    raw["jobs"][1]["cc"] = "mltcp-reno"
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.bmv2
def test_a_bmv2_switch_killed_mid_run_is_one_line_and_tears_down(tmp_path, state_dir):
    veths = root_veths()
    proc = start_run(bmv2_file(tmp_path, 200), tmp_path)
    state = wait_for_state(state_dir, str(proc.pid), lambda s: running(s, rows=3), proc=proc)
    namespaces = namespaces_of(state)
    switch = next(p for p in state.processes() if p.label == "simple_switch_grpc s1")
    run_dir = next(r.path for r in state.sections["dataplane"] if r.kind == "directory")
    os.kill(switch.pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "bmv2: switch s1 exited while the jobs ran" in one_line(err)
    assert_nothing_left(state, namespaces, veths)
    assert not Path(run_dir).exists() and not list(state_dir.glob("*.json"))
    assert iteration_rows(state) >= 3 and summary_of(state)["status"].startswith("failed: bmv2")


@pytest.mark.bmv2
def test_two_runs_at_once_on_both_data_planes_complete(tmp_path, state_dir):
    veths = root_veths()
    linux = start_run(experiment_file(tmp_path, 20, cc="mltcp-reno"), tmp_path / "linux")
    bmv2 = start_run(bmv2_file(tmp_path, 8), tmp_path / "bmv2")
    states = [wait_for_state(state_dir, str(p.pid), lambda s: len(workers_of(s)) == 4, proc=p)
              for p in (linux, bmv2)]
    namespaces = set().union(*(namespaces_of(s) for s in states))
    for proc in (linux, bmv2):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    for state in states:
        summary = summary_of(state)
        assert summary["status"] == "completed" and all(j["missing_rows"] == 0 for j in summary["jobs"].values())
        assert_nothing_left(state, namespaces, veths)
    assert not list(state_dir.glob("*.json"))

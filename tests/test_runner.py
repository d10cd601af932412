"""Real runs in network namespaces: Mininet hosts, Linux routers, HTB queues, kernel TCP.

These are the harness's end-to-end checks; they need root and take a few seconds each."""

from __future__ import annotations

import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mn_harness.collectives import ring
from mn_harness.config import Experiment, load_experiment
from mn_harness.runner import run_experiment
from mn_harness.state import STATE_DIR
from tests.helpers import small_demo

pytestmark = [pytest.mark.root, pytest.mark.slow]




def read_rows(results: Path) -> list[dict]:
    with open(results / "iterations.csv") as f:
        return list(csv.DictReader(f))


def test_demo_topology_completes_with_every_row(tmp_path):
    exp = Experiment.from_dict(small_demo(), "demo-small")
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    rows = read_rows(results)
    keys = {(r["job"], int(r["rank"]), int(r["iteration"])) for r in rows}
    expected = {(j.name, rank, it) for j in exp.jobs for rank in range(j.n) for it in range(j.iterations)}
    assert keys == expected and len(rows) == len(expected)
    for r in rows:
        assert float(r["iter_time"]) >= 0.060 - 1e-3  # never faster than the compute phase
        assert float(r["t_comm_start"]) - float(r["t_start"]) >= 0.060 - 1e-3
        assert int(r["bytes_sent"]) == ring.bytes_sent_per_worker(2_000_000, 2)
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["jobs"]["job1"]["iterations"] == 4 and summary["jobs"]["job1"]["missing_rows"] == 0
    # job2 starts 20 ms after job1: the common start time makes offsets exact
    first = {r["job"]: float(r["t_start"]) for r in rows if r["iteration"] == "0" and r["rank"] == "0"}
    assert first["job2"] - first["job1"] == pytest.approx(0.020, abs=0.005)
    assert (results / "throughput.csv").stat().st_size > 100
    assert (results / "config.yaml").is_file()
    assert not list(STATE_DIR.glob(f"{os.getpid()}-*.json"))


def test_isolated_job_communicates_at_link_rate(tmp_path):
    """One job alone on a 300 Mbit/s path: its communication phase must take bytes/rate,
    within 15% (TCP/IP headers alone cost ~4.5%); below, the worker would be the bottleneck."""
    raw = small_demo(iterations=6)
    raw["jobs"] = raw["jobs"][:1]
    raw["jobs"][0].update(bytes_per_iteration="6MB", compute="50ms")
    raw["link_defaults"]["bw"] = "300Mbit"
    raw["links"][2]["bw"] = "300Mbit"
    results = run_experiment(Experiment.from_dict(raw, "iso"), out_root=tmp_path, log=lambda *_: None)
    rows = [r for r in read_rows(results) if r["iteration"] != "0"]  # first iteration ramps up
    comm = statistics.median(float(r["comm_time"]) for r in rows)
    ideal = ring.bytes_sent_per_worker(6_000_000, 2) * 8 / 300e6
    assert ideal * 0.98 <= comm <= ideal * 1.15, f"comm {comm:.4f}s vs ideal {ideal:.4f}s"


def _netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except FileNotFoundError:
        return None


def _gone(pid: int, timeout: float = 5.0) -> bool:
    """True once /proc/pid is gone (a killed process stays a zombie until reaped)."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _live_netns_inodes() -> set[int]:
    inodes = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                inodes.add(os.stat(f"/proc/{entry}/ns/net").st_ino)
            except OSError:
                pass
    return inodes


def test_sigint_halfway_leaves_nothing_and_keeps_rows(tmp_path):
    raw = small_demo(iterations=40)
    config = tmp_path / "demo.yaml"
    config.write_text(yaml.safe_dump(raw))
    exp = load_experiment(config)
    veths_before = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True, text=True).stdout
    proc = subprocess.Popen([sys.executable, "-m", "mn_harness.cli", "run", str(config), "--out", str(tmp_path),
                             "--no-plots"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    state, rows_file = None, None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        states = [json.loads(p.read_text()) for p in STATE_DIR.glob(f"{proc.pid}-*.json")]
        if states and len(states[0]["processes"]) >= len(exp.hosts) + len(exp.switches) + 4:
            state = states[0]
            rows_file = Path(state["results_dir"]) / "raw" / "job1-r0.iterations.jsonl"
            if rows_file.exists() and len(rows_file.read_text().splitlines()) >= 5:
                break
        time.sleep(0.2)
    assert state is not None, proc.stderr.read() if proc.poll() is not None else "no state file"
    pids = [pid for pid, _ in state["processes"]]
    namespaces = {_netns_inode(pid) for pid in pids} - {None}
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    for pid in pids:
        assert _gone(pid), f"pid {pid} survived"
    assert not (namespaces & _live_netns_inodes()), "a network namespace of the run is still alive"
    veths_after = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True, text=True).stdout
    assert veths_after == veths_before
    assert not STATE_DIR.joinpath(f"{state['run_id']}.json").exists()
    rows = read_rows(Path(state["results_dir"]))
    assert 5 * 2 <= len(rows) < 40 * 4  # kept what was measured, stopped halfway
    summary = json.loads((Path(state["results_dir"]) / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["jobs"]["job1"]["missing_rows"] > 0


def test_clean_removes_leftovers_of_a_sigkilled_run(tmp_path):
    raw = small_demo(iterations=200)
    config = tmp_path / "demo.yaml"
    config.write_text(yaml.safe_dump(raw))
    exp = load_experiment(config)
    proc = subprocess.Popen([sys.executable, "-m", "mn_harness.cli", "run", str(config), "--out", str(tmp_path),
                             "--no-plots"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    state = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and state is None:
        for p in STATE_DIR.glob(f"{proc.pid}-*.json"):
            data = json.loads(p.read_text())
            if len(data["processes"]) >= len(exp.hosts) + len(exp.switches) + 4:
                state = data
        time.sleep(0.2)
    assert state is not None
    time.sleep(1.0)
    proc.kill()  # no teardown at all: everything it created is left behind
    proc.wait()
    pids = [pid for pid, _ in state["processes"]]
    # node shells die with the harness's ptys, but the workers live on and keep namespaces alive
    namespaces = {_netns_inode(pid) for pid in pids} - {None}
    assert namespaces, "expected leftovers after SIGKILL"
    out = subprocess.run([sys.executable, "-m", "mn_harness.cli", "clean"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"cleaned run {state['run_id']}" in out.stdout
    for pid in pids:
        assert _gone(pid), f"pid {pid} survived clean"
    assert not (namespaces & _live_netns_inodes())
    assert not STATE_DIR.joinpath(f"{state['run_id']}.json").exists()


def test_dead_worker_fails_the_run_with_one_line_and_tears_down(tmp_path):
    import threading

    from mn_harness.jobs.launcher import JobError

    exp = Experiment.from_dict(small_demo(iterations=200), "dies")
    outcome: dict = {}

    def run():
        try:
            run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
        except JobError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    state, deadline = None, time.monotonic() + 60
    while time.monotonic() < deadline and state is None:
        for p in STATE_DIR.glob(f"{os.getpid()}-*.json"):
            data = json.loads(p.read_text())
            workers = [pid for pid, marker in data["processes"] if marker == "mn_harness.worker"]
            if len(workers) == 4:
                state = data
        time.sleep(0.1)
    assert state is not None
    time.sleep(1.0)
    victim = next(pid for pid, marker in state["processes"] if marker == "mn_harness.worker")
    os.kill(victim, signal.SIGKILL)
    thread.join(60)
    assert not thread.is_alive()
    message = str(outcome["error"])
    assert "died (exit -9)" in message and "\n" not in message
    for pid, _ in state["processes"]:
        assert _gone(pid), f"pid {pid} survived"
    summary = json.loads((Path(state["results_dir"]) / "summary.json").read_text())
    assert summary["status"].startswith("failed: ") and summary["jobs"]["job1"]["iterations"] > 0

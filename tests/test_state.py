"""State files and `mn-harness clean`: exact process identity (a decoy under a recorded pid, with
each marker in its command line, survives), a state file kept until its teardown really
finished, a malformed file named in one line, a failed unregister kept for the next clean."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mn_harness.state import (
    KINDS,
    CleanRemotePart,
    EgressProgramGone,
    KillProcess,
    RemoveDirectory,
    RemoveTunnel,
    RestoreAllowedCongestionControl,
    RunState,
    UnregisterCongestionControl,
    load_state_file,
    proc_cmdline,
    proc_start_time,
)
from tests.helpers import ROOT

MARKERS = ("mininet:h1", "mn_harness.worker", "simple_switch_grpc")


def decoy(*argv_tail: str, new_session: bool = False) -> subprocess.Popen:
    """A process that is none of ours, whose command line carries `argv_tail`."""
    code = "import time\nwhile True: time.sleep(1)"
    return subprocess.Popen([sys.executable, "-c", code, *argv_tail], start_new_session=new_session)


def wait_started(proc: subprocess.Popen) -> KillProcess:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        me = KillProcess.of(proc.pid)
        if me and me.cmdline[0] == sys.executable:
            return me
        time.sleep(0.02)
    raise AssertionError("decoy did not start")


def write_state(directory: Path, run_id: str, records: dict[str, list], harness: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{run_id}.json"
    undo = {name: [{"kind": r.kind, **{k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(r).items()}}
                   for r in rs] for name, rs in records.items()}
    path.write_text(json.dumps({"version": 2, "run_id": run_id, "results_dir": "/nowhere",
                                "harness": harness or {"pid": 1, "start_time": 0, "cmdline": ["gone"]},
                                "undo": undo}))
    return path


def clean_cli(state_dir: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "MN_HARNESS_STATE_DIR": str(state_dir)}
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "mn_harness.cli", "clean", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)


# -- identity ----------------------------------------------------------------------------------

def test_start_time_is_field_22_even_with_parentheses_in_the_name(tmp_path):
    odd = tmp_path / "a) b (c"
    shutil.copy("/bin/sleep", odd)
    proc = subprocess.Popen([str(odd), "30"])
    try:
        deadline = time.monotonic() + 5
        while proc_cmdline(proc.pid)[:1] != (str(odd),) and time.monotonic() < deadline:
            time.sleep(0.02)
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
        assert "(a) b (c)" in stat
        start = proc_start_time(proc.pid)
        assert start is not None and start == int(stat.rsplit(")", 1)[1].split()[19])
        assert start >= proc_start_time(os.getpid())  # started after us
    finally:
        proc.kill()
        proc.wait()


def test_identity_follows_exec_but_not_reuse():
    proc = decoy("mininet:h1")
    try:
        me = wait_started(proc)
        assert me.alive()
        assert not KillProcess(me.pid, me.start_time + 1, me.cmdline).alive()  # pid reused
        assert not KillProcess(me.pid, me.start_time, ("bash", "-is", "mininet:h1")).alive()
        # recorded before a wrapper exec'd the program: the command line may be a suffix
        assert KillProcess(me.pid, me.start_time, ("mnexec", "-da", "1", *me.cmdline)).alive()
    finally:
        proc.kill()
        proc.wait()
    assert not me.alive()


# -- the run's side ------------------------------------------------------------------------------

def test_a_childs_identity_is_taken_once_and_kept(tmp_path):
    """The session records a child again and again (each worker started, all READY): the identity
    is the first one taken, so a later record cannot pick up whoever holds the pid by then."""
    state = RunState("44-x", tmp_path / "results", directory=tmp_path)
    proc = decoy("mn_harness.worker")
    try:
        wait_started(proc)  # a child between fork and exec has no command line yet
        first = state.process(proc.pid, "w")
        assert first is not None and first.group and first.netns  # what mnexec -d gives a worker
        assert state.process(proc.pid, "w") is first
        capture = state.process(proc.pid, "tcpdump", netns=False)
        assert capture is not None and not capture.netns
    finally:
        proc.kill()
        proc.wait()
    assert state.process(proc.pid, "w") is first  # reaped: still the identity taken while it lived
    assert state.process(proc.pid, "other") is None  # gone: nothing new can be recorded under it
    state.finish()


def test_state_file_stays_until_every_section_is_done(tmp_path):
    state = RunState("42-x", tmp_path / "results", directory=tmp_path)
    assert state.path.is_file() and state.finish()  # nothing recorded: nothing to keep
    state = RunState("43-x", tmp_path / "results", directory=tmp_path)
    state.record("network", [KillProcess.of(os.getpid(), "me", group=True), None])
    state.record("cc", [UnregisterCongestionControl("mlreno_x", 7, "/usr/sbin/bpftool")])
    state.record("dataplane", [RemoveDirectory("/tmp/mn-harness-bmv2-x")])
    loaded = load_state_file(state.path)
    assert loaded.sections == state.sections and loaded.harness_alive()
    assert [type(r) for _, r in loaded.records()] == [KillProcess, RemoveDirectory, UnregisterCongestionControl]
    state.done("network")
    state.done("dataplane")
    assert not state.finish() and state.path.is_file()  # the CC is still registered
    assert list(load_state_file(state.path).sections) == ["cc"]
    state.done("cc")
    assert state.finish() and not state.path.exists()


def test_every_kind_round_trips(tmp_path):
    examples = [KillProcess(1, 2, ("a", "b"), "x", True, True), RemoveDirectory("/tmp/mn-harness-y"),
                UnregisterCongestionControl("mlreno_1", 3, ""), EgressProgramGone(7, "s1-eth1"),
                RestoreAllowedCongestionControl(("cubic", "mlreno_1")), RemoveTunnel("vxlan", 77),
                CleanRemotePart("b", "192.0.2.2", "lab", 2222, "/opt/venv/bin/python", "9-x")]
    assert {type(e) for e in examples} == set(KINDS.values())
    state = RunState("44-x", tmp_path, directory=tmp_path)
    state.record("all", examples)
    assert load_state_file(state.path).sections["all"] == examples


def test_a_directory_record_removes_only_what_the_harness_makes(tmp_path):
    mine = Path(tempfile_dir()) / f"mn-harness-bmv2-test-{os.getpid()}"
    mine.mkdir()
    (mine / "s1.sock").write_text("")
    other = tmp_path / "mn-harness-lookalike"
    other.mkdir()
    assert RemoveDirectory(str(mine)).undo(lambda *_: None) and not mine.exists()
    assert RemoveDirectory(str(other)).undo(lambda *_: None) and other.is_dir()
    assert RemoveDirectory("/etc").undo(lambda *_: None) and Path("/etc").is_dir()


def tempfile_dir() -> str:
    import tempfile

    return tempfile.gettempdir()


# -- clean ---------------------------------------------------------------------------------------

@pytest.mark.root
@pytest.mark.parametrize("marker", MARKERS)
def test_a_decoy_under_a_recorded_pid_survives_clean(state_dir, marker):
    """The pid was the run's; now a stranger holds it whose command line contains the marker
    (or the same start time but another command line): clean must leave it alone."""
    reused, lookalike = decoy(marker, "--not-ours"), decoy(marker)
    try:
        a, b = wait_started(reused), wait_started(lookalike)
        ours = {"mininet:h1": ("bash", "--norc", "--noediting", "-is", "mininet:h1"),
                "mn_harness.worker": (sys.executable, "-u", "-m", "mn_harness.worker", "/tmp/r/job1-r0.spec.json"),
                "simple_switch_grpc": ("simple_switch_grpc", "--device-id", "1", "-i", "1@s1-eth1")}[marker]
        write_state(state_dir, "1-gone", {"network": [
            KillProcess(a.pid, a.start_time - 5, a.cmdline, marker, group=True, netns=True),  # pid reused
            KillProcess(b.pid, b.start_time, ours, marker, group=True, netns=True),  # another program
        ]})
        out = clean_cli(state_dir)
        assert out.returncode == 0, out.stderr
        assert "cleaned run 1-gone" in out.stdout and "killed" not in out.stdout
        time.sleep(0.3)
        assert reused.poll() is None and lookalike.poll() is None, "clean killed a process it did not start"
        assert not (state_dir / "1-gone.json").exists()
    finally:
        for p in (reused, lookalike):
            p.kill()
            p.wait()


@pytest.mark.root
def test_clean_kills_an_exact_match_but_never_a_group_that_is_not_ours(state_dir):
    leader = subprocess.Popen(["sh", "-c", "sleep 300 & exec sleep 301"], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        member = None
        while member is None or member.cmdline != ("sleep", "300"):  # the child has exec'd sleep
            assert time.monotonic() < deadline
            time.sleep(0.02)
            children = Path(f"/proc/{leader.pid}/task/{leader.pid}/children").read_text().split()
            member = KillProcess.of(int(children[0])) if children else None
        assert os.getpgid(member.pid) == leader.pid != member.pid
        # recorded as a group leader of ours, but it leads no group: only it may die
        write_state(state_dir, "2-gone", {"jobs": [KillProcess(member.pid, member.start_time, member.cmdline,
                                                               "worker", group=True)]})
        out = clean_cli(state_dir)
        assert out.returncode == 0 and f"killed pid {member.pid}" in out.stdout, out.stdout + out.stderr
        assert not member.alive()
        time.sleep(0.3)
        assert leader.poll() is None, "the whole group was killed"
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()


@pytest.mark.root
def test_clean_skips_a_live_run_unless_forced(state_dir):
    victim = decoy("mininet:h2")
    try:
        me = wait_started(victim)
        harness = KillProcess.of(os.getpid())
        assert harness is not None
        write_state(state_dir, "3-live", {"network": [KillProcess(me.pid, me.start_time, me.cmdline, "h2")]},
                    harness={"pid": harness.pid, "start_time": harness.start_time, "cmdline": list(harness.cmdline)})
        out = clean_cli(state_dir)
        assert out.returncode == 0 and "still running" in out.stdout and victim.poll() is None
        out = clean_cli(state_dir, "--force")
        assert out.returncode == 0 and "cleaned run 3-live" in out.stdout, out.stderr
        victim.wait(10)
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.root
def test_a_malformed_state_file_is_one_line_and_the_others_are_cleaned(state_dir):
    victim = decoy("mininet:h3")
    try:
        me = wait_started(victim)
        write_state(state_dir, "4-good", {"network": [KillProcess(me.pid, me.start_time, me.cmdline, "h3")]})
        (state_dir / "5-bad.json").write_text('{"version": 2, "run_id": "5-bad", "undo": {"x": [1]}}')
        out = clean_cli(state_dir)
        assert out.returncode == 2, out.stderr
        assert len(out.stderr.splitlines()) == 1 and "5-bad.json" in out.stderr and "Traceback" not in out.stderr
        victim.wait(10)  # the good file was cleaned all the same
        assert not (state_dir / "4-good.json").exists() and (state_dir / "5-bad.json").exists()
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.root
def test_a_failed_unregister_is_kept_and_a_second_clean_finishes_it(state_dir, tmp_path):
    """A crashed run's BPF congestion control; the first clean cannot reach bpftool (the one that
    registered it is gone, none on PATH), keeps the record and says so in one line; the second,
    with bpftool back, unregisters it and the kernel frees its struct_ops map."""
    from mn_harness.cc.errors import CCUnavailable
    from mn_harness.cc.manager import CongestionControlManager, available_congestion_controls, struct_ops_maps
    from mn_harness.cc.spec import CCSpec

    manager = CongestionControlManager(log=lambda *_: None)
    try:
        manager.prepare([CCSpec("mltcp-reno", slope=3.5)])
    except CCUnavailable as exc:
        pytest.skip(str(exc))
    try:
        ((name, map_id, _),) = manager.registered()
        assert name in available_congestion_controls() and map_id in struct_ops_maps()
        write_state(state_dir, "6-crashed", {"cc": [UnregisterCongestionControl(name, map_id, "/gone/bpftool")]})
        first = clean_cli(state_dir, path="/usr/bin:/bin")
        assert first.returncode == 1, first.stderr
        assert len(first.stderr.splitlines()) == 1 and name in first.stderr and "clean" in first.stderr
        kept = load_state_file(state_dir / "6-crashed.json")
        assert kept.sections == {"cc": [UnregisterCongestionControl(name, map_id, "/gone/bpftool")]}
        assert name in available_congestion_controls()
        second = clean_cli(state_dir)
        assert second.returncode == 0, second.stderr
        assert f"unregistered congestion control {name}" in second.stdout
        assert not (state_dir / "6-crashed.json").exists()
        assert name not in available_congestion_controls() and map_id not in struct_ops_maps()
    finally:
        manager.close()


@pytest.mark.root
def test_a_state_file_of_the_old_format_is_refused_not_guessed(state_dir):
    victim = decoy("mininet:h1")
    try:
        state_dir.mkdir()
        (state_dir / "7-old.json").write_text(json.dumps({"run_id": "7-old", "harness_pid": 1,
                                                         "processes": [[victim.pid, "mininet:h1"]]}))
        out = clean_cli(state_dir)
        assert out.returncode == 2 and "7-old.json" in out.stderr and len(out.stderr.splitlines()) == 1
        time.sleep(0.3)
        assert victim.poll() is None
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()

"""Test helpers: the shipped demo shrunk for real runs, hand-made results folders, the bench scripts
as modules."""

import importlib
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent  # the checkout under test


def bench_module(name: str):
    """bench/<name>.py imported as a module (bench/ is scripts, not a package)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "bench"))


TOPOLOGIES = ROOT / "topologies"


def small_demo(iterations: int = 4, bytes_per_iteration: str = "2MB", compute: str = "60ms") -> dict:
    raw = yaml.safe_load((TOPOLOGIES / "dumbbell-2jobs.yaml").read_text())
    for job in raw["jobs"]:
        job.update(bytes_per_iteration=bytes_per_iteration, compute=compute, iterations=iterations)
    raw["run"]["dataplane"] = "linux"
    return raw


def two_switch_line(**run) -> dict:
    """h1 - s1 - s2 - h2 at 1 Gbit/s, one job across it, Linux data plane; `run` options added."""
    return {"hosts": ["h1", "h2"], "switches": ["s1", "s2"], "link_defaults": {"bw": "1Gbit"},
            "links": [{"endpoints": ["h1", "s1"]}, {"endpoints": ["s1", "s2"]}, {"endpoints": ["s2", "h2"]}],
            "jobs": [{"name": "j", "workers": ["h1", "h2"], "bytes_per_iteration": "1MB",
                      "compute": "10ms", "iterations": 1}],
            "run": {"dataplane": "linux", **run}}


# iterations.csv as runs from before cpu_s wrote it (readers must still take those folders)
ITER_HEADER = "job,rank,iteration,t_start,t_comm_start,t_comm_end,iter_time,comm_time,bytes_sent"


def write_folder(root, compute=0.6, comm=0.4, n_iter=4, offset_b=0.0, queue=True, extra=None):
    """Two jobs (A: 2 ranks, B: 1 rank) on link s1-s2, identical periods; B offset by offset_b.

    Each rank sends 1000 bytes per 10 ms bin during its communication phase."""
    root.mkdir(parents=True, exist_ok=True)
    period = compute + comm
    it_lines = [ITER_HEADER]
    tp_lines = ["job,rank,t,bin_s,bytes"]
    for job, ranks, off in (("A", 2, 0.0), ("B", 1, offset_b)):
        for i in range(n_iter):
            t0 = off + i * period
            for r in range(ranks):
                c0, c1 = t0 + compute, t0 + period
                it_lines.append(f"{job},{r},{i},{t0},{c0},{c1},{period},{comm},4000")
                for k in range(round(comm / 0.01)):
                    tp_lines.append(f"{job},{r},{c0 + k * 0.01:.6f},0.01,1000")
    (root / "iterations.csv").write_text("\n".join(it_lines) + "\n")
    (root / "throughput.csv").write_text("\n".join(tp_lines) + "\n")
    if queue:
        q = ["t,switch,port,depth,marks,bytes_A,bytes_B"]
        q += [f"{k * 0.05:.2f},s1,2,{k % 7},{k % 2},100,200" for k in range(40)]
        (root / "queue.csv").write_text("\n".join(q) + "\n")
    summary = {
        "experiment": "demo",
        "cc": {"A": "reno", "B": "reno"},
        "jobs": {
            "A": {
                "workers": ["h1", "h2"],
                "iterations": n_iter,
                "bytes_per_iteration": 4000,
                "compute_s": compute,
                "ideal_iter_s": 0.8,
                "bottleneck_bps": 1e8,
            },
            "B": {
                "workers": ["h3"],
                "iterations": n_iter,
                "bytes_per_iteration": 4000,
                "compute_s": compute,
                "ideal_iter_s": 0.8,
                "bottleneck_bps": 1e8,
            },
        },
        "link_jobs": {"s1-s2": ["A", "B"]},
        "status": "completed",
        **(extra or {}),
    }
    (root / "summary.json").write_text(json.dumps(summary))
    return root


# -- real runs: what a run created (its state file) and that none of it is left ---------------

def load_states(directory: Path, prefix: str) -> list:
    """The state files `<prefix>-*.json` in `directory` (a run's id starts with its pid)."""
    from mn_harness.errors import ConfigError
    from mn_harness.state import load_state_file

    out = []
    for path in directory.glob(f"{prefix}-*.json"):
        try:
            out.append(load_state_file(path))
        except ConfigError:  # being replaced right now
            continue
    return out


def wait_for_state(directory: Path, prefix: str, ready, timeout: float = 90, proc=None):
    """The first state file of run `prefix` for which `ready(state)` holds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for state in load_states(directory, prefix):
            if ready(state):
                return state
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run ended first: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.1)
    raise AssertionError(f"no ready state file for run {prefix} in {directory}")


def workers_of(state) -> list:
    from mn_harness.jobs.launcher import WORKER_MODULE

    return [p for p in state.processes() if p.label == WORKER_MODULE]


def rows_written(state, job: str = "job1", rank: int = 0) -> int:
    path = Path(state.results_dir) / "raw" / f"{job}-r{rank}.iterations.jsonl"
    try:
        return len(path.read_text().splitlines())
    except OSError:
        return 0


def netns_inode(pid: int) -> int | None:
    import os

    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def live_netns_inodes() -> set[int]:
    import os

    inodes = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                inodes.add(os.stat(f"/proc/{entry}/ns/net").st_ino)
            except OSError:
                pass
    return inodes


def root_veths() -> set[str]:
    import subprocess

    out = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


def struct_ops_ids() -> set[int]:
    from mn_harness.cc.manager import struct_ops_maps

    return set(struct_ops_maps())


def assert_nothing_left(state, namespaces: set[int], veths_before: set[str], timeout: float = 20) -> None:
    """No process the run recorded is alive, none of its network namespaces exists, no veth
    appeared in the root namespace, none of its congestion controls is registered, none of
    their struct_ops maps is held by the kernel and none of its egress programs is loaded
    (namespaces, maps and programs are freed asynchronously: waited for up to `timeout`)."""
    import time

    from mn_harness.cc.manager import available_congestion_controls
    from mn_harness.state import EgressProgramGone, UnregisterCongestionControl

    ccs = [r for records in state.sections.values() for r in records
           if isinstance(r, UnregisterCongestionControl)]
    programs = [r for records in state.sections.values() for r in records if isinstance(r, EgressProgramGone)]
    deadline = time.monotonic() + timeout
    while True:
        problems = [f"{p.describe()} alive" for p in state.processes() if p.alive()]
        if namespaces & live_netns_inodes():
            problems.append("a network namespace of the run exists")
        if root_veths() - veths_before:
            problems.append(f"new veths {sorted(root_veths() - veths_before)}")
        problems += [f"{cc.name} registered" for cc in ccs if cc.name in available_congestion_controls()]
        problems += [f"struct_ops map {cc.map_id} ({cc.name}) held" for cc in ccs
                     if cc.map_id and cc.map_id in struct_ops_ids()]
        problems += [f"{p.describe()} loaded" for p in programs if p.loaded()]
        if not problems:
            return
        if time.monotonic() > deadline:
            raise AssertionError("; ".join(problems))
        time.sleep(0.2)


def run_schedule(schedule, state):
    """Play a collective's schedule on block contents: `state[rank][chunk]` is the set of ranks
    whose contribution the block holds. Step by step, every send carries the sender's block as it
    was before the step; the receiver adds it (reduce) or stores it. Returns the final state and
    asserts that nobody sends a block it does not have."""
    state = [{c: set(v) for c, v in blocks.items()} for blocks in state]
    for step in range(schedule.steps):
        moves = []
        for t in schedule.at_step(step):
            held = state[t.src].get(t.chunk)
            assert held, f"step {step}: rank {t.src} sends block {t.chunk} it does not hold ({t})"
            moves.append((t, set(held)))
        for t, held in moves:
            if t.reduce:
                state[t.dst][t.chunk] = state[t.dst].get(t.chunk, set()) | held
            else:
                state[t.dst][t.chunk] = held
    return state

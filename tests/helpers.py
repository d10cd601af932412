"""Test helpers: the shipped demo shrunk for real runs, and hand-made results folders."""

import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent  # the checkout under test
TOPOLOGIES = ROOT / "topologies"


def small_demo(iterations: int = 4, bytes_per_iteration: str = "2MB", compute: str = "60ms") -> dict:
    raw = yaml.safe_load((TOPOLOGIES / "dumbbell-2jobs.yaml").read_text())
    for job in raw["jobs"]:
        job.update(bytes_per_iteration=bytes_per_iteration, compute=compute, iterations=iterations)
    raw["run"]["dataplane"] = "linux"
    return raw


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

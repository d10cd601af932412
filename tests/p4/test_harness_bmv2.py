"""The harness on `dataplane: bmv2`: the demo dumbbell scaled to BMv2 speeds (50 Mbit/s links,
1.25 MB per iteration, so a job alone communicates ~200 ms; the link-rate check at a fifth of
both), a few iterations per run.

Checks: every iteration row, queue.csv sampled at >= 50/s with the bottleneck queue building,
ECN marks counted for both jobs, data at the link rate on the bottleneck (the reverse
direction's ACKs have their own queue); DCTCP keeps the bottleneck queue near the marking
threshold while CUBIC without marking (threshold above the queue size) fills it; nothing left
behind."""

from __future__ import annotations

import csv
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mn_harness.config import Experiment
from mn_harness.dataplane.bmv2_setup import resolve_program
from mn_harness.p4.compile import compile_p4
from mn_harness.runner import run_experiment
from mn_harness.units import parse_bandwidth, parse_size

pytestmark = [pytest.mark.bmv2, pytest.mark.root]
BOTTLENECK = ("s1", "3")  # s1's port towards s2 (ports in link order: h1=1, h2=2, s2=3)


def demo_raw(topologies: Path, cc="cubic", threshold=20, iterations=5, slower: int = 1) -> dict:
    """The shipped BMv2 demo; `slower` divides its link rates and bytes per iteration alike
    (the same phase times), for checks that need BMv2 far from its CPU limit."""
    raw = yaml.safe_load((topologies / "dumbbell-2jobs-bmv2.yaml").read_text())
    raw["switches"] = [{"name": s, "ecn_threshold": threshold} for s in ("s1", "s2")]
    for job in raw["jobs"]:
        job.update(iterations=iterations, cc=cc)
        if slower > 1:
            job["bytes_per_iteration"] = parse_size(job["bytes_per_iteration"], "bytes_per_iteration") // slower
    if slower > 1:
        raw["link_defaults"]["bw"] = parse_bandwidth(raw["link_defaults"]["bw"], "bw") / slower
    raw["run"]["dataplane"] = "bmv2"
    return raw


def demo(topologies: Path, cc="cubic", threshold=20, iterations=5, slower: int = 1) -> Experiment:
    return Experiment.from_dict(demo_raw(topologies, cc, threshold, iterations, slower), "bmv2-demo")


def run(exp: Experiment, tmp_path: Path) -> tuple[Path, dict, list[dict]]:
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    summary = json.loads((results / "summary.json").read_text())
    with open(results / "queue.csv") as fh:
        rows = list(csv.DictReader(fh))
    return results, summary, rows


def no_leftovers(results: Path) -> None:
    ps = subprocess.run(["pgrep", "-af", "simple_switch_grpc"], capture_output=True, text=True)
    assert "mn-harness-bmv2-" not in ps.stdout, ps.stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "s1-eth" not in links and "h1-eth" not in links  # nothing in the root namespace


def test_demo_runs_on_bmv2_with_queue_series_and_marks(topologies, tmp_path):
    # At 10 Mbit/s (bytes scaled alike): the two switches, four workers and the telemetry share 2
    # cores whose speed varies from hour to hour on these VMs. In a slow hour (BMv2 forwarding
    # 161 Mbit/s unshaped, ~300 on a good day) the demo's 50 Mbit/s bottleneck was busy at only
    # 0.52-0.59 of its rate (5 runs) and 25 Mbit/s at 0.78-0.79 (2), below or near what the ACK
    # bug below gave; 10 Mbit/s reached 0.96-0.98 (2). The bug's 0.65-0.68 is a share of the
    # queue's slots, the same at any rate.
    exp = demo(topologies, slower=5)
    results, summary, rows = run(exp, tmp_path)
    assert summary["status"] == "completed" and summary["dataplane"] == "bmv2"
    with open(results / "iterations.csv") as fh:
        keys = {(r["job"], int(r["rank"]), int(r["iteration"])) for r in csv.DictReader(fh)}
    assert keys == {(j.name, r, i) for j in exp.jobs for r in range(j.n_workers) for i in range(j.iterations)}

    assert set(rows[0]) >= {"t", "switch", "port", "depth", "marks", "bytes_job1", "bytes_job2"}
    times = sorted({float(r["t"]) for r in rows})
    rate = (len(times) - 1) / (times[-1] - times[0])
    bottleneck = [r for r in rows if (r["switch"], r["port"]) == BOTTLENECK]
    print(f"\nsamples/s {rate:.0f}; bottleneck {summary['queue']['s1:3']}; "
          f"marks {summary['ecn_marks']}")
    assert rate >= 50 and summary["telemetry"]["samples_per_s"] >= 50
    assert max(float(r["depth"]) for r in bottleneck) > 0
    assert summary["queue"]["s1:3"]["link"] == "s1->s2"
    assert summary["queue"]["s1:3"]["max_depth"] > 0
    assert summary["ecn_marks"]["job1"] > 0 and summary["ecn_marks"]["job2"] > 0
    # per-sample marks on the bottleneck add up to the summary's count for that port
    assert sum(int(r["marks"]) for r in bottleneck) == summary["queue"]["s1:3"]["marks"]
    assert sum(int(r["bytes_job1"]) for r in bottleneck) > 0
    assert sum(int(r["bytes_job2"]) for r in bottleneck) > 0
    # The bottleneck carries data at the link rate: the busy 200-ms windows (p90) of job bytes
    # out of s1->s2 reached ~0.99 of 50 Mbit/s on a good day. With the reverse direction's ACKs paced like full
    # frames in the same queue (one queue per port) they reached 0.65-0.68 (iterations ~1.8x the
    # ideal 0.5 s instead of ~1.5x; the jobs overlap on BMv2, which costs 1.4x at full rate).
    link_bps = summary["link_bps"]["s1->s2"]
    window = {}
    for r in bottleneck:
        w = int(float(r["t"]) / 0.2)
        window[w] = window.get(w, 0) + int(r["bytes_job1"]) + int(r["bytes_job2"])
    rates = sorted(b * 8 / 0.2 / link_bps for b in window.values())
    p90 = rates[int(0.9 * len(rates))]
    slowdown = {job: round(s["slowdown_mean"], 2) for job, s in summary["jobs"].items()}
    print(f"bottleneck p90 {p90:.2f} of {link_bps / 1e6:.0f} Mbit/s; iteration time vs ideal {slowdown}")
    assert p90 >= 0.8, f"bottleneck busy rate only {p90:.2f} of the link"
    no_leftovers(results)


def test_dctcp_keeps_the_queue_near_the_threshold_while_cubic_fills_it(topologies, tmp_path):
    _, dctcp, _ = run(demo(topologies, cc="dctcp", threshold=20, iterations=4), tmp_path / "dctcp")
    _, cubic, _ = run(demo(topologies, cc="cubic", threshold=1000, iterations=4), tmp_path / "cubic")
    d, c = dctcp["queue"]["s1:3"], cubic["queue"]["s1:3"]
    print(f"\nbottleneck s1->s2: dctcp (K=20) mean {d['mean_depth']} max {d['max_depth']} "
          f"marks {d['marks']}; cubic (no marking) mean {c['mean_depth']} max {c['max_depth']}")
    assert dctcp["status"] == cubic["status"] == "completed"
    assert c["marks"] == 0 and d["marks"] > 0
    assert c["max_depth"] >= 80                 # the 100-packet queue fills
    assert d["mean_depth"] <= 30                # near K = 20
    assert d["mean_depth"] < 0.75 * c["mean_depth"]


def switch_run_dirs(parents: set[int]) -> set[str]:
    """The per-run directories (P4Runtime sockets) of the BMv2 switches running now below these
    processes (the harness starts them through `mnexec -a`). `-ww`: without it ps cuts the
    command line at the terminal width even into a pipe, before the socket path."""
    rows = [line.split(None, 2) for line in subprocess.run(
        ["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True).stdout.splitlines()]
    ppid = {int(r[0]): int(r[1]) for r in rows if len(r) >= 2}
    dirs = set()
    for r in rows:
        if len(r) < 3 or "simple_switch_grpc" not in r[2]:
            continue
        pid, seen = int(r[0]), 0
        while pid > 1 and pid not in parents and seen < 20:
            pid, seen = ppid.get(pid, 0), seen + 1
        m = re.search(r"unix:(/\S*mn-harness-bmv2-[^/\s]+)/", r[2])
        if pid in parents and m:
            dirs.add(m.group(1))
    return dirs


def test_two_bmv2_runs_started_together_both_complete(topologies, tmp_path):
    """Two `mn-harness run`s of the BMv2 demo at once, as two users would start them: the same
    switch names, device ids and Thrift port in both. Each run's switches live in its own
    namespaces, with their P4Runtime sockets (and a nanomsg build's notifications socket) in the
    run's own directory, so both complete; their switches were up at the same time."""
    # A cold compile cache (a fresh clone, or a new toolchain: the compiler is part of the cache
    # key) would make both runs compile at once and start their switches tens of seconds apart,
    # on a loaded 2-core machine after the first run has already finished: compile it first.
    compile_p4(resolve_program(None))
    iterations = 6
    spec = tmp_path / "demo.yaml"
    spec.write_text(yaml.safe_dump(demo_raw(topologies, iterations=iterations)))
    logs = [tmp_path / f"run{i}.log" for i in (1, 2)]
    procs = []
    for i, log in enumerate(logs, 1):
        with open(log, "w") as out:  # a file, not a pipe nobody reads while waiting
            procs.append(subprocess.Popen([sys.executable, "-m", "mn_harness.cli", "run", str(spec),
                                           "--no-plots", "--out", str(tmp_path / f"run{i}")],
                                          stdout=out, stderr=subprocess.STDOUT))
    together = 0
    deadline = time.monotonic() + 300
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        together = max(together, len(switch_run_dirs({p.pid for p in procs})))
        time.sleep(0.2)
    for p in procs:  # past the deadline: SIGINT tears a run down cleanly
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        p.wait()
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log.read_text()[-3000:]
    assert together == 2, "the two runs' switches were never up at the same time"
    for i in (1, 2):
        results = next((tmp_path / f"run{i}").glob("*/summary.json")).parent
        summary = json.loads((results / "summary.json").read_text())
        assert summary["status"] == "completed" and summary["dataplane"] == "bmv2"
        with open(results / "iterations.csv") as fh:
            assert len(list(csv.DictReader(fh))) == 2 * 2 * iterations  # jobs x ranks x iterations
        assert summary["queue"]["s1:3"]["packets"] > 0
        no_leftovers(results)

#!/usr/bin/env python3
"""Where a run's CPU goes, per component and per emulated Gbit/s (bench/perf_profile.py says how
samples are classified).

Each run is recorded whole with `perf record -a -g` (cpu-clock, 1 ms per sample per core, times
on CLOCK_MONOTONIC); the profile keeps the samples from --skip seconds after the jobs' common
start to the end of the first worker's last iteration, so every job is running throughout. The
emulated traffic in the same window is the jobs' goodput: the bytes the workers' peers
acknowledged (throughput.csv bins inside the window). Per component it prints the cores it kept
busy on average, its share of the busy time, the cores it needs per emulated Gbit/s of goodput
and the share of it that ran as a softirq; then the same per context (whose thread the time
was charged to); mean ± 95% CI over --reps runs (round robin over the scenarios).

Scenarios:
  demo        make demo's: four 2-worker DCTCP jobs started together on a 500 Mbit/s bottleneck
              with ECN (topologies/dumbbell-4jobs-ecn.yaml)
  solo-1g     one 2-worker job alone at 1 Gbit/s, back to back (25 MB per iteration, 1 ms compute)
  jobs-N-R    N 2-worker jobs at R each (e.g. jobs-8-100Mbit), bench/scale.py's concurrent-jobs run

The machine is shared: samples of processes that are not this run's are counted apart ("other
processes"), and the VM's steal in the window is printed (cpu.csv). The bench takes the
measurement lock itself in chunks (do not wrap it in flock on that file). Ends with one
key=value line.

Usage: sudo .venv/bin/python bench/profile.py [--scenarios demo,solo-1g] [--reps 3] [--skip 2]
           [--iterations N] [--set run.gso_max_segs=16] [--json FILE]"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# bench/common.py: the package importable
from common import DEFAULT_LOCK, ChunkedLock, mean_ci, topology, with_overrides
from perf_profile import IDLE, PerfRecorder, Profile, Roles, profile
from scale import dumbbell

from mn_harness import collectives
from mn_harness.config import Experiment
from mn_harness.jobs.specs import TRANSPORT_ENV
from mn_harness.results.loaders import load_summary
from mn_harness.runner import run_experiment
from mn_harness.units import parse_bandwidth


def demo(iterations: int | None) -> dict:
    raw = topology("dumbbell-4jobs-ecn")
    raw["experiment"] = "profile-demo"
    for job in raw["jobs"]:
        job["iterations"] = iterations or 14
    return raw


def jobs_at(n: int, rate: str, iterations: int | None, per_iteration_s: float = 0.2) -> dict:
    """bench/scale.py's run: n jobs at `rate` each, 200 ms of data per iteration, 1 ms compute."""
    bps = parse_bandwidth(rate, "rate")
    raw = dumbbell(2 * n, rate, core=f"{int(bps * n)}bit", jobs=n, bytes_per_iteration=int(bps / 8 * per_iteration_s),
                   iterations=iterations or 50)
    raw["experiment"] = f"profile-jobs-{n}-{rate}"
    return raw


def scenario(name: str, iterations: int | None) -> dict:
    if name == "demo":
        return demo(iterations)
    if name == "solo-1g":
        raw = jobs_at(1, "1Gbit", iterations)
        raw["experiment"] = "profile-solo-1g"
        return raw
    if name.startswith("jobs-"):
        _, n, rate = name.split("-", 2)
        return jobs_at(int(n), rate, iterations)
    raise SystemExit(f"unknown scenario {name!r} (demo, solo-1g, jobs-N-RATE)")


def _rows(path: Path) -> list[dict]:
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def window(results: Path, skip: float) -> tuple[float, float]:
    """(start, end) in seconds since t0: from `skip` to the end of the first worker's last iteration."""
    last: dict[tuple[str, str], float] = {}
    for r in _rows(results / "iterations.csv"):
        key = (r["job"], r["rank"])
        last[key] = max(last.get(key, 0.0), float(r["t_start"]) + float(r["iter_time"]))
    end = min(last.values(), default=0.0)
    if end <= skip:
        raise RuntimeError(f"the jobs ended {end:.1f}s after their start, before the window's start ({skip}s)")
    return skip, end


def goodput_gbps(results: Path, start: float, end: float) -> float:
    """Bytes acknowledged to every worker's sockets in bins inside [start, end), in Gbit/s."""
    total = sum(int(r["bytes"]) for r in _rows(results / "throughput.csv")
                if float(r["t"]) >= start and float(r["t"]) + float(r["bin_s"]) <= end)
    return total * 8 / (end - start) / 1e9


def steal_share(results: Path, start: float, end: float) -> float | None:
    rows = [r for r in _rows(results / "cpu.csv") if start <= float(r["t"]) <= end and r.get("steal")]
    return statistics.mean(float(r["steal"]) for r in rows) if rows else None


def run_once(raw: dict, out: Path, lock: ChunkedLock, skip: float) -> dict:
    """One run recorded whole; its profile in the window, the goodput and the verdict."""
    roles = Roles()
    t0: list[float] = []
    perf_path = Path(tempfile.mkdtemp(prefix="mn-harness-perf-")) / "perf.data"
    recorder = PerfRecorder(perf_path)

    def network_up(session) -> None:
        recorder.start()

    def jobs_started(session) -> None:
        t0.append(session.t0)
        for w in session.launcher.workers:
            torch = collectives.get(w.spec.collective).engine == collectives.TORCH
            roles.workers[w.proc.pid] = "torch" if torch else "synthetic"
        roles.note_harness_threads()
        roles.note_descendants()

    def iteration(session, job, i) -> None:
        roles.note_harness_threads()

    with lock.run():
        try:
            results = run_experiment(Experiment.from_dict(copy.deepcopy(raw)), out_root=out, log=lambda *_: None,
                                     on_network_up=network_up, on_jobs_started=jobs_started, on_iteration=iteration)
        finally:
            recorder.stop()
    start, end = window(results, skip)
    prof = profile(recorder.samples(), roles, t0[0] + start, t0[0] + end)
    perf_path.unlink(missing_ok=True)
    perf_path.parent.rmdir()
    f = load_summary(results).fidelity
    return {"profile": prof, "gbps": goodput_gbps(results, start, end), "steal": steal_share(results, start, end),
            "window_s": end - start, "verdict": "unchecked" if f is None else f.verdict,
            "reason": None if f is None else f.reason}


def table(title: str, runs: list[dict], key: str, top: int) -> list[str]:
    """Rows of one table: per name, cores ± CI, share of the busy time, cores per Gbit/s, softirq share."""
    names: set[str] = set()
    for r in runs:
        names |= set(getattr(r["profile"], key))
    def cores(r: dict, name: str) -> float:
        p: Profile = r["profile"]
        return p.cores_of(getattr(p, key)[name])
    order = sorted(names, key=lambda n: -statistics.mean(cores(r, n) for r in runs))
    busy = [r["profile"].cores_of(r["profile"].busy) for r in runs]
    lines = [f"{title:<58} {'cores':>15} {'of busy':>8} {'cores per Gbit/s':>18} {'softirq':>8}"]
    for name in order[:top]:
        if name == IDLE:
            continue
        c = [cores(r, name) for r in runs]
        share = statistics.mean(x / b for x, b in zip(c, busy, strict=True) if b)
        per_gbit = [x / r["gbps"] for x, r in zip(c, runs, strict=True) if r["gbps"]]
        soft = ""
        if key == "components":
            n = sum(r["profile"].components[name] for r in runs)
            soft = f"{sum(r['profile'].softirq[name] for r in runs) / n:.0%}" if n else ""
        lines.append(f"  {name[:56]:<56} {mean_ci(c, 3):>15} {share:>8.1%} {mean_ci(per_gbit, 3):>18} {soft:>8}")
    rest = [sum(cores(r, n) for n in order[top:] if n != IDLE) for r in runs]
    if any(rest):
        lines.append(f"  {'(the rest)':<56} {mean_ci(rest, 3):>15}")
    return lines


def report(name: str, runs: list[dict], top: int) -> list[str]:
    busy = [r["profile"].cores_of(r["profile"].busy) for r in runs]
    other = [sum(r["profile"].cores_of(n) for c, n in r["profile"].contexts.items() if "not this run" in c)
             for r in runs]
    gbps = [r["gbps"] for r in runs]
    steal = [r["steal"] for r in runs if r["steal"] is not None]
    verdicts = [r["verdict"] + (f" ({r['reason']})" if r["reason"] else "") for r in runs]
    out = [f"\n[{name}] {len(runs)} runs, windows of {mean_ci([r['window_s'] for r in runs], 1)} s; "
           f"emulated goodput {mean_ci(gbps, 3)} Gbit/s; busy {mean_ci(busy, 3)} of {runs[0]['profile'].cores} cores "
           f"({mean_ci([b / g for b, g in zip(busy, gbps, strict=True) if g], 3)} cores per Gbit/s); "
           f"other processes {mean_ci(other, 3)} cores; steal {mean_ci(steal, 3)}",
           "  verdicts: " + "; ".join(verdicts)]
    out += table("component", runs, "components", top)
    out += table("context (whose thread the time was charged to)", runs, "contexts", top)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default="demo,solo-1g")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=None, help="per run (default: per scenario)")
    ap.add_argument("--skip", type=float, default=2.0, help="seconds after the start left out of the window")
    ap.add_argument("--set", action="append", default=[],
                    help="PATH=VALUE override of every scenario (e.g. run.gso_max_segs=16)")
    ap.add_argument("--top", type=int, default=24, help="rows per table")
    ap.add_argument("--lock", default=DEFAULT_LOCK, help="the measurement lock ('' for none)")
    ap.add_argument("--chunk-min", type=float, default=10.0, help="hold the lock at most this long at a time")
    ap.add_argument("--json", default=None, help="write the sample counts here")
    args = ap.parse_args()
    names = [n for n in args.scenarios.split(",") if n]
    raws = {n: with_overrides(scenario(n, args.iterations), args.set) for n in names}
    lock = ChunkedLock(args.lock, args.chunk_min * 60)
    out = Path(tempfile.mkdtemp(prefix="mn-harness-profile-"))
    started = time.monotonic()
    runs: dict[str, list[dict]] = {n: [] for n in names}
    try:
        for rep in range(args.reps):
            for n in names:  # round robin: a slow hour of the machine hits every scenario alike
                r = run_once(raws[n], out / n, lock, args.skip)
                runs[n].append(r)
                p = r["profile"]
                print(f"  {n} #{rep}: {r['gbps']:.3f} Gbit/s, busy {p.cores_of(p.busy):.2f} cores, {r['verdict']}",
                      flush=True)
    finally:
        lock.release()
    print(f"\nmachine: kernel {os.uname().release}, {os.cpu_count()} cores; overrides: {args.set or 'none'}; "
          f"transport: {os.environ.get(TRANSPORT_ENV) or 'the defaults'} ({TRANSPORT_ENV}); mean ± 95% CI over runs")
    keys = []
    for n, rs in runs.items():
        print("\n".join(report(n, rs, args.top)))
        busy = statistics.mean(r["profile"].cores_of(r["profile"].busy) / r["gbps"] for r in rs if r["gbps"])
        keys.append(f"{n}_cores_per_gbps={busy:.3f}")
        keys.append(f"{n}_gbps={statistics.mean(r['gbps'] for r in rs):.3f}")
    print(f"\ntook {(time.monotonic() - started) / 60:.1f} min; runs in {out}")
    print(" ".join(keys))
    if args.json:
        kept = {n: [{"gbps": r["gbps"], "steal": r["steal"], "window_s": r["window_s"], "verdict": r["verdict"],
                     "components": dict(r["profile"].components), "contexts": dict(r["profile"].contexts),
                     "softirq": dict(r["profile"].softirq)} for r in rs] for n, rs in runs.items()}
        Path(args.json).write_text(json.dumps(kept, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

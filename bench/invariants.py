#!/usr/bin/env python3
"""Is the emulation faithful, and what do its monitors cost? (docs/fidelity.md)

1. The invariants on scenarios: each run's summary.json `fidelity` (mn_harness.fidelity):
   the bottleneck's link invariant (share of backlogged dequeue gaps within ±10% of their
   serialisation time, late, early, p99 excess, achieved rate), the host (share of intervals
   with every core saturated, steal), the workers (compute overshoot and send lag p99) and the
   verdict, with the jobs' mean slowdown beside them; mean ± 95% CI over --reps runs.
   Scenarios:
     demo       make demo's: four 2-worker DCTCP jobs started together, 500 Mbit/s, ECN at 10
                packets (topologies/dumbbell-4jobs-ecn.yaml)
     demo-100m  the same with run.emulation.time_scale 5: the emulation runs five times slower
                (every link at 100 Mbit/s, compute x5, the same bytes and queues) and the results
                are the demo's times (they should be the demo's if the demo's emulation was good)
     demo-20m   the same with time_scale 25 (links at 20 Mbit/s): the 100 Mbit/s twin dilated 5x
     solo-1g    one 2-worker job alone at 1 Gbit/s, back to back (1 ms compute)
   --sysctl KEY=VALUE,... sets kernel sysctls (e.g. net.core.dev_weight=1) for the runs and
   restores them after: the candidates for making the emulation faithful, measured here.
2. The monitors' cost (--cost-reps pairs, skipped with 0): solo-1g with run.fidelity on and
   off, alternated: the goodput ratio on/off; and, with kernel.bpf_stats_enabled on for the
   runs, the kernel program's and the harness's own time as a share of one core.

Warm-up iterations are left out of the slowdowns (run.warmup). The bench takes the measurement
lock itself in chunks (do not wrap it in flock on that file). Ends with one key=value line.

Usage: sudo .venv/bin/python bench/invariants.py [--scenarios demo,demo-100m,demo-20m] [--reps 3]
           [--cost-reps 4] [--sysctl KEY=V,...] [--iterations N] [--json]"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from common import DEFAULT_LOCK, ChunkedLock, mean_ci, topology

import mn_harness as mh
from mn_harness.results.schema import RunSummary

BOTTLENECK = "s1->s2"


def demo(time_scale: int = 1, iterations: int = 20) -> dict:
    """make demo's experiment with `iterations`, run `time_scale` times slower (run.emulation)."""
    raw = topology("dumbbell-4jobs-ecn")
    raw["experiment"] = "invariants-demo" if time_scale == 1 else f"invariants-demo-x{time_scale}"
    raw["run"].setdefault("emulation", {})["time_scale"] = time_scale
    for job in raw["jobs"]:
        job["iterations"] = iterations
    return raw


def solo_1g(iterations: int = 25) -> dict:
    return {"experiment": "invariants-solo-1g", "hosts": ["h1", "h2"], "switches": ["s1", "s2"],
            "link_defaults": {"bw": "1Gbit", "queue": 100},
            "links": [{"endpoints": ["h1", "s1"]}, {"endpoints": ["s1", "s2"]}, {"endpoints": ["s2", "h2"]}],
            "jobs": [{"name": "j", "workers": ["h1", "h2"], "bytes_per_iteration": "25MB", "compute": "1ms",
                      "iterations": iterations, "cc": "cubic"}],
            "run": {"dataplane": "linux"}}


SCENARIOS = {"demo": lambda n: demo(1, n or 20), "demo-100m": lambda n: demo(5, n or 10),
             "demo-20m": lambda n: demo(25, n or 6),
             "solo-1g": lambda n: solo_1g(n or 25)}


@contextlib.contextmanager
def sysctls(values: dict[str, str]) -> Iterator[None]:
    """Set kernel sysctls for the block, restore what was there after."""
    before = {k: subprocess.run(["sysctl", "-n", k], capture_output=True, text=True, check=True).stdout.strip()
              for k in values}
    try:
        for k, v in values.items():
            subprocess.run(["sysctl", "-qw", f"{k}={v}"], check=True)
        yield
    finally:
        for k, v in before.items():
            subprocess.run(["sysctl", "-qw", f"{k}={v}"], check=False)


def run_once(raw: dict, out: Path, lock: ChunkedLock) -> RunSummary:
    with lock.run():
        return mh.run(mh.ExperimentBuilder.from_raw(copy.deepcopy(raw)), out=out, quiet=True, report=False).summary


def row(summary: RunSummary) -> dict:
    """What one run says: the bottleneck's link invariant, host, workers, verdict, slowdown."""
    f = summary.fidelity
    assert f is not None
    link = f.links.get(BOTTLENECK)
    judged = [x for x in f.links.values() if (x.gaps or 0) >= f.thresholds.get("link_min_gaps", 500)]
    worst = min((x.within_share for x in judged if x.within_share is not None), default=None)
    slow = [j.slowdown_mean for j in summary.jobs.values() if j.slowdown_mean is not None]
    return {"verdict": f.verdict, "reason": f.reason,
            "within": link.within_share if link else None, "late": link.late_share if link else None,
            "early": link.early_share if link else None, "p99_excess_us": link.p99_excess_us if link else None,
            "rate": link.rate_ratio if link else None, "gaps": link.gaps if link else None,
            "worst_within": worst,
            "saturated": f.host.all_saturated_share if f.host else None,
            "steal": f.host.steal_mean if f.host else None,
            "overshoot_p99_ms": f.workers.compute_overshoot_p99_ms if f.workers else None,
            "send_lag_p99_ms": f.workers.send_lag_p99_ms if f.workers else None,
            "slowdown": statistics.mean(slow) if slow else None,
            "iter_s": statistics.mean(j.mean_iter_s for j in summary.jobs.values() if j.mean_iter_s is not None),
            "time_scale": summary.time_scale or 1}


def invariants(names: list[str], reps: int, iterations: int | None, out: Path, lock: ChunkedLock) -> dict:
    results: dict[str, list[dict]] = {}
    for rep in range(reps):
        for name in names:  # round robin: a slow hour of the machine hits every scenario alike
            summary = run_once(SCENARIOS[name](iterations), out / name, lock)
            r = row(summary)
            results.setdefault(name, []).append(r)
            print(f"  {name} #{rep} (time scale {r['time_scale']:g}): {r['verdict']}, {BOTTLENECK} within "
                  f"{r['within']}, late {r['late']}, "
                  f"early {r['early']}, p99 excess {r['p99_excess_us']} us, all cores saturated "
                  f"{r['saturated']}, steal {r['steal']}, slowdown {r['slowdown']:.3f}", flush=True)
    return results


def cost(pairs: int, out: Path, lock: ChunkedLock) -> dict:
    raw_on = solo_1g()
    raw_off = copy.deepcopy(raw_on)
    raw_off["run"]["fidelity"] = False
    ratios, shares = [], []
    with sysctls({"kernel.bpf_stats_enabled": "1"}):
        for rep in range(pairs):
            on, off = (run_once(raw, out / "cost", lock) for raw in (raw_on, raw_off))
            good_on, good_off = (s.jobs["j"].bytes_sent_per_worker * 8 / s.jobs["j"].mean_iter_s for s in (on, off))
            ratios.append(good_on / good_off)
            f = on.fidelity
            assert f is not None
            busy_s = (f.monitor_kernel_s or 0.0) + (f.monitor_cpu_s or 0.0)
            run_s = on.jobs["j"].mean_iter_s * on.jobs["j"].iterations
            shares.append(busy_s / run_s)
            print(f"  cost #{rep}: goodput on {good_on / 1e6:.1f} off {good_off / 1e6:.1f} Mbit/s, monitors "
                  f"{busy_s:.3f} s of {run_s:.1f} s", flush=True)
    return {"goodput_ratio": ratios, "core_share": shares}


FIELDS = (("within", "within ±10%", 3), ("late", "late", 3), ("early", "early", 3),
          ("p99_excess_us", "p99 excess µs", 1), ("rate", "rate", 3), ("worst_within", "worst link within", 3),
          ("saturated", "cores saturated", 3), ("steal", "steal", 3),
          ("overshoot_p99_ms", "overshoot p99 ms", 2), ("send_lag_p99_ms", "send lag p99 ms", 2),
          ("slowdown", "slowdown", 3), ("iter_s", "mean iteration s", 3))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default="demo,demo-100m")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=None, help="per run (default: per scenario)")
    ap.add_argument("--cost-reps", type=int, default=4)
    ap.add_argument("--sysctl", default="", help="KEY=VALUE,... set for the runs, restored after")
    ap.add_argument("--lock", default=DEFAULT_LOCK)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    names = [n for n in args.scenarios.split(",") if n]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s) {unknown} (known: {', '.join(SCENARIOS)})")
    knobs = dict(kv.split("=", 1) for kv in args.sysctl.split(",") if kv)
    lock = ChunkedLock(args.lock)
    out = Path(tempfile.mkdtemp(prefix="mn-harness-invariants-"))
    started = time.monotonic()
    try:
        with sysctls(knobs):
            results = invariants(names, args.reps, args.iterations, out, lock) if args.reps else {}
            spent = cost(args.cost_reps, out, lock) if args.cost_reps else {}
    finally:
        lock.release()
    print(f"\nmachine: kernel {os.uname().release}, {os.cpu_count()} cores; sysctls: {knobs or 'as found'}; "
          f"{args.reps} runs per scenario; mean ± 95% CI")
    keys = []
    for name, rows in results.items():
        faithful = sum(r["verdict"] == "faithful" for r in rows)
        print(f"\n[{name}] faithful {faithful} of {len(rows)}"
              + "".join(f"\n  {title:17s} {mean_ci([r[k] for r in rows if r[k] is not None], digits)}"
                        for k, title, digits in FIELDS))
        keys.append(f"{name}_within={statistics.mean(r['within'] for r in rows if r['within'] is not None):.3f}")
        keys.append(f"{name}_faithful={faithful}/{len(rows)}")
    if spent:
        print(f"\n[monitors' cost] goodput on/off {mean_ci(spent['goodput_ratio'], 4)}, "
              f"share of one core {mean_ci(spent['core_share'], 4, scale=100)}%")
        keys.append(f"cost_goodput_ratio={statistics.mean(spent['goodput_ratio']):.4f}")
        keys.append(f"cost_core_pct={statistics.mean(spent['core_share']) * 100:.2f}")
    print(f"\ntook {(time.monotonic() - started) / 60:.1f} min; runs in {out}")
    print(" ".join(keys))
    if args.json:
        print(json.dumps({"results": results, "cost": spent, "sysctl": knobs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

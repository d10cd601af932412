#!/usr/bin/env python3
"""Does a link-rate change made mid-run take effect? One 2-worker job alone on the demo
dumbbell at --rate; a session callback sets the shared link s1-s2 to --new after the job's
third iteration. Printed per repetition and as mean ± 95% CI over --repeat runs: the median
per-worker send rate (non-empty 10 ms throughput bins) before the change / --rate, and after it
(from the first iteration wholly after the change) / --new. TCP/IP headers take ~4.5%, so ~0.95
is the ceiling. No thresholds: tests/test_session.py holds the 10% bound.

Usage: sudo .venv/bin/python bench/link_rate.py [--rate 200Mbit] [--new 100Mbit] [--repeat 3]"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from mn_harness.config import Experiment  # noqa: E402
from mn_harness.results.stats import mean_ci95  # noqa: E402
from mn_harness.runner import run_experiment  # noqa: E402
from mn_harness.units import parse_bandwidth  # noqa: E402


def median_rate(results: Path, lo: float, hi: float) -> float:
    with open(results / "throughput.csv") as f:
        rates = [int(r["bytes"]) * 8 / float(r["bin_s"]) for r in csv.DictReader(f)
                 if lo <= float(r["t"]) < hi and int(r["bytes"]) > 0]
    return statistics.median(rates)


def one_run(rate: str, new: str, out: Path) -> tuple[float, float]:
    raw = yaml.safe_load((ROOT / "topologies/dumbbell-2jobs.yaml").read_text())
    raw["jobs"] = raw["jobs"][:1]
    raw["jobs"][0].update(iterations=8, bytes_per_iteration="4MB", compute="50ms")
    raw["link_defaults"]["bw"] = rate
    raw["links"][2]["bw"] = rate
    raw["run"]["dataplane"] = "linux"
    done: list[int] = []

    def change(session, job, iteration):
        if iteration == 2 and not done:
            session.set_link_rate("s1-s2", new)
            done.append(1)

    results = run_experiment(Experiment.from_dict(raw, "bench-rate"), out_root=out, log=None, on_iteration=change)
    t = json.loads((results / "summary.json").read_text())["link_changes"][0]["t"]
    with open(results / "iterations.csv") as f:
        after = min(s for s in (float(r["t_start"]) for r in csv.DictReader(f)) if s > t)
    return (median_rate(results, 0.0, t) / parse_bandwidth(rate, "--rate"),
            median_rate(results, after, 1e9) / parse_bandwidth(new, "--new"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", default="200Mbit")
    parser.add_argument("--new", default="100Mbit")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    before, after = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            b, a = one_run(args.rate, args.new, Path(tmp))
            before.append(b)
            after.append(a)
            print(f"run {i + 1}: before {b:.3f} of {args.rate}, after {a:.3f} of {args.new}", flush=True)
    out = {}
    for name, values in (("before", before), ("after", after)):
        m, _, half = mean_ci95(values)
        print(f"{name}: {m:.3f} ± {half or 0:.3f} (95% CI, n={len(values)})")
        out[f"{name}_frac"], out[f"{name}_ci95"] = round(m, 3), round(half or 0, 3)
    print(" ".join(f"{k}={v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

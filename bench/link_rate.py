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
import statistics
import sys
import tempfile
from pathlib import Path

from common import demo_alone, pm  # bench/common.py, which makes the package importable

from mn_harness.config import Experiment
from mn_harness.results.loaders import RunData, load_run
from mn_harness.results.stats import mean_ci95
from mn_harness.runner import run_experiment
from mn_harness.units import parse_bandwidth


def median_rate(run: RunData, lo: float, hi: float) -> float:
    return statistics.median(r.bytes * 8 / r.bin_s for r in run.throughput if lo <= r.t < hi and r.bytes > 0)


def one_run(rate: str, new: str, out: Path) -> tuple[float, float]:
    raw = demo_alone(rate, iterations=8, bytes_per_iteration="4MB", compute="50ms")
    done: list[int] = []

    def change(session, job, iteration):
        if iteration == 2 and not done:
            session.set_link_rate("s1-s2", new)
            done.append(1)

    run = load_run(run_experiment(Experiment.from_dict(raw, "bench-rate"), out_root=out, log=None,
                                  on_iteration=change))
    t = (run.summary.link_changes or [])[0].t or 0.0
    after = min(r.t_start for r in run.iterations if r.t_start > t)
    return (median_rate(run, 0.0, t) / parse_bandwidth(rate, "--rate"),
            median_rate(run, after, 1e9) / parse_bandwidth(new, "--new"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", default="200Mbit", help="every link's rate before the change")
    parser.add_argument("--new", default="100Mbit", help="s1-s2's rate after the job's third iteration")
    parser.add_argument("--repeat", type=int, default=3, help="runs (mean ± 95%% CI over them)")
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
        print(f"{name}: {pm(m, half or 0.0)} (95% CI, n={len(values)})")
        out[f"{name}_frac"], out[f"{name}_ci95"] = round(m, 3), round(half or 0, 3)
    print(" ".join(f"{k}={v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

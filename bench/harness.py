#!/usr/bin/env python3
"""Harness benchmark, printed as ratios measured in this one run (no thresholds: machines are
noisy; read the numbers against each other).

1. Isolated-job goodput as a fraction of the link rate: one 2-worker job alone on the demo
   dumbbell, for each gso_max_segs setting; goodput = bytes sent per worker / median
   communication time (first iteration excluded: it ramps up).
2. Network set-up and tear-down seconds for topologies/leaf-spine.yaml (Linux data plane).

Usage: sudo .venv/bin/python bench/harness.py [--rate 1Gbit] [--segs 1,16,65535]"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import TOPOLOGIES, demo_alone  # bench/common.py, which makes the package importable

from mn_harness.config import Experiment, load_experiment
from mn_harness.dataplane.linux import LinuxDataplane
from mn_harness.network.emulated import EmulatedNetwork
from mn_harness.network.plan import NetworkPlan
from mn_harness.results.loaders import load_run
from mn_harness.runner import run_experiment
from mn_harness.units import parse_bandwidth


def isolated_goodput(rate: str, segs: int, out: Path) -> float:
    raw = demo_alone(rate, iterations=8, compute="100ms")
    raw["run"]["gso_max_segs"] = segs
    run = load_run(run_experiment(Experiment.from_dict(raw, "bench-iso"), out_root=out, log=lambda *_: None))
    rows = sorted((r for r in run.iterations if (r.job, r.rank) == ("job1", 0)), key=lambda r: r.iteration)[1:]
    comm = statistics.median(r.comm_time for r in rows)
    return rows[0].bytes_sent * 8 / comm / parse_bandwidth(rate, "rate")


def setup_teardown(repeat: int) -> tuple[float, float]:
    exp = load_experiment(TOPOLOGIES / "leaf-spine.yaml")
    ups, downs = [], []
    for _ in range(repeat):
        net = EmulatedNetwork(exp, NetworkPlan(exp), LinuxDataplane())
        t0 = time.monotonic()
        try:
            net.build()
            t1 = time.monotonic()
        finally:
            net.stop()
        ups.append(t1 - t0)
        downs.append(time.monotonic() - t1)
    return statistics.median(ups), statistics.median(downs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", default="1Gbit")
    parser.add_argument("--segs", default="1,16,65535")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for segs in (int(s) for s in args.segs.split(",")):
            frac = isolated_goodput(args.rate, segs, Path(tmp))
            results[f"goodput_frac_segs{segs}"] = round(frac, 3)
            print(f"isolated job goodput at {args.rate}, gso_max_segs={segs}: {frac:.3f} of link rate", flush=True)
    up, down = setup_teardown(args.repeat)
    results.update(leafspine_setup_s=round(up, 2), leafspine_teardown_s=round(down, 2))
    print(f"leaf-spine (6 hosts, 5 switches, 12 links): set-up {up:.2f} s, tear-down {down:.2f} s "
          f"(median of {args.repeat})")
    print(" ".join(f"{k}={v}" for k, v in results.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

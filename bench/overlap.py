#!/usr/bin/env python3
"""DDP-style overlap: how much iteration time it saves, and whether MLTCP still finds iterations.

One 2-worker job alone on the demo dumbbell (1 Gbit/s, Linux data plane): S bytes all-reduced
per iteration after `compute`, once plainly and once with `overlap: {bucket, first_bucket}`
(backward = 2/3 of compute), alternating, --repeat times each, warm-up iterations left out.

1. Overlap: per run, the mean job iteration time; the overlapped time = per rank and iteration,
   how long its collectives ran while its backward computed (phases.csv), averaged. Printed: the
   drop (plain - overlap) with its 95% CI, the overlapped time, and drop / overlapped (target:
   >= 0.8: overlapping saves at least 0.8x the time it hides).
2. MLTCP's in-kernel iteration detection (--cc mltcp-reno, the default): per sending socket,
   cc_telemetry.csv's learned bytes per iteration against the true bytes that socket sends per
   iteration (summary.json bytes_sent_per_rank), and how many iterations the kernel saw against
   how many ran. A new iteration is a transmit start after more than idle_gap (default 50 ms)
   of silence: with overlap the silence between iterations is forward + the first backward slice
   minus what the previous iteration's last bucket still sends, not the whole compute phase.

Ends with one key=value line. Usage: sudo .venv/bin/python bench/overlap.py [--compute 120ms,300ms]"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from common import ci_interval, topology  # bench/common.py, which makes the package importable

from mn_harness.config import Experiment
from mn_harness.report.metrics import covered_length, union_intervals
from mn_harness.results.iterations import job_iterations
from mn_harness.results.loaders import RunData, load_cc_telemetry, load_run
from mn_harness.results.schema import CCTelemetryRow
from mn_harness.results.stats import mean_ci95
from mn_harness.runner import run_experiment


def experiment(size: str, compute: str, overlap: bool, iterations: int, cc: str) -> Experiment:
    raw = topology()
    job = {"name": "job", "workers": ["h1", "h3"], "bytes_per_iteration": size, "compute": compute,
           "iterations": iterations, "cc": cc}
    if overlap:
        job["overlap"] = {"bucket": "2MB", "first_bucket": "1MiB"}
    raw["jobs"] = [job]
    raw["run"]["dataplane"] = "linux"
    return Experiment.from_dict(raw, "bench-overlap")


def measure(exp: Experiment, warmup: int, out: Path) -> dict:
    results = run_experiment(exp, out_root=out, log=lambda *_: None)
    run = load_run(results)
    iters = [i for i in job_iterations(run.iterations, {"job": 2})["job"] if i.complete and i.iteration >= warmup]
    hidden = []
    for rank in (0, 1):
        for it in range(warmup, exp.jobs[0].iterations):
            rows = [p for p in run.phases if p.rank == rank and p.iteration == it]
            backward = [p for p in rows if p.name.endswith(".backward")]
            comm = union_intervals((p.t_start, p.t_end) for p in rows if p.kind == "comm")
            hidden.append(sum(covered_length((b.t_start, b.t_end), comm) for b in backward))
    return {"iter_s": statistics.mean(i.iter_time for i in iters), "hidden_s": statistics.mean(hidden),
            "telemetry": telemetry_check(run, warmup)}


def telemetry_check(run: RunData, warmup: int) -> dict | None:
    rows, _ = load_cc_telemetry(run.results_dir)
    if not rows:
        return None
    info = run.summary.jobs["job"]
    ip_rank = {}
    for raw in sorted((run.results_dir / "raw").glob("job-r*.spec.json")):
        spec = json.loads(raw.read_text())
        ip_rank[spec["ips"][spec["rank"]]] = spec["rank"]
    sockets: dict[str, list[CCTelemetryRow]] = {}
    for r in rows:
        if r.bytes > 1000:
            sockets.setdefault(r.src, []).append(r)
    out: dict = {"sockets": len(sockets), "seen_iterations": [], "learned_over_true": []}
    for src, its in sockets.items():
        true = info.bytes_sent_per_rank[ip_rank[src.rsplit(":", 1)[0]]]
        out["seen_iterations"].append(len(its))
        out["learned_over_true"] += [r.learned_bytes_per_iteration / true for r in its[warmup:]
                                     if r.learned_bytes_per_iteration and not r.final]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="8MB")
    parser.add_argument("--compute", default="120ms,300ms")
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cc", default="mltcp-reno")
    args = parser.parse_args()
    line = {}
    with tempfile.TemporaryDirectory() as tmp:
        for compute in args.compute.split(","):
            runs: dict[bool, list[dict]] = {False: [], True: []}
            for _ in range(args.repeat):
                for overlap in (False, True):
                    exp = experiment(args.size, compute, overlap, args.iterations, args.cc)
                    runs[overlap].append(measure(exp, args.warmup, Path(tmp)))
            drops = [a["iter_s"] - b["iter_s"] for a, b in zip(runs[False], runs[True], strict=True)]
            hidden = [b["hidden_s"] for b in runs[True]]
            drop, _, half = mean_ci95(drops)
            ratio = drop / statistics.mean(hidden)
            plain = statistics.mean(r["iter_s"] for r in runs[False])
            over = statistics.mean(r["iter_s"] for r in runs[True])
            ci = ci_interval(drop, half, 1, scale=1e3)
            print(f"S={args.size} compute={compute}: iteration {plain * 1e3:.1f} ms plain, {over * 1e3:.1f} ms "
                  f"with overlap; drop {drop * 1e3:.1f} ms 95% CI {ci}; overlapped "
                  f"{statistics.mean(hidden) * 1e3:.1f} ms; drop/overlapped {ratio:.2f} (target >= 0.8)")
            key = compute.replace(" ", "")
            line[f"drop_over_overlapped_{key}"] = round(ratio, 2)
            for overlap in (False, True):
                tel = [r["telemetry"] for r in runs[overlap] if r["telemetry"]]
                if not tel:
                    continue
                ratios = [x for t in tel for x in t["learned_over_true"]]
                seen = [x for t in tel for x in t["seen_iterations"]]
                ok = sum(abs(x - 1) <= 0.05 for x in ratios) / len(ratios) if ratios else 0.0
                med = statistics.median(ratios) if ratios else float("nan")
                label = "overlap" if overlap else "plain"
                print(f"  {args.cc} {label}: kernel saw {min(seen)}-{max(seen)} iterations per socket of "
                      f"{args.iterations} run; learned/true bytes median {med:.2f}, within 5% in {ok:.0%} of "
                      f"{len(ratios)} rows")
                line[f"learned_ok_{label}_{key}"] = round(ok, 2)
    print(" ".join(f"{k}={v}" for k, v in line.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

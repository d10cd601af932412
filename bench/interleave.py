#!/usr/bin/env python3
"""Does MLTCP make compatible jobs interleave? The demo dumbbell, two identical jobs started
20 ms apart, run once per congestion control; printed as ratios measured in this one run.

For each pair (reno vs mltcp-reno, cubic vs mltcp-cubic): mean and p99 iteration time (mean
over the two jobs), their ratio base/mltcp, the slowdown against the isolated ideal, and the
convergence iteration (first iteration after which the jobs' communication phases overlap
<= 10%; the later of the two jobs; -1 = never). `--sweep` adds a slope x intercept grid for
mltcp-reno that justifies the defaults. Ends with one `key=value` line, also written as JSON.

`--repeat N` runs each CC N times (mean ± 95% CI); `--collective torch_allreduce` uses real
torch.distributed (gloo) jobs instead of the synthetic worker.

Usage: sudo .venv/bin/python bench/interleave.py [--iterations 40] [--repeat 3]
           [--collective torch_allreduce] [--sweep] [--json out.json]"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from common import topology  # bench/common.py, which makes the package importable

from mn_harness.config import Experiment
from mn_harness.report.markdown import report_run
from mn_harness.results.stats import mean_ci95
from mn_harness.runner import run_experiment

PAIRS = (("reno", "mltcp-reno"), ("cubic", "mltcp-cubic"))


COLLECTIVE = {"collective": "ring_allreduce"}  # --collective: e.g. torch_allreduce (real gloo traffic)


def scenario(cc, iterations: int, offset: str) -> Experiment:
    raw = topology()
    for job in raw["jobs"]:
        job.update(iterations=iterations, cc=cc, collective=COLLECTIVE["collective"])
    raw["jobs"][1]["start_offset"] = offset
    raw["run"]["dataplane"] = "linux"
    return Experiment.from_dict(raw)


def measure(cc, iterations: int, offset: str, out: Path, repeat: int = 1) -> dict:
    """One run, or with repeat > 1 the mean of `repeat` runs with 95% CI half-widths (`*_ci`)."""
    if repeat > 1:
        runs = [measure(cc, iterations, offset, out) for _ in range(repeat)]
        merged: dict = {"runs": runs, "results": [r["results"] for r in runs]}
        for key in ("mean_s", "p99_s", "slowdown", "overlap"):
            merged[key], _, merged[f"{key}_ci"] = mean_ci95([r[key] for r in runs])
        merged["converge_iters"] = [r["converge_iter"] for r in runs]
        converged = [c for c in merged["converge_iters"] if c >= 0]
        merged["converge_iter"] = max(converged) if len(converged) == repeat else -1
        return merged
    results = run_experiment(scenario(cc, iterations, offset), out_root=out, log=lambda *_: None)
    _, metrics = report_run(results, plots=False)
    jobs = list(metrics.jobs.values())
    converged = [j.convergence_iteration for j in jobs]
    return {
        "mean_s": sum(j.mean_iter_s for j in jobs) / len(jobs),
        "p99_s": sum(j.p99_iter_s for j in jobs) / len(jobs),
        "slowdown": sum(j.slowdown_mean for j in jobs) / len(jobs),
        "overlap": sum(j.overlap_mean or 0 for j in jobs) / len(jobs),
        "converge_iter": -1 if None in converged else max(converged),
        "results": str(results),
    }


def describe(name: str, m: dict) -> str:
    if "converge_iters" in m:  # repeated: mean ± 95% CI, convergence per run
        conv = ",".join("never" if c < 0 else str(c) for c in m["converge_iters"])
        return (f"  {name:<28} mean {m['mean_s'] * 1e3:7.1f} ± {m['mean_s_ci'] * 1e3:5.1f} ms  "
                f"p99 {m['p99_s'] * 1e3:7.1f} ± {m['p99_s_ci'] * 1e3:5.1f} ms  "
                f"slowdown {m['slowdown']:.2f}x  overlap {m['overlap'] * 100:5.1f}%  converged at {conv}")
    conv = "never" if m["converge_iter"] < 0 else str(m["converge_iter"])
    return (f"  {name:<28} mean {m['mean_s'] * 1e3:7.1f} ms  p99 {m['p99_s'] * 1e3:7.1f} ms  "
            f"slowdown {m['slowdown']:.2f}x  overlap {m['overlap'] * 100:5.1f}%  converged at {conv}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--offset", default="20ms", help="start offset of job2")
    parser.add_argument("--pairs", default="reno,cubic", help="base CCs to compare with their MLTCP variant")
    parser.add_argument("--sweep", action="store_true", help="also sweep mltcp-reno slope x intercept")
    parser.add_argument("--slopes", default="0.5,1,2,4")
    parser.add_argument("--intercepts", default="0.25,0.5,1")
    parser.add_argument("--gaps", default="",
                        help="also run the best slope/intercept with these idle_gaps, e.g. 10ms,50ms,100ms")
    parser.add_argument("--repeat", type=int, default=1, help="runs per CC (mean ± 95%% CI when > 1)")
    parser.add_argument("--collective", default="ring_allreduce",
                        help="ring_allreduce (synthetic) or torch_allreduce (real torch/gloo traffic)")
    parser.add_argument("--json", default="bench-interleave.json")
    parser.add_argument("--keep", help="keep the runs' results folders under this directory")
    args = parser.parse_args()
    COLLECTIVE["collective"] = args.collective
    keys: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.keep or tmp)
        for base, ml in PAIRS:
            if base not in args.pairs.split(","):
                continue
            print(f"{base} vs {ml}: {args.iterations} iterations, job2 offset {args.offset}", flush=True)
            b = measure(base, args.iterations, args.offset, out, args.repeat)
            print(describe(base, b), flush=True)
            m = measure(ml, args.iterations, args.offset, out, args.repeat)
            print(describe(ml, m), flush=True)
            tag = base
            keys.update({
                f"mean_ratio_{tag}": round(b["mean_s"] / m["mean_s"], 3),
                f"p99_ratio_{tag}": round(b["p99_s"] / m["p99_s"], 3),
                f"slowdown_{tag}": round(b["slowdown"], 3),
                f"slowdown_mltcp_{tag}": round(m["slowdown"], 3),
                f"converge_iter_{tag}": b["converge_iter"],
                f"converge_iter_mltcp_{tag}": m["converge_iter"],
            })
            print(f"  ratio {base}/{ml}: mean {keys[f'mean_ratio_{tag}']}x  p99 {keys[f'p99_ratio_{tag}']}x",
                  flush=True)
        if args.sweep:
            print("sweep mltcp-reno (slope x intercept):", flush=True)
            sweep = []
            for slope in (float(s) for s in args.slopes.split(",")):
                for intercept in (float(i) for i in args.intercepts.split(",")):
                    cc = {"name": "mltcp-reno", "slope": slope, "intercept": intercept}
                    m = measure(cc, args.iterations, args.offset, out)
                    print(describe(f"slope={slope:g} intercept={intercept:g}", m), flush=True)
                    sweep.append({"slope": slope, "intercept": intercept, **m})
            best = min(sweep, key=lambda r: (r["mean_s"], r["p99_s"]))
            keys.update(best_slope=best["slope"], best_intercept=best["intercept"])
            keys["sweep"] = sweep
            if args.gaps:
                print(f"idle_gap at slope={best['slope']:g} intercept={best['intercept']:g}:", flush=True)
                gaps = []
                for gap in args.gaps.split(","):
                    cc = {"name": "mltcp-reno", "slope": best["slope"], "intercept": best["intercept"],
                          "idle_gap": gap}
                    m = measure(cc, args.iterations, args.offset, out)
                    print(describe(f"idle_gap={gap}", m), flush=True)
                    gaps.append({"idle_gap": gap, **m})
                keys["gap_sweep"] = gaps
    line = " ".join(f"{k}={v}" for k, v in keys.items() if k not in ("sweep", "gap_sweep"))
    print(line)
    Path(args.json).write_text(json.dumps(keys, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

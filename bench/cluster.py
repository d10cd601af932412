#!/usr/bin/env python3
"""What crossing between servers costs: one 2-worker job whose ring crosses s1-s2 (h1-s1-s2-h2,
s1-s2 at --rates, the hosts' links at twice that so s1-s2 is the bottleneck both ways), run on
one server (every node on it: no tunnel) and split over two
(s1-s2 a VXLAN tunnel between them), with the servers of the cluster tests (namespaces with their
own sshd on this machine, mn_harness/cluster/bed.py: the same kernel and cores, so what differs
is the tunnel itself). Both go through the same head and agents; the two modes alternate within
each repetition, so machine noise hits both alike.

Per rate and mode, mean ± 95% CI over --repeat runs: goodput (bytes sent / communication time
over the link rate, after the warm-up; TCP/IP headers cap it near 0.95), the TCP round trip
(min and median of the senders' srtt over the run's 10 ms bins), the CPU per Gbit/s moved (the
machine's busy core-seconds per Gbit sent), and the link invariant on the crossing link (the
share of backlogged gaps within 10% of the serialisation time, both directions, and the rate
ratio); then split / one server per repetition (paired), mean ± 95% CI. No thresholds: the
cluster tests hold the 10% goodput bound.

Usage: sudo .venv/bin/python bench/cluster.py [--rates 100Mbit,500Mbit] [--repeat 3] [--iterations 12]
Takes /tmp/mn-harness-net.lock per repetition (--lock '' for none)."""

from __future__ import annotations

import argparse
import fcntl
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from common import ROOT, mean_ci  # bench/common.py, which makes the package importable

from mn_harness.cluster.bed import ClusterBed
from mn_harness.results.loaders import load_run
from mn_harness.results.stats import mean_ci95
from mn_harness.units import parse_bandwidth

MODES = ("one server", "two servers")
NET_LOCK = "/tmp/mn-harness-net.lock"
WARMUP = 2  # iterations left out of goodput: slow start


def experiment(rate: str, iterations: int, mode: str, bed: ClusterBed) -> dict:
    bps = parse_bandwidth(rate, "--rates")
    nodes = {"a": ["h1", "s1"], "b": ["s2", "h2"]} if mode == MODES[1] else {"a": ["h1", "s1", "s2", "h2"]}
    return {
        "experiment": "bench-cluster", "hosts": ["h1", "h2"], "switches": ["s1", "s2"],
        # the hosts' links twice as fast: s1-s2, the crossing link, is the bottleneck both ways,
        # so its queue is backlogged and the link invariant is judged on it
        "link_defaults": {"bw": f"{int(2 * bps)}bit", "queue": 100},
        "links": [{"endpoints": ["h1", "s1"]}, {"endpoints": ["s1", "s2"], "bw": rate},
                  {"endpoints": ["s2", "h2"]}],
        # 200 ms of data at the link's rate per iteration, a little compute between
        "jobs": [{"name": "job1", "workers": ["h1", "h2"], "bytes_per_iteration": int(bps * 0.2 / 8),
                  "compute": "20ms", "iterations": iterations, "cc": "cubic"}],
        "servers": [{"name": n, "address": bed.addresses[n], "python": sys.executable, "nodes": ns}
                    for n, ns in nodes.items()],
        "run": {"dataplane": "linux"},
    }


def measure(folder: Path, rate_bps: float) -> dict[str, float | None]:
    run = load_run(folder)
    s = run.summary
    rows = [r for r in run.iterations if r.iteration >= WARMUP and r.comm_time > 0]
    goodput = statistics.mean(r.bytes_sent * 8 / r.comm_time for r in rows) / rate_bps
    srtt = [r.srtt_us / 1000 for r in run.throughput if r.bytes > 0 and r.srtt_us]
    load = s.cpu_load or {}
    gbit = sum(r.bytes_sent for r in run.iterations) * 8 / 1e9
    busy_s = (load.get("busy_mean") or 0.0) * (load.get("cores") or 0) * (load.get("samples") or 0) * \
        (load.get("interval_s") or 0.0)
    links = s.fidelity.links if s.fidelity else {}
    out: dict[str, float | None] = {
        "goodput": goodput, "rtt_min_ms": min(srtt) if srtt else None,
        "rtt_p50_ms": statistics.median(srtt) if srtt else None,
        "cpu_s_per_gbit": busy_s / gbit if gbit else None}
    for name in ("s1->s2", "s2->s1"):
        link = links.get(name)
        out[f"{name} within"] = link.within_share if link else None
        out[f"{name} rate"] = link.rate_ratio if link else None
    return out


def one(bed: ClusterBed, rate: str, iterations: int, mode: str, out: Path) -> dict[str, float | None]:
    spec = out / f"{mode.replace(' ', '-')}-{rate}.yaml"
    spec.write_text(yaml.safe_dump(experiment(rate, iterations, mode, bed)))
    before = set(out.glob("bench-cluster-*"))
    proc = subprocess.run(bed.head_argv([sys.executable, "-m", "mn_harness.cli", "run", str(spec), "--out", str(out),
                                         "--no-plots"]), env=bed.env(), capture_output=True, text=True,
                          timeout=900, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} at {rate}: {proc.stderr.strip().splitlines()[-1:]}")
    folder = max(set(out.glob("bench-cluster-*")) - before)
    return measure(folder, parse_bandwidth(rate, "--rates"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="100Mbit,500Mbit", help="the links' rates, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs per rate and mode (mean ± 95%% CI)")
    parser.add_argument("--iterations", type=int, default=12, help=f"iterations per run ({WARMUP} are warm-up)")
    parser.add_argument("--lock", default=NET_LOCK, help="the shared network lock, taken per repetition")
    args = parser.parse_args()
    rates = [r.strip() for r in args.rates.split(",") if r.strip()]
    results: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="mn-harness-bench-cluster-", dir="/var/tmp") as tmp:
        for rep in range(args.repeat):
            lock = open(args.lock, "a") if args.lock else None  # noqa: SIM115 - released below
            if lock is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with ClusterBed(2) as bed:
                    for rate in rates:
                        order = MODES if rep % 2 == 0 else MODES[::-1]
                        for mode in order:
                            m = one(bed, rate, args.iterations, mode, Path(tmp))
                            results.setdefault((rate, mode), []).append(m)
                            print(f"rep {rep + 1} {rate} {mode}: " + ", ".join(
                                f"{k} {v:.3f}" for k, v in m.items() if isinstance(v, float)), flush=True)
            finally:
                if lock is not None:
                    lock.close()
    keys = ["goodput", "rtt_min_ms", "rtt_p50_ms", "cpu_s_per_gbit", "s1->s2 within", "s2->s1 within",
            "s1->s2 rate", "s2->s1 rate"]
    print(f"\n{args.repeat} runs per cell, mean ± 95% CI")
    print("| rate | mode | " + " | ".join(keys) + " |")
    print("|---|---|" + "---|" * len(keys))
    for rate in rates:
        for mode in MODES:
            rows = results[(rate, mode)]
            cells = [mean_ci([r[k] for r in rows if r[k] is not None], 3) for k in keys]
            print(f"| {rate} | {mode} | " + " | ".join(cells) + " |")
        ratios = []
        for k in keys:
            pairs = [(b[k], a[k]) for a, b in zip(results[(rate, MODES[0])], results[(rate, MODES[1])], strict=True)
                     if a[k] and b[k] is not None]
            if pairs:
                m, _, half = mean_ci95([b / a for b, a in pairs])
                ratios.append(f"{m:.3f}" + (f" ± {half:.3f}" if half is not None else ""))
            else:
                ratios.append("-")
        print(f"| {rate} | split / one | " + " | ".join(ratios) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

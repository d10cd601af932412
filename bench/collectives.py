#!/usr/bin/env python3
"""Isolated bus bandwidth of every collective on the demo link, as a fraction of the link rate.

One job alone on the demo dumbbell (topologies/dumbbell-2jobs.yaml: 1 Gbit/s links, Linux data
plane), once per collective and repetition. Each iteration computes 20 ms and then runs the
collective on S bytes, S chosen so that its ideal time (busiest link's bytes / rate) is about
--target; warm-up iterations are left out. Per run: the median over iterations of
busbw = S / t * factor (nccl-tests conventions, mn_harness/collectives/bandwidth.py; t = the
job's phase duration, first rank's start to last rank's end), divided by the link rate. Printed
per collective: the fraction's mean with its 95% CI over the repetitions, the bound an ideal run
reaches on this topology (busbw at the ideal time: below 1 where a link carries more than the
convention assumes, e.g. the tree's inner ranks), and measured/ideal time. With --hosts 4 the job spans
all four demo hosts (ring order h1 h3 h2 h4). Target: >= 0.85 for ring, tree, reduce-scatter
and all-gather. Resumable: finished runs are kept in --state, keyed by the settings and the
transport tunables in effect (defaults included, so a changed default is measured afresh), and
skipped. Ends with one key=value line.

Usage: sudo .venv/bin/python bench/collectives.py [--repeat 3] [--hosts 2] [--only ring_allreduce,...]"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from common import ci_interval, topology  # bench/common.py, which makes the package importable

from mn_harness import collectives
from mn_harness.config import Experiment
from mn_harness.jobs.ideal import phase_summary
from mn_harness.jobs.specs import TRANSPORT_ENV
from mn_harness.network.plan import NetworkPlan
from mn_harness.results.loaders import load_run
from mn_harness.results.stats import mean_ci95
from mn_harness.runner import run_experiment
from mn_harness.worker.tunables import Tunables

TARGET = ("ring_allreduce", "tree_allreduce", "reduce_scatter", "all_gather")


PS_SERVERS = {1: ["h2"], 2: ["h2", "h4"]}


def experiment(name: str, nbytes: int, hosts: int, iterations: int, cc: str, ps_servers: int = 2) -> Experiment:
    raw = topology()
    workers = ["h1", "h3"] if hosts == 2 else ["h1", "h3", "h2", "h4"]
    job: dict = {"name": "job", "iterations": iterations, "cc": cc}
    if name == "parameter_server":  # workers h1 h3; servers on the other hosts
        workers, job["servers"] = ["h1", "h3"], PS_SERVERS[ps_servers]
    phase: dict = {"collective": name, "bytes": nbytes}
    if name == "pipeline":
        phase.update(micro_batches=8)
    job.update(workers=workers, phases=[{"compute": "20ms"}, phase])
    raw["jobs"] = [job]
    raw["run"]["dataplane"] = "linux"
    return Experiment.from_dict(raw, f"bench-{name}")


def sized(name: str, hosts: int, target_s: float, cc: str, ps_servers: int) -> tuple[Experiment, dict]:
    probe = experiment(name, 1_000_000, hosts, 1, cc, ps_servers)
    ideal = phase_summary(probe.jobs[0], NetworkPlan(probe))[1]["ideal_s"]
    per_mb = 8 if name == "pipeline" else 1  # the pipeline's bytes are per micro-batch
    nbytes = int(1_000_000 * target_s / ideal)
    exp = experiment(name, max(nbytes, 1000 * per_mb), hosts, 1, cc, ps_servers)
    return exp, phase_summary(exp.jobs[0], NetworkPlan(exp))[1]


def one_run(name: str, hosts: int, target_s: float, iterations: int, warmup: int, cc: str, out: Path,
            ps_servers: int) -> dict:
    sized_exp, info = sized(name, hosts, target_s, cc, ps_servers)
    exp = experiment(name, sized_exp.jobs[0].comm_phases[0].bytes, hosts, iterations, cc, ps_servers)
    job = exp.jobs[0]
    phase = job.comm_phases[0]
    rate = min(NetworkPlan(exp).link_bps().values())
    run = load_run(run_experiment(exp, out_root=out, log=lambda *_: None))
    by_iter: dict[int, list] = {}
    for r in run.phases:
        if r.kind == "comm" and r.iteration >= warmup:
            by_iter.setdefault(r.iteration, []).append(r)
    durations = [max(r.t_end for r in rs) - min(r.t_start for r in rs) for rs in by_iter.values()
                 if len(rs) == len(phase.participants)]
    t = statistics.median(durations)
    n = len(phase.participants) - phase.servers
    size = phase.bytes * (phase.micro_batches or 1) if name == "pipeline" else phase.bytes
    busbw_bits = collectives.busbw(name, size, max(n, 2), t) * 8
    bound = collectives.busbw(name, size, max(n, 2), info["ideal_s"]) * 8 / rate
    return {"fraction": busbw_bits / rate, "bound": bound,
            "efficiency": info["ideal_s"] / t, "bytes": phase.bytes, "iterations": len(durations),
            "rows": len(run.iterations), "expected_rows": job.n_ranks * job.iterations}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hosts", type=int, choices=(2, 4), default=2)
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--target", type=float, default=0.08, help="ideal collective time, seconds")
    parser.add_argument("--cc", default="cubic")
    parser.add_argument("--ps-servers", type=int, choices=(1, 2), default=2,
                        help="parameter servers (on h2, h4) for the two workers h1, h3")
    parser.add_argument("--only", help="comma-separated collectives (default: all)")
    parser.add_argument("--transport", default="", help='transport tunables as JSON, e.g. {"segment_bytes": 0}')
    parser.add_argument("--state", default="/tmp/mn-harness-bench-collectives.json",
                        help="finished runs (resume); delete it to start over")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(collectives.names(engine=collectives.SYNTHETIC))
    if args.transport:
        os.environ[TRANSPORT_ENV] = args.transport
    # the effective tunables (defaults and overrides), so runs of an older default are not reused
    tunables = json.dumps(asdict(Tunables.from_overrides(json.loads(args.transport or "{}"))), sort_keys=True)
    state_path = Path(args.state)
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    summary = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            key = f"{name}/{args.hosts}/{args.cc}/{args.target}/{tunables}"
            if name == "parameter_server":
                key += f"/servers{args.ps_servers}"
            runs = state.setdefault(key, [])
            while len(runs) < args.repeat:
                runs.append(one_run(name, args.hosts, args.target, args.iterations, args.warmup, args.cc,
                                    Path(tmp), args.ps_servers))
                state_path.write_text(json.dumps(state, indent=1))
                print(f"  {name} run {len(runs)}/{args.repeat}: {runs[-1]['fraction']:.3f} of link rate",
                      flush=True)
            frac, _, half = mean_ci95([r["fraction"] for r in runs[:args.repeat]])
            eff = statistics.mean(r["efficiency"] for r in runs[:args.repeat])
            ci = ci_interval(frac, half)
            mark = " (target >= 0.85)" if name in TARGET else ""
            print(f"{name:<17} busbw/link {frac:.3f} 95% CI {ci}  bound {runs[0]['bound']:.3f}  "
                  f"measured/ideal time {1 / eff:.3f}  S={runs[0]['bytes']} B  rows "
                  f"{runs[0]['rows']}/{runs[0]['expected_rows']}{mark}", flush=True)
            summary[f"{name}_busbw_frac"] = round(frac, 3)
    print(" ".join(f"{k}={v}" for k, v in summary.items()) + f" hosts={args.hosts} repeat={args.repeat}"
          + (f" transport={args.transport.replace(' ', '')}" if args.transport else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

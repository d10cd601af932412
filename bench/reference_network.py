#!/usr/bin/env python3
"""Hold the project's network against a plain Mininet network, and measure how far each of the
emulator's own choices (run.emulation, run.gso_max_segs, the samplers) moves the answer.

Two tables, from the same runs of the harness (the same workers, results and fidelity checks):

1. **Reference**: per scenario, congestion control and traffic (real gloo jobs,
   `torch_allreduce`, and the synthetic worker), the slowdown (mean over jobs of mean iteration
   time / ideal, warm-up left out) with its 95% CI in three networks: `plain` (what Mininet users
   build: Linux bridges, only the links between switches shaped as TCLink shapes them — HTB
   `burst 15k`, tc's own cburst and quantum, HTB's default leaf, a FIFO of txqueuelen = 1000
   packets — and the hosts' default offloads, gso_max_segs 65535), `plain-access` (the same with
   the hosts' links shaped too, as TCLink on every link) and `project` (the defaults); the share
   of runs that interleaved (every job with a rival ≤ 10% overlap from some iteration on, the
   report's convergence rule) and of runs whose fidelity verdict was `faithful`.
2. **Sensitivity**: each choice flipped alone from the project's defaults (FLIPS), same scenario:
   the slowdown, its ratio to the project's (delta-method 95% CI), the runs interleaved and
   faithful, the bottleneck's link invariant (share of backlogged gaps within ±10%) and the
   drops in the hosts' own egress queues per run.

Runs go round-robin (repetition 1 of every cell, then 2, ...) so the machine's drift spreads
over all cells. Resumable: every finished run leaves <out>/runs/<cell>__r<k>.json (its results
folder under <out>/results/), and a second invocation runs only what is missing. The bench takes
the network lock itself (`--lock`, default /tmp/mn-harness-net.lock) and the measurement lock
the other benches take (`--measure-lock`), for chunks of at most `--chunk-min` minutes, giving
them up in between; do not wrap it in flock. Each run records the share of the cores that
processes other than its own used meanwhile (`foreign_cpu`): the machine may be shared. `--budget-min` stops
starting runs after that many minutes of measuring.

Usage: sudo .venv/bin/python bench/reference_network.py [--out bench-reference] [--reps 3]
           [--scenarios 3jobs-ssai,4jobs-ecn] [--variants plain,plain-access,project,...]
           [--traffics real,synthetic] [--flip-traffics synthetic] [--flip-scenarios 3jobs-ssai]
           [--budget-min 60]
       .venv/bin/python bench/reference_network.py --out DIR --table-only   (Markdown tables)"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import signal
import sys
import time
from pathlib import Path
from typing import Any

from common import DEFAULT_LOCK, ChunkedLock, topology  # bench/common.py, which makes the package importable
from fidelity import interleaved, ratio_ci  # bench/fidelity.py

from mn_harness.config import Experiment
from mn_harness.errors import HarnessError
from mn_harness.network.tcp_counters import timeouts_per_iteration
from mn_harness.results.iterations import job_iterations
from mn_harness.results.loaders import load_run, load_summary
from mn_harness.results.schema import RunSummary
from mn_harness.results.stats import mean, mean_ci95, percentile

LOCK = "/tmp/mn-harness-net.lock"
# the lock bench/reproduce.py and bench/fidelity.py take: held too, so their runs never overlap ours
MEASURE_LOCK = DEFAULT_LOCK
TRAFFIC = {"real": "torch_allreduce", "synthetic": "ring_allreduce"}
BOTTLENECK = ("s1->s2", "s2->s1")

# What Mininet users build: `Mininet(switch=LinuxBridge, link=TCLink)` with TCLink(bw=...) on the
# links between switches only (TCLink's HTB: `burst 15k`, no cburst, no quantum, no leaf qdisc;
# max_queue_size would need netem), hosts as Mininet leaves them (offloads on, no qdisc)
PLAIN = {"emulation": {"switches": "bridge", "access_links": "unshaped", "queue_limit": "txqueuelen",
                       "htb_burst": "15KiB", "htb_cburst": "auto", "htb_quantum": "auto"},
         "gso_max_segs": 65535}
NETWORKS: dict[str, dict[str, Any]] = {
    "plain": PLAIN,
    "plain-access": {**PLAIN, "emulation": {**PLAIN["emulation"], "access_links": "shaped"}},
    "project": {},
}
# each choice flipped alone from the project's defaults (run: changes)
FLIPS: dict[str, dict[str, Any]] = {
    "access-unshaped": {"emulation": {"access_links": "unshaped"}},
    "host-queue-link": {"emulation": {"host_queue": "link"}},
    "gso-65535": {"gso_max_segs": 65535},
    "gso-1": {"gso_max_segs": 1},
    "bridges": {"emulation": {"switches": "bridge"}},
    "htb-tclink": {"emulation": {"htb_burst": "15KiB", "htb_cburst": "auto"}},
    "htb-quantum-1514": {"emulation": {"htb_quantum": "1514B"}},
    "queue-packets": {"emulation": {"queue_limit": "packets"}},
    "queue-txqueuelen": {"emulation": {"queue_limit": "txqueuelen"}},
    "no-queue-telemetry": {"queue_telemetry": False},
    "bins-100ms": {"throughput_bin": "100ms"},
    "cpu-split": {"emulation": {"cpu_placement": "split"}},
}
VARIANTS = {**NETWORKS, **FLIPS}


def three_jobs_ssai() -> dict:
    """Three compatible 2-worker jobs on one 500 Mbit/s bottleneck with slow start after idle:
    12.5 MB per iteration (0.2 s at line rate) and 500 ms of compute (a = 0.29: they could
    interleave perfectly), started 0, 10 and 20 ms apart."""
    raw = topology("compatible-3jobs")
    raw["link_defaults"]["bw"] = "500Mbit"
    for job in raw["jobs"]:
        job.update(bytes_per_iteration="12.5MB", compute="500ms")
    raw["run"]["slow_start_after_idle"] = True
    return raw


def four_jobs_ecn() -> dict:
    """`make demo`'s scenario (topologies/dumbbell-4jobs-ecn.yaml): four jobs started together,
    500 Mbit/s, a 200-packet buffer marking ECN above 10 packets."""
    return topology("dumbbell-4jobs-ecn")


SCENARIOS = {"3jobs-ssai": (three_jobs_ssai, ("cubic", "reno")), "4jobs-ecn": (four_jobs_ecn, ("dctcp",))}


def experiment(scenario: str, variant: str, traffic: str, cc: str, iterations: int) -> Experiment:
    raw = copy.deepcopy(SCENARIOS[scenario][0]())
    raw["experiment"] = f"ref-{scenario}-{variant}-{traffic}"
    for job in raw["jobs"]:
        job.update(cc=cc, iterations=iterations, collective=TRAFFIC[traffic])
    run = raw.setdefault("run", {})
    run["dataplane"] = "linux"
    for key, value in VARIANTS[variant].items():
        run[key] = {**run.get(key, {}), **value} if key == "emulation" else value
    return Experiment.from_dict(raw)


def run_metrics(results: Path, warmup: int) -> dict[str, Any]:
    """One run: slowdown (mean over jobs of mean iteration time / ideal, iterations >= warmup) and
    its p99, interleaved or not, the fidelity verdict, the bottleneck's link invariant, the drops
    in the hosts' egress queues, timeouts per iteration, the host's steal, the cores busy."""
    run = load_run(results)
    summary = run.summary
    iters = job_iterations(run.iterations, {name: len(j.hosts) for name, j in summary.jobs.items()})
    slow, slow99 = [], []
    for name, job in summary.jobs.items():
        times = [i.iter_time for i in iters.get(name, []) if i.complete and i.iteration >= warmup]
        if not times or not job.ideal_iter_s:
            raise RuntimeError(f"{results}: {name} has no complete iteration after the warm-up, or no ideal")
        slow.append(mean(times) / job.ideal_iter_s)
        slow99.append(percentile(times, 99) / job.ideal_iter_s)
    fidelity = summary.fidelity
    links = fidelity.links if fidelity else {}
    within = [w for k in BOTTLENECK if k in links and (w := links[k].within_share) is not None]
    stats = summary.link_stats or {}
    hosts = {h for j in summary.jobs.values() for h in j.hosts}
    return {"slowdown": mean(slow), "slowdown_p99": mean(slow99), "interleaved": interleaved(run),
            "verdict": fidelity.verdict if fidelity else None, "reason": fidelity.reason if fidelity else None,
            "bottleneck_within": mean(within) if within else None,
            "host_drops": sum(v.get("drops", 0) for k, v in stats.items() if k.split("->")[0] in hosts),
            "bottleneck_drops": sum((stats.get(k) or {}).get("drops", 0) for k in BOTTLENECK),
            "timeouts": timeouts_per_iteration(summary.tcp_counters, [j.iterations for j in summary.jobs.values()]),
            "steal": fidelity.host.steal_mean if fidelity and fidelity.host else None,
            "busy": cores_busy(summary),
            "status": summary.status, "results": str(results)}


def cores_busy(summary: RunSummary) -> float | None:
    """The mean share of the cores busy while the jobs ran (fidelity.host)."""
    host = summary.fidelity.host if summary.fidelity else None
    known = [c.busy_mean for c in (host.cores if host else []) if c.busy_mean is not None]
    return mean(known) if known else None


def busy_of(run: dict) -> float | None:
    """A run's `busy`, read again from its results folder for runs recorded before the field."""
    if "busy" in run:
        return run["busy"]
    path = Path(run.get("results", ""))
    return cores_busy(load_summary(path)) if (path / "summary.json").is_file() else None


def cells(scenarios: list[str], variants: list[str], traffics: list[str], flip_traffics: list[str],
          reps: int, flip_scenarios: list[str] | None = None) -> list[str]:
    """Every run's name, round-robin over repetitions; the flips only in `flip_scenarios` (all
    when None)."""
    out = []
    for rep in range(reps):
        for scenario in scenarios:
            for variant in variants:
                if variant in FLIPS and flip_scenarios is not None and scenario not in flip_scenarios:
                    continue
                for traffic in traffics if variant in NETWORKS else flip_traffics:
                    out += [f"{scenario}__{variant}__{traffic}__{cc}__r{rep}" for cc in SCENARIOS[scenario][1]]
    return out


def load_done(out: Path) -> dict[tuple[str, str, str, str], list[dict]]:
    done: dict[tuple[str, str, str, str], list[dict]] = {}
    for path in sorted((out / "runs").glob("*.json")):
        scenario, variant, traffic, cc, _rep = path.stem.split("__")
        m = json.loads(path.read_text())
        if m["status"] == "completed":
            done.setdefault((scenario, variant, traffic, cc), []).append(m)
    return done


def ci_text(values: list[float]) -> str:
    m, _, h = mean_ci95(values)
    return f"{m:.3f} ± {h:.3f}" if h is not None else f"{m:.3f}"


def share(runs: list[dict], key: str, value: Any = True) -> str:
    known = [r for r in runs if r.get(key) is not None]
    return f"{sum(r[key] == value for r in known)}/{len(known)}"


def reference_table(done: dict, scenarios: list[str], traffics: list[str]) -> list[str]:
    nets = list(NETWORKS)
    lines = ["| scenario | CC | traffic | " + " | ".join(f"{n}: slowdown (95% CI), interleaved, faithful"
                                                       for n in nets) + " | project / plain (95% CI) |",
             "|---|---|---|" + "---|" * (len(nets) + 1)]
    for scenario in scenarios:
        for cc in SCENARIOS[scenario][1]:
            for traffic in traffics:
                cols = []
                for net in nets:
                    runs = done.get((scenario, net, traffic, cc), [])
                    cols.append("-" if not runs else f"{ci_text([r['slowdown'] for r in runs])} (n={len(runs)}), "
                                f"{share(runs, 'interleaved')}, {share(runs, 'verdict', 'faithful')}")
                plain = done.get((scenario, "plain", traffic, cc))
                project = done.get((scenario, "project", traffic, cc))
                ratio = "-"
                if plain and project:
                    r, h = ratio_ci([m["slowdown"] for m in project], [m["slowdown"] for m in plain])
                    ratio = f"{r:.3f} ± {h:.3f}" if h is not None else f"{r:.3f}"
                lines.append(f"| {scenario} | {cc} | {traffic} | " + " | ".join(cols) + f" | {ratio} |")
    return lines


def sensitivity_table(done: dict, scenarios: list[str], traffics: list[str]) -> list[str]:
    lines = ["| scenario | CC | traffic | choice flipped | slowdown (95% CI) | / project's (95% CI) | "
             "interleaved | faithful | bottleneck gaps within ±10% | host-queue drops per run | RTOs per iteration | "
             "cores busy | others' CPU |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for scenario in scenarios:
        for cc in SCENARIOS[scenario][1]:
            for traffic in traffics:
                base = done.get((scenario, "project", traffic, cc), [])
                for variant in ["project", *FLIPS]:
                    runs = done.get((scenario, variant, traffic, cc), [])
                    if not runs:
                        continue
                    ratio = "-"
                    if base and variant != "project":
                        r, h = ratio_ci([m["slowdown"] for m in runs], [m["slowdown"] for m in base])
                        ratio = f"{r:.3f} ± {h:.3f}" if h is not None else f"{r:.3f}"
                    within = [r["bottleneck_within"] for r in runs if r["bottleneck_within"] is not None]
                    rtos = [r["timeouts"] for r in runs if r["timeouts"] is not None]
                    busy = [b for b in map(busy_of, runs) if b is not None]
                    foreign = [r["foreign_cpu"] for r in runs if r.get("foreign_cpu") is not None]
                    lines.append(
                        f"| {scenario} | {cc} | {traffic} | {'(defaults)' if variant == 'project' else variant} | "
                        f"{ci_text([r['slowdown'] for r in runs])} (n={len(runs)}) | {ratio} | "
                        f"{share(runs, 'interleaved')} | {share(runs, 'verdict', 'faithful')} | "
                        f"{(f'{mean(within):.1%}' if within else '-')} | {mean([r['host_drops'] for r in runs]):.0f} | "
                        f"{(f'{mean(rtos):.2f}' if rtos else '-')} | {(f'{mean(busy):.0%}' if busy else '-')} | "
                        f"{(f'{mean(foreign):.0%} (max {max(foreign):.0%})' if foreign else '-')} |")
    return lines


def cpu_snapshot() -> tuple[float, float, float]:
    """(seconds every core was busy, this process's and its waited-for children's CPU seconds,
    the ksoftirqd threads' CPU seconds) now: their differences over a run tell how much of the
    machine something else used (`foreign_cpu`; the machine is shared)."""
    tick = os.sysconf("SC_CLK_TCK")
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
    busy = (user + nice + system + irq + softirq) / tick
    mine = sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                   resource.getrusage(resource.RUSAGE_CHILDREN)))
    kernel = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if "(ksoftirqd/" in text:
            after = text.rsplit(")", 1)[1].split()
            kernel += (int(after[11]) + int(after[12])) / tick  # utime, stime
    return busy, mine, kernel


def foreign_share(before: tuple[float, float, float], after: tuple[float, float, float], wall_s: float) -> float:
    """The share of the machine's cores used over `wall_s` by processes that are neither this
    run's (the bench, its network, its workers) nor the kernel's packet work (ksoftirqd)."""
    busy, mine, kernel = (b - a for a, b in zip(before, after, strict=True))
    return max(0.0, (busy - mine - kernel) / (wall_s * (os.cpu_count() or 1)))


def measure(out: Path, todo: list[str], args) -> None:
    from mn_harness.runner import run_experiment

    # the other benches' lock first, then the network lock (always in this order), and the
    # network lock never kept once the other is given up: a bench holding the measurement lock
    # waits for the network lock, so holding the network lock while waiting for the measurement
    # lock would deadlock
    measure_lock, net_lock = (ChunkedLock(path, args.chunk_min * 60) for path in (args.measure_lock, args.lock))
    started = None
    try:
        for k, name in enumerate(todo):
            if started is not None and time.monotonic() - started > args.budget_min * 60:
                print(f"budget of {args.budget_min:g} min used: {len(todo) - k} runs left; run again to resume",
                      flush=True)
                return
            scenario, variant, traffic, cc, rep = name.split("__")
            exp = experiment(scenario, variant, traffic, cc, args.iterations)
            print(f"[{k + 1}/{len(todo)}] {scenario} {variant} {traffic} {cc} {rep}", flush=True)
            try:
                with measure_lock.run(), net_lock.run():
                    started = started or time.monotonic()
                    cpu0, t0 = cpu_snapshot(), time.monotonic()
                    results = run_experiment(exp, out_root=out / "results", log=lambda *_: None)
                    foreign = foreign_share(cpu0, cpu_snapshot(), time.monotonic() - t0)
            except HarnessError as exc:  # left out of the tables; the next invocation tries again
                print(f"    failed: {exc}", flush=True)
                continue
            finally:
                if measure_lock.path and not measure_lock.held:
                    net_lock.release()
            m = {**run_metrics(results, args.warmup), "foreign_cpu": round(foreign, 4)}
            print(f"    slowdown {m['slowdown']:.3f}  interleaved {m['interleaved']}  {m['verdict']}  "
                  f"bottleneck within {m['bottleneck_within']}  host drops {m['host_drops']}  "
                  f"foreign CPU {foreign:.0%}", flush=True)
            (out / "runs" / f"{name}.json").write_text(json.dumps(m))
    finally:
        net_lock.release()
        measure_lock.release()


def main() -> int:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C tears down, even from a script
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", default="bench-reference", help="results folder (resumable)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--variants", default=",".join(VARIANTS), help="networks and flips to run")
    parser.add_argument("--traffics", default="real,synthetic", help="traffic of the three networks")
    parser.add_argument("--flip-traffics", default="synthetic", help="traffic of the flipped choices")
    parser.add_argument("--flip-scenarios", default="3jobs-ssai", help="scenarios the flips run in")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5, help="iterations left out of the statistics")
    parser.add_argument("--budget-min", type=float, default=60.0, help="start no run after this many minutes")
    parser.add_argument("--chunk-min", type=float, default=18.0, help="hold the lock at most about this long")
    parser.add_argument("--lock", default=LOCK, help="the network lock ('' for none)")
    parser.add_argument("--measure-lock", default=MEASURE_LOCK, help="the other benches' lock ('' for none)")
    parser.add_argument("--table-only", action="store_true", help="print the tables of what is finished")
    args = parser.parse_args()
    scenarios, variants = args.scenarios.split(","), args.variants.split(",")
    traffics, flip_traffics = args.traffics.split(","), args.flip_traffics.split(",")
    for given, known in ((scenarios, SCENARIOS), (variants, VARIANTS), (traffics + flip_traffics, TRAFFIC)):
        unknown = [x for x in given if x not in known]
        if unknown:
            parser.error(f"unknown: {', '.join(unknown)} (known: {', '.join(known)})")
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    todo = [c for c in cells(scenarios, variants, traffics, flip_traffics, args.reps, args.flip_scenarios.split(","))
            if not (out / "runs" / f"{c}.json").exists()]
    if not args.table_only and todo:
        measure(out, todo, args)
    done = load_done(out)
    print("\n".join(["", "Reference networks:", *reference_table(done, scenarios, sorted(set(traffics))),
                     "", "Sensitivity (each choice flipped alone from the project's defaults):",
                     *sensitivity_table(done, scenarios, sorted(set(traffics) | set(flip_traffics)))]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

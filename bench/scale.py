#!/usr/bin/env python3
"""How far one machine goes: network set-up / tear-down time and memory against topology size,
and the largest number of concurrent jobs whose goodput stays at its fair share.

1. Set-up and tear-down seconds and memory (MemAvailable before the build minus after it:
   namespaces, veths, qdiscs, node shells) of the Linux data plane for 4 .. 64 hosts, two
   shapes: a dumbbell (hosts split over two switches, one core link) and a leaf-spine fabric
   (2 spines, 4 hosts per leaf). `--repeat` builds each; median and 95% CI of the mean.
2. Concurrent jobs: N 2-worker jobs across a dumbbell whose core carries N × rate, so every
   job's fair share is `rate` (1 Gbit/s, 500 Mbit/s and 100 Mbit/s by default) and only the machine limits
   it. Each job communicates back to back (1 ms compute); goodput = bytes sent per worker per
   iteration / mean iteration time (warm-up left out), as a fraction of the fair share. N grows
   until the worst job (mean over repetitions) falls below --threshold (0.9); the largest N that
   stayed above is the goodput limit at that rate, and the largest N up to which every run was
   also faithful (summary.json `fidelity`: every invariant held) the faithful limit, the one
   docs/scaling.md and the README quote. Beside the fraction, the payload ceiling of the links'
   MTU (mn_harness/frames.py: 1448 bytes of payload per 1514-byte frame at 1500, 0.956) and
   the fraction of it. Beside each count: the busy cores while the jobs' measured iterations
   ran (cpu.csv in that window, mn_harness/results/cpu_window.py; the VM's steal left out) and
   the steal, the jobs' goodput together and, over the faithful runs (and over every run: the
   machine's other load is in the busy cores too, so a shared machine reads low), that goodput
   per busy core, and its ratio to the kernel's own forwarding rate per core on this machine,
   measured first (bench/forwarding.py: one route, frames of the same size and GSO cap, iperf3
   both ways): how far the emulation is from what the kernel alone could move.
   `--set PATH=VALUE` changes every concurrent-jobs run (e.g. run.gso_max_segs=16,
   link_defaults.mtu=9000).

The bench takes the measurement lock itself, in chunks of at most --chunk-min minutes (do not
wrap this in flock). Ends with
one key=value line; `--json` keeps everything.

Usage: sudo .venv/bin/python bench/scale.py [--sizes 4,8,16,32,64] [--rates 1Gbit,500Mbit,100Mbit]
           [--jobs 1,2,3,4,6,8,12,16,24,32] [--repeat 3] [--skip-setup] [--skip-jobs]
           [--skip-forwarding] [--set PATH=VALUE]"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, fields
from pathlib import Path

import forwarding
from common import DEFAULT_LOCK, ChunkedLock, mean_ci, with_overrides  # bench/common.py: the package importable
from forwarding import ForwardingRate

from mn_harness.config import Experiment
from mn_harness.frames import payload_ceiling
from mn_harness.results.cpu_window import run_window_load
from mn_harness.results.loaders import load_summary
from mn_harness.units import parse_bandwidth

HOSTS_PER_LEAF = 4


def dumbbell(hosts: int, rate: str = "1Gbit", core: str | None = None, jobs: int = 1,
             bytes_per_iteration: str | int = "1MB", compute: str = "1ms", iterations: int = 1) -> dict:
    """`hosts` hosts, half on s1, half on s2; job i runs on a<i> (s1) and b<i> (s2)."""
    half = hosts // 2
    left, right = [f"a{i}" for i in range(half)], [f"b{i}" for i in range(half)]
    return {
        "experiment": f"scale-dumbbell-{hosts}", "hosts": left + right, "switches": ["s1", "s2"],
        "link_defaults": {"bw": rate, "queue": 100},
        "links": [{"endpoints": ["s1", "s2"], "bw": core or rate}]
        + [{"endpoints": [h, "s1"]} for h in left] + [{"endpoints": [h, "s2"]} for h in right],
        "jobs": [{"name": f"j{i}", "workers": [left[i], right[i]], "bytes_per_iteration": bytes_per_iteration,
                  "compute": compute, "iterations": iterations, "cc": "cubic"} for i in range(jobs)],
        "run": {"dataplane": "linux"},
    }


def leaf_spine(hosts: int, rate: str = "1Gbit") -> dict:
    """2 spines, hosts/4 leaves of 4 hosts; one job from the first to the last leaf."""
    leaves = max(2, hosts // HOSTS_PER_LEAF)
    names = [f"h{i}" for i in range(hosts)]
    links = [{"endpoints": [f"leaf{k}", s]} for k in range(leaves) for s in ("spine1", "spine2")]
    links += [{"endpoints": [h, f"leaf{i * leaves // hosts}"]} for i, h in enumerate(names)]
    return {
        "experiment": f"scale-leafspine-{hosts}", "hosts": names,
        "switches": ["spine1", "spine2"] + [f"leaf{k}" for k in range(leaves)],
        "link_defaults": {"bw": rate, "queue": 100}, "links": links,
        "jobs": [{"name": "j0", "workers": [names[0], names[-1]], "bytes_per_iteration": "1MB",
                  "compute": "1ms", "iterations": 1}],
        "run": {"dataplane": "linux"},
    }


def mem_available_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def build_once(raw: dict) -> tuple[float, float, float]:
    """(set-up s, tear-down s, memory MB) of one build of the Linux data plane."""
    from mn_harness.dataplane.linux import LinuxDataplane
    from mn_harness.network.emulated import EmulatedNetwork
    from mn_harness.network.plan import NetworkPlan

    exp = Experiment.from_dict(raw)
    net = EmulatedNetwork(exp, NetworkPlan(exp), LinuxDataplane())
    before = mem_available_kb()
    t0 = time.monotonic()
    try:
        net.build()
        t1 = time.monotonic()
        used_mb = (before - mem_available_kb()) / 1024
    finally:
        t_stop = time.monotonic()
        net.stop()
    return t1 - t0, time.monotonic() - t_stop, used_mb


def setup_sizes(sizes: list[int], repeat: int, lock: ChunkedLock, keys: dict, out: dict) -> None:
    print("shape      hosts switches links  set-up s        tear-down s     memory MB")
    for shape, make in (("dumbbell", dumbbell), ("leafspine", leaf_spine)):
        for hosts in sizes:
            raw = make(hosts)
            samples = []
            for _ in range(repeat):
                with lock.run():
                    samples.append(build_once(raw))
            ups, downs, mems = (list(x) for x in zip(*samples, strict=True))
            print(f"{shape:<10} {hosts:>5} {len(raw['switches']):>8} {len(raw['links']):>5}  "
                  f"{mean_ci(ups, 2):<15} {mean_ci(downs, 2):<15} {mean_ci(mems, 2)}", flush=True)
            keys[f"setup_s_{shape}_{hosts}"] = round(statistics.median(ups), 2)
            keys[f"teardown_s_{shape}_{hosts}"] = round(statistics.median(downs), 2)
            keys[f"memory_mb_{shape}_{hosts}"] = round(statistics.median(mems), 1)
            out.setdefault("setup", []).append({"shape": shape, "hosts": hosts, "setup_s": ups,
                                                "teardown_s": downs, "memory_mb": mems})


@dataclass
class JobsRun:
    """One run of n concurrent jobs: per job its goodput / fair share; the run's verdict (with
    its reason); the jobs' goodput together and the cores the machine kept busy while the jobs'
    measured iterations ran (cpu.csv in that window, the VM's steal left out)."""

    fractions: list[float]
    verdict: str
    gbps: float
    busy_cores: float  # in the jobs' measured iterations (results.cpu_window), steal left out
    steal: float  # the share of the cores' time the hypervisor took meanwhile
    mtu: int  # the smallest of the run's links: its payload ceiling bounds every job

    @property
    def ceiling(self) -> float:
        """The most of the line rate a job's goodput can be (frames.payload_ceiling)."""
        return payload_ceiling(self.mtu)

    @property
    def faithful(self) -> bool:
        return self.verdict == "faithful"

    @property
    def gbps_per_core(self) -> float:
        return self.gbps / self.busy_cores if self.busy_cores else 0.0


def run_jobs(n_jobs: int, rate: str, iterations: int, lock: ChunkedLock, overrides: list[str]) -> JobsRun:
    """One run of n_jobs jobs at `rate` each (`overrides`: PATH=VALUE changes of the experiment)."""
    from mn_harness.runner import run_experiment

    bps = parse_bandwidth(rate, "rate")
    nbytes = int(bps / 8 * 0.2)  # 200 ms per iteration at the fair share
    raw = with_overrides(dumbbell(2 * n_jobs, rate, core=f"{int(bps * n_jobs)}bit", jobs=n_jobs,
                                  bytes_per_iteration=nbytes, iterations=iterations), overrides)
    experiment = Experiment.from_dict(raw)
    with tempfile.TemporaryDirectory() as tmp, lock.run():
        results = run_experiment(experiment, out_root=tmp, log=lambda *_: None)
        summary = load_summary(results)
        window = run_window_load(results, experiment.run.warmup)
    jobs = list(summary.jobs.values())
    fractions = [(j.bytes_sent_per_worker or 0) * 8 / j.mean_iter_s / bps if j.mean_iter_s else 0.0 for j in jobs]
    gbps = sum(sum(j.bytes_sent_per_rank) * 8 / j.mean_iter_s for j in jobs if j.mean_iter_s) / 1e9
    cores = (summary.cpu_load or {}).get("cores") or os.cpu_count() or 0
    busy = window.busy_cores(cores) if window is not None else 0.0
    f = summary.fidelity
    verdict = "unchecked" if f is None else (f.verdict or "unchecked") + (f" ({f.reason})" if f.reason else "")
    return JobsRun(fractions, verdict, gbps, busy, window.steal if window is not None else 0.0,
                   min(link.mtu for link in experiment.links))


def of_kernel(per_core: list[float], reference: ForwardingRate | None) -> str:
    """' = x of the kernel's forwarding': the mean Gbit/s per busy core against the kernel's."""
    if not per_core or reference is None or not reference.gbps_per_core:
        return ""
    return f" = {statistics.mean(per_core) / reference.gbps_per_core:.2f} of the kernel's forwarding"


def concurrent_jobs(rates: list[str], counts: list[int], repeat: int, iterations: int, threshold: float,
                    lock: ChunkedLock, keys: dict, out: dict, overrides: list[str],
                    reference: ForwardingRate | None) -> None:
    for rate in rates:
        best = faithful_best = 0
        every_faithful = True
        per_core: list[float] = []  # Gbit/s per busy core of the faithful runs at the faithful limit
        print(f"concurrent jobs at {rate} each (fair share = {rate}; worst job's goodput / fair share; "
              "the runs' fidelity verdicts; the faithful runs' goodput per busy core)")
        for n in counts:
            runs = [run_jobs(n, rate, iterations, lock, overrides) for _ in range(repeat)]
            worst = [min(r.fractions) for r in runs]
            faithful = [r for r in runs if r.faithful]
            mean = statistics.mean(worst)
            good = [r.gbps_per_core for r in faithful]
            every = [r.gbps_per_core for r in runs]
            ceiling = runs[0].ceiling
            print(f"  {n:>3} jobs: {mean_ci(worst, 3)}  (runs: {', '.join(f'{w:.3f}' for w in worst)}) = "
                  f"{mean_ci([w / ceiling for w in worst], 3)} of the payload ceiling {ceiling:.3f} (MTU "
                  f"{runs[0].mtu}); faithful {len(faithful)} of {len(runs)}; busy cores in the iterations "
                  f"{mean_ci([r.busy_cores for r in runs], 3)} (steal {mean_ci([r.steal for r in runs], 3)}); "
                  f"goodput {mean_ci([r.gbps for r in runs], 3)} Gbit/s, "
                  f"per busy core (faithful runs) {mean_ci(good, 2)} Gbit/s{of_kernel(good, reference)}, "
                  f"(every run) {mean_ci(every, 2)} Gbit/s{of_kernel(every, reference)}", flush=True)
            for r in runs:
                if not r.faithful:
                    print(f"        {r.verdict}", flush=True)
            out.setdefault("jobs", []).append({"rate": rate, "jobs": n, "worst_fraction": worst,
                                               "verdicts": [r.verdict for r in runs], "gbps": [r.gbps for r in runs],
                                               "busy_cores": [r.busy_cores for r in runs],
                                               "steal": [r.steal for r in runs], "mtu": runs[0].mtu,
                                               "payload_ceiling": ceiling})
            if mean < threshold:
                break
            best = n
            every_faithful = every_faithful and len(faithful) == len(runs)
            if every_faithful:  # this count and every smaller one: all runs faithful
                faithful_best, per_core = n, good
        keys[f"max_jobs_{rate}"] = best
        keys[f"max_faithful_jobs_{rate}"] = faithful_best
        if per_core:
            keys[f"gbps_per_core_{rate}"] = round(statistics.mean(per_core), 3)
        print(f"  -> at most {best} concurrent jobs at {rate} keep >= {threshold} of their fair share; "
              f"{faithful_best} with every run faithful as well (every invariant held)"
              + (f", at {mean_ci(per_core, 2)} Gbit/s of goodput per busy core" if per_core else ""), flush=True)


def forwarding_reference(repeat: int, lock: ChunkedLock, gso_max_segs: int, mtu: int, keys: dict,
                         out: dict) -> ForwardingRate:
    """The kernel's forwarding rate on this machine (bench/forwarding.py) with the runs' GSO cap
    and MTU, mean of `repeat` runs."""
    rates = []
    for _ in range(repeat):
        with lock.run():
            rates.append(forwarding.measure(gso_max_segs=gso_max_segs, mtu=mtu))
    per_core = [r.gbps_per_core for r in rates]
    print(f"kernel forwarding, one route (a -> router -> b, veth, MTU {mtu}, gso_max_segs {gso_max_segs}, iperf3 "
          f"--bidir): {mean_ci([r.gbps for r in rates], 2)} Gbit/s on {mean_ci([r.busy_cores for r in rates], 2)} "
          f"busy cores = {mean_ci(per_core, 2)} Gbit/s per core (steal {mean_ci([r.steal for r in rates], 3)}; "
          f"the machine's other load just before {mean_ci([r.before_cores for r in rates], 2)} cores)", flush=True)
    keys["kernel_gbps_per_core"] = round(statistics.mean(per_core), 3)
    out["forwarding"] = [vars(r) for r in rates]
    return ForwardingRate(*(statistics.mean(getattr(r, f.name) for r in rates) for f in fields(ForwardingRate)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,8,16,32,64")
    parser.add_argument("--rates", default="1Gbit,500Mbit,100Mbit")
    parser.add_argument("--jobs", default="1,2,3,4,6,8,12,16,24,32")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--lock", default=DEFAULT_LOCK, help="the measurement lock ('' for none)")
    parser.add_argument("--chunk-min", type=float, default=20.0, help="hold the lock at most this long at a time")
    parser.add_argument("--skip-setup", action="store_true")
    parser.add_argument("--skip-jobs", action="store_true")
    parser.add_argument("--skip-forwarding", action="store_true", help="no kernel forwarding reference")
    parser.add_argument("--set", action="append", default=[],
                        help="PATH=VALUE change of every concurrent-jobs run (e.g. run.gso_max_segs=16)")
    parser.add_argument("--json", default="bench-scale.json")
    args = parser.parse_args()
    keys: dict[str, object] = {}
    out: dict[str, list] = {}
    lock = ChunkedLock(args.lock, args.chunk_min * 60)
    try:
        if not args.skip_setup:
            setup_sizes([int(s) for s in args.sizes.split(",")], args.repeat, lock, keys, out)
        if not args.skip_jobs:
            sample = Experiment.from_dict(with_overrides(dumbbell(2), args.set))
            segs, mtu = sample.run.gso_max_segs, min(link.mtu for link in sample.links)
            reference = None if args.skip_forwarding else forwarding_reference(args.repeat, lock, segs, mtu, keys, out)
            concurrent_jobs(args.rates.split(","), [int(n) for n in args.jobs.split(",")], args.repeat,
                            args.iterations, args.threshold, lock, keys, out, args.set, reference)
    finally:
        lock.release()
    Path(args.json).write_text(json.dumps({"keys": keys, **out}, indent=1))
    print(" ".join(f"{k}={v}" for k, v in keys.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

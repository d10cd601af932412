#!/usr/bin/env python3
"""ECN marking and queue telemetry on the Linux data plane, measured: ratios and means from this
run, with repetitions and 95% confidence intervals (mean_ci95), warm-up iterations left out.

Parts (--part, comma-separated; default all). Each finished run is stored in --state at once, so
an interrupted benchmark resumes where it stopped (delete the file to start over); run each part
under the measurement lock on shared machines.

  cost       isolated goodput of one 2-worker job at 1 Gbit/s (the demo dumbbell, cubic) with the
             egress program marking and sampling every switch port at 100/s, against no program
             at all (ecn_threshold off, queue_telemetry false); goodput = bytes per worker /
             median communication time of the iterations after --warmup. Also the sampler's own
             CPU time per second (telemetry.busy_s).
  tracking   how well each tracker follows the qdisc's backlog under load: a bulk flow
             (cubic, dctcp) h1 -2 Gbit/s- s1 -1 Gbit/s- h2 (100-frame queue, K = 20), the
             program built with both trackers. At packet arrivals: the virtual queue vs the
             qdisc's backlog after the same packet (same moment by construction). At read
             moments: the tracked depth vs RTM_GETQDISC (what `tc -s qdisc` prints).
  scenarios  dctcp, mltcp-dctcp and cubic on a 2-job (topologies/dumbbell-2jobs.yaml) and a 3-job
             dumbbell (three 16 MB / 300 ms jobs, offsets 0/20/40 ms) at 1 Gbit/s, K = 20: the
             s1->s2 queue (packet-weighted mean and max depth), marks and drops there, and the
             mean over jobs of the mean and p99 slowdown against the ideal iteration time.

Usage: sudo flock /tmp/mn-harness-measure.lock .venv/bin/python bench/ecn.py --part cost"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import demo_alone, mean_ci, topology  # bench/common.py, which makes the package importable

from mn_harness.cc.manager import CongestionControlManager
from mn_harness.cc.spec import CCSpec
from mn_harness.config import Experiment
from mn_harness.p4.limits import FRAME_BYTES
from mn_harness.results.iterations import job_iterations
from mn_harness.results.loaders import load_run
from mn_harness.results.stats import mean_ci95, percentile
from mn_harness.runner import run_experiment
from mn_harness.testing.linux_testbed import (
    bulk_flow_topology,
    in_host,
    linux_network,
    traffic_result,
)
from mn_harness.testing.qdisc_stats import QdiscStatsReader

BOTTLENECK = "s1->s2"


def ci(values: list[float], digits: int = 3) -> str:
    return mean_ci(values, digits, n=True)


class State:
    """Finished runs by key, saved after each one."""

    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def run(self, key: str, fn):
        if key not in self.data:
            self.data[key] = fn()
            self.path.write_text(json.dumps(self.data, indent=1))
        return self.data[key]


# -- cost ------------------------------------------------------------------------------------

def cost_run(marking: bool, iterations: int, warmup: int, out: Path) -> dict:
    raw = demo_alone(iterations=iterations, compute="100ms", cc="cubic")
    if not marking:
        raw["switches"] = [{"name": s, "ecn_threshold": "off"} for s in raw["switches"]]
        raw["run"]["queue_telemetry"] = False
    run = load_run(run_experiment(Experiment.from_dict(raw, "bench-ecn-cost"), out_root=out, log=lambda *_: None))
    rows = sorted((r for r in run.iterations if (r.job, r.rank) == ("job1", 0)), key=lambda r: r.iteration)[warmup:]
    comm = statistics.median(r.comm_time for r in rows)
    tel = run.summary.telemetry or {}
    return {"goodput_gbps": rows[0].bytes_sent * 8 / comm / 1e9,
            "samples_per_s": tel.get("samples_per_s"), "busy_s": tel.get("busy_s"),
            "run_s": rows[-1].t_comm_end - rows[0].t_start, "method": (run.summary.ecn or {}).get("method")}


def part_cost(state: State, args, out: Path) -> dict:
    on, off, ratios, busy = [], [], [], []
    for rep in range(args.repeat):
        order = (True, False) if rep % 2 == 0 else (False, True)
        got = {m: state.run(f"cost/{m}/{rep}", lambda m=m: cost_run(m, args.iterations, args.warmup, out))
               for m in order}
        on.append(got[True]["goodput_gbps"])
        off.append(got[False]["goodput_gbps"])
        ratios.append(on[-1] / off[-1])
        if got[True]["busy_s"] is not None:
            busy.append(got[True]["busy_s"] / max(1e-9, got[True]["run_s"]))
        print(f"  rep {rep}: on {on[-1]:.3f} Gbit/s ({got[True]['method']}, "
              f"{got[True]['samples_per_s']}/s), off {off[-1]:.3f} Gbit/s", flush=True)
    print(f"cost: goodput with marking + telemetry {ci(on)} Gbit/s, without {ci(off)} Gbit/s, "
          f"ratio {ci(ratios)}; sampler CPU {ci([b * 100 for b in busy], 2)} % of a core", flush=True)
    return {"cost_goodput_on_gbps": round(statistics.mean(on), 3),
            "cost_goodput_off_gbps": round(statistics.mean(off), 3),
            "cost_ratio": round(statistics.mean(ratios), 4),
            "cost_ratio_ci95": round(mean_ci95(ratios)[2] or 0, 4),
            "sampler_cpu_pct": round(statistics.mean(busy) * 100, 2) if busy else None}


# -- tracking --------------------------------------------------------------------------------

def tracking_run(cc: str, seconds: float) -> dict:
    raw = bulk_flow_topology()
    with CongestionControlManager(log=lambda *_: None) as ccm:
        spec = CCSpec.from_dict(cc, "cc")
        ccm.prepare([spec])
        name = ccm.kernel_name(spec)
        with linux_network(raw, compare_trackers=True) as (network, plan, dataplane):
            prog = dataplane.programs[("s1", "s1-eth2")]
            rx = in_host(network, "h2", "tcp-recv", "9002", name)
            rx.stdout.readline()
            tx = in_host(network, "h1", "tcp-send", plan.host_ip["h2"], "9002", name, str(seconds))
            time.sleep(0.5)
            arrival, moments, ages = [], [], []  # ages: µs from the latest arrival to the read
            with QdiscStatsReader(network.nodes["s1"].pid, "s1-eth2") as qdisc:
                end = time.monotonic() + seconds - 1.0
                while time.monotonic() < end:
                    first = prog.read()
                    backlog = qdisc.root().backlog
                    read_ns = time.monotonic_ns()  # the program's clock (bpf_ktime_get_ns)
                    second = prog.read()
                    arrival.append((second.last_backlog / FRAME_BYTES, second.last_vq / FRAME_BYTES))
                    if first.last_ns == second.last_ns:
                        moments.append((second.last_depth / FRAME_BYTES, backlog / FRAME_BYTES))
                        ages.append((read_ns - second.last_ns) / 1e3)
                    time.sleep(0.002)
            traffic_result(tx)
            got = traffic_result(rx)
    vq_err = [abs(v - b) for b, v in arrival]
    read_err = [abs(t - b) for t, b in moments]
    return {"goodput_gbps": got["bytes"] * 8 / seconds / 1e9,
            "mean_backlog": statistics.mean(b for b, _ in arrival),
            "vq_mean_abs": statistics.mean(vq_err), "vq_p99_abs": percentile(vq_err, 99),
            "vq_mean_signed": statistics.mean(v - b for b, v in arrival),
            "read_mean_abs": statistics.mean(read_err) if read_err else None,
            "read_p99_abs": percentile(read_err, 99) if read_err else None,
            "read_within": sum(e <= max(2.0, 0.1 * b) for e, (_, b) in zip(read_err, moments, strict=True))
            / max(1, len(read_err)), "arrivals": len(arrival), "moments": len(moments),
            "read_age_us_median": statistics.median(ages) if ages else None}


def part_tracking(state: State, args, out: Path) -> dict:
    keys = {}
    for cc in ("cubic", "dctcp"):
        runs = [state.run(f"tracking/{cc}/{rep}", lambda cc=cc: tracking_run(cc, args.seconds))
                for rep in range(args.repeat)]
        print(f"tracking, {cc} flow at 1 Gbit/s: mean backlog {ci([r['mean_backlog'] for r in runs], 1)} frames; "
              f"virtual queue vs backlog at arrivals: mean |error| {ci([r['vq_mean_abs'] for r in runs], 2)}, "
              f"p99 {ci([r['vq_p99_abs'] for r in runs], 1)}, bias {ci([r['vq_mean_signed'] for r in runs], 2)} "
              f"frames; backlog tracker vs RTM_GETQDISC at read moments: mean |error| "
              f"{ci([r['read_mean_abs'] for r in runs], 2)}, p99 {ci([r['read_p99_abs'] for r in runs], 2)} "
              f"frames, within 10%/2 frames {ci([r['read_within'] * 100 for r in runs], 1)} % (median age of the "
              f"latest arrival at the read {ci([r['read_age_us_median'] for r in runs], 1)} µs)", flush=True)
        keys.update({f"vq_mean_abs_{cc}": round(statistics.mean(r["vq_mean_abs"] for r in runs), 2),
                     f"backlog_read_mean_abs_{cc}": round(statistics.mean(r["read_mean_abs"] for r in runs), 2)})
    return keys


# -- scenarios -------------------------------------------------------------------------------

def scenario_raw(name: str, cc: str, iterations: int) -> dict:
    raw = topology()
    if name == "3jobs":
        raw["hosts"] = [f"h{i}" for i in range(1, 7)]
        raw["links"] = ([{"endpoints": [f"h{i}", "s1"]} for i in (1, 2, 3)] + [{"endpoints": ["s1", "s2"]}]
                        + [{"endpoints": ["s2", f"h{i}"]} for i in (4, 5, 6)])
        raw["jobs"] = [{"name": f"job{j}", "workers": [f"h{j}", f"h{j + 3}"], "bytes_per_iteration": "16MB",
                        "compute": "300ms", "iterations": iterations, "start_offset": f"{20 * (j - 1)}ms"}
                       for j in (1, 2, 3)]
    raw["switches"] = [{"name": s, "ecn_threshold": 20} for s in ("s1", "s2")]
    for job in raw["jobs"]:
        job.update(iterations=iterations, cc=cc)
    raw["run"]["dataplane"] = "linux"
    return raw


def scenario_run(name: str, cc: str, iterations: int, warmup: int, out: Path) -> dict:
    exp = Experiment.from_dict(scenario_raw(name, cc, iterations), f"bench-ecn-{name}")
    run = load_run(run_experiment(exp, out_root=out, log=lambda *_: None))
    summary = run.summary
    iters = job_iterations(run.iterations, {j.name: j.n_workers for j in exp.jobs})
    slow_mean, slow_p99 = [], []
    for job in exp.jobs:
        times = [i.iter_time for i in iters.get(job.name, []) if i.complete and i.iteration >= warmup]
        ideal = summary.jobs[job.name].ideal_iter_s
        slow_mean.append(statistics.mean(times) / ideal)
        slow_p99.append(percentile(times, 99) / ideal)
    port = next(p for p in (summary.queue or {}).values() if p["link"] == BOTTLENECK)
    return {"mean_depth": port["mean_depth"], "max_depth": port["max_depth"], "marks": port["marks"],
            "drops": port["drops"], "slowdown_mean": statistics.mean(slow_mean),
            "slowdown_p99": statistics.mean(slow_p99), "status": summary.status,
            "samples_per_s": (summary.telemetry or {})["samples_per_s"]}


def part_scenarios(state: State, args, out: Path) -> dict:
    keys = {}
    for name in ("2jobs", "3jobs"):
        print(f"scenario {name} ({args.iterations} iterations, first {args.warmup} left out), "
              f"{BOTTLENECK} at 1 Gbit/s, K = 20 packets:", flush=True)
        for cc in ("dctcp", "mltcp-dctcp", "cubic"):
            runs = []
            for rep in range(args.repeat):
                runs.append(state.run(f"scenario/{name}/{cc}/{rep}",
                                      lambda cc=cc, name=name: scenario_run(name, cc, args.iterations,
                                                                            args.warmup, out)))
            print(f"  {cc:12s} queue mean {ci([r['mean_depth'] for r in runs], 1)} max "
                  f"{ci([r['max_depth'] for r in runs], 0)} packets; marks {ci([r['marks'] for r in runs], 0)}; "
                  f"drops {ci([r['drops'] for r in runs], 0)}; slowdown mean {ci([r['slowdown_mean'] for r in runs])} "
                  f"p99 {ci([r['slowdown_p99'] for r in runs])}", flush=True)
            tag = f"{name}_{cc.replace('-', '_')}"
            keys.update({f"queue_{tag}": round(statistics.mean(r["mean_depth"] for r in runs), 1),
                         f"slowdown_{tag}": round(statistics.mean(r["slowdown_mean"] for r in runs), 3),
                         f"p99_slowdown_{tag}": round(statistics.mean(r["slowdown_p99"] for r in runs), 3)})
    return keys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="cost,tracking,scenarios")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=20, help="per run (cost: 10 are plenty)")
    parser.add_argument("--warmup", type=int, default=3, help="first iterations left out")
    parser.add_argument("--seconds", type=float, default=4.0, help="tracking flow duration")
    parser.add_argument("--state", default="bench-ecn-state.json")
    args = parser.parse_args()
    state = State(Path(args.state))
    parts = {"cost": part_cost, "tracking": part_tracking, "scenarios": part_scenarios}
    keys: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for part in args.part.split(","):
            keys.update(parts[part](state, args, Path(tmp)))
    print(" ".join(f"{k}={v}" for k, v in keys.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Does the synthetic traffic behave like real training traffic? The same scenarios run with
torch.distributed (gloo) jobs ("real") and with the project's synthetic worker ("synthetic"),
per congestion control, with repetitions; printed as synthetic/real ratios with 95% CIs.

Per run (warm-up iterations excluded): the mean over jobs of each job's mean and p99 iteration
time and of its mean overlap (results.md's definitions), whether its jobs interleaved (the
convergence rule bench/reproduce.py counts), the share of its communication phases stalled
by a retransmission timeout (>= 150 ms with nothing acknowledged) and the timeouts the kernel
counted in the jobs' hosts per iteration (summary.json tcp_counters), a worker's CPU time per
iteration and the share of the machine's cores busy (worker_cpu, cpu_load). Per scenario and CC: the ratio
synthetic/real of the means over repetitions, with a 95% CI from the two samples' standard
errors (delta method: relative SE of a ratio = sqrt(se_s^2/m_s^2 + se_r^2/m_r^2), Student t with
n_s + n_r - 2 degrees of freedom). Overlap ratios are shown only where the real overlap is at
least 2% (below that a ratio means nothing; both values are printed). Target: every mean and
p99 ratio within 1.00 +/- 0.10 and the CI of the mean ratio containing 1.0.

Resumable: each finished run leaves <out>/runs/<scenario>__<cc>__<mode>__r<k>.json (its
results folder under <out>/results/); a second invocation skips those and prints the table
from everything finished. The bench takes the measurement lock itself
(/tmp/mn-harness-measure.lock) for chunks of runs of about --chunk-min minutes, giving it up in
between so others get the machine; --budget-min stops starting runs after that many minutes.
Do not wrap it in flock (use --no-lock if you must).

--transport '{"segment_bytes": 1048576}' runs the synthetic worker with those
mn_harness/worker/tunables.py Tunables overrides, and --set PATH=VALUE changes every run of both
traffics (e.g. run.emulation.worker_main_thread=realtime); use a fresh --out for each setting:
the folder records it, and a folder with runs of another setting is refused.

Usage: sudo .venv/bin/python bench/fidelity.py [--out bench-fidelity] [--reps 3] [--chunk-min 25] [--budget-min 200]
           [--scenarios demo,three_jobs,heavy,three_slack] [--ccs reno,cubic,bbr,mltcp-reno,mltcp-cubic]
           [--modes real,synthetic] [--transport JSON] [--set PATH=VALUE ...]"""

from __future__ import annotations

import argparse
import bisect
import copy
import json
import math
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

# bench/common.py, which makes the package importable
from common import DEFAULT_LOCK, ChunkedLock, pm, topology, with_overrides

from mn_harness.config import Experiment
from mn_harness.jobs.ideal import ideal_iteration_s
from mn_harness.jobs.specs import TRANSPORT_ENV
from mn_harness.network.plan import NetworkPlan
from mn_harness.network.tcp_counters import timeouts_per_iteration
from mn_harness.report.metrics import compute_metrics, iteration_overlaps, rivals
from mn_harness.results.iterations import job_iterations
from mn_harness.results.loaders import RunData, load_run, load_summary
from mn_harness.results.schema import RunSummary
from mn_harness.results.stats import mean, mean_ci95, percentile, t_critical_95
from mn_harness.runner import run_experiment

CCS = ("reno", "cubic", "bbr", "mltcp-reno", "mltcp-cubic")
MODES = {"real": "torch_allreduce", "synthetic": "ring_allreduce"}
TOLERANCE = 0.10
STALL_S = 0.15  # a stretch of a communication phase with nothing acknowledged (stalled_share)


def demo() -> dict:
    """The shipped demo: two 2-worker jobs, 25 MB / 300 ms, 1 Gbit/s, job2 20 ms later."""
    return topology()


def heavy() -> dict:
    """The demo's network, communication-heavy jobs: 50 MB / 150 ms (phases cannot separate)."""
    raw = demo()
    for job in raw["jobs"]:
        job.update(bytes_per_iteration="50MB", compute="150ms")
    return raw


def three_jobs() -> dict:
    """Three 3-worker jobs across the dumbbell (each ring crosses the bottleneck both ways),
    12 MB / 250 ms, started 0, 20 and 40 ms apart."""
    raw = demo()
    left, right = ["h1", "h2", "h3", "h4", "h5"], ["h6", "h7", "h8", "h9"]
    raw["hosts"] = left + right
    raw["links"] = ([{"endpoints": [h, "s1"]} for h in left] + [{"endpoints": ["s1", "s2"]}]
                    + [{"endpoints": ["s2", h]} for h in right])
    workers = (["h1", "h6", "h2"], ["h3", "h7", "h4"], ["h5", "h8", "h9"])
    raw["jobs"] = [{"name": f"job{k + 1}", "workers": list(w), "bytes_per_iteration": "12MB",
                    "compute": "250ms", "iterations": 30, "start_offset": f"{20 * k}ms", "cc": "cubic"}
                   for k, w in enumerate(workers)]
    return raw


def three_slack() -> dict:
    """bench/reproduce.py's `3jobs-slack`: three 2-worker jobs on one 1 Gbit/s bottleneck,
    25 MB / 500 ms (a = 0.29 each: they could interleave perfectly), started 10 ms apart. Here
    the unmodified CCs do not interleave on their own, so it shows whether the synthetic traffic
    locks in step as often as gloo's (and so whether MLTCP's gain over reno is the traffic's)."""
    raw = topology("compatible-3jobs")
    for job in raw["jobs"]:
        job["compute"] = "500ms"
    return raw


SCENARIOS = {"demo": demo, "three_jobs": three_jobs, "heavy": heavy, "three_slack": three_slack}
# iterations per run where --iterations is not given: phases drift over tens of iterations in
# three_slack, so 20 would show little more than the start
ITERATIONS = {"three_slack": 40}
# The shortest run per CC where --iterations is not given. BBR probes its path's minimum RTT
# once its estimate is 10 s old (PROBE_RTT: the window cut to 4 packets for 200 ms, Linux's
# tcp_bbr.c bbr_min_rtt_win_sec): a run of about 10 s catches that probe or not depending on
# sub-second differences in when its connections last saw their minimum RTT. Measured here on
# 3 December 2026: the demo's 20 iterations (10.2 s) caught it (the window at 4 packets for
# 100-420 ms of sending, at 9.3-10.4 s) in 3 of 5 gloo runs and 1 of 5 synthetic ones; in 2
# of the 3 the delayed jobs fell back into step, which set the p99 (synthetic / real 0.76).
# Over 30 s every connection of either traffic meets it about three times, as a training job
# does every 10 s.
MIN_RUN_S = {"bbr": 30.0}


def iterations_for(scenario: str, cc: str, given: int | None = None) -> int:
    """Iterations per run: `given` (--iterations) if set, else the scenario's default raised so
    the run lasts MIN_RUN_S[cc] at the jobs' ideal iteration time (the slowest job's)."""
    if given:
        return given
    n = ITERATIONS.get(scenario, 20)
    min_s = MIN_RUN_S.get(cc)
    if min_s:
        exp = experiment(scenario, cc, "synthetic", n)
        plan = NetworkPlan(exp)
        period = max(ideal_iteration_s(job, plan)[0] for job in exp.jobs)
        n = max(n, math.ceil(min_s / period))
    return n


def experiment(scenario: str, cc: str, mode: str, iterations: int, overrides: Sequence[str] = ()) -> Experiment:
    raw = with_overrides(copy.deepcopy(SCENARIOS[scenario]()), overrides)
    raw["experiment"] = f"fidelity-{scenario}-{mode}"
    for job in raw["jobs"]:
        job.update(cc=cc, iterations=iterations, collective=MODES[mode])
    raw.setdefault("run", {})["dataplane"] = "linux"
    return Experiment.from_dict(raw)


def run_metrics(results: Path, warmup: int) -> dict:
    """Mean over jobs of (mean iteration time, p99, mean overlap), iterations >= warmup; whether
    the run interleaved and its stalled share."""
    run = load_run(results)
    summary = run.summary
    iters = job_iterations(run.iterations, {name: len(j.hosts) for name, j in summary.jobs.items()})
    means, p99s, overlaps = [], [], []
    for job in summary.jobs:
        times = [i.iter_time for i in iters.get(job, []) if i.complete and i.iteration >= warmup]
        if not times:
            raise RuntimeError(f"{results}: {job} has no complete iteration after the warm-up")
        means.append(mean(times))
        p99s.append(percentile(times, 99))
        ovs = [o.overlap for o in iteration_overlaps(job, iters, rivals(summary.link_jobs, job))
               if o.iteration >= warmup and o.overlap is not None]
        overlaps.append(mean(ovs) if ovs else 0.0)
    return {"mean_s": mean(means), "p99_s": mean(p99s), "overlap": mean(overlaps),
            "interleaved": interleaved(run), "stalled": stalled_share(run, warmup),
            "timeouts": timeouts(summary), "status": summary.status, "results": str(results)}


def timeouts(summary: RunSummary) -> float | None:
    """Retransmission timeouts per job iteration (summary.json tcp_counters)."""
    return timeouts_per_iteration(summary.tcp_counters, [j.iterations for j in summary.jobs.values()])


def interleaved(run: RunData) -> bool | None:
    """Did every job with a rival interleave (overlap <= 10% from some iteration on, results.md's
    convergence rule, as bench/reproduce.py counts it)? None when no job has a rival.

    Two-job runs are bimodal: a run either interleaves (near the ideal, p99 ~ mean) or stays in
    step (~1.1-1.4x, p99 far above), so a cell's mean and p99 depend first on how many of its
    runs interleaved; the count says whether a ratio off 1 is traffic or that draw."""
    metrics = compute_metrics(run.summary, run.iterations, run.throughput)
    conv = [j.convergence_iteration for j in metrics.jobs.values() if j.rivals]
    return None if not conv else all(c is not None for c in conv)


def stalled_share(run: RunData, warmup: int) -> float:
    """Share of the (job, rank) communication phases, iterations >= warmup, that hold a stretch
    of >= STALL_S with none of the rank's bytes acknowledged (throughput.csv's bins): the mark of
    a retransmission timeout (Linux's minimum RTO is 200 ms; a phase here lasts 0.2-1 s). One
    such phase in 15 sets a run's p99, so where the p99 ratios part and the means agree, this
    says whether the two traffics time out as often."""
    acked: dict[tuple[str, int], list[float]] = {}
    for row in run.throughput:
        if row.bytes > 0:
            acked.setdefault((row.job, row.rank), []).append(row.t)
    for times in acked.values():
        times.sort()
    phases = stalled = 0
    for it in run.iterations:
        if it.iteration < warmup or it.t_comm_end <= it.t_comm_start:
            continue
        times = acked.get((it.job, it.rank), [])
        inside = times[bisect.bisect_left(times, it.t_comm_start):bisect.bisect_right(times, it.t_comm_end)]
        edges = [it.t_comm_start, *inside, it.t_comm_end]
        phases += 1
        stalled += max(b - a for a, b in zip(edges, edges[1:], strict=False)) >= STALL_S
    return stalled / phases if phases else 0.0


def cpu_use(results: str | Path) -> tuple[float | None, float | None]:
    """(a worker's CPU seconds per iteration, mean over the run's jobs; the share of the
    machine's cores busy while the jobs ran), from summary.json's `worker_cpu` and `cpu_load`;
    None where a run does not record it. Both traffics share the machine's cores: a difference
    here says whether one of them was slowed by the CPU rather than by the network."""
    summary = load_summary(results)
    per_iter = [j.worker_cpu.per_iteration_s for j in summary.jobs.values()
                if j.worker_cpu and j.worker_cpu.per_iteration_s is not None]
    return (mean(per_iter) if per_iter else None), (summary.cpu_load or {}).get("busy_mean")


def mean_known(values: list[float | None]) -> float | None:
    """The mean of `values`, or None when any is unknown (a run from before the field)."""
    known = [v for v in values if v is not None]
    return mean(known) if known and len(known) == len(values) else None


def run_cpu(runs: list[dict]) -> tuple[float | None, float | None]:
    """(mean CPU seconds per worker-iteration, mean share of the cores busy) over `runs`."""
    figures = [cpu_use(m["results"]) if "results" in m else (None, None) for m in runs]
    return mean_known([f[0] for f in figures]), mean_known([f[1] for f in figures])


def run_flags(runs: list[dict], warmup: int) -> tuple[str, float, float | None]:
    """('k/n', mean stalled share, mean timeouts per iteration or None): of n runs (with rivals)
    k interleaved; run files from before these fields are read again from their results
    folders (timeouts: None where a run has no kernel counters)."""
    flags, shares, rtos = [], [], []
    for m in runs:
        if "interleaved" not in m or "stalled" not in m:
            run = load_run(m["results"])
            m = {**m, "interleaved": interleaved(run), "stalled": stalled_share(run, warmup)}
        if "timeouts" not in m and "results" in m:
            m = {**m, "timeouts": timeouts(load_summary(m["results"]))}
        flags.append(m["interleaved"])
        shares.append(m["stalled"])
        rtos.append(m.get("timeouts"))
    known = [f for f in flags if f is not None]
    return f"{sum(known)}/{len(known)}", mean(shares), mean_known(rtos)


def ratio_ci(syn: list[float], real: list[float]) -> tuple[float, float | None]:
    """(mean(syn) / mean(real), CI half-width of that ratio) — see the module docstring."""
    ms, _, hs = mean_ci95(syn)
    mr, _, hr = mean_ci95(real)
    r = ms / mr
    if hs is None or hr is None:
        return r, None
    se_s = hs / t_critical_95(len(syn) - 1)
    se_r = hr / t_critical_95(len(real) - 1)
    # r * sqrt((se_s/ms)^2 + (se_r/mr)^2), written so a synthetic mean of 0 (an overlap) is fine
    se = math.sqrt(se_s ** 2 + (r * se_r) ** 2) / mr
    return r, t_critical_95(len(syn) + len(real) - 2) * se


def fmt(r: float, h: float | None) -> str:
    return pm(r, h, alone=" (1 rep)")


def load_done(out: Path) -> dict[tuple[str, str, str], list[dict]]:
    done: dict[tuple[str, str, str], list[dict]] = {}
    for path in sorted((out / "runs").glob("*.json")):
        scenario, cc, mode, _rep = path.stem.split("__")
        done.setdefault((scenario, cc, mode), []).append(json.loads(path.read_text()))
    return done


def report(out: Path, scenarios: list[str], ccs: list[str], markdown: bool = False,
           warmup: int = 5) -> dict[str, object]:
    done = load_done(out)
    keys: dict[str, object] = {}
    within = total = 0
    if markdown:
        print("| scenario | CC | reps real/syn | mean real | mean synthetic | mean ratio (95% CI) | "
              "p99 ratio (95% CI) | overlap real / synthetic | interleaved real / synthetic | "
              "stalled phases real / synthetic | RTOs per iteration real / synthetic | "
              "CPU per worker-iteration real / synthetic | cores busy real / synthetic | on target |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    else:
        print(f"{'scenario':<11} {'cc':<12} {'reps':>5}  {'mean real':>9} {'mean syn':>9}  "
              f"{'mean ratio (95% CI)':<20} {'p99 ratio (95% CI)':<20} {'interleaved':<11} "
              f"{'stalled':<9} {'RTOs/iter':<11} {'CPU/iter ms':<11} {'busy':<9} overlap real/syn, ratio")
    for scenario in scenarios:
        for cc in ccs:
            real = [m for m in done.get((scenario, cc, "real"), []) if m["status"] == "completed"]
            syn = [m for m in done.get((scenario, cc, "synthetic"), []) if m["status"] == "completed"]
            if not real or not syn:
                if not markdown:
                    print(f"{scenario:<11} {cc:<12} {len(real)}/{len(syn)}  (not measured yet)")
                continue
            rm, hm = ratio_ci([m["mean_s"] for m in syn], [m["mean_s"] for m in real])
            rp, hp = ratio_ci([m["p99_s"] for m in syn], [m["p99_s"] for m in real])
            o_real, o_syn = mean([m["overlap"] for m in real]), mean([m["overlap"] for m in syn])
            if o_real >= 0.02:
                ro, ho = ratio_ci([m["overlap"] for m in syn], [m["overlap"] for m in real])
                overlap = f"{o_real:.0%}/{o_syn:.0%}, {fmt(ro, ho)}"
                keys[f"overlap_ratio_{scenario}_{cc}"] = round(ro, 3)
            else:
                overlap = f"{o_real:.0%}/{o_syn:.0%}, -"
            ok = (abs(rm - 1) <= TOLERANCE and abs(rp - 1) <= TOLERANCE
                  and (hm is None or abs(rm - 1) <= hm))
            within += ok
            total += 1
            keys[f"mean_ratio_{scenario}_{cc}"] = round(rm, 3)
            keys[f"p99_ratio_{scenario}_{cc}"] = round(rp, 3)
            (inter_r, stall_r, rto_r), (inter_s, stall_s, rto_s) = run_flags(real, warmup), run_flags(syn, warmup)
            inter, stalls = f"{inter_r} / {inter_s}", f"{stall_r:.0%}/{stall_s:.0%}"
            rtos = "-" if rto_r is None or rto_s is None else f"{rto_r:.2f}/{rto_s:.2f}"
            (cpu_r, busy_r), (cpu_s, busy_s) = run_cpu(real), run_cpu(syn)
            cpu = "-" if cpu_r is None or cpu_s is None else f"{cpu_r * 1e3:.0f}/{cpu_s * 1e3:.0f}"
            busy = "-" if busy_r is None or busy_s is None else f"{busy_r:.0%}/{busy_s:.0%}"
            if markdown:
                print(f"| {scenario} | {cc} | {len(real)}/{len(syn)} | "
                      f"{mean([m['mean_s'] for m in real]) * 1e3:.0f} ms | "
                      f"{mean([m['mean_s'] for m in syn]) * 1e3:.0f} ms | {fmt(rm, hm)} | {fmt(rp, hp)} | "
                      f"{o_real:.0%} / {o_syn:.0%} | {inter} | {stalls} | {rtos} | {cpu} ms | {busy} | "
                      f"{'yes' if ok else 'no'} |")
                continue
            print(f"{scenario:<11} {cc:<12} {len(real)}/{len(syn)}  "
                  f"{mean([m['mean_s'] for m in real]) * 1e3:7.1f}ms "
                  f"{mean([m['mean_s'] for m in syn]) * 1e3:7.1f}ms  "
                  f"{fmt(rm, hm):<20} {fmt(rp, hp):<20} {inter:<11} {stalls:<9} {rtos:<11} "
                  f"{cpu:<11} {busy:<9} {overlap}"
                  f"{'' if ok else '  <- off target'}")
    keys["on_target"] = f"{within}/{total}"
    return keys


def main() -> int:
    # started from a script's background job SIGINT is ignored: restore it, so Ctrl-C tears down
    signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", default="bench-fidelity", help="results folder (resumable)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--ccs", default=",".join(CCS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=None,
                        help="iterations per run (default: 20, three_slack 40; bbr: at least 30 s of ideal iterations)")
    parser.add_argument("--warmup", type=int, default=5, help="iterations left out of the statistics")
    parser.add_argument("--budget-min", type=float, default=25.0, help="start no run after this many minutes")
    parser.add_argument("--chunk-min", type=float, default=25.0,
                        help="hold the measurement lock for at most about this long at a time")
    parser.add_argument("--no-lock", action="store_true", help="do not take the measurement lock")
    parser.add_argument("--report-only", action="store_true", help="print the table of what is finished")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (for docs/)")
    parser.add_argument("--transport", default="{}", help="JSON: synthetic worker Tunables overrides")
    parser.add_argument("--set", action="append", default=[],
                        help="PATH=VALUE change of every run (e.g. run.emulation.worker_main_thread=realtime)")
    args = parser.parse_args()
    scenarios, ccs, modes = args.scenarios.split(","), args.ccs.split(","), args.modes.split(",")
    for name, known in ((scenarios, SCENARIOS), (ccs, None), (modes, MODES)):
        unknown = [x for x in name if known is not None and x not in known]
        if unknown:
            parser.error(f"unknown: {', '.join(unknown)}")
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    transport = json.loads(args.transport)
    # one setting per folder: the synthetic runs' Tunables overrides, and every run's --set
    for name, value in (("transport.json", transport), ("set.json", args.set)):
        setting = out / name
        if setting.exists() and json.loads(setting.read_text()) != value:
            parser.error(f"{out} holds runs with {name[:-5]} {setting.read_text()}: use another --out")
        if not args.report_only:
            setting.write_text(json.dumps(value))
    os.environ[TRANSPORT_ENV] = json.dumps(transport)
    todo = [(s, c, m, r) for r in range(args.reps) for s in scenarios for c in ccs for m in modes
            if not (out / "runs" / f"{s}__{c}__{m}__r{r}.json").exists()]
    started = time.monotonic()
    lock = ChunkedLock(None if args.no_lock else DEFAULT_LOCK, args.chunk_min * 60, gap_s=2.0)
    for k, (scenario, cc, mode, rep) in enumerate(todo if not args.report_only else []):
        if time.monotonic() - started > args.budget_min * 60:
            print(f"budget of {args.budget_min:g} min used: {len(todo) - k} runs left; run again to resume",
                  flush=True)
            break
        print(f"[{k + 1}/{len(todo)}] {scenario} {cc} {mode} rep {rep}", flush=True)
        exp = experiment(scenario, cc, mode, iterations_for(scenario, cc, args.iterations), args.set)
        with lock.run():
            results = run_experiment(exp, out_root=out / "results", log=lambda *_: None)
        metrics = run_metrics(results, args.warmup)
        print(f"    mean {metrics['mean_s'] * 1e3:.1f} ms  p99 {metrics['p99_s'] * 1e3:.1f} ms  "
              f"overlap {metrics['overlap']:.1%}", flush=True)
        (out / "runs" / f"{scenario}__{cc}__{mode}__r{rep}.json").write_text(json.dumps(metrics))
    lock.release()
    keys = report(out, scenarios, ccs, args.markdown, args.warmup)
    print(" ".join(f"{k}={v}" for k, v in keys.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

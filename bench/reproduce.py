#!/usr/bin/env python3
"""Reproduce MLTCP's claims on the scenario suite: every scenario × congestion control ×
repetition, then one table with 95% confidence intervals.

For each scenario (a shipped topologies/ file, possibly with `--set`-style changes) and CC:
mean and p99 slowdown (mean over the jobs of mean / p99 iteration time over the ideal, warm-up
iterations left out) ± 95% CI over the repetitions; for every base CC whose MLTCP variant also
ran, the gain of the variant (base / MLTCP mean and p99 iteration time, per repetition, paired by
repetition: both ran side by side in the same round) ± 95% CI; the fraction of runs that
converged (every job with a rival interleaved, overlap <= 10% from some iteration on) with its
Wilson interval and the median convergence iteration over all runs (never counts as later than
any); CASSINI's prediction (mean over jobs, best shifts / phases aligned); and the same slowdowns
and gains over each run's last STEADY_ITERATIONS iterations ("last 20"), where interleaving, if
it comes, has come: over a whole run the p99 is set by the iterations before convergence; and
the retransmission timeouts the kernel counted in the jobs' hosts per job iteration
(summary.json tcp_counters; a phase that waits for one sets a p99).

Restartable: the bench's folder holds one `mn_harness.sweep` folder per scenario (plan.json,
runs/) and `reproduce.json`; `--resume DIR` runs only what is missing (a run that was cut off is
run again). Runs go round-robin (repetition 1 of every CC, then repetition 2, ...), so machine
drift spreads over all CCs. The bench takes the measurement lock itself (`--lock`), for chunks
of runs of at most `--chunk-min` minutes, releasing it for a few seconds in between so others
get their turn: do not wrap this script in flock. `--budget-min` stops starting runs after that
many minutes of measuring (counted from the first run, not while waiting for the lock; resume
later).

A CC may carry MLTCP parameters, `--ccs reno,mltcp-reno,mltcp-reno:slope=12` (mn_harness.cc.spec's
one-string form): each variant's gain is over its base CC's run of the same round.

Usage: sudo .venv/bin/python bench/reproduce.py [--scenarios 2jobs,3jobs] [--ccs reno,mltcp-reno]
           [--repeat 5] [--iterations 50] [--budget-min 25] [--out results]
       sudo .venv/bin/python bench/reproduce.py --resume results/reproduce-<stamp> [--repeat 8]
       .venv/bin/python bench/reproduce.py --table results/reproduce-<stamp>   (no runs, no root)"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from measurelock import DEFAULT_LOCK, ChunkedLock  # noqa: E402  (bench/ is on sys.path)

from mn_harness.cc.spec import CCSpec  # noqa: E402
from mn_harness.config import Experiment  # noqa: E402
from mn_harness.config.loader import read_experiment_file  # noqa: E402
from mn_harness.config.overrides import apply_variant, parse_value  # noqa: E402
from mn_harness.jobs.ideal import ideal_iteration_s  # noqa: E402
from mn_harness.network.plan import NetworkPlan  # noqa: E402
from mn_harness.network.tcp_counters import timeouts_per_iteration  # noqa: E402
from mn_harness.report.aggregate import ALL_SCOPE, aggregate_metrics, collect, flatten_metrics  # noqa: E402
from mn_harness.report.metrics import separation  # noqa: E402
from mn_harness.results.stats import mean_ci95, median_with_never, percentile, wilson_ci95  # noqa: E402
from mn_harness.sweep import Sweep, load_sweep, new_sweep, run_sweep  # noqa: E402

ECN_20 = ("links[0].ecn_threshold", 20)  # the bottleneck CE-marks above 20 queued packets
QUEUE_400 = ("links[0].queue", 400)


def _jobs(n: int, compute: str, *, together: bool = False) -> list[tuple[str, object]]:
    """Every one of the n jobs computing `compute`; with together=True all starting at once."""
    changes: list[tuple[str, object]] = [(f"jobs[{i}].compute", compute) for i in range(n)]
    return changes + ([(f"jobs[{i}].start_offset", "0ms") for i in range(n)] if together else [])


SLACK_3JOBS = _jobs(3, "500ms")  # 3jobs-slack's change, see SUITE

# name -> (file in topologies/, changes as (path, value)); see docs/reproduction.md
SUITE: dict[str, tuple[str, list[tuple[str, object]]]] = {
    "2jobs": ("dumbbell-2jobs.yaml", []),
    "2jobs-ssai": ("dumbbell-2jobs-ssai.yaml", []),  # the demo file with slow start after idle
    "2jobs-sync": ("dumbbell-2jobs.yaml", [("jobs[1].start_offset", "0ms")]),
    # what real clusters vary, on the demo's scenario: simultaneous starts, the bottleneck's queue
    "2jobs-ssai-sync": ("dumbbell-2jobs-ssai.yaml", [("jobs[1].start_offset", "0ms")]),
    "2jobs-ssai-q20": ("dumbbell-2jobs-ssai.yaml", [("links[2].queue", 20)]),
    "2jobs-ssai-q400": ("dumbbell-2jobs-ssai.yaml", [("links[2].queue", 400)]),
    # the same with ECN: both switches CE-mark above 20 queued packets (for dctcp, mltcp-dctcp)
    "2jobs-ssai-ecn": ("dumbbell-2jobs-dctcp.yaml", [("run.slow_start_after_idle", True)]),
    "3jobs": ("compatible-3jobs.yaml", []),
    "4jobs": ("compatible-4jobs.yaml", []),
    # a = 1/N leaves no slack once TCP/IP headers are paid: one job reaches 0.91 of line rate
    # here (bench/scale.py), so 25 MB takes ~220 ms and three 1/3 jobs need 1.06 of the link.
    # Computing 500 ms instead of 400 (a = 0.29 ideal, ~0.31 measured; N*a ~ 0.92) keeps the
    # phases separable; fair sharing of aligned phases still costs (1 - a) + N*a = 1.57x.
    "3jobs-slack": ("compatible-3jobs.yaml", SLACK_3JOBS),
    "3jobs-slack-ssai": ("compatible-3jobs.yaml", [*SLACK_3JOBS, ("run.slow_start_after_idle", True)]),
    # ... started at once (reno keeps the phases on top of each other), and behind a 20-packet
    # buffer, where fair sharing ends phases in retransmission timeouts: the base CC's tail
    "3jobs-slack-sync": ("compatible-3jobs.yaml", _jobs(3, "500ms", together=True)),
    "3jobs-slack-sync-q20": ("compatible-3jobs.yaml", [*_jobs(3, "500ms", together=True), ("links[0].queue", 20)]),
    # 3jobs-slack's a with 4-worker rings: crossing the bottleneck four times (two flows of a
    # job each way) or, ordered by rack, twice (one each way)
    "3jobs-4w": ("compatible-3jobs-4workers.yaml", []),
    "3jobs-racks": ("compatible-3jobs-racks.yaml", []),
    # with ECN (for dctcp, mltcp-dctcp): the bottleneck's ends CE-mark above 20 queued packets
    # (3jobs-racks-ecn: every port of both switches; only the bottleneck's build queues).
    # DCTCP's phases take ~245 ms of 25 MB where reno's take ~220, so 3jobs-ecn and 4jobs-ecn
    # give the jobs the compute that leaves three or four such phases ~15% of slack
    "3jobs-slack-ecn": ("compatible-3jobs.yaml", [*SLACK_3JOBS, ECN_20]),
    "3jobs-ecn": ("compatible-3jobs.yaml", [*_jobs(3, "600ms"), ECN_20]),
    "4jobs-ecn": ("compatible-4jobs.yaml", [*_jobs(4, "700ms"), ECN_20]),
    # the same started at once: fair DCTCP keeps whatever offsets the jobs start with
    "3jobs-ecn-sync": ("compatible-3jobs.yaml", [*_jobs(3, "600ms", together=True), ECN_20]),
    "4jobs-ecn-sync": ("compatible-4jobs.yaml", [*_jobs(4, "700ms", together=True), ECN_20]),
    # ... behind a deeper buffer (400 packets, 600 KB: a data-centre switch's share per port)
    # that ECN keeps mostly empty: bursts that overflowed 100 packets no longer drop
    "3jobs-ecn-sync-q400": ("compatible-3jobs.yaml", [*_jobs(3, "600ms", together=True), ECN_20, QUEUE_400]),
    "4jobs-ecn-sync-q400": ("compatible-4jobs.yaml", [*_jobs(4, "700ms", together=True), ECN_20, QUEUE_400]),
    # ... with Linux's slow start after idle: a phase starts from the initial window, not from
    # the window the last phase ended with (which lets a follower take half the link at once)
    "4jobs-ecn-sync-q400-ssai": ("compatible-4jobs.yaml", [*_jobs(4, "700ms", together=True), ECN_20, QUEUE_400,
                                                           ("run.slow_start_after_idle", True)]),
    # ... with 900 ms of compute: a = 0.17, the four phases leave a third of the period free
    "4jobs-ecn-sync-q400-slack": ("compatible-4jobs.yaml", [*_jobs(4, "900ms", together=True), ECN_20, QUEUE_400]),
    # ... at half the packet rate, the same in time: every link 500 Mbit/s, half the bytes, and
    # the buffer and marking threshold halved in packets (the same milliseconds). The emulation
    # needs half the CPU, so a VM whose host takes some of it keeps more headroom
    # (docs/troubleshooting.md#the-vms-host-took-its-cpu)
    "4jobs-ecn-sync-q400-500m": ("compatible-4jobs.yaml", [
        *_jobs(4, "700ms", together=True), ("link_defaults.bw", "500Mbit"), ("links[0].ecn_threshold", 10),
        ("links[0].queue", 200), *[(f"jobs[{i}].bytes_per_iteration", "9.375MB") for i in range(4)]]),
    "3jobs-racks-ecn": ("compatible-3jobs-racks.yaml", [("switches", [{"name": s, "ecn_threshold": 20}
                                                                      for s in ("s1", "s2")])]),
    "stragglers": ("stragglers-3jobs.yaml", []),
    "presets": ("mixed-presets.yaml", []),
    "partial": ("partial-overlap.yaml", []),
    "periods": ("partial-periods.yaml", []),
    "circular": ("circular-3leaf.yaml", []),
    "leafspine": ("leaf-spine.yaml", []),
    "overload": ("overload-4jobs.yaml", []),
}
DEFAULT_CCS = "reno,mltcp-reno,cubic,mltcp-cubic"
STATE = "reproduce.json"


class BudgetSpent(Exception):
    """The time budget ran out before the next run: resume later."""


def scenario_raw(name: str, changes: list, iterations: int | None) -> dict:
    file, fixed = SUITE[name] if name in SUITE else (name, [])
    raw = read_experiment_file(ROOT / "topologies" / file)
    raw = apply_variant(raw, [*fixed, *changes], create=True)
    if iterations:
        exp = Experiment.from_dict(raw)
        plan = NetworkPlan(exp)
        periods = [ideal_iteration_s(job, plan)[0] for job in exp.jobs]
        for job, period in zip(raw["jobs"], periods, strict=True):
            # the same duration for every job: the slowest does `iterations`
            job["iterations"] = max(1, round(iterations * max(periods) / period))
    raw["experiment"] = f"repro-{name}"
    return raw


def round_robin(ccs: list[str], repeat: int) -> list[dict]:
    return [{"label": cc, "cc": cc, "set": [], "repetition": rep, "results_dir": None}
            for rep in range(repeat) for cc in ccs]


def runner(budget_s: float | None, lock: ChunkedLock):
    from mn_harness.report.markdown import write_report
    from mn_harness.runner import run_experiment

    started: list[float] = []

    def run_one(experiment, runs_root: Path, record) -> None:
        if budget_s is not None and started and time.monotonic() - started[0] > budget_s:
            raise BudgetSpent
        done: list[Path] = []
        with lock.run():
            started[:] = started or [time.monotonic()]
            run_experiment(experiment, out_root=runs_root, log=lambda *_: None,
                           after_run=lambda d: (done.append(d), record(d)))
            write_report(done[0], plots=False)

    return run_one


def run_all(folder: Path, state: dict, args) -> bool:
    """Every scenario's sweep until done or out of budget; True when everything finished."""
    lock = ChunkedLock(args.lock, args.chunk_min * 60)
    budget = None if args.budget_min is None else args.budget_min * 60
    try:
        return _run_scenarios(folder, state, args, runner(budget, lock))
    finally:
        lock.release()


def _run_scenarios(folder: Path, state: dict, args, run_one) -> bool:
    for name, info in state["scenarios"].items():
        sweep = _sweep(folder, name, info, state)
        todo = sum(not sweep.finished(e) for e in sweep.runs)
        if not todo:
            continue
        print(f"== {name}: {todo} of {len(sweep.runs)} runs to do", flush=True)
        try:
            run_sweep(sweep, run_one, log=lambda line: print("  " + line, flush=True))
        except BudgetSpent:
            print(f"time budget of {args.budget_min} min spent; continue with "
                  f"`bench/reproduce.py --resume {folder}`", flush=True)
            return False
    return True


def _sweep(folder: Path, name: str, info: dict, state: dict) -> Sweep:
    if info.get("sweep"):
        sweep = load_sweep(info["sweep"])
        _extend(sweep, state)
        return sweep
    raw = scenario_raw(name, info["set"], state["iterations"])
    sweep = new_sweep(folder, raw, raw["experiment"], round_robin(state["ccs"], state["repeat"]))
    sweep.experiments()  # validated before the first run
    info["sweep"] = str(sweep.folder)
    (folder / STATE).write_text(json.dumps(state, indent=1))
    return sweep


def _extend(sweep: Sweep, state: dict) -> None:
    """Add the repetitions `state["repeat"]` asks for beyond what the sweep's plan has
    (`--resume DIR --repeat N`), round-robin after the planned ones."""
    have = 1 + max((e["repetition"] for e in sweep.runs), default=-1)
    if state["repeat"] > have:
        sweep.runs.extend(e for e in round_robin(state["ccs"], state["repeat"]) if e["repetition"] >= have)
        sweep.save()


# -- the table ---------------------------------------------------------------------------------

def _ci(values: list[float]) -> str:
    if not values:
        return "-"
    m, _, h = mean_ci95(values)
    return f"{m:.3f}" + ("" if h is None else f" ± {h:.3f}")


STEADY_ITERATIONS = 20


def span_stats(metrics, *, last: int | None = None, first: int | None = None) -> dict[str, float] | None:
    """One run's statistics over a span of every job's iterations, warm-up left out: the mean
    over jobs of their mean and p99 iteration time, in seconds and over the baseline.

    Neither: the whole run. last=N: the run's last N iterations, where interleaving, if it
    comes, has come (the whole-run columns mix the iterations before convergence with those
    after). first=N: the iterations before N of the job that did the fewest (the others in
    proportion: the same stretch of time): what a run of N iterations would have measured.
    A p99 is a tail only with enough samples: over 48 iterations it falls between the two
    largest, so a short run's p99 is its slowest iteration and says how the run began."""
    fewest = min((job.n_iterations for job in metrics.jobs.values()), default=0)
    per_job = []
    for job in metrics.jobs.values():
        rows = [p for p in job.per_iteration if p["iter_time"] is not None and not p.get("warmup")]
        if first is not None:
            rows = [p for p in rows if p["iteration"] < round(first * job.n_iterations / fewest)]
        times = [p["iter_time"] for p in rows][-last:] if last else [p["iter_time"] for p in rows]
        if not times or not job.baseline_iter_s:
            return None
        per_job.append((statistics.mean(times), percentile(times, 99), job.baseline_iter_s))
    if not per_job:
        return None
    return {"mean_s": statistics.mean(m for m, _, _ in per_job),
            "p99_s": statistics.mean(p for _, p, _ in per_job),
            "slowdown": statistics.mean(m / b for m, _, b in per_job),
            "slowdown_p99": statistics.mean(p / b for _, p, b in per_job)}


def base_of(cc: str) -> str | None:
    """The base CC whose run of the same round an MLTCP variant's gain is over
    ("mltcp-reno:slope=8" -> "reno"); None for a base CC."""
    variant = CCSpec.from_dict(cc, "--ccs").canonical  # "mltcp-reno:slope=8" -> "mltcp-reno"
    return variant[len("mltcp-"):] if variant.startswith("mltcp-") else None


def finished_results(sweep: Sweep) -> list:
    """(RunRef, RunMetrics) of every finished run of a scenario's sweep, read once for all tables."""
    results, _ = collect([r for r in sweep.refs() if sweep.finished(_entry(sweep, r))])
    return results


def scenario_rows(name: str, results: list, ccs: list[str],
                  steady: int = STEADY_ITERATIONS) -> tuple[list[dict], str]:
    agg = {(r.label, r.metric): r for r in aggregate_metrics(results) if r.scope == ALL_SCOPE}
    per_run = {(ref.label, ref.repetition): flatten_metrics(m) for ref, m in results}
    tails = {(ref.label, ref.repetition): span_stats(m, last=steady) for ref, m in results}
    apart = {(ref.label, ref.repetition): separation(m) for ref, m in results}
    summaries = {(ref.label, ref.repetition): _summary(ref.results_dir) for ref, _ in results}
    rtos = {key: timeouts_per_iteration(summary) for key, summary in summaries.items()}
    steal = {key: host_steal(summary) for key, summary in summaries.items()}
    prediction = _prediction(summaries.values())
    rows = []
    for cc in ccs:
        runs = [v for (label, _), v in per_run.items() if label == cc]
        if not runs:
            continue
        conv, frac = agg.get((cc, "convergence_iteration")), agg.get((cc, "converged"))
        row = {"scenario": name, "cc": cc, "runs": len(runs),
               "slowdown": [v[(ALL_SCOPE, "slowdown_mean")] for v in runs if v[(ALL_SCOPE, "slowdown_mean")]],
               "slowdown_p99": [v[(ALL_SCOPE, "slowdown_p99")] for v in runs if v[(ALL_SCOPE, "slowdown_p99")]],
               "converged": None if frac is None or frac.mean is None else (frac.mean, frac.n, frac.interval),
               "median_conv": None if conv is None or not conv.of else conv.median,
               "cassini": prediction,
               "steady": [t["slowdown"] for (label, _), t in tails.items() if label == cc and t],
               "steady_p99": [t["slowdown_p99"] for (label, _), t in tails.items() if label == cc and t],
               "rtos": [v for (label, _), v in rtos.items() if label == cc and v is not None],
               "steal": [v for (label, _), v in steal.items() if label == cc and v is not None],
               "apart": [v for (label, _), v in apart.items() if label == cc and v is not None]}
        base = base_of(cc)
        if base:
            row["gain_mean"], row["gain_p99"] = [], []
            for (label, rep), v in per_run.items():
                b = per_run.get((base, rep))
                if label != cc or b is None:
                    continue
                for key, metric in (("gain_mean", "mean_iter_s"), ("gain_p99", "p99_iter_s")):
                    if b[(ALL_SCOPE, metric)] and v[(ALL_SCOPE, metric)]:
                        row[key].append(b[(ALL_SCOPE, metric)] / v[(ALL_SCOPE, metric)])
                tb, tv = tails.get((base, rep)), tails.get((label, rep))
                if tb and tv:
                    row.setdefault("steady_gain", []).append(tb["mean_s"] / tv["mean_s"])
                    row.setdefault("steady_gain_p99", []).append(tb["p99_s"] / tv["p99_s"])
        rows.append(row)
    return rows, prediction


DEFAULT_LENGTHS = (50, 100, 200)


def length_rows(name: str, results: list, ccs: list[str], lengths) -> list[dict]:
    """The 'by run length' table: each CC's slowdowns, and each MLTCP variant's gains over its
    base (paired by round), over the first N iterations of every run (span_stats first=N) for
    each N in `lengths` shorter than the runs, then over the whole run. One set of long runs so
    shows how much of a short run's p99 gain is the iterations before the jobs separate."""
    runs = {(ref.label, ref.repetition): m for ref, m in results}
    fewest = min((job.n_iterations for m in runs.values() for job in m.jobs.values()), default=0)
    spans = [*(n for n in sorted(set(lengths)) if n < fewest), None]  # None: the whole run
    stats = {(key, n): span_stats(m, first=n) for key, m in runs.items() for n in spans}
    rows = []
    for cc in ccs:
        reps = sorted(rep for label, rep in runs if label == cc)
        if not reps:
            continue
        base = base_of(cc)
        for n in spans:
            own = [t for t in (stats[((cc, rep), n)] for rep in reps) if t]
            row = {"scenario": name, "cc": cc, "runs": len(own), "iterations": n or fewest, "whole": n is None,
                   "slowdown": [t["slowdown"] for t in own], "slowdown_p99": [t["slowdown_p99"] for t in own]}
            if base:
                pairs = [(b, v) for b, v in ((stats.get(((base, rep), n)), stats[((cc, rep), n)]) for rep in reps)
                         if b and v]
                row["gain_mean"] = [b["mean_s"] / v["mean_s"] for b, v in pairs]
                row["gain_p99"] = [b["p99_s"] / v["p99_s"] for b, v in pairs]
            rows.append(row)
    return rows


LENGTH_HEADERS = ["scenario", "cc", "runs", "iterations", "slowdown mean / p99", "gain mean / p99"]


def format_length_row(row: dict) -> list[str]:
    gains = "-" if row.get("gain_mean") is None else f"{_ci(row['gain_mean'])} / {_ci(row['gain_p99'])}"
    span = f"{row['iterations']} (whole run)" if row["whole"] else f"first {row['iterations']}"
    return [row["scenario"], row["cc"], str(row["runs"]), span,
            f"{_ci(row['slowdown'])} / {_ci(row['slowdown_p99'])}", gains]


def _entry(sweep: Sweep, ref) -> dict:
    return next(e for e in sweep.runs if e["results_dir"] == ref[2])


def _summary(results_dir) -> dict:
    try:
        return json.loads((Path(results_dir) / "summary.json").read_text())
    except (OSError, ValueError):
        return {}


def host_steal(summary: dict) -> float | None:
    """The share of the cores' time the VM's host took during the run (summary.json
    cpu_load.steal_mean; None for runs recorded before 3 December 2026). On the project's VM
    it lengthens phases that nothing else slows (docs/troubleshooting.md#the-vms-host-took-its-cpu),
    so a set of runs says how much of its noise was the host's."""
    value = (summary.get("cpu_load") or {}).get("steal_mean")
    return float(value) if isinstance(value, (int, float)) else None


def _prediction(summaries) -> str:
    """CASSINI's predicted slowdown (best shifts / phases aligned), averaged over the jobs that
    share a link, from the first run's summary that has one: every run of a scenario carries
    the same prediction, since it depends on the config only."""
    for summary in summaries:
        pred = summary.get("cassini") or {}
        jobs = [j for j in (pred.get("jobs") or {}).values() if j.get("links")]
        if jobs:
            best = sum(j["slowdown"] for j in jobs) / len(jobs)
            aligned = sum(j["aligned_slowdown"] for j in jobs) / len(jobs)
            return f"{best:.2f} / {aligned:.2f}"
    return "-"


APART_WITHIN = 10  # the target's "interleaved within 10 iterations" (in >= 80% of runs)


def apart_early(seps: list) -> int:
    """How many runs' jobs first stood apart by iteration APART_WITHIN."""
    return sum(1 for s in seps if s.first is not None and s.first <= APART_WITHIN)


def apart_text(seps: list) -> str:
    """The 'apart' column: the runs whose jobs first stood apart (no job above the convergence
    threshold's overlap, report.metrics.separation) by iteration APART_WITHIN, with the Wilson
    95% interval; the median first-apart iteration over all runs (a run never apart counting
    as later than any); the median number of later iterations in which they fell back."""
    if not seps:
        return "-"
    early = apart_early(seps)
    lo, hi = wilson_ci95(early, len(seps))
    first = median_with_never([s.first for s in seps])
    apart = [s.relapses for s in seps if s.first is not None]
    relapses = "-" if not apart else f"{statistics.median(apart):g}"
    return (f"{early} of {len(seps)} [{lo * 100:.0f}–{hi * 100:.0f}]; first "
            f"{'never' if first is None else f'{first:g}'}; relapses {relapses}")


HEADERS = ["scenario", "cc", "runs", "slowdown (mean)", "slowdown (p99)", "gain mean", "gain p99",
           "converged", "median conv. iter", f"apart by {APART_WITHIN}; first; relapses", "CASSINI best / aligned",
           f"last {STEADY_ITERATIONS}: slowdown mean / p99", f"last {STEADY_ITERATIONS}: gain mean / p99",
           "RTOs / iteration", "host steal"]


def format_row(row: dict) -> list[str]:
    conv = row["converged"]
    conv_text = "-" if conv is None else \
        f"{conv[0] * 100:.0f}% of {conv[1]} [{conv[2][0] * 100:.0f}–{conv[2][1] * 100:.0f}]"
    median = row["median_conv"]
    med_text = "-" if conv is None else ("never" if median is None else f"{median:.0f}")
    return [row["scenario"], row["cc"], str(row["runs"]), _ci(row["slowdown"]), _ci(row["slowdown_p99"]),
            _ci(row.get("gain_mean", [])), _ci(row.get("gain_p99", [])), conv_text, med_text,
            apart_text(row.get("apart", [])), row["cassini"],
            f"{_ci(row['steady'])} / {_ci(row['steady_p99'])}",
            "-" if not row.get("steady_gain") else f"{_ci(row['steady_gain'])} / {_ci(row['steady_gain_p99'])}",
            _ci(row["rtos"]), _ci(row.get("steal", []))]


def table(folder: Path, state: dict, lengths=DEFAULT_LENGTHS) -> tuple[str, dict]:
    """The bench's table (and, where the runs are longer than some of `lengths`, the table by
    run length below it) and its keys for scripts."""
    from mn_harness.report.markdown import markdown_table

    rows: list[list[str]] = []
    by_length: list[list[str]] = []
    keys: dict[str, object] = {}
    for name, info in state["scenarios"].items():
        if not info.get("sweep"):
            continue
        results = finished_results(load_sweep(info["sweep"]))
        scenario, _ = scenario_rows(name, results, state["ccs"])
        for row in scenario:
            rows.append(format_row(row))
            tag = re.sub(r"[^A-Za-z0-9.]+", "_", f"{name}_{row['cc']}")
            if row["slowdown"]:
                keys[f"slowdown_{tag}"] = round(sum(row["slowdown"]) / len(row["slowdown"]), 3)
            for key in ("gain_mean", "gain_p99", "steady_gain", "steady_gain_p99"):
                if row.get(key):
                    keys[f"{key}_{tag}"] = round(sum(row[key]) / len(row[key]), 3)
            if row.get("apart"):
                keys[f"apart_by_{APART_WITHIN}_{tag}"] = round(apart_early(row["apart"]) / len(row["apart"]), 3)
        spans = length_rows(name, results, state["ccs"], lengths)
        if any(not r["whole"] for r in spans):
            by_length.extend(format_length_row(r) for r in spans)
            for r in spans:
                tag = re.sub(r"[^A-Za-z0-9.]+", "_", f"{name}_{r['cc']}")
                if r.get("gain_p99") and not r["whole"]:
                    keys[f"gain_p99_first{r['iterations']}_{tag}"] = round(sum(r["gain_p99"]) / len(r["gain_p99"]), 3)
    text = markdown_table(HEADERS, rows)
    if by_length:
        text += "\n\nBy run length (each run's first N iterations, warm-up left out):\n\n" + \
            markdown_table(LENGTH_HEADERS, by_length)
    return text, keys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SUITE),
                        help=f"comma-separated names ({', '.join(SUITE)}) or topologies/ file names")
    parser.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                        help="change every scenario, e.g. run.slow_start_after_idle=true (repeatable)")
    parser.add_argument("--ccs", default=DEFAULT_CCS)
    parser.add_argument("--repeat", type=int, default=None,
                        help="repetitions (default 5); with --resume: add repetitions up to this many")
    parser.add_argument("--iterations", type=int, default=None,
                        help="iterations of the slowest job of each scenario (others: the same duration)")
    parser.add_argument("--budget-min", type=float, default=None,
                        help="stop starting runs after this many minutes of measuring (default: run all)")
    parser.add_argument("--lock", default=DEFAULT_LOCK, help="the measurement lock ('' for none)")
    parser.add_argument("--chunk-min", type=float, default=20.0,
                        help="hold the lock for at most about this long at a time")
    parser.add_argument("--out", default="results")
    parser.add_argument("--resume", metavar="DIR")
    parser.add_argument("--table", metavar="DIR", help="print the table of a bench folder, run nothing")
    parser.add_argument("--lengths", default=",".join(map(str, DEFAULT_LENGTHS)),
                        help="for runs longer than these: the table by run length over each run's first N "
                             "iterations (default %(default)s; '' for none)")
    args = parser.parse_args()

    if args.table or args.resume:
        folder = Path(args.table or args.resume)
        state = json.loads((folder / STATE).read_text())
        if args.resume and args.repeat and args.repeat > state["repeat"]:
            state["repeat"] = args.repeat
            (folder / STATE).write_text(json.dumps(state, indent=1))
    else:
        changes = []
        for spec in args.set:
            path, _, value = spec.partition("=")
            changes.append((path, parse_value(value)))
        ccs = [c.strip() for c in args.ccs.split(",") if c.strip()]
        scenarios = {name: {"set": changes, "sweep": None} for name in args.scenarios.split(",")}
        state = {"ccs": ccs, "repeat": args.repeat or 5, "iterations": args.iterations,
                 "created": datetime.now().isoformat(), "scenarios": scenarios}
        folder = Path(args.out) / f"reproduce-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
        folder.mkdir(parents=True)
        (folder / STATE).write_text(json.dumps(state, indent=1))
        for name, info in state["scenarios"].items():  # every scenario valid before any run
            _sweep(folder, name, info, state)
    print(f"bench folder: {folder}", flush=True)
    finished = True
    if not args.table:
        try:
            finished = run_all(folder, state, args)
        except KeyboardInterrupt:
            print(f"interrupted; continue with `bench/reproduce.py --resume {folder}`", file=sys.stderr)
            finished = False
    lengths = [int(n) for n in args.lengths.split(",") if n.strip()]
    text, keys = table(folder, state, lengths)
    (folder / "reproduce.md").write_text(text + "\n")
    (folder / "reproduce-keys.json").write_text(json.dumps(keys, indent=1))
    print(text)
    print(" ".join(f"{k}={v}" for k, v in keys.items()) or "no finished runs")
    return 0 if finished else 3


if __name__ == "__main__":
    sys.exit(main())

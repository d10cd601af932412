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
and gains over each run's last 20 iterations (report.headline), where interleaving, if
it comes, has come: over a whole run the p99 is set by the iterations before convergence; and
the retransmission timeouts the kernel counted in the jobs' hosts per job iteration
(summary.json tcp_counters; a phase that waits for one sets a p99). For runs longer than some N
of `--lengths`, a second table gives the slowdowns and gains over each run's first N iterations:
over 48 iterations a p99 is the slowest one, so long runs show the tail a training job sees.
The table is computed in bench/repro_table.py.

Restartable: the bench's folder holds one `mn_harness.sweep` folder per scenario (plan.json,
runs/) and `reproduce.json`; `--resume DIR` runs only what is missing (a run that was cut off is
run again). Runs go round-robin (repetition 1 of every CC, then repetition 2, ...), so machine
drift spreads over all CCs. The bench takes the measurement lock itself (`--lock`), for chunks
of runs of at most `--chunk-min` minutes, releasing it for a few seconds in between so others
get their turn: do not wrap this script in flock. `--budget-min` stops starting runs after that
many minutes of measuring (counted from the first run, not while waiting for the lock; resume
later).

A CC may carry MLTCP parameters, `--ccs reno,mltcp-reno,mltcp-reno:slope=12` (mn_harness.cc.spec's
one-string form), and `+cassini` runs it with CASSINI's time shifts (`run.shifts: cassini`,
mn_harness/jobs/shifts.py): `--ccs dctcp,mltcp-dctcp,dctcp+cassini,mltcp-dctcp+cassini` compares the
base CC, MLTCP, CASSINI's shifts and the two together; each row's gain is over its base CC's run
of the same round.

Usage: sudo .venv/bin/python bench/reproduce.py [--scenarios 2jobs,3jobs] [--ccs reno,mltcp-reno]
           [--repeat 5] [--iterations 50] [--budget-min 25] [--out results]
       sudo .venv/bin/python bench/reproduce.py --resume results/reproduce-<stamp> [--repeat 8]
       .venv/bin/python bench/reproduce.py --table results/reproduce-<stamp> [--lengths 50,100,200]
           (no runs, no root)"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path

from common import DEFAULT_LOCK, TOPOLOGIES, ChunkedLock  # bench/common.py, which makes the package importable
from repro_table import DEFAULT_LENGTHS, row_cc, table

from mn_harness.config import Experiment
from mn_harness.config.dump import complete_raw
from mn_harness.config.loader import read_experiment_file
from mn_harness.config.overrides import apply_variant, parse_value
from mn_harness.jobs.ideal import ideal_iteration_s
from mn_harness.jobs.scaling import apply_scaling
from mn_harness.network.plan import NetworkPlan
from mn_harness.sweep import Sweep, load_sweep, new_sweep, run_sweep


def _ecn_20(link: int) -> tuple[str, int]:
    """The change that makes links[link] CE-mark above 20 queued packets."""
    return (f"links[{link}].ecn_threshold", 20)


ECN_20 = _ecn_20(0)  # the bottleneck (links[0] in most files) CE-marks above 20 queued packets
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
    # (docs/troubleshooting.md#the-vms-host-took-its-cpu). The demo file, what `make demo` runs
    "4jobs-ecn-sync-q400-500m": ("dumbbell-4jobs-ecn.yaml", []),
    "3jobs-racks-ecn": ("compatible-3jobs-racks.yaml", [("switches", [{"name": s, "ecn_threshold": 20}
                                                                      for s in ("s1", "s2")])]),
    "stragglers": ("stragglers-3jobs.yaml", []),
    "presets": ("mixed-presets.yaml", []),
    "partial": ("partial-overlap.yaml", []),
    # ... with ECN at the bottleneck (for dctcp, mltcp-dctcp): where no schedule exists either
    "partial-ecn": ("partial-overlap.yaml", [_ecn_20(2)]),  # its bottleneck is links[2]
    "periods": ("partial-periods.yaml", []),
    "circular": ("circular-3leaf.yaml", []),
    "leafspine": ("leaf-spine.yaml", []),
    # ... with ECMP: each flow hashed onto one of the equal-cost spines, so which jobs share
    # which uplinks (and whether their affinity graph has a loop) is the hash's
    "leafspine-ecmp": ("leaf-spine.yaml", [("routing", "ecmp")]),
    "overload": ("overload-4jobs.yaml", []),
    "overload-ecn": ("overload-4jobs.yaml", [ECN_20]),
}
DEFAULT_CCS = "reno,mltcp-reno,cubic,mltcp-cubic"
STATE = "reproduce.json"


class BudgetSpent(Exception):
    """The time budget ran out before the next run: resume later."""


def scenario_raw(name: str, changes: list, iterations: int | None) -> dict:
    file, fixed = SUITE[name] if name in SUITE else (name, [])
    raw = read_experiment_file(TOPOLOGIES / file)
    # the file's complete configuration: a --set may name an option it leaves at its default
    known = complete_raw(raw)
    raw = apply_variant(raw, [*fixed, *changes], create=True, known=known)
    raw.setdefault("run", {}).setdefault("shifts", False)  # off; the CC+cassini rows set it
    if iterations:
        exp = apply_scaling(Experiment.from_dict(raw))
        plan = NetworkPlan(exp)
        periods = [ideal_iteration_s(job, plan)[0] for job in exp.jobs]
        for job, period in zip(raw["jobs"], periods, strict=True):
            # the same duration for every job: the slowest does `iterations`
            job["iterations"] = max(1, round(iterations * max(periods) / period))
    raw["experiment"] = f"repro-{name}"
    return raw


def round_robin(rows: list[str], repeat: int) -> list[dict]:
    """Repetition 1 of every row, then repetition 2, ...; a row `CC+cassini` runs CC with CASSINI's
    time shifts (run.shifts: cassini)."""
    out = []
    for rep in range(repeat):
        for label in rows:
            cc, shifted = row_cc(label)
            out.append({"label": label, "cc": cc, "set": [["run.shifts", "cassini"]] if shifted else [],
                        "repetition": rep, "results_dir": None})
    return out


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

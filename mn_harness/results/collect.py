"""Turn the workers' JSON-lines files into the results folder's CSVs and summary.

Runs in the harness's `finally`, so it must cope with a killed run: missing files, a
truncated last line, ranks that finished fewer iterations than others. Everything a worker
flushed is kept; the summary says how many rows are missing."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

from mn_harness.config import Experiment
from mn_harness.jobs.ideal import bytes_sent_per_worker, ideal_iteration_s
from mn_harness.network.plan import NetworkPlan
from mn_harness.results.stats import describe

ITERATION_COLUMNS = ["job", "rank", "iteration", "t_start", "t_comm_start", "t_comm_end",
                     "iter_time", "comm_time", "bytes_sent"]
THROUGHPUT_COLUMNS = ["job", "rank", "t", "bin_s", "bytes"]


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a line cut by a kill: keep what came before
    except OSError:
        pass
    return rows


def iteration_rows(raw_dir: Path) -> list[dict]:
    rows = []
    for path in sorted(raw_dir.glob("*.iterations.jsonl")):
        for r in read_jsonl(path):
            r["iter_time"] = round(r["t_comm_end"] - r["t_start"], 6)
            r["comm_time"] = round(r["t_comm_end"] - r["t_comm_start"], 6)
            rows.append(r)
    rows.sort(key=lambda r: (r["job"], r["iteration"], r["rank"]))
    return rows


def throughput_rows(raw_dir: Path) -> list[dict]:
    rows = []
    for path in sorted(raw_dir.glob("*.throughput.jsonl")):
        for r in read_jsonl(path):
            for t, nbytes in r["bins"]:
                rows.append({"job": r["job"], "rank": r["rank"], "t": t, "bin_s": r["bin_s"], "bytes": nbytes})
    rows.sort(key=lambda r: (r["job"], r["rank"], r["t"]))
    return rows


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def job_iteration_times(rows: list[dict], job: str, n_ranks: int) -> list[float]:
    """One time per iteration completed by every rank: the slowest rank's iteration time
    (a synchronous job waits for its slowest worker)."""
    by_iter: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        if r["job"] == job:
            by_iter[r["iteration"]].append(r["iter_time"])
    return [max(v) for _, v in sorted(by_iter.items()) if len(v) == n_ranks]


def summarise(experiment: Experiment, plan: NetworkPlan, rows: list[dict],
              cc_names: dict[str, str]) -> dict:
    jobs = {}
    for job in experiment.jobs:
        times = job_iteration_times(rows, job.name, job.n)
        ideal, rate = ideal_iteration_s(job, plan)
        stats = describe(times)
        expected_rows = job.iterations * job.n
        present = sum(1 for r in rows if r["job"] == job.name)
        jobs[job.name] = {
            "workers": list(job.workers),
            "cc": cc_names.get(job.name, job.cc.name),
            "iterations": stats["n"],
            "iterations_planned": job.iterations,
            "missing_rows": expected_rows - present,
            "bytes_per_iteration": job.bytes_per_iteration,
            "bytes_sent_per_worker": bytes_sent_per_worker(job),
            "compute_s": job.compute_s,
            "bottleneck_bps": rate,
            "ideal_iter_s": ideal,
            "mean_iter_s": stats["mean"],
            "p50_iter_s": stats["p50"],
            "p99_iter_s": stats["p99"],
            "slowdown_mean": stats["mean"] / ideal if times else None,
            "slowdown_p99": stats["p99"] / ideal if times else None,
        }
    return {
        "experiment": experiment.name,
        "cc": {name: j["cc"] for name, j in jobs.items()},
        "jobs": jobs,
        "link_jobs": plan.link_jobs(),
        "link_ranks": plan.link_ranks(),
        "link_bps": plan.link_bps(),
    }


def format_table(summary: dict) -> str:
    header = f"{'job':<10}{'cc':<16}{'iters':>7}{'mean':>9}{'p50':>9}{'p99':>9}{'ideal':>9}{'slowdown':>10}"
    lines = [header, "-" * len(header)]
    for name, j in summary["jobs"].items():
        if j["iterations"]:
            lines.append(f"{name:<10}{j['cc']:<16}{j['iterations']:>7}{j['mean_iter_s'] * 1e3:>7.1f}ms"
                         f"{j['p50_iter_s'] * 1e3:>7.1f}ms{j['p99_iter_s'] * 1e3:>7.1f}ms"
                         f"{j['ideal_iter_s'] * 1e3:>7.1f}ms{j['slowdown_mean']:>9.2f}x")
        else:
            lines.append(f"{name:<10}{j['cc']:<16}{0:>7}   (no complete iteration)")
    return "\n".join(lines)

"""bench/reproduce.py's table: per scenario and row (a CC, or a CC with CASSINI's time shifts:
`dctcp+cassini`) the slowdowns, each row's gains over its base CC paired by round (MLTCP
variants, CASSINI's shifts and the two together), convergence and separation, CASSINI's
prediction and the measurement against it, the last 20 iterations, how the adaptive step's
searches ran (cc_telemetry.csv), timeouts, the VM host's steal and how many runs were faithful,
each with its 95% CI; for runs longer than some N, the same slowdowns and gains over each run's
first N iterations; and the targets against the rows (bench/repro_targets.py;
docs/reproduction.md says what every column means). Reads finished runs only; runs nothing and
needs no root."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from common import mean_ci  # bench/common.py, which makes the package importable
from repro_targets import evaluate_all, targets_table

from mn_harness.cc.spec import CCSpec
from mn_harness.network.tcp_counters import timeouts_per_iteration
from mn_harness.report.aggregate import ALL_SCOPE, aggregate_metrics, collect, flatten_metrics
from mn_harness.report.headline import APART_WITHIN, LAST_ITERATIONS, apart_early, apart_text, span_stats
from mn_harness.report.metrics import separation
from mn_harness.report.search import search_text, socket_searches
from mn_harness.results.loaders import load_cc_telemetry, load_summary
from mn_harness.results.schema import RunSummary
from mn_harness.results.stats import mean_ci95
from mn_harness.sweep import Sweep, load_sweep

SHIFTS_SUFFIX = "+cassini"  # a row's label: its CC run with run.shifts: cassini


def row_cc(label: str) -> tuple[str, bool]:
    """A row's CC and whether it runs with CASSINI's shifts: "dctcp+cassini" -> ("dctcp", True)."""
    if label.endswith(SHIFTS_SUFFIX):
        return label[: -len(SHIFTS_SUFFIX)], True
    return label, False


def base_of(label: str) -> str | None:
    """The base CC whose run of the same round a row's gain is over ("mltcp-reno:slope=8" ->
    "reno", "dctcp+cassini" and "mltcp-dctcp+cassini" -> "dctcp"); None for a base CC alone."""
    cc, shifted = row_cc(label)
    variant = CCSpec.from_dict(cc, "--ccs").canonical  # "mltcp-reno:slope=8" -> "mltcp-reno"
    if variant.startswith("mltcp-"):
        return variant[len("mltcp-"):]
    return variant if shifted else None


def finished_results(sweep: Sweep) -> list:
    """(RunRef, RunMetrics) of every finished run of a scenario's sweep, read once for all tables."""
    results, _ = collect([r for r in sweep.refs() if sweep.finished(_entry(sweep, r))])
    return results


def scenario_rows(name: str, results: list, ccs: list[str],
                  steady: int = LAST_ITERATIONS) -> tuple[list[dict], str]:
    agg = {(r.label, r.metric): r for r in aggregate_metrics(results) if r.scope == ALL_SCOPE}
    per_run = {(ref.label, ref.repetition): flatten_metrics(m) for ref, m in results}
    tails = {(ref.label, ref.repetition): span_stats(m, last=steady) for ref, m in results}
    apart = {(ref.label, ref.repetition): separation(m) for ref, m in results}
    summaries = {(ref.label, ref.repetition): _summary(ref.results_dir) for ref, _ in results}
    rtos = {key: timeouts_per_iteration(summary.tcp_counters, [j.iterations for j in summary.jobs.values()])
            for key, summary in summaries.items()}
    steal = {key: host_steal(summary) for key, summary in summaries.items()}
    searches = {(ref.label, ref.repetition): socket_searches(load_cc_telemetry(ref.results_dir)[0])
                for ref, _ in results}
    faithful = {key: summary.fidelity.verdict if summary.fidelity else None for key, summary in summaries.items()}
    predicted = prediction_values(summaries.values())
    prediction = "-" if predicted is None else f"{predicted[0]:.2f} / {predicted[1]:.2f}"
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
               "steady": [t.slowdown for (label, _), t in tails.items() if label == cc and t],
               "steady_p99": [t.slowdown_p99 for (label, _), t in tails.items() if label == cc and t],
               "rtos": [v for (label, _), v in rtos.items() if label == cc and v is not None],
               "steal": [v for (label, _), v in steal.items() if label == cc and v is not None],
               "searches": [s for (label, _), v in searches.items() if label == cc for s in v],
               "apart": [v for (label, _), v in apart.items() if label == cc and v is not None],
               "faithful": [v for (label, _), v in faithful.items() if label == cc],
               "vs_cassini": [] if predicted is None else
               [v[(ALL_SCOPE, "slowdown_mean")] / predicted[0] - 1 for v in runs if v[(ALL_SCOPE, "slowdown_mean")]]}
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
                    row.setdefault("steady_gain", []).append(tb.mean_s / tv.mean_s)
                    row.setdefault("steady_gain_p99", []).append(tb.p99_s / tv.p99_s)
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
                   "slowdown": [t.slowdown for t in own], "slowdown_p99": [t.slowdown_p99 for t in own]}
            if base:
                pairs = [(b, v) for b, v in ((stats.get(((base, rep), n)), stats[((cc, rep), n)]) for rep in reps)
                         if b and v]
                row["gain_mean"] = [b.mean_s / v.mean_s for b, v in pairs]
                row["gain_p99"] = [b.p99_s / v.p99_s for b, v in pairs]
            rows.append(row)
    return rows


LENGTH_HEADERS = ["scenario", "cc", "runs", "iterations", "slowdown mean / p99", "gain mean / p99"]


def format_length_row(row: dict) -> list[str]:
    gains = "-" if row.get("gain_mean") is None else f"{mean_ci(row['gain_mean'])} / {mean_ci(row['gain_p99'])}"
    span = f"{row['iterations']} (whole run)" if row["whole"] else f"first {row['iterations']}"
    return [row["scenario"], row["cc"], str(row["runs"]), span,
            f"{mean_ci(row['slowdown'])} / {mean_ci(row['slowdown_p99'])}", gains]


def _entry(sweep: Sweep, ref) -> dict:
    return next(e for e in sweep.runs if e["results_dir"] == ref[2])


def _summary(results_dir) -> RunSummary:
    """A finished run's summary; an empty one where it cannot be read (its columns stay empty)."""
    try:
        return load_summary(results_dir)
    except ValueError:  # ConfigError: missing or malformed
        return RunSummary()


def host_steal(summary: RunSummary) -> float | None:
    """The share of the cores' time the VM's host took during the run (summary.json
    cpu_load.steal_mean; None for runs recorded before it). On the project's VM it lengthens
    phases that nothing else slows (docs/troubleshooting.md#the-vms-host-took-its-cpu), so a set
    of runs says how much of its noise was the host's."""
    value = (summary.cpu_load or {}).get("steal_mean")
    return float(value) if isinstance(value, int | float) else None


def prediction_values(summaries) -> tuple[float, float] | None:
    """CASSINI's predicted slowdown (best shifts, phases aligned), averaged over the jobs that
    share a link, from the first run's summary that has one: every run of a scenario carries
    the same prediction, since it depends on the config only."""
    for summary in summaries:
        pred = summary.cassini or {}
        jobs = [j for j in (pred.get("jobs") or {}).values() if j.get("links")]
        if jobs:
            return (sum(j["slowdown"] for j in jobs) / len(jobs),
                    sum(j["aligned_slowdown"] for j in jobs) / len(jobs))
    return None


def faithful_text(verdicts: list[str | None]) -> str:
    """"k of n": the runs whose emulation kept its invariants (summary.json fidelity.verdict);
    runs that were not checked (older runs, run.fidelity: false) count in n, not in k."""
    return f"{sum(v == 'faithful' for v in verdicts)} of {len(verdicts)}" if verdicts else "-"


def pct_ci(values: list[float]) -> str:
    """Mean ± 95% CI of shares as signed percentages: "+12 ± 3%"."""
    if not values:
        return "-"
    m, _, half = mean_ci95(list(values))
    return f"{m * 100:+.0f}%" if half is None else f"{m * 100:+.0f} ± {half * 100:.0f}%"


HEADERS = ["scenario", "cc", "runs", "faithful", "slowdown (mean)", "slowdown (p99)", "gain mean", "gain p99",
           "converged", "median conv. iter", f"apart by {APART_WITHIN}; first; relapses", "CASSINI best / aligned",
           "vs CASSINI best", f"last {LAST_ITERATIONS}: slowdown mean / p99",
           f"last {LAST_ITERATIONS}: gain mean / p99", "first search ends; relapses", "RTOs / iteration",
           "host steal"]


def format_row(row: dict) -> list[str]:
    conv = row["converged"]
    conv_text = "-" if conv is None else \
        f"{conv[0] * 100:.0f}% of {conv[1]} [{conv[2][0] * 100:.0f}–{conv[2][1] * 100:.0f}]"
    median = row["median_conv"]
    med_text = "-" if conv is None else ("never" if median is None else f"{median:.0f}")
    return [row["scenario"], row["cc"], str(row["runs"]), faithful_text(row.get("faithful", [])),
            mean_ci(row["slowdown"]), mean_ci(row["slowdown_p99"]),
            mean_ci(row.get("gain_mean", [])), mean_ci(row.get("gain_p99", [])), conv_text, med_text,
            apart_text(row.get("apart", [])), row["cassini"], pct_ci(row.get("vs_cassini", [])),
            f"{mean_ci(row['steady'])} / {mean_ci(row['steady_p99'])}",
            "-" if not row.get("steady_gain") else f"{mean_ci(row['steady_gain'])} / {mean_ci(row['steady_gain_p99'])}",
            search_text(row.get("searches", [])), mean_ci(row["rtos"]), mean_ci(row.get("steal", []))]


def _key(metric: str, scenario: str, cc: str) -> str:
    """A key of the closing key=value line: "gain_p99_4jobs_ecn_sync_q400_mltcp_dctcp_slope_32"."""
    return re.sub(r"[^A-Za-z0-9.]+", "_", f"{metric}_{scenario}_{cc}")


def _mean3(values: list[float]) -> float:
    return round(statistics.mean(values), 3)


def table(folder: Path, state: dict, lengths=DEFAULT_LENGTHS) -> tuple[str, dict]:
    """The bench's table (and, where the runs are longer than some of `lengths`, the table by
    run length below it) and its keys for scripts."""
    from mn_harness.report.markdown import markdown_table

    rows: list[list[str]] = []
    all_rows: list[dict] = []
    by_length: list[list[str]] = []
    keys: dict[str, object] = {}
    for name, info in state["scenarios"].items():
        if not info.get("sweep"):
            continue
        results = finished_results(load_sweep(info["sweep"]))
        scenario, _ = scenario_rows(name, results, state["ccs"])
        all_rows.extend(scenario)
        for row in scenario:
            rows.append(format_row(row))
            for key in ("slowdown", "gain_mean", "gain_p99", "steady_gain", "steady_gain_p99"):
                if row.get(key):
                    keys[_key(key, name, row["cc"])] = _mean3(row[key])
            if row.get("apart"):
                keys[_key(f"apart_by_{APART_WITHIN}", name, row["cc"])] = \
                    round(apart_early(row["apart"]) / len(row["apart"]), 3)
        spans = length_rows(name, results, state["ccs"], lengths)
        if any(not r["whole"] for r in spans):
            by_length.extend(format_length_row(r) for r in spans)
            for r in spans:
                if r.get("gain_p99") and not r["whole"]:
                    keys[_key(f"gain_p99_first{r['iterations']}", name, r["cc"])] = _mean3(r["gain_p99"])
    text = markdown_table(HEADERS, rows)
    if by_length:
        text += "\n\nBy run length (each run's first N iterations, warm-up left out):\n\n" + \
            markdown_table(LENGTH_HEADERS, by_length)
    text += "\n\nTargets (docs/reproduction.md#the-targets; the whole runs):\n\n" + targets_table(all_rows)
    for verdict in evaluate_all(all_rows):
        t = verdict.target
        keys[_key(f"target_{t.measure}", t.scenario, t.cc)] = verdict.verdict.replace(" ", "_")
    return text, keys

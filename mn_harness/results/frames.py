"""Results folders as pandas DataFrames: one tidy table per kind over any number of runs.

    from mn_harness.results import load
    frames = load(["results/a-20261201-101500", "results/x-compare-20261201-120000"])
    frames.iterations.groupby(["label", "job"]).iter_time.mean()

`load` takes a run folder, a comparison folder (its plan.json lists the runs, their labels and
repetitions), or a list of either, and returns `RunFrames(iterations, throughput, queue, metrics,
phases)`.
Every row carries `run` (the run folder's name), `label` (the comparison label, else the label
the run was given, else the experiment name) and `repetition` (comparisons; else 0), and the
per-job tables `cc` (the job's kernel congestion control), so frames of many runs concatenate
and group directly. The rows are the loaders' (mn_harness.results.loaders: a truncated last row
is skipped, as in the report), the metrics the report's (mn_harness.report.metrics), one row per
job and run. pandas is optional (`pip install 'mn-harness[analysis]'`); only this module needs it,
and only when called."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from mn_harness.errors import RunError, UsageError
from mn_harness.results.loaders import RunData, load_run
from mn_harness.results.schema import (
    ITERATION_COLUMNS,
    PHASE_COLUMNS,
    QUEUE_BASE_COLUMNS,
    SUMMARY_JSON,
    THROUGHPUT_COLUMNS,
)

PLAN_JSON = "plan.json"  # a comparison folder's plan (mn_harness.sweep writes it)
KEY_COLUMNS = ("run", "label", "repetition")


class PandasMissing(RunError, ImportError):
    """pandas is an optional dependency."""


class RunFrames(NamedTuple):
    iterations: Any  # pandas.DataFrame
    throughput: Any
    queue: Any
    metrics: Any
    phases: Any  # phases.csv rows (docs/results.md); empty for runs without it


def _pandas():
    try:
        import pandas
    except ImportError:
        raise PandasMissing("mn_harness.results.load needs pandas: pip install 'mn-harness[analysis]' "
                            "(or pip install pandas)") from None
    return pandas


def run_folders(paths: str | Path | Iterable[str | Path]) -> list[tuple[Path, str | None, int]]:
    """(run folder, comparison label or None, repetition) of every run under `paths`."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    out: list[tuple[Path, str | None, int]] = []
    for item in items:
        folder = Path(item)
        if (folder / PLAN_JSON).is_file():
            plan = json.loads((folder / PLAN_JSON).read_text())
            for entry in plan.get("runs", []):
                run_dir = entry.get("results_dir")
                if not run_dir:
                    continue  # not run yet
                path = Path(run_dir)
                if not (path / SUMMARY_JSON).is_file():  # recorded relative to another cwd
                    path = folder / "runs" / path.name
                out.append((path, entry.get("label"), int(entry.get("repetition", 0))))
        elif (folder / SUMMARY_JSON).is_file():
            out.append((folder, None, 0))
        else:
            raise UsageError(f"{folder}: neither a results folder (summary.json) nor a comparison "
                             f"folder ({PLAN_JSON})")
    return out


def _rows(run: RunData, label: str, repetition: int):
    from mn_harness.report.metrics import compute_metrics

    key = {"run": run.results_dir.name, "label": label, "repetition": repetition}
    cc = run.summary.cc
    iterations = [{**key, "cc": cc.get(r.job), **dataclasses.asdict(r)} for r in run.iterations]
    throughput = [{**key, "cc": cc.get(r.job), **dataclasses.asdict(r), "rate_bps": r.bytes * 8 / r.bin_s}
                  for r in run.throughput if r.bin_s > 0]
    queue = []
    for q in run.queue or []:
        row = {**key, "t": q.t, "switch": q.switch, "port": q.port, "depth": q.depth, "marks": q.marks}
        row.update({f"bytes_{job}": n for job, n in q.job_bytes.items()})
        queue.append(row)
    metrics = compute_metrics(run.summary, run.iterations, run.throughput, malformed_rows=run.malformed_rows)
    jobs = []
    for jm in metrics.jobs.values():
        fields = {k: v for k, v in dataclasses.asdict(jm).items() if k not in ("per_iteration", "rivals")}
        jobs.append({**key, **fields, "rivals": ",".join(jm.rivals), "fidelity": metrics.fidelity})
    phases = [{**key, "cc": cc.get(r.job), **dataclasses.asdict(r)} for r in run.phases]
    return iterations, throughput, queue, jobs, phases


def load(paths: str | Path | Iterable[str | Path], labels: dict[str, str] | None = None) -> RunFrames:
    """DataFrames of every run under `paths` (run folders, comparison folders, or a list).
    `labels` maps a run folder's name to a label of your choosing."""
    pd = _pandas()
    tables: list[list[dict]] = [[], [], [], [], []]
    for folder, compare_label, repetition in run_folders(paths):
        run = load_run(folder)
        label = ((labels or {}).get(folder.name) or compare_label or run.summary.label
                 or run.summary.experiment or folder.name)
        for table, rows in zip(tables, _rows(run, str(label), repetition), strict=True):
            table.extend(rows)
    keys = [*KEY_COLUMNS]
    columns = ([*keys, "cc", *ITERATION_COLUMNS], [*keys, "cc", *THROUGHPUT_COLUMNS, "rate_bps"],
               [*keys, *(c for c in QUEUE_BASE_COLUMNS if c in ("t", "switch", "port", "depth", "marks"))],
               [*keys, "job", "cc"], [*keys, "cc", *PHASE_COLUMNS])
    frames = []
    for rows, cols in zip(tables, columns, strict=True):
        frame = pd.DataFrame(rows)
        if frame.empty:
            frame = pd.DataFrame(columns=list(cols))
        frames.append(frame)
    return RunFrames(*frames)

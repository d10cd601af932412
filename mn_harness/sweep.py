"""A sweep: the same experiment per congestion control, per `--set` variant and per repetition.

A sweep is a folder: `plan.json` lists every (label, variant, repetition) and, once it has
finished, its results folder. Runs are executed in order and `plan.json` is rewritten after each
one, so an interrupted sweep keeps its finished runs and `resume` continues where it stopped (a
run that was cut off is run again). Every variant is validated before the first run starts, so a
typo in the tenth variant does not cost nine runs.

Used by `mn-harness compare` (and by the benches that sweep); aggregation and output are the
report's (mn_harness.report.compare)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from mn_harness.config import Experiment
from mn_harness.config.overrides import apply_variant, expand_set_specs, variant_label
from mn_harness.errors import ConfigError
from mn_harness.ownership import hand_over, make_dirs
from mn_harness.progress import format_eta, sweep_eta_s

PLAN_FILE = "plan.json"


def run_label(cc: str | None, assignments: Sequence[tuple[str, Any]]) -> str:
    parts = ([cc] if cc else []) + ([variant_label(assignments)] if assignments else [])
    return " ".join(parts) or "default"


def build_plan(ccs: Sequence[str | None], sets: Sequence[str], repeat: int) -> list[dict]:
    """One entry per CC × --set combination × repetition, in that order."""
    if repeat < 1:
        raise ConfigError("--repeat", f"must be >= 1, got {repeat}")
    variants = expand_set_specs(sets)
    plan = []
    for cc in ccs:
        for assignments in variants:
            for rep in range(repeat):
                plan.append({"label": run_label(cc, assignments), "cc": cc, "set": assignments,
                             "repetition": rep, "results_dir": None})
    return plan


def experiment_for(raw: dict, entry: dict, name: str) -> Experiment:
    """The raw YAML with the entry's --set values and CC applied, validated; errors name the
    --set path or the YAML path."""
    variant = apply_variant(raw, entry["set"])
    if entry["cc"]:
        jobs = variant.get("jobs")
        if isinstance(jobs, list):
            for job in jobs:
                if isinstance(job, dict):
                    job["cc"] = entry["cc"]
    return Experiment.from_dict(variant, default_name=name)


@dataclass
class Sweep:
    folder: Path
    experiment: str
    raw: dict
    runs: list[dict]

    @property
    def plan_path(self) -> Path:
        return self.folder / PLAN_FILE

    def save(self) -> None:
        tmp = self.plan_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"experiment": self.experiment, "raw": self.raw,
                                   "runs": self.runs}, indent=1))
        os.replace(tmp, self.plan_path)

    def experiments(self) -> list[Experiment]:
        """Every run's experiment, validated (raises ConfigError before anything runs)."""
        return [experiment_for(self.raw, entry, self.experiment) for entry in self.runs]

    def finished(self, entry: dict) -> bool:
        folder = entry.get("results_dir")
        if not folder:
            return False
        try:
            summary = json.loads(Path(folder, "summary.json").read_text())
        except (OSError, ValueError):
            return False
        return isinstance(summary, dict) and summary.get("status") == "completed"

    def refs(self) -> list[tuple[str, int, str]]:
        return [(e["label"], e["repetition"], e["results_dir"]) for e in self.runs
                if e.get("results_dir")]


def new_sweep(root: Path, raw: dict, name: str, runs: list[dict]) -> Sweep:
    """A new sweep folder under `root` (never an existing one: a second sweep started in the
    same second gets a suffix)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    make_dirs(root)
    for suffix in range(1, 1000):
        folder = root / (f"{name}-compare-{stamp}" + (f"-{suffix}" if suffix > 1 else ""))
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        sweep = Sweep(folder, name, raw, runs)
        sweep.save()
        return sweep
    raise ConfigError(str(root), "cannot create a new comparison folder there")


def load_sweep(folder: str | Path) -> Sweep:
    """An existing sweep folder (for resume); ConfigError naming the folder when it is not one."""
    folder = Path(folder)
    where = str(folder)
    try:
        saved = json.loads((folder / PLAN_FILE).read_text())
    except FileNotFoundError:
        raise ConfigError(where, f"no {PLAN_FILE}: not a comparison folder") from None
    except OSError as exc:
        raise ConfigError(where, f"cannot read {PLAN_FILE}: {exc.strerror}") from None
    except ValueError:
        raise ConfigError(where, f"{PLAN_FILE} is not valid JSON") from None
    if (not isinstance(saved, dict) or not isinstance(saved.get("raw"), dict)
            or not isinstance(saved.get("runs"), list) or not isinstance(saved.get("experiment"), str)
            or not all(isinstance(r, dict) and {"label", "cc", "set", "repetition"} <= set(r)
                       for r in saved["runs"])):
        raise ConfigError(where, f"{PLAN_FILE} is not a comparison plan")
    for r in saved["runs"]:
        r["set"] = [tuple(a) for a in r["set"]]
        r.setdefault("results_dir", None)
    return Sweep(folder, saved["experiment"], saved["raw"], saved["runs"])


def run_sweep(sweep: Sweep, run_one: Callable[[Experiment, Path, Callable[[Path], None]], None],
              log=print) -> None:
    """Run every unfinished entry in order; plan.json is saved after each run (finished or
    cut off), so `resume` knows where to go on."""
    experiments = sweep.experiments()
    todo = [i for i, e in enumerate(sweep.runs) if not sweep.finished(e)]
    started = time.monotonic()
    for k, i in enumerate(todo):
        entry = sweep.runs[i]
        eta = sweep_eta_s(k, len(todo), time.monotonic() - started)
        log(f"== run {i + 1}/{len(sweep.runs)} ({k + 1} of {len(todo)} to do): {entry['label']} "
            f"(repetition {entry['repetition'] + 1})" + (f"; sweep ETA {format_eta(eta)}" if eta is not None else ""))

        def record(results_dir: Path, entry: dict = entry) -> None:
            entry["results_dir"] = str(results_dir)
            sweep.save()

        try:
            run_one(experiments[i], sweep.folder / "runs", record)
        finally:
            hand_over(sweep.folder)


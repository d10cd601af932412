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
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mn_harness.config import Experiment
from mn_harness.config.dump import complete_raw
from mn_harness.config.loader import read_json_file
from mn_harness.config.overrides import apply_variant, expand_set_specs, parse_set_spec, variant_label
from mn_harness.errors import ConfigError, shown
from mn_harness.jobs.scaling import apply_scaling
from mn_harness.ownership import hand_over, make_dirs, new_stamped_dir
from mn_harness.progress import format_eta, sweep_eta_s
from mn_harness.results.loaders import load_summary

PLAN_FILE = "plan.json"
MAX_RUNS = 10_000  # CCs x --set combinations x repetitions in one comparison


def run_label(cc: str | None, assignments: Sequence[tuple[str, Any]]) -> str:
    parts = ([cc] if cc else []) + ([variant_label(assignments)] if assignments else [])
    return " ".join(parts) or "default"


def build_plan(ccs: Sequence[str | None], sets: Sequence[str], repeat: int) -> list[dict]:
    """One entry per CC × --set combination × repetition, in that order."""
    if repeat < 1:
        raise ConfigError("--repeat", f"must be >= 1, got {repeat}")
    count = len(ccs) * repeat * math.prod(len(parse_set_spec(s)) for s in sets)
    if count > MAX_RUNS:
        raise ConfigError("--cc x --set x --repeat", f"{count} runs; at most {MAX_RUNS} in one comparison")
    variants = expand_set_specs(sets)
    plan = []
    for cc in ccs:
        for assignments in variants:
            for rep in range(repeat):
                plan.append({"label": run_label(cc, assignments), "cc": cc, "set": assignments,
                             "repetition": rep, "results_dir": None})
    return plan


def _complete(raw: dict, name: str) -> dict | None:
    """The file's complete configuration, defaults written out (what --set may name besides the
    file's own fields); None if the file alone does not validate (its variants then say why)."""
    try:
        return complete_raw(raw, name)
    except ConfigError:
        return None


def experiment_for(raw: dict, entry: dict, name: str, known: dict | None = None) -> Experiment:
    """The raw YAML with the entry's --set values and CC applied, validated and scaled; errors
    name the --set path or the YAML path. `known`: the file's complete configuration (_complete),
    so --set may name an option the file leaves at its default."""
    variant = apply_variant(raw, entry["set"], known=known)
    if entry["cc"]:
        jobs = variant.get("jobs")
        if isinstance(jobs, list):
            for job in jobs:
                if isinstance(job, dict):
                    job["cc"] = entry["cc"]
    return apply_scaling(Experiment.from_dict(variant, default_name=name))


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
        """Every run's experiment, validated (raises ConfigError before anything runs; a --set
        variant's error says which variant)."""
        out = []
        known = _complete(self.raw, self.experiment) if any(e["set"] for e in self.runs) else None
        for entry in self.runs:
            try:
                out.append(experiment_for(self.raw, entry, self.experiment, known))
            except ConfigError as exc:
                if not entry["set"] or exc.path == "--set":
                    raise
                raise ConfigError(exc.path, f"{exc.detail} (variant --set "
                                  f"{shown(variant_label(entry['set']))})") from None
        return out

    def finished(self, entry: dict) -> bool:
        folder = entry.get("results_dir")
        if not folder:
            return False
        try:
            return load_summary(folder).status == "completed"
        except ConfigError:  # missing, cut off or not ours: run it again
            return False

    def refs(self) -> list[tuple[str, int, str]]:
        return [(e["label"], e["repetition"], e["results_dir"]) for e in self.runs
                if e.get("results_dir")]


def new_sweep(root: Path, raw: dict, name: str, runs: list[dict]) -> Sweep:
    """A new sweep folder under `root` (never an existing one: a second sweep started in the
    same second gets a suffix)."""
    try:
        folder = new_stamped_dir(make_dirs(root), f"{name}-compare")
        if folder is not None:
            sweep = Sweep(folder, name, raw, runs)
            sweep.save()
            return sweep
    except OSError as exc:
        raise ConfigError(shown(str(root)), f"cannot create a comparison folder there: "
                                            f"{exc.strerror or exc}") from None
    raise ConfigError(shown(str(root)), "cannot create a new comparison folder there")


def load_sweep(folder: str | Path) -> Sweep:
    """An existing sweep folder (for resume); ConfigError naming the folder when it is not one,
    or its plan.json when that is not a plan this version wrote."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(shown(str(folder)), "no such folder" if not folder.exists() else
                          "not a folder (give the comparison folder compare wrote)")
    if not os.path.lexists(folder / PLAN_FILE):
        raise ConfigError(shown(str(folder)), f"no {PLAN_FILE}: not a comparison folder")
    where = shown(str(folder / PLAN_FILE))
    saved = read_json_file(folder / PLAN_FILE, "a comparison plan")
    if (not isinstance(saved, dict) or not isinstance(saved.get("raw"), dict)
            or not isinstance(saved.get("runs"), list) or not isinstance(saved.get("experiment"), str)):
        raise ConfigError(where, "not a comparison plan (needs experiment, raw and runs)")
    if not saved["runs"]:
        raise ConfigError(where, "runs: the plan has no runs")
    for i, r in enumerate(saved["runs"]):
        _check_entry(r, where, f"runs[{i}]")
        r["set"] = [tuple(a) for a in r["set"]]
        r.setdefault("results_dir", None)
    return Sweep(folder, saved["experiment"], saved["raw"], saved["runs"])


def _check_entry(entry: Any, where: str, path: str) -> None:
    """One run of a plan has the shape build_plan gives it."""
    def bad(what: str) -> ConfigError:
        return ConfigError(where, f"{path}: {what}")

    if not isinstance(entry, dict) or not {"label", "cc", "set", "repetition"} <= set(entry):
        raise bad("expected an object with label, cc, set and repetition")
    if not isinstance(entry["label"], str):
        raise bad("label: expected a string")
    if entry["cc"] is not None and not isinstance(entry["cc"], str):
        raise bad("cc: expected a congestion control name or null")
    if not isinstance(entry["set"], list) or not all(
            isinstance(a, list) and len(a) == 2 and isinstance(a[0], str) for a in entry["set"]):
        raise bad("set: expected a list of [path, value] pairs")
    rep = entry["repetition"]
    if isinstance(rep, bool) or not isinstance(rep, int) or rep < 0:
        raise bad("repetition: expected a whole number >= 0")
    if entry.get("results_dir") is not None and not isinstance(entry["results_dir"], str):
        raise bad("results_dir: expected a folder path or null")


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


"""`mn-harness compare`: the same experiment per congestion control, per `--set` variant and
per repetition, aggregated into one table with 95% confidence intervals.

A comparison is a folder: `plan.json` lists every (label, variant, repetition) and, once it has
finished, its results folder. Runs are executed in order and `plan.json` is rewritten after each
one, so an interrupted sweep keeps its finished runs and `--resume DIR` continues where it
stopped (a run that was cut off is run again)."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import yaml

from mn_harness.config import ConfigError, Experiment


def _label(cc: str | None, assignments: list) -> str:
    from mn_harness.report.compare import variant_label

    parts = ([cc] if cc else []) + ([variant_label(assignments)] if assignments else [])
    return " ".join(parts) or "default"


def build_plan(ccs: list[str | None], sets: list[str], repeat: int) -> list[dict]:
    from mn_harness.report.compare import expand_set_specs

    try:
        variants = expand_set_specs(sets)
    except ValueError as exc:
        raise ConfigError("--set", str(exc)) from None
    plan = []
    for cc in ccs:
        for assignments in variants:
            for rep in range(repeat):
                plan.append({"label": _label(cc, assignments), "cc": cc, "set": assignments,
                             "repetition": rep, "results_dir": None})
    return plan


def experiment_for(raw: dict, entry: dict, name: str) -> Experiment:
    """The raw YAML with the entry's --set values and CC applied, validated; errors name the
    --set path or the YAML path."""
    from mn_harness.report.compare import apply_variant

    try:
        variant = apply_variant(raw, entry["set"])
    except ValueError as exc:
        raise ConfigError("--set", str(exc)) from None
    if entry["cc"]:
        for job in variant.get("jobs", []):
            job["cc"] = entry["cc"]
    return Experiment.from_dict(variant, default_name=name)


def run_plan(compare_dir: Path, raw: dict, name: str, plan: list[dict], plots: bool) -> int:
    from mn_harness.report.compare import aggregate, format_compare_table, write_compare
    from mn_harness.report.markdown import write_report
    from mn_harness.runner import run_experiment

    # validate every variant before spending minutes on the first run
    experiments = [experiment_for(raw, entry, name) for entry in plan]
    plan_path = compare_dir / "plan.json"
    for i, (entry, experiment) in enumerate(zip(plan, experiments, strict=True)):
        if entry["results_dir"] and Path(entry["results_dir"], "summary.json").is_file():
            status = json.loads(Path(entry["results_dir"], "summary.json").read_text()).get("status")
            if status == "completed":
                continue
        print(f"== run {i + 1}/{len(plan)}: {entry['label']} (repetition {entry['repetition'] + 1})", flush=True)
        results: list[Path] = []
        try:
            run_experiment(experiment, out_root=compare_dir / "runs", after_run=results.append)
        finally:
            if results:
                entry["results_dir"] = str(results[0])
                plan_path.write_text(json.dumps({"experiment": name, "raw": raw, "runs": plan}, indent=1))
        write_report(results[0], plots=plots)
    runs = [(e["label"], e["repetition"], e["results_dir"]) for e in plan]
    md = write_compare(runs, compare_dir, plots=plots)
    print(format_compare_table(aggregate(runs)))
    print(f"comparison: {md}")
    return 0


def cmd_compare(args) -> int:
    from mn_harness.cli import _need_root

    if args.resume:
        compare_dir = Path(args.resume)
        saved = json.loads((compare_dir / "plan.json").read_text())
        raw, name, plan = saved["raw"], saved["experiment"], saved["runs"]
    else:
        try:
            raw = yaml.safe_load(Path(args.experiment).read_text())
        except OSError as exc:
            raise ConfigError(args.experiment, f"cannot read: {exc.strerror}") from None
        name = Path(args.experiment).stem
        if isinstance(raw, dict) and isinstance(raw.get("experiment"), str):
            name = raw["experiment"]
        ccs: list[str | None] = [c.strip() for c in args.cc.split(",") if c.strip()] if args.cc else [None]
        plan = build_plan(ccs, args.set or [], args.repeat)
        root = Path(args.out or (raw.get("run", {}) or {}).get("output_dir", "results"))
        compare_dir = root / f"{name}-compare-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
        for entry in plan:
            experiment_for(raw, entry, name)  # one-line error before anything is created
        _need_root("compare")
        compare_dir.mkdir(parents=True)
        (compare_dir / "plan.json").write_text(json.dumps({"experiment": name, "raw": raw, "runs": plan}, indent=1))
    _need_root("compare")
    print(f"comparison folder: {compare_dir} ({len(plan)} runs)")
    try:
        return run_plan(compare_dir, raw, name, plan, plots=not args.no_plots)
    except KeyboardInterrupt:
        print(f"mn-harness compare: interrupted; finished runs kept, continue with "
              f"`mn-harness compare --resume {compare_dir}`", file=sys.stderr)
        return 130


def add_compare_parser(sub) -> None:
    p = sub.add_parser("compare", help="run an experiment per CC / --set value / repetition and compare (root)")
    p.add_argument("experiment", nargs="?", help="experiment file (not needed with --resume)")
    p.add_argument("--cc", help="comma-separated congestion controls, e.g. reno,cubic,mltcp-reno")
    p.add_argument("--set", action="append", metavar="PATH=V1,V2",
                   help="sweep a YAML field, e.g. jobs[0].compute=80ms,120ms (repeatable: all combinations)")
    p.add_argument("--repeat", type=int, default=1, help="repetitions per variant (>= 2 for confidence intervals)")
    p.add_argument("--out", help="put the comparison folder under this directory")
    p.add_argument("--resume", metavar="DIR", help="continue an interrupted comparison")
    p.add_argument("--no-plots", action="store_true")
    p.set_defaults(func=_checked)


def _checked(args) -> int:
    if not args.resume and not args.experiment:
        raise ConfigError("compare", "give an experiment file or --resume DIR")
    if args.repeat < 1:
        raise ConfigError("--repeat", f"must be >= 1, got {args.repeat}")
    return cmd_compare(args)

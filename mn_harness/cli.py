"""`mn-harness`: validate, run, clean up, report.

Every user error is one line on stderr: exit 2 for a bad experiment file or argument, 1 for a
failure while running (what failed and, where it helps, what to install), 130 on Ctrl-C (the
partial results are still written). Tracebacks are for bugs only."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mn_harness.config import ConfigError, Experiment, load_experiment

EXIT_USAGE, EXIT_FAILED, EXIT_INTERRUPTED = 2, 1, 130


def _need_root(command: str) -> None:
    if os.geteuid() != 0:
        print(f"mn-harness {command}: needs root (network namespaces, tc, BPF): run it with sudo",
              file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _load(path: str, args) -> Experiment:
    from mn_harness.cc.errors import CCConfigError
    from mn_harness.cc.spec import CCSpec
    from mn_harness.runner import override_cc

    experiment = load_experiment(path)
    if getattr(args, "cc", None):
        try:
            experiment = override_cc(experiment, CCSpec.from_dict(args.cc, "--cc"))
        except CCConfigError as exc:
            raise ConfigError("", str(exc)) from None
    if getattr(args, "dataplane", None):
        experiment = experiment.with_run(dataplane=args.dataplane)
    return experiment


def _report(results_dir: Path, plots: bool) -> None:
    from mn_harness.report.markdown import format_table, report_run

    report, metrics = report_run(results_dir, plots=plots)
    print(format_table(metrics))
    print(f"report: {report}")


def cmd_validate(args) -> int:
    experiment = _load(args.experiment, args)
    from mn_harness.network.plan import NetworkPlan

    plan = NetworkPlan(experiment)
    print(f"{args.experiment}: ok — {len(experiment.hosts)} hosts, {len(experiment.switches)} switches, "
          f"{len(experiment.links)} links, {len(experiment.jobs)} jobs")
    for label, jobs in plan.link_jobs().items():
        if len(jobs) > 1:
            print(f"  shared link {label}: {', '.join(jobs)}")
    return 0


def cmd_run(args) -> int:
    experiment = _load(args.experiment, args)
    _need_root("run")
    from mn_harness.runner import run_experiment

    results: list[Path] = []
    try:
        run_experiment(experiment, out_root=args.out, after_run=results.append)
    except KeyboardInterrupt:
        where = f"; partial results in {results[0]}" if results else ""
        print(f"mn-harness run: interrupted, network torn down{where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    results_dir = results[0]
    print(f"results: {results_dir}")
    _report(results_dir, plots=not args.no_plots)
    return 0


def cmd_clean(args) -> int:
    _need_root("clean")
    from mn_harness.state import clean

    removed = clean(include_live=args.force)
    print(f"mn-harness clean: removed {removed} leftover(s)")
    return 0


def cmd_report(args) -> int:
    results_dir = Path(args.results_dir)
    if not (results_dir / "summary.json").is_file():
        print(f"mn-harness report: {results_dir}: no summary.json (not a results folder)", file=sys.stderr)
        return EXIT_USAGE
    _report(results_dir, plots=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mn-harness", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check an experiment file and show shared links")
    p.add_argument("experiment")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("run", help="run an experiment (root)")
    p.add_argument("experiment")
    p.add_argument("--cc", help="override every job's congestion control, e.g. reno or mltcp-reno")
    p.add_argument("--out", help="put the results folder under this directory")
    p.add_argument("--dataplane", choices=["auto", "linux", "bmv2"], help="override run.dataplane")
    p.add_argument("--no-plots", action="store_true", help="skip plots and report.md")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("clean", help="remove leftovers of crashed runs (root)")
    p.add_argument("--force", action="store_true", help="also runs whose harness still seems alive")
    p.set_defaults(func=cmd_clean)

    p = sub.add_parser("report", help="metrics, plots and report.md for a results folder")
    p.add_argument("results_dir")
    p.set_defaults(func=cmd_report)

    try:
        from mn_harness.compare_cli import add_compare_parser
    except ImportError:
        pass
    else:
        add_compare_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from mn_harness.errors import USER_ERRORS

    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"mn-harness: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except USER_ERRORS as exc:
        print(f"mn-harness: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("mn-harness: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())

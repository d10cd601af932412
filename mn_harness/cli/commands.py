"""The single-experiment commands: validate, run, report, clean."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mn_harness.config import ConfigError, Experiment, load_experiment
from mn_harness.config.model import DATAPLANES
from mn_harness.errors import EXIT_INTERRUPTED, UsageError, shown
from mn_harness.results.folder import check_results_root

EXAMPLES = {
    "validate": "example: mn-harness validate topologies/dumbbell-2jobs.yaml",
    "run": "examples: sudo mn-harness run topologies/dumbbell-2jobs.yaml --cc mltcp-reno;  "
           "sudo mn-harness run topologies/dumbbell-2jobs.yaml --pcap s1-s2 --cli=after",
    "report": "example: mn-harness report results/dumbbell-2jobs-20261201-101500 --window 2s:4s",
    "clean": "example: sudo mn-harness clean",
}


def need_root(command: str) -> None:
    if os.geteuid() != 0:
        raise UsageError(f"{command}: needs root (network namespaces, tc, BPF): run it with sudo")


def load(path: str, args: argparse.Namespace) -> Experiment:
    """The experiment file, its jobs scaled, with the command line's overrides (--cc,
    --dataplane) applied and validated like the file itself."""
    from mn_harness.cc.spec import CCSpec
    from mn_harness.jobs.scaling import apply_scaling

    experiment = apply_scaling(load_experiment(path))
    if getattr(args, "cc", None) is not None:
        experiment = experiment.with_cc(CCSpec.from_dict(args.cc, "--cc"))
    if getattr(args, "dataplane", None):
        experiment = experiment.with_run(dataplane=args.dataplane)
    return experiment


def parse_window(text: str | None) -> tuple[float, float] | None:
    """`--window 2s:5s` (or `2:5`, seconds since the experiment start) -> (2.0, 5.0)."""
    if text is None:
        return None
    from mn_harness.units import parse_duration

    start, sep, end = text.partition(":")
    if not sep:
        raise ConfigError("--window", f"expected START:END, e.g. 2s:5s, got {text!r}")
    lo, hi = parse_duration(start, "--window"), parse_duration(end, "--window")
    if hi <= lo:
        raise ConfigError("--window", f"the end must be after the start, got {text!r}")
    return lo, hi


def print_report(results_dir: Path, plots: bool, window: tuple[float, float] | None = None) -> None:
    from mn_harness.ownership import hand_over
    from mn_harness.report.markdown import format_table, report_run
    from mn_harness.runlog import append_to_log

    report, metrics = report_run(results_dir, plots=plots, window=window)
    table = format_table(metrics)
    print(table)
    print(f"report: {report}")
    append_to_log(results_dir, f"{table}\nreport: {report}")
    hand_over(results_dir)


def cmd_validate(args: argparse.Namespace) -> int:
    experiment = load(args.experiment, args)
    from mn_harness.network.plan import NetworkPlan

    plan = NetworkPlan(experiment)
    from mn_harness.dataplane.bmv2_setup import check_programs

    programs = check_programs(plan)  # the switches' own P4 programs against the contract
    print(f"{args.experiment}: ok — {len(experiment.hosts)} hosts, {len(experiment.switches)} switches, "
          f"{len(experiment.links)} links, {len(experiment.jobs)} jobs")
    for warning in experiment.warnings():
        print(f"  warning: {warning}")
    if (scale := experiment.run.emulation.time_scale) != 1:
        from mn_harness.config.time_scale import dilate

        rates = sorted({(a.bw_bps, b.bw_bps) for a, b in zip(experiment.links, dilate(experiment).links, strict=True)})
        print(f"  time scale {scale:g}: the emulation runs {scale:g} times slower: links at "
              + ", ".join(f"{b / 1e6:g} Mbit/s ({a / 1e6:g} nominal)" for a, b in rates)
              + f", compute and delays x {scale:g}; results in the experiment's times")
    for line in programs:
        print(f"  {line}")
    if experiment.servers:
        from mn_harness.config.servers import describe_placement

        for line in describe_placement(experiment.servers, experiment.links):
            print(f"  {line}")
    plan, routing = routed_plan(plan)
    if routing:
        print(f"  {routing}")
    maybe = "" if plan.resolved else "may share "
    for label, jobs in plan.link_jobs().items():
        if len(jobs) > 1:
            print(f"  shared link {label}: {maybe}{', '.join(jobs)}")
    from mn_harness.jobs.ideal import describe_job

    for job in experiment.jobs:
        print(f"  job {describe_job(job, plan)}")
    if plan.resolved:
        from mn_harness.jobs.cassini import predict

        for line in predict(experiment, plan).lines():
            print(line)
    return 0


def routed_plan(plan):
    """With ECMP: the plan with every flow's path where the data plane's choice is known before
    anything runs (BMv2: the P4 hash, computed in Python), and one line saying how flows are
    routed; ("", the plan) with shortest-path routing."""
    from mn_harness.network.flows import ecmp_hash_seed

    exp = plan.experiment
    if exp.routing != "ecmp":
        return plan, ""
    seed = ecmp_hash_seed(exp.run.seed)
    dataplane = exp.run.dataplane
    if dataplane == "auto":
        from mn_harness.dataplane import bmv2_unavailable_reason

        dataplane = "linux" if bmv2_unavailable_reason() else "bmv2"
    choices = sum(len(plan.flow_paths(f)) > 1 for f in plan.flows)
    head = f"routing ecmp (hash seed {seed}): {choices} of {len(plan.flows)} flows have equal-cost paths"
    if dataplane == "bmv2":
        from mn_harness.dataplane.bmv2 import bmv2_paths

        plan = bmv2_paths(plan)
        paths = "; ".join(f"{f.job} r{f.rank} " + "-".join(plan.flow_nodes(f)) for f in plan.flows)
        return plan, f"{head}; BMv2's hash sends them: {paths}"
    return plan, (f"{head}; the Linux routers' hash picks each path when the network is up "
                  "(summary.json: flow_paths); the CASSINI prediction is made on those paths")


def cmd_run(args: argparse.Namespace) -> int:
    from mn_harness.state import check_state_dir

    experiment = load(args.experiment, args)
    window = parse_window(args.window)
    if experiment.servers and (args.pcap is not None or args.cli is not None):
        raise UsageError(f"{'--pcap' if args.pcap is not None else '--cli'}: not with `servers` (the network "
                         "runs on the servers, not here)")
    if args.pcap is not None:  # `--pcap ""` too: it would silently capture nothing
        from mn_harness.capture import parse_links

        parse_links(args.pcap, experiment)  # a typo is exit 2 before anything is built
    check_results_root(experiment.run.output_dir if args.out is None else args.out,
                       "run.output_dir" if args.out is None else "--out")
    check_state_dir()
    from mn_harness.dataplane.bmv2_setup import check_programs
    from mn_harness.network.plan import NetworkPlan

    check_programs(NetworkPlan(experiment))  # a program that cannot do what is asked: exit 2 here
    need_root("run")
    for warning in experiment.warnings():
        print(f"warning: {warning}")
    from mn_harness.runner import run_experiment

    results: list[Path] = []
    try:
        run_experiment(experiment, out_root=args.out, after_run=results.append, pcap=args.pcap or (),
                       cli=args.cli, label=args.label)
    except KeyboardInterrupt:
        where = f"; partial results in {results[0]}" if results else ""
        print(f"mn-harness run: interrupted, network torn down{where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"results: {results[0]}")
    print_report(results[0], plots=not args.no_plots, window=window)
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from mn_harness.state import clean, read_state_files

    _, errors = read_state_files()  # a malformed state file is named without root too
    if errors and os.geteuid() != 0:
        raise errors[0]
    need_root("clean")
    removed = clean(include_live=args.force)
    print(f"mn-harness clean: removed {removed} leftover(s)")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    results_dir = Path(args.results_dir)
    window = parse_window(args.window)
    where = shown(args.results_dir)
    if not results_dir.is_dir():
        raise ConfigError(where, "no such folder" if not results_dir.exists() else
                          "not a folder (give a results folder written by run)")
    if not os.path.lexists(results_dir / "summary.json"):
        raise ConfigError(where, "no summary.json (not a results folder)")
    try:
        print_report(results_dir, plots=not args.no_plots, window=window)
    except OSError as exc:  # the folder is read-only, or the disk is full
        raise ConfigError(where, f"cannot write {shown(exc.filename or 'the report')}: "
                                 f"{exc.strerror or exc}") from None
    return 0


def add_parsers(sub) -> None:
    def command(name: str, help_text: str):
        return sub.add_parser(name, help=help_text, description=help_text, epilog=EXAMPLES[name])

    p = command("validate", "check an experiment file and list the links jobs share")
    p.add_argument("experiment", help="experiment file (YAML)")
    p.add_argument("--cc", help="check with every job's congestion control set to this")
    p.add_argument("--dataplane", choices=DATAPLANES, help="check with run.dataplane set to this")
    p.set_defaults(func=cmd_validate)

    p = command("run", "run an experiment (root); results go to results/<experiment>-<timestamp>/")
    p.add_argument("experiment", help="experiment file (YAML)")
    p.add_argument("--cc", help="override every job's congestion control, e.g. reno or mltcp-reno")
    p.add_argument("--out", help="put the results folder under this directory (default: run.output_dir)")
    p.add_argument("--dataplane", choices=DATAPLANES, help="override run.dataplane")
    p.add_argument("--no-plots", action="store_true", help="skip plots and report.md")
    p.add_argument("--pcap", metavar="LINK[,LINK]",
                   help="capture packet headers on these links (e.g. s1-s2) into pcap/<link>.pcap (needs tcpdump)")
    p.add_argument("--cli", nargs="?", const="up", choices=("up", "after"),
                   help="open the Mininet CLI once the network is up (jobs wait until you exit it), "
                        "or with --cli=after once the jobs are done, before teardown")
    p.add_argument("--label", help="a name for this run in summary.json (what results.load() groups by)")
    p.add_argument("--window", metavar="START:END",
                   help="throughput plot of this part of the run only, e.g. 2s:5s (seconds since the start)")
    p.set_defaults(func=cmd_run)

    p = command("clean", "remove what crashed runs left behind (root); never touches anything else")
    p.add_argument("--force", action="store_true", help="also runs whose harness still seems alive")
    p.set_defaults(func=cmd_clean)

    p = command("report", "recompute metrics, plots and report.md of a results folder")
    p.add_argument("results_dir", help="a results folder written by run")
    p.add_argument("--no-plots", action="store_true", help="tables and report.md only")
    p.add_argument("--window", metavar="START:END",
                   help="throughput plot of this part of the run only, e.g. 2s:5s (seconds since the start)")
    p.set_defaults(func=cmd_report)

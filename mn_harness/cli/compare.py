"""`mn-harness compare`: an experiment per congestion control × `--set` value × repetition
(mn_harness.sweep), aggregated into one table with 95% confidence intervals
(mn_harness.report.compare)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mn_harness.cli.commands import need_root
from mn_harness.config.loader import default_name, read_experiment_file
from mn_harness.errors import EXIT_INTERRUPTED, ConfigError, shown
from mn_harness.results.folder import check_results_root
from mn_harness.state import check_state_dir

EXAMPLE = ("examples: sudo mn-harness compare topologies/dumbbell-2jobs.yaml --cc reno,mltcp-reno "
           "--repeat 3;  sudo mn-harness compare --resume results/dumbbell-2jobs-compare-20261201-101500;  "
           "sudo mn-harness compare x.yaml --cc reno,mltcp-reno --repeat 8 --rounds, then --round DIR r001 on any "
           "machine and --merge DIR")


def parse_ccs(text: str | None) -> list[str | None]:
    """`--cc reno,cubic` -> ["reno", "cubic"]; each validated as a CC name."""
    if text is None:
        return [None]
    from mn_harness.cc.spec import CCSpec

    names = [c.strip() for c in text.split(",")]
    if not any(names) or any(not n for n in names):
        raise ConfigError("--cc", f"expected comma-separated congestion controls, got {text!r}")
    for name in names:
        CCSpec.from_dict(name, "--cc")
    return list(names)


def cmd_compare(args: argparse.Namespace) -> int:
    from mn_harness import sweep as sweeps

    if args.round or args.merge:
        return _rounds(args)
    if args.resume:
        if args.experiment or args.cc is not None or args.set or args.out is not None or args.rounds:
            raise ConfigError("--resume", "takes the comparison folder only (its plan has the rest; "
                                          "--faithful-only and --no-plots may go with it)")
        sweep = sweeps.load_sweep(args.resume)
        try:
            sweep.experiments()  # still valid with this version?
        except ConfigError as exc:
            raise ConfigError(shown(str(sweep.plan_path)), str(exc)) from None
        check_results_root(sweep.folder, "--resume")
        check_state_dir()
        need_root("compare")
    else:
        if not args.experiment:
            raise ConfigError("compare", "give an experiment file or --resume DIR")
        raw = read_experiment_file(args.experiment)
        name = raw["experiment"] if isinstance(raw.get("experiment"), str) else default_name(args.experiment)
        runs = sweeps.build_plan(parse_ccs(args.cc), args.set or [], args.repeat)
        first = sweeps.Sweep(Path("."), name, raw, runs)
        experiments = first.experiments()  # one-line error before anything is created
        root = Path(experiments[0].run.output_dir if args.out is None else args.out)
        check_results_root(root, "run.output_dir" if args.out is None else "--out")
        check_state_dir()
        need_root("compare")
        sweep = sweeps.new_sweep(root, raw, experiments[0].name, runs)
        if args.rounds:
            from mn_harness.cluster.rounds import ROUND_NAMES, write_rounds
            from mn_harness.ownership import hand_over

            rounds = write_rounds(sweep)
            hand_over(sweep.folder)
            print(f"comparison folder: {sweep.folder} ({len(sweep.runs)} runs in {len(rounds)} rounds, listed in "
                  f"{ROUND_NAMES}); run each anywhere with `mn-harness compare --round {sweep.folder} NAME`, "
                  f"then `mn-harness compare --merge {sweep.folder}`")
            return 0
    print(f"comparison folder: {sweep.folder} ({len(sweep.runs)} runs)")
    try:
        sweeps.run_sweep(sweep, _run_one(plots=not args.no_plots))
    except KeyboardInterrupt:
        print(f"mn-harness compare: interrupted; finished runs kept, continue with "
              f"`mn-harness compare --resume {sweep.folder}`", file=sys.stderr)
        return EXIT_INTERRUPTED
    return _write(sweep, args)


def _write(sweep, args: argparse.Namespace) -> int:
    """compare.csv, compare.md and the table of a comparison whose runs are done."""
    from mn_harness.ownership import hand_over
    from mn_harness.report.compare import format_compare_table, write_compare

    written = write_compare(sweep.refs(), sweep.folder, plots=not args.no_plots, only_faithful=args.faithful_only)
    hand_over(sweep.folder)
    print(format_compare_table(written.rows))
    if written.left_out:
        print(f"faithful runs only: left out {len(written.left_out)} of {len(sweep.refs())}: "
              + "; ".join(written.left_out))
    print(f"comparison: {written.md}")
    return 0


def _rounds(args: argparse.Namespace) -> int:
    """--round DIR NAME (one round of a planned comparison) and --merge DIR [ROUND ...]."""
    from mn_harness.cluster import rounds

    if args.round and args.merge:
        raise ConfigError("--round", "one of --round and --merge at a time")
    if args.experiment or args.cc is not None or args.set or args.out is not None or args.resume or args.rounds:
        option = "--round" if args.round else "--merge"
        raise ConfigError(option, "takes the comparison folder (and a round) only: its plan has the rest")
    if args.merge:
        folder, *extra = (Path(p) for p in args.merge)
        sweep = rounds.merge_rounds(folder, extra)
        print(f"comparison folder: {sweep.folder} ({len(sweep.runs)} runs, merged from its rounds)")
        return _write(sweep, args)
    folder, name = Path(args.round[0]), args.round[1]
    from mn_harness import sweep as sweeps

    sweeps.load_sweep(folder)  # a bad folder is named without root
    rounds.load_rounds(folder)
    check_results_root(folder, "--round")
    check_state_dir()
    need_root("compare")
    try:
        target = rounds.run_round(folder, name, _run_one(plots=not args.no_plots))
    except KeyboardInterrupt:
        print(f"mn-harness compare: round {name} interrupted; run it again with "
              f"`mn-harness compare --round {folder} {name}`", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"round {name}: done in {target}")
    return 0


def _run_one(plots: bool):
    def run_one(experiment, runs_root: Path, record) -> None:
        from mn_harness.report.markdown import write_report
        from mn_harness.runner import run_experiment

        results: list[Path] = []

        def after(results_dir: Path) -> None:
            results.append(results_dir)
            record(results_dir)

        from mn_harness.ownership import hand_over

        run_experiment(experiment, out_root=runs_root, after_run=after)
        write_report(results[0], plots=plots)
        hand_over(results[0])

    return run_one


def _repeat(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"must be 1..1000, got {value}")
    return value


def add_parser(sub) -> None:
    text = "run an experiment per CC / --set value / repetition and compare them (root)"
    p = sub.add_parser("compare", help=text, description=text, epilog=EXAMPLE)
    p.add_argument("experiment", nargs="?", help="experiment file (not with --resume)")
    p.add_argument("--cc", help="comma-separated congestion controls, e.g. reno,cubic,mltcp-reno")
    p.add_argument("--set", action="append", metavar="PATH=V1,V2",
                   help="sweep a YAML field, e.g. jobs[0].compute=80ms,120ms (repeatable: all combinations)")
    p.add_argument("--repeat", type=_repeat, default=1,
                   help="repetitions per variant (>= 2 for confidence intervals; default 1)")
    p.add_argument("--out", help="put the comparison folder under this directory")
    p.add_argument("--resume", metavar="DIR", help="continue an interrupted comparison")
    p.add_argument("--rounds", action="store_true",
                   help="plan the comparison into rounds (every CC of one repetition each) and run nothing: "
                        "each round then runs anywhere with --round, and --merge joins them (docs/cluster.md)")
    p.add_argument("--round", nargs=2, metavar=("DIR", "NAME"), help="run one round of a comparison planned "
                   "with --rounds (again: replaces that round's earlier attempt)")
    p.add_argument("--merge", nargs="+", metavar="DIR",
                   help="merge a planned comparison's rounds (DIR/rounds/*, and any round folders named after DIR) "
                        "into one comparison")
    p.add_argument("--no-plots", action="store_true", help="skip plots")
    p.add_argument("--faithful-only", action="store_true",
                   help="aggregate only the runs whose emulation was faithful (summary.json fidelity); "
                        "says how many were left out")
    p.set_defaults(func=cmd_compare)

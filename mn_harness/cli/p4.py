"""`mn-harness p4 new DIR`: a folder to start a P4 program of one's own from (mn_harness.p4.starter)."""

from __future__ import annotations

import argparse

EXAMPLE = ("example: mn-harness p4 new my_p4 --name dequeue_ecn; then in my_p4: mn-harness validate "
           "experiment.yaml, sudo <venv>/bin/python -m pytest ., sudo mn-harness run experiment.yaml")


def cmd_new(args: argparse.Namespace) -> int:
    from mn_harness.p4.starter import new_program_folder

    written = new_program_folder(args.folder, args.name)
    print(f"{args.folder}: {', '.join(p.name for p in written)}")
    print(f"next: cd {args.folder} && mn-harness validate experiment.yaml")
    return 0


def add_parser(sub) -> None:
    about = "P4 programs of your own for the BMv2 data plane"
    p4 = sub.add_parser("p4", help=about, description=about, epilog=EXAMPLE)
    commands = p4.add_subparsers(dest="p4_command", required=True, metavar="COMMAND",
                                 parser_class=type(p4), help="new: a folder to start a program from")
    about = ("a folder with a program derived from ecn_telemetry.p4, an experiment that runs it and "
             "its unit tests, which pass as they are")
    new = commands.add_parser("new", help=about, description=about, epilog=EXAMPLE)
    new.add_argument("folder", help="the folder to create (new, or empty)")
    new.add_argument("--name", default="program", help="the program's name: <name>.p4 (default: program)")
    new.set_defaults(func=cmd_new)

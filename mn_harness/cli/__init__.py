"""`mn-harness`: validate, run, compare, report, clean, p4.

Every user error is one line on stderr: exit 2 for a bad experiment file or argument (it names
the YAML path, the file or the option), 1 for a failure while running (what failed and, where it
helps, what to install), 130 on Ctrl-C or SIGTERM (the network is torn down and the partial
results are written). Tracebacks are for bugs only. `main` catches `HarnessError` once; the
commands themselves only raise."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import NoReturn

from mn_harness import __version__
from mn_harness.errors import EXIT_INTERRUPTED, EXIT_USAGE, HarnessError, one_line


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (`mn-harness run: error: ...`) and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from mn_harness.cli import commands, compare, p4

    parser = OneLineParser(prog="mn-harness", description=(__doc__ or "").splitlines()[0],
                           epilog="Each command has --help with an example.")
    parser.add_argument("--version", action="version", version=f"mn-harness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=OneLineParser)
    commands.add_parsers(sub)
    compare.add_parser(sub)
    p4.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    # A run started from a script's background job inherits SIGINT as ignored: restore it, so
    # Ctrl-C and `kill -INT` always tear the network down.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a reader that left shows here, not at exit where it cannot be caught
        return code
    except HarnessError as exc:
        print(f"mn-harness: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("mn-harness: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `mn-harness validate x.yaml | head -1`: the reader is gone; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def run_main() -> None:
    """Console-script entry point."""
    sys.exit(main())

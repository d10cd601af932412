"""`mn-harness p4 new DIR`: a folder to start a P4 program of one's own from.

The program is the shipped ecn_telemetry.p4 with its includes inlined (one file the user owns,
which compiles and meets the program contract as it is); next to it an experiment file that
runs it on a small BMv2 dumbbell, unit tests written with the pytest plugin (a Python module
and a *.p4test.yaml file) that pass on the unchanged program, and a README with the commands.
The non-program files are templates in starter/ (package data), `$name` standing for the
program's name."""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from mn_harness import __version__
from mn_harness.errors import UsageError

from . import DEFAULT_PROGRAM, PROGRAMS_DIR

STARTER_DIR = Path(__file__).resolve().parent / "starter"
# template -> file written, `$name` substituted in both
TEMPLATES = {"experiment.yaml": "experiment.yaml", "test_program.py.tmpl": "test_$name.py",
             "program.p4test.yaml": "$name.p4test.yaml", "README.md": "README.md"}
_INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[ \t]*$', re.MULTILINE)
_LEADING_COMMENT_RE = re.compile(r"\A\s*/\*.*?\*/\s*\n", re.DOTALL)
NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,39}")


def flatten(source: Path, _seen: frozenset[Path] = frozenset()) -> str:
    """`source` with every `#include "..."` (relative to the including file) replaced by that
    file's text, recursively, its leading comment (which describes it as a shared part) left
    out; `#include <...>` (the compiler's) stay."""
    source = source.resolve()
    seen = _seen | {source}

    def inline(m: re.Match) -> str:
        path = (source.parent / m.group(1)).resolve()
        if path in seen:
            raise ValueError(f"{source}: {m.group(1)} includes itself")
        body = _LEADING_COMMENT_RE.sub("", flatten(path, seen), count=1)
        return f"/* --- {path.name} --- */\n{body.rstrip()}\n/* --- end of {path.name} --- */"

    return _INCLUDE_RE.sub(inline, source.read_text())


def program_text(name: str) -> str:
    source = PROGRAMS_DIR / f"{DEFAULT_PROGRAM}.p4"
    head = (f"/* {name}.p4 -- a program of your own for mn-harness's BMv2 data plane: the shipped\n"
            f" * {source.name} (mn-harness {__version__}) with its includes inlined. Change it as you\n"
            " * like; keep the tables, actions and counters the harness programs and reads by name\n"
            " * (docs/p4.md, \"The program contract\"): `mn-harness validate experiment.yaml` checks\n"
            f" * them, `sudo pytest` here runs test_{name}.py and {name}.p4test.yaml against it.\n"
            " * What follows is the shipped program's own description. */\n")
    body = flatten(source)
    return head + body.replace(f"{DEFAULT_PROGRAM}.p4 --", f"{name}.p4 (from {DEFAULT_PROGRAM}.p4) --", 1)


def new_program_folder(folder: str | Path, name: str = "program") -> list[Path]:
    """Write the starter folder; UsageError (exit 2) naming the option for a bad name or a
    folder that exists and is not empty. Returns the files written."""
    if not NAME_RE.fullmatch(name):
        raise UsageError(f"--name: {name!r} is not a program name (lower-case letters, digits and _, "
                         "starting with a letter, at most 40)")
    dest = Path(folder)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UsageError(f"{folder}: exists and is not an empty folder (give a new one)")
    dest.mkdir(parents=True, exist_ok=True)
    written = [dest / f"{name}.p4"]
    written[0].write_text(program_text(name))
    for template, target in TEMPLATES.items():
        text = Template((STARTER_DIR / template).read_text()).substitute(name=name, version=__version__)
        path = dest / Template(target).substitute(name=name)
        path.write_text(text)
        written.append(path)
    return written

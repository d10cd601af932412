"""The CLI as an unprivileged user (nobody), from an installation that user can read.

The checkout and its .venv may live where nobody cannot look (a clone in root's 0700 home, an
Ubuntu home at 0750): then `setpriv ... .venv/bin/python -m mn_harness.cli` cannot even start.
So the tests that run the CLI as nobody use a copy made for them: the package and the
distributions it requires (those only the venv sees, or nobody cannot read) in a temporary
0755 folder on PYTHONPATH, run by the base interpreter the venv was made from, with the
system's site-packages (Mininet) as the venv sees them. What cannot be made readable (an
interpreter in a private folder, no setpriv) is a skip with the reason, never a failure."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import mn_harness

NOBODY = 65534
DISTRIBUTION = "mn-harness"


def blocked_at(path: str | Path) -> Path | None:
    """Where any user's access to `path` stops, or None: the first folder above it others
    cannot search, or the path itself when others cannot read it (or list it, a folder).
    Symbolic links resolved."""
    real = Path(os.path.realpath(path))
    try:
        for folder in [*reversed(real.parents)]:
            if not folder.stat().st_mode & stat.S_IXOTH:
                return folder
        mode = real.stat().st_mode
    except OSError:
        return real
    wanted = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return None if mode & wanted == wanted else real


def readable_by_all(path: str | Path) -> bool:
    return blocked_at(path) is None


def _runtime_requirements(name: str) -> list[str]:
    """The distributions `name` requires to run, extras left out, markers evaluated here."""
    from packaging.requirements import Requirement

    names = []
    for text in metadata.requires(name) or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            names.append(req.name)
    return names


def requirement_closure(name: str = DISTRIBUTION) -> list[metadata.Distribution]:
    """Every installed distribution `name` needs at run time, itself excluded."""
    seen: dict[str, metadata.Distribution] = {}
    todo = _runtime_requirements(name)
    while todo:
        want = todo.pop()
        key = want.lower().replace("_", "-")
        if key in seen:
            continue
        seen[key] = metadata.distribution(want)
        todo.extend(_runtime_requirements(want))
    return list(seen.values())


def _copy_distribution(dist: metadata.Distribution, site: Path) -> None:
    """The files of an installed distribution that live in its site folder (scripts in ../bin
    and the like left out) copied under `site`."""
    for rel in dist.files or []:
        if rel.parts and rel.parts[0] == "..":
            continue
        source = Path(str(dist.locate_file(rel)))
        if not source.is_file():
            continue
        target = site / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


@dataclass(frozen=True)
class NobodyInstall:
    """How to run Python as user nobody with mn_harness importable."""

    python: str  # the base interpreter, executable by anyone
    site: Path  # a 0755 folder holding mn_harness and the requirements nobody could not read

    def argv(self, *args: str) -> list[str]:
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                "env", f"PYTHONPATH={self.site}", self.python, *args]


def unavailable_reason() -> str | None:
    """Why the CLI cannot be run as nobody here at all, or None."""
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed: cannot run the CLI as user nobody"
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    blocked = blocked_at(base)
    if blocked is not None or not os.stat(base).st_mode & stat.S_IXOTH:
        where = f" ({blocked} is closed to other users)" if blocked is not None and blocked != Path(base) else ""
        return f"the interpreter {base} is not executable by user nobody{where}"
    return None


def make_install(root: Path) -> NobodyInstall:
    """A copy under `root` (made 0755) that user nobody can import mn_harness from."""
    root.mkdir(parents=True, exist_ok=True)
    site = root / "site"
    shutil.copytree(Path(mn_harness.__file__).parent, site / "mn_harness",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    venv = Path(sys.prefix) if sys.prefix != sys.base_prefix else None
    for dist in requirement_closure():
        where = Path(os.path.realpath(str(dist.locate_file(""))))
        if (venv is not None and where.is_relative_to(os.path.realpath(venv))) or not readable_by_all(where):
            _copy_distribution(dist, site)  # the base interpreter would not see it, or nobody could not read it
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
        elif path.is_file():
            path.chmod(path.stat().st_mode | 0o444)
    python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    install = NobodyInstall(python=python, site=site)
    probe = subprocess.run(install.argv("-c", "import mn_harness.cli"), capture_output=True, text=True,
                           cwd="/", timeout=60)
    if probe.returncode != 0:
        raise RuntimeError(f"user nobody cannot import mn_harness from {site}: {probe.stderr.strip()}")
    return install


def temporary_root() -> Path:
    """A fresh 0755 folder in the system's temporary directory (pytest's tmp_path is private)."""
    path = Path(tempfile.mkdtemp(prefix="mn-harness-nobody-"))
    path.chmod(0o755)
    return path

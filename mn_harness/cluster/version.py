"""Which project a server runs: the version and a digest of the package's files.

A run spread over servers is one experiment only when every server runs the same code: the
worker, the data plane, the congestion controls' BPF sources. The version number alone does not
say that (a checkout with local changes keeps it), so the head compares a digest of every file
of the installed package (sources, BPF and P4 programs, package data) with each server's and
refuses a server whose digest differs, naming both versions."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from mn_harness import __version__

PACKAGE_DIR = Path(__file__).resolve().parents[1]
_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = {".pyc", ".pyo", ".o"}


@cache
def package_digest() -> str:
    """sha256 over the package's files (relative path and content, in path order), 16 hex digits."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*")):
        rel = path.relative_to(PACKAGE_DIR)
        if not path.is_file() or _SKIP_DIRS & set(rel.parts) or path.suffix in _SKIP_SUFFIXES:
            continue
        digest.update(str(rel).encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def identity() -> dict[str, str]:
    return {"version": __version__, "digest": package_digest()}

"""The CLI's promise for bad input, over the corpus in tests/cli/bad_inputs.py: exit 2, exactly
one line on stderr naming the file, YAML path or option, no traceback, no control character —
for validate, run, compare, report and clean, without root (as user nobody when the tests run
as root, from a copy of the package nobody can read: tests/unprivileged.py), so every refusal
comes before anything that needs root, i.e. before any network."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.bad_inputs import CASES, Case
from tests.helpers import ROOT


@pytest.fixture(scope="module")
def cli_argv(unprivileged_python) -> Callable[[list[str]], list[str]]:
    """argv of `mn-harness ARGV` without root."""
    return lambda argv: unprivileged_python("-m", "mn_harness.cli", *argv)


@pytest.fixture(scope="module")
def world_dir():
    """A directory user nobody can read (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="mn-harness-corpus-"))
    path.chmod(0o755)
    yield path
    for sub in path.rglob("*"):  # the not-writable cases leave 0555 folders behind
        if sub.is_dir() and not sub.is_symlink():
            sub.chmod(0o755)
    shutil.rmtree(path)


def test_the_corpus_is_large_and_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) >= 150 and len(set(ids)) == len(ids)
    for command in ("validate", "run", "compare", "report", "clean"):
        assert sum(c.id.startswith(command) for c in CASES) >= 10, command


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input_is_one_line_and_exit_2(case: Case, world_dir: Path, cli_argv):
    work = Path(tempfile.mkdtemp(dir=world_dir))
    work.chmod(0o755)
    argv, expect = case.make(work)
    env = {**os.environ, **{k: v.replace("{dir}", str(work)) for k, v in case.env.items()}}
    env.setdefault("MN_HARNESS_STATE_DIR", str(work / "no-state"))
    stdout: int | None = subprocess.DEVNULL
    reader = writer = None
    if case.stdout_closed:  # `mn-harness ... | head -1` after head has gone
        reader, writer = os.pipe()
        os.close(reader)
        stdout = writer
    try:
        proc = subprocess.run(cli_argv(argv), stdout=stdout, stderr=subprocess.PIPE, cwd=work, env=env,
                              timeout=60, stdin=subprocess.DEVNULL)
    finally:
        if writer is not None:
            os.close(writer)
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    assert proc.returncode == 2, f"exit {proc.returncode}: {err}"
    lines = err.split("\n")
    assert len(lines) == 2 and lines[1] == "", f"not exactly one line: {err!r}"
    assert all(c.isprintable() for c in lines[0]), f"control character in {lines[0]!r}"
    assert expect in lines[0], f"{expect!r} not named in {lines[0]!r}"


@pytest.fixture
def demo_dir(world_dir: Path) -> Path:
    """A world-readable folder holding topologies/dumbbell-2jobs.yaml."""
    work = Path(tempfile.mkdtemp(dir=world_dir))
    (work / "topologies").mkdir()
    shutil.copy(ROOT / "topologies/dumbbell-2jobs.yaml", work / "topologies")
    for path in (work, work / "topologies"):
        path.chmod(0o755)
    (work / "topologies/dumbbell-2jobs.yaml").chmod(0o644)
    return work


def test_validate_into_a_closed_pipe_is_quiet(cli_argv, demo_dir):
    """`mn-harness validate x.yaml | head -1`: the reader left; no BrokenPipeError traceback."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        proc = subprocess.run(cli_argv(["validate", "topologies/dumbbell-2jobs.yaml"]), stdout=writer,
                              stderr=subprocess.PIPE, cwd=demo_dir, timeout=60, text=True)
    finally:
        os.close(writer)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_validate_piped_into_head(cli_argv, demo_dir):
    proc = subprocess.run(["sh", "-c", shlex.join(cli_argv(["validate", "topologies/dumbbell-2jobs.yaml"]))
                           + " | head -1"], capture_output=True, text=True, cwd=demo_dir, timeout=60)
    assert proc.stdout.startswith("topologies/dumbbell-2jobs.yaml: ok") and proc.stderr == "", proc.stderr

"""Shared pytest gating: tests marked `root` need root (namespaces, tc, BPF); tests marked
`torch` need PyTorch (the .[torch] extra); tests marked `cluster` need sshd (openssh-server) for
the servers they run on this machine. Tests marked `bmv2` (BMv2 and p4c, found on PATH or
under the prefix named by P4_TOOLCHAIN) are gated by mn-harness's own pytest plugin
(mn_harness/testing/pytest_p4.py), which users' P4 tests get too: skipped with the reason, or,
where the BMv2 tests must run (CI with the toolchain bundle: `.ci/run` sets
MN_HARNESS_REQUIRE_BMV2=1), failed with the reason whatever made them skip.

A test that cannot run here is skipped with the reason, never silently passed. The `topologies`
fixture finds the shipped topology files from any test directory; `unprivileged_python` runs
Python as user nobody wherever the checkout lives.

SIGTERM (`timeout`, `kill`) is turned into KeyboardInterrupt, as Ctrl-C is, so an interrupted
real-run test still runs its `finally` blocks and fixture teardowns: namespaces, egress
programs and BPF congestion controls are removed, not left behind."""

import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mn_harness.collectives.gloo import INSTALL_HINT, torch_importable


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config):
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)


def cluster_reason() -> str | None:
    """Why the cluster tests' servers (mn_harness/cluster/bed.py) cannot run here."""
    from mn_harness.cluster.bed import unavailable_reason

    return unavailable_reason()


def pytest_collection_modifyitems(config, items):
    is_root = os.geteuid() == 0
    has_torch = torch_importable()
    for item in items:
        if "root" in item.keywords and not is_root:
            item.add_marker(pytest.mark.skip(reason="needs root: run with sudo"))
        if "torch" in item.keywords and not has_torch:
            item.add_marker(pytest.mark.skip(reason=f"needs {INSTALL_HINT}"))
        if "cluster" in item.keywords and (reason := cluster_reason()):
            item.add_marker(pytest.mark.skip(reason=f"cluster: {reason}"))


@pytest.fixture(scope="session")
def topologies(pytestconfig) -> Path:
    """The shipped topologies/ of the checkout under test (pytest's rootdir), wherever the test
    file sits."""
    return pytestconfig.rootpath / "topologies"


@pytest.fixture
def state_dir(tmp_path, monkeypatch) -> Path:
    """A private state directory for the runs of one test (the CLI's subprocesses inherit it):
    `mn-harness clean` in a test must never see, let alone undo, another engineer's runs."""
    from mn_harness.state import STATE_DIR_ENV

    path = tmp_path / "state"
    monkeypatch.setenv(STATE_DIR_ENV, str(path))
    return path


@pytest.fixture(scope="session")
def unprivileged_python() -> Iterator[Callable[..., list[str]]]:
    """argv for `python ARGS` as an unprivileged user with mn_harness importable: as root, user
    nobody from a world-readable copy (tests/unprivileged.py), as anyone else, this interpreter
    as that user. Skips with the reason where nobody cannot run Python at all."""
    if os.geteuid() != 0:
        yield lambda *args: [sys.executable, *args]
        return
    from tests import unprivileged

    reason = unprivileged.unavailable_reason()
    if reason:
        pytest.skip(reason)
    root = unprivileged.temporary_root()
    try:
        install = unprivileged.make_install(root)
        yield install.argv
    finally:
        shutil.rmtree(root, ignore_errors=True)

"""Shared pytest gating: tests marked `root` need root (namespaces, tc, BPF); tests marked
`bmv2` need BMv2 and p4c, found on PATH or under the prefix named by P4_TOOLCHAIN.

A test that cannot run here is skipped with the reason, never silently passed. Where the BMv2
tests must run (CI with the toolchain bundle: `.ci/run` sets MN_HARNESS_REQUIRE_BMV2=1), a
bmv2-marked test that would be skipped - for any reason: no toolchain, not root, a skipif or a
pytest.skip() inside it - fails instead, with the reason, so a machine that lost BMv2 cannot
pass CI by skipping. The `topologies` fixture finds the shipped topology files from any test
directory."""

import os
from pathlib import Path

import pytest

from mn_harness.p4.toolchain import find_toolchain

REQUIRE_BMV2_ENV = "MN_HARNESS_REQUIRE_BMV2"


def bmv2_required() -> bool:
    return os.environ.get(REQUIRE_BMV2_ENV) == "1"


def pytest_collection_modifyitems(config, items):
    is_root = os.geteuid() == 0
    toolchain = find_toolchain()
    for item in items:
        if "root" in item.keywords and not is_root:
            item.add_marker(pytest.mark.skip(reason="needs root: run with sudo"))
        if "bmv2" in item.keywords and not toolchain.complete:
            item.add_marker(pytest.mark.skip(reason=toolchain.missing_reason()))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With MN_HARNESS_REQUIRE_BMV2=1 a skipped bmv2 test is reported as failed (xfail stays)."""
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and not hasattr(report, "wasxfail") and "bmv2" in item.keywords
            and bmv2_required()):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_BMV2_ENV}=1 and this bmv2 test would be skipped: {reason}"


@pytest.fixture(scope="session")
def topologies(pytestconfig) -> Path:
    """The shipped topologies/ of the checkout under test (pytest's rootdir), wherever the test
    file sits."""
    return pytestconfig.rootpath / "topologies"

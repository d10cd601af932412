"""pytest plugin for P4 unit tests on BMv2, loaded by pytest wherever mn-harness is installed
(entry point `pytest11: mn_harness_p4`; `-p no:mn_harness_p4` turns it off). Reference:
docs/p4.md, "Unit tests for your program".

Fixtures
    p4_experiment  (module)   the topology and programs: an experiment file (path), an
                              Experiment, or None (default: one switch s1, hosts h1 h2 h3,
                              ecn_telemetry.p4). Override it in a test module or conftest.py.
    p4_program     (module)   None, or a .p4 file every switch runs instead of the experiment's.
    p4_network     (module)   the started P4Network (mn_harness.testing.p4network) of those two.
    p4             (function) the same network, reset to how it was brought up, for one test:
                              p4.send(port, pkt), p4.expect(port, pkt_or_matcher),
                              p4.expect_nothing(ports), p4.insert(...), p4.counter(...),
                              p4.register(...), p4.set_queue(...), p4.watch_queue(port).
    p4_compile     (session)  p4_compile(path) -> CompiledProgram (p4c, cached by content).

`*.p4test.yaml` files are collected as declarative tests (mn_harness.testing.p4cases).

What cannot run here is skipped with the reason: no BMv2/p4c (a test using these fixtures, or
marked `bmv2`, skips at collection), not root (the network needs namespaces), no scapy. Where
they must run, MN_HARNESS_REQUIRE_BMV2=1 turns every such skip of a bmv2 test into a failure
naming the reason (the project's CI sets it where its toolchain bundle is installed).
`--p4-log-dir DIR` keeps every switch's BMv2 event log there."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from mn_harness.p4.toolchain import find_toolchain

if TYPE_CHECKING:
    from mn_harness.p4.compile import CompiledProgram
    from mn_harness.testing.p4cases import Case, CaseFile
    from mn_harness.testing.p4network import P4Network

REQUIRE_BMV2_ENV = "MN_HARNESS_REQUIRE_BMV2"
BMV2_MARKER = "bmv2: needs BMv2 simple_switch_grpc and p4c (PATH or P4_TOOLCHAIN prefix); skipped otherwise"
NETWORK_FIXTURES = {"p4", "p4_network"}
COMPILE_FIXTURES = {"p4_compile"}
SCAPY_HINT = "scapy (pip install 'mn-harness[test]')"


def bmv2_required() -> bool:
    return os.environ.get(REQUIRE_BMV2_ENV) == "1"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mn_harness_p4", "P4 unit tests on BMv2 (mn-harness)")
    group.addoption("--p4-log-dir", default=None, metavar="DIR",
                    help="keep the BMv2 event log of every switch of the P4 tests in DIR")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", BMV2_MARKER)


def _uses_plugin_fixtures(item: pytest.Item) -> bool:
    """Whether the test uses this plugin's p4 / p4_network / p4_compile (not a fixture of the
    same name of its own)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {}) if info is not None else {}
    for name in NETWORK_FIXTURES | COMPILE_FIXTURES:
        chain = defs.get(name)
        if chain and getattr(chain[-1].func, "__module__", None) == __name__:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that use the P4 fixtures are bmv2 tests; bmv2 tests skip without the toolchain."""
    toolchain = None
    for item in items:
        if "bmv2" not in item.keywords and _uses_plugin_fixtures(item):
            item.add_marker(pytest.mark.bmv2)
        if "bmv2" in item.keywords:
            toolchain = toolchain or find_toolchain()
            if not toolchain.complete:
                item.add_marker(pytest.mark.skip(reason=toolchain.missing_reason()))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator[None, Any, None]:
    """With MN_HARNESS_REQUIRE_BMV2=1 a skipped bmv2 test is reported as failed (xfail stays)."""
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and not hasattr(report, "wasxfail") and "bmv2" in item.keywords
            and bmv2_required()):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_BMV2_ENV}=1 and this bmv2 test would be skipped: {reason}"


def _skip_unless_network_can_run() -> None:
    reason = find_toolchain()
    if not reason.complete:
        pytest.skip(reason.missing_reason())
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces for the P4 test network): run with sudo")
    try:
        import scapy  # noqa: F401
    except ImportError:
        pytest.skip(f"needs {SCAPY_HINT}")


def start_network(experiment: Any, program: Any, config: pytest.Config, base: Path | None = None
                  ) -> P4Network:
    """A started P4Network for the fixtures' values (skips with the reason where it cannot run)."""
    _skip_unless_network_can_run()
    from mn_harness.config import Experiment, load_experiment
    from mn_harness.errors import UsageError
    from mn_harness.testing.p4network import P4Network, single_switch

    try:
        if experiment is None:
            experiment = single_switch()
        elif isinstance(experiment, dict):
            experiment = Experiment.from_dict(experiment, base_dir=base)
        elif isinstance(experiment, (str, Path)):
            experiment = load_experiment(experiment)
        log_dir = config.getoption("p4_log_dir")
        return P4Network(experiment, program=program, log_dir=log_dir).start()
    except UsageError as exc:  # the experiment or the program is wrong: say so in one line
        pytest.fail(f"p4_experiment: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def p4_experiment() -> Any:
    """The experiment whose switches the P4 tests of a module run on (None: single_switch())."""
    return None


@pytest.fixture(scope="module")
def p4_program() -> str | Path | None:
    """A program every switch runs instead of the experiment's (None: the experiment's own)."""
    return None


@pytest.fixture(scope="module")
def p4_network(request: pytest.FixtureRequest, p4_experiment: Any, p4_program: Any) -> Iterator[P4Network]:
    net = start_network(p4_experiment, p4_program, request.config, Path(str(request.path)).parent)
    try:
        yield net
    finally:
        net.close()


@pytest.fixture
def p4(p4_network: P4Network) -> P4Network:
    p4_network.reset()
    return p4_network


@pytest.fixture(scope="session")
def p4_compile() -> Callable[[str | Path], CompiledProgram]:
    """Compile a P4 program with p4c-bm2-ss (cached by content); skips without p4c."""
    from mn_harness.p4.compile import compile_p4

    toolchain = find_toolchain()
    if "p4c-bm2-ss" not in toolchain.paths:
        pytest.skip(toolchain.missing_reason())
    return lambda path: compile_p4(path)


# -- declarative tests (*.p4test.yaml) -------------------------------------------------------------
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    from mn_harness.testing.p4cases import SUFFIX

    if file_path.name.endswith(SUFFIX):
        return P4CaseFile.from_parent(parent, path=file_path)
    return None


class P4CaseFile(pytest.File):
    """One *.p4test.yaml: its cases share one network, started before the first and closed
    after the last."""

    spec: CaseFile | None = None
    net: P4Network | None = None

    def collect(self) -> Iterator[P4CaseItem]:
        from mn_harness.errors import ConfigError
        from mn_harness.testing.p4cases import load_case_file

        try:
            self.spec = load_case_file(self.path)
        except ConfigError as exc:
            raise self.CollectError(str(exc)) from None
        for case in self.spec.cases:
            item = P4CaseItem.from_parent(self, name=case.name, case=case)
            item.add_marker(pytest.mark.bmv2)
            yield item

    def setup(self) -> None:
        assert self.spec is not None
        self.net = start_network(self.spec.experiment, self.spec.program, self.config)

    def teardown(self) -> None:
        if self.net is not None:
            self.net.close()
            self.net = None


class P4CaseItem(pytest.Item):
    def __init__(self, *, case: Case, **kw):
        super().__init__(**kw)
        self.case = case

    def runtest(self) -> None:
        from mn_harness.testing.p4cases import run_case

        parent = self.parent
        assert isinstance(parent, P4CaseFile) and parent.net is not None and parent.spec is not None
        run_case(parent.net, parent.spec, self.case)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, AssertionError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, 0, f"{self.path.name}::{self.case.where} {self.name}"

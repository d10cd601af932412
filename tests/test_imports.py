"""Import hygiene: config, results and report load without Mininet, grpc or torch (a config-only
or analysis-only user needs none), matplotlib only when plotting, no module-level import circle
anywhere in the package, and every import follows the layers of docs/architecture.md."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mn_harness"


def loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {m.split(".")[0] for m in out.stdout.split()}


def test_config_results_report_load_neither_mininet_nor_grpc():
    top = loaded_after("import mn_harness.config, mn_harness.results, mn_harness.report, "
                       "mn_harness.results.loaders, mn_harness.results.summary, mn_harness.report.metrics, "
                       "mn_harness.report.markdown, mn_harness.report.compare, mn_harness.errors, "
                       "mn_harness.units, mn_harness.p4.limits, mn_harness.dataplane, mn_harness.jobs.specs")
    assert not {"mininet", "grpc", "matplotlib", "p4", "torch"} & top, top


def test_import_mn_harness_and_its_api_names_load_no_heavy_module():
    top = loaded_after("import mn_harness; mn_harness.ExperimentBuilder, mn_harness.run, mn_harness.network, "
                       "mn_harness.Results, mn_harness.load, mn_harness.JobError")
    assert not {"mininet", "grpc", "matplotlib", "p4", "pandas"} & top, top


def test_building_an_experiment_leaves_the_api_network_its_name():
    """The network layer's package and the API's `network` share a name, and importing the
    package sets it as an attribute of mn_harness: building an experiment without a scale rule
    (as examples/mid_run.py does before mh.network) must not import it."""
    code = ("import sys, mn_harness as mh; "
            f"mh.ExperimentBuilder.from_file({str(PACKAGE.parent / 'topologies/dumbbell-2jobs.yaml')!r}).build(); "
            "print('mn_harness.network' in sys.modules, callable(mh.network) and mh.network.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "mn_harness.api"]


def test_import_mn_harness_alone_loads_nothing_but_the_version():
    """The worker in every emulated host imports the package: it must stay the standard library."""
    modules = loaded_after("import mn_harness")
    assert not {"yaml", "mininet", "grpc", "matplotlib"} & modules, modules


def test_the_cli_parser_loads_no_heavy_module():
    top = loaded_after("from mn_harness.cli import build_parser; build_parser()")
    assert not {"mininet", "grpc", "matplotlib", "p4", "torch"} & top, top


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(node: ast.AST, path: Path, known: set[str]) -> set[str]:
    """The mn_harness modules one import statement of the file at `path` names (a name imported
    from a package that is not a module counts as the package)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name.startswith("mn_harness")}
    if not isinstance(node, ast.ImportFrom):
        return set()
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join(anchor + ([base] if base else []))
    if not base.startswith("mn_harness"):
        return set()
    return {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}


def module_level_imports(path: Path, known: set[str]) -> set[str]:
    """mn_harness modules imported at module level (not inside functions, not TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()

    def visit(body):
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
                continue
            out.update(imported(node, path, known))
            if isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
    visit(tree.body)
    out.discard(module_name(path))
    return out


def test_no_import_circle():
    files = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(f) for f in files}
    graph = {module_name(f): module_level_imports(f, known) for f in files}
    # importing a.b.c also imports its packages a.b and a
    for mod in list(graph):
        for target in list(graph[mod]):
            parts = target.split(".")
            graph[mod].update(".".join(parts[:i]) for i in range(2, len(parts)) if ".".join(parts[:i]) in known)
        graph[mod] = {t for t in graph[mod] if t in known and t != mod and not mod.startswith(t + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                dfs(nxt)
        stack.pop()
        state[node] = 2

    for mod in sorted(graph):
        if mod not in state:
            dfs(mod)


def test_the_worker_and_the_collectives_need_only_the_standard_library():
    """The worker runs inside each emulated host with nothing but Python: its modules, the
    collectives' arithmetic it executes and the P4 limits inc.py reads import no third-party
    package and nothing of the harness beyond them."""
    code = ("import sys; before = set(sys.modules); "
            "import mn_harness.worker.main, mn_harness.worker.inc, mn_harness.collectives; "
            "print(' '.join(sorted(set(sys.modules) - before)))")  # site hooks load before us
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.split()
    ours = {m for m in loaded if m.startswith("mn_harness")}
    allowed = ("mn_harness.worker", "mn_harness.collectives", "mn_harness.p4.limits")
    assert all(m == "mn_harness" or m == "mn_harness.p4" or m.startswith(allowed) for m in ours), ours
    third_party = {m.split(".")[0] for m in loaded} - set(sys.stdlib_module_names) - {"mn_harness"}
    assert not third_party, third_party


# The layers of docs/architecture.md#layers, first to last. A module belongs to the layer whose
# package prefix is the longest match; it may import its own layer, the layers before it and
# the foundation (modules that import nothing after it); the drivers (every module no layer
# names: session, runner, api, cli, sweep, ...) may import anything. Imports inside functions
# count; imports only for type checking do not.
FOUNDATION = (
    "mn_harness.errors", "mn_harness.units", "mn_harness.frames", "mn_harness.collectives",
    "mn_harness.ownership", "mn_harness.progress", "mn_harness.runlog", "mn_harness.interrupts",
    # facts later layers own and config validates: the `cc:` value (CC names, parameters), the
    # P4 programs' names and limits
    "mn_harness.cc.spec", "mn_harness.cc.variants", "mn_harness.cc.errors", "mn_harness.p4.limits",
)
FOUNDATION_MODULES = ("mn_harness", "mn_harness.cc", "mn_harness.p4")  # the packages alone load nothing later
LAYERS = (
    ("config", ("mn_harness.config", "mn_harness.chakra")),  # and the trace files experiment files name
    ("network", ("mn_harness.network",)),
    ("data plane", ("mn_harness.dataplane", "mn_harness.p4", "mn_harness.bpf")),
    ("congestion control", ("mn_harness.cc",)),
    ("jobs", ("mn_harness.jobs", "mn_harness.worker")),
    ("results", ("mn_harness.results",)),
    ("fidelity", ("mn_harness.fidelity",)),  # judges the run from its monitors into results' records
    ("report", ("mn_harness.report",)),
)
# (importer prefix, imported prefix): the imports against the order, each with its reason
# (docs/architecture.md#layers lists them)
AGAINST_THE_ORDER = {
    ("mn_harness.dataplane", "mn_harness.state"): "switch processes and egress programs are recorded for teardown",
    ("mn_harness.dataplane.queue_csv", "mn_harness.results"): "queue.csv is written with the results' row type",
    ("mn_harness.results.frames", "mn_harness.report.metrics"): "load() returns the report's metrics as a table",
}


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int:
    """0: the foundation; 1..len(LAYERS): the layers; len(LAYERS) + 1: the drivers."""
    if module in FOUNDATION_MODULES or any(_under(module, f) for f in FOUNDATION):
        return 0
    matches = [(len(prefix), rank) for rank, (_, prefixes) in enumerate(LAYERS, 1)
               for prefix in prefixes if _under(module, prefix)]
    return max(matches)[1] if matches else len(LAYERS) + 1


def all_imports(path: Path, known: set[str]) -> set[str]:
    """mn_harness modules imported anywhere in the file (functions too), except for type checking."""
    tree = ast.parse(path.read_text())
    typing_only = {id(node) for block in ast.walk(tree)
                   if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.dump(block.test)
                   for node in ast.walk(block)}
    out = {m for node in ast.walk(tree) if id(node) not in typing_only for m in imported(node, path, known)}
    out.discard(module_name(path))
    return out


def test_every_import_follows_the_layers():
    files = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(f) for f in files}
    wrong, used = [], set()
    for path in files:
        me = module_name(path)
        for target in sorted(all_imports(path, known)):
            if layer_of(target) <= layer_of(me):
                continue
            allowed = [pair for pair in AGAINST_THE_ORDER if _under(me, pair[0]) and _under(target, pair[1])]
            used.update(allowed)
            if not allowed:
                wrong.append(f"{me} -> {target}")
    assert not wrong, "imports against the layers (docs/architecture.md#layers): " + "; ".join(wrong)
    assert used == set(AGAINST_THE_ORDER), f"no longer needed: {set(AGAINST_THE_ORDER) - used}"


def test_the_layers_know_every_package():
    """A new package is placed on purpose: in a layer, the foundation or the drivers below."""
    drivers = {"api", "cli", "state", "testing", "session", "runner", "sweep", "hooks", "capture",
               "provenance", "cluster"}
    for path in sorted(PACKAGE.iterdir()):
        name = f"mn_harness.{path.stem}"
        if path.name.startswith("__") or (path.is_file() and path.suffix != ".py"):
            continue
        if layer_of(name) > len(LAYERS) and path.stem not in drivers and not any(
                _under(f, name) for f in FOUNDATION):
            raise AssertionError(f"{name} is in no layer: place it in tests/test_imports.py and docs/architecture.md")


def test_loading_and_dumping_an_experiment_stays_in_the_config_layer():
    """config depends on what is below it only: loading files with every form (presets with a
    scale rule, a trace, phases, in-network aggregation) and writing config.yaml loads no
    module of a later layer."""
    files = [str(PACKAGE.parent / "topologies" / f)
             for f in ("mixed-presets.yaml", "ddp-trace.yaml", "inc-vs-ring-bmv2.yaml", "stragglers-3jobs.yaml")]
    code = ("import sys; from mn_harness.config import load_experiment; "
            "from mn_harness.config.dump import experiment_to_yaml; "
            f"[experiment_to_yaml(load_experiment(f)) for f in {files!r}]; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('mn_harness'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    later = [m for m in out.stdout.split() if layer_of(m) > 1]
    assert not later, later

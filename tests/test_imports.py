"""Import hygiene: config, results and report load without Mininet or grpc (a config-only or
analysis-only user needs neither), matplotlib only when plotting, and no module-level import
circle anywhere in the package."""

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
    assert not {"mininet", "grpc", "matplotlib", "p4"} & top, top


def test_import_mn_harness_and_its_api_names_load_no_heavy_module():
    top = loaded_after("import mn_harness; mn_harness.ExperimentBuilder, mn_harness.run, mn_harness.network, "
                       "mn_harness.Results, mn_harness.load, mn_harness.JobError")
    assert not {"mininet", "grpc", "matplotlib", "p4", "pandas"} & top, top


def test_import_mn_harness_alone_loads_nothing_but_the_version():
    """The worker in every emulated host imports the package: it must stay the standard library."""
    modules = loaded_after("import mn_harness")
    assert not {"yaml", "mininet", "grpc", "matplotlib"} & modules, modules


def test_the_cli_parser_loads_no_heavy_module():
    top = loaded_after("from mn_harness.cli import build_parser; build_parser()")
    assert not {"mininet", "grpc", "matplotlib", "p4"} & top, top


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_level_imports(path: Path, known: set[str]) -> set[str]:
    """mn_harness modules imported at module level (not inside functions, not TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()

    def visit(body):
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
                continue
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name.startswith("mn_harness"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                if not base.startswith("mn_harness"):
                    continue
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    out.add(sub if sub in known else base)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
    visit(tree.body)
    out.discard(me)
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

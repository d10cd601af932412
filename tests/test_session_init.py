"""The Session object before its network is up (no root, nothing created): every attribute it
ever sets is set in __init__, so a reader finds them all in one place and no method meets one
that is not there yet; what summary.json will say it observed starts typed (RunFacts)."""

import ast
import inspect

import pytest

from mn_harness import session as session_module
from mn_harness.config import Experiment
from mn_harness.config.emulation import record
from mn_harness.results.schema import RunFacts
from mn_harness.session import Session
from tests.helpers import small_demo


def assigned_attributes(function: ast.FunctionDef) -> set[str]:
    return {t.attr for node in ast.walk(function) if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign)
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}


def test_every_attribute_the_session_sets_is_set_in_init():
    tree = ast.parse(inspect.getsource(session_module))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Session")
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    in_init = assigned_attributes(methods.pop("__init__"))
    elsewhere = {(name, attr) for name, fn in methods.items() for attr in assigned_attributes(fn)}
    assert {(name, attr) for name, attr in elsewhere if attr not in in_init} == set()
    assert len(elsewhere) > 5  # the check sees the methods' assignments at all


def test_a_new_session_knows_its_data_plane_and_creates_nothing(tmp_path):
    exp = Experiment.from_dict(small_demo(), "x")
    s = Session(exp, tmp_path, log=None)
    assert s.dataplane.name == "linux" and s.experiment.run.dataplane == "linux"
    assert s.facts == RunFacts(dataplane="linux", slow_start_after_idle=exp.run.slow_start_after_idle,
                               emulation=record(exp.run))
    assert s.facts.emulation is not None and s.facts.emulation["switches"] == exp.run.emulation.switches
    assert s.results_dir is None and s.network is None and list(tmp_path.iterdir()) == []
    with pytest.raises(AssertionError, match="not up"):
        s.state  # noqa: B018 - the property asserts

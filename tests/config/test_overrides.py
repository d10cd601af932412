"""The --set path language."""


import pytest

from mn_harness.config.overrides import (
    apply_path,
    apply_variant,
    expand_set_specs,
    get_path,
    parse_path,
    parse_set_spec,
    variant_label,
)


def test_parse_set_spec():
    assert parse_set_spec("jobs[0].compute=80ms,120ms") == [
        ("jobs[0].compute", "80ms"),
        ("jobs[0].compute", "120ms"),
    ]
    assert parse_set_spec("run.iterations=3, 5") == [("run.iterations", 3), ("run.iterations", 5)]
    assert parse_set_spec("a.b=[1,2],[3]") == [("a.b", [1, 2]), ("a.b", [3])]
    assert parse_set_spec("flag=true") == [("flag", True)]
    for bad in ("no-equals", "jobs[0].=1", "jobs[x].compute=1", "a=1,,2", "a="):
        with pytest.raises(ValueError):
            parse_set_spec(bad)
    assert parse_path("jobs[0].links[2].bw") == ["jobs", 0, "links", 2, "bw"]


def test_expand_and_label():
    variants = expand_set_specs(["a=1,2", "b=x,y,z"])
    assert len(variants) == 6
    assert variants[0] == [("a", 1), ("b", "x")]
    assert variant_label(variants[-1]) == "a=2 b=z"
    assert expand_set_specs([]) == [[]]


def test_apply_path():
    cfg = {"jobs": [{"compute": "100ms", "workers": ["h1"]}], "cc": "reno"}
    out = apply_path(cfg, "jobs[0].compute", "80ms")
    assert out["jobs"][0]["compute"] == "80ms"
    assert cfg["jobs"][0]["compute"] == "100ms"  # the original is untouched
    assert apply_path(cfg, "cc", "cubic")["cc"] == "cubic"
    assert apply_path(cfg, "jobs[0].workers[0]", "h9")["jobs"][0]["workers"] == ["h9"]
    assert get_path(cfg, "jobs[0].workers[0]") == "h1"
    for path, missing in (
        ("jobs[1].compute", "jobs[1]"),
        ("jobs[0].comptue", "jobs[0].comptue"),
        ("cc.name", "cc.name"),
        ("nope", "nope"),
    ):
        with pytest.raises(ValueError, match=missing.replace("[", r"\[").replace("]", r"\]")):
            apply_path(cfg, path, 1)
    assert apply_path(cfg, "jobs[0].offset", "5ms", create=True)["jobs"][0]["offset"] == "5ms"
    with pytest.raises(ValueError):
        apply_path(cfg, "jobs[3].offset", "5ms", create=True)
    both = apply_variant(cfg, [("cc", "cubic"), ("jobs[0].compute", "1s")])
    assert (both["cc"], both["jobs"][0]["compute"]) == ("cubic", "1s")

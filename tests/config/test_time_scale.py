"""run.emulation.time_scale (config/time_scale.py): every number field of the configuration is
classified (a new time field cannot be forgotten), dilation does to each field what its class
says, the ideal times (and so the slowdowns' baseline) scale by K, bad values are one line
naming the YAML path."""

import copy
import dataclasses
import types
import typing

import pytest

from mn_harness.config import Experiment
from mn_harness.config.dump import experiment_to_raw
from mn_harness.config.time_scale import DILATED, KEPT, SLOWED, dilate
from mn_harness.errors import ConfigError
from mn_harness.jobs.ideal import ideal_iteration_s
from mn_harness.network.plan import NetworkPlan

K = 5

RAW = {
    "experiment": "dilated",
    "hosts": ["h1", "h2", "h3", "h4", "h5", "h6"],
    "switches": ["s1", "s2"],
    "link_defaults": {"bw": "500Mbit", "queue": 100},
    "links": [{"endpoints": ["s1", "s2"], "queue": 200, "ecn_threshold": 10, "delay": "1ms"},
              *({"endpoints": [h, "s1"]} for h in ("h1", "h2", "h3")),
              *({"endpoints": [h, "s2"]} for h in ("h4", "h5", "h6"))],
    "jobs": [
        {"name": "ring", "workers": ["h1", "h4"], "bytes_per_iteration": "9MB",
         "compute": {"mean": "700ms", "jitter": 0.05}, "overlap": {"bucket": "4MiB"}, "iterations": 10,
         "start_offset": "20ms", "cc": {"name": "mltcp-dctcp", "slope": 4, "intercept": 0.5},
         "stragglers": [{"ranks": [1], "delay": "50ms", "probability": 0.2}, {"ranks": [0], "slowdown": 1.3}]},
        {"name": "pp", "workers": ["h2", "h5"], "iterations": 10, "cc": "cubic",
         "phases": [{"collective": "pipeline", "bytes": "2MB", "micro_batches": 4, "forward": "5ms",
                     "backward": "10ms"}, {"compute": "10ms"}]},
        {"name": "gap", "workers": ["h3", "h6"], "bytes_per_iteration": "1MB", "compute": "100ms",
         "iterations": 10, "cc": {"name": "mltcp-reno", "idle_gap": "30ms"}},
    ],
    "run": {"dataplane": "linux", "timeout": "10min", "throughput_bin": "20ms", "shifts": "cassini",
            "fidelity": {"send_lag": "3ms"}, "emulation": {"time_scale": K, "htb_burst": "2ms"}},
}


def _config_classes() -> dict[str, type]:
    """Every dataclass reachable from Experiment through its fields' types."""
    seen: dict[str, type] = {}
    todo: list = [Experiment]
    while todo:
        cls = todo.pop()
        if cls.__name__ in seen:
            continue
        seen[cls.__name__] = cls
        for hint in typing.get_type_hints(cls).values():
            todo.extend(t for t in _leaf_types(hint) if dataclasses.is_dataclass(t))
    return seen


def _leaf_types(hint) -> list:
    args = typing.get_args(hint)
    if not args:
        return [hint]
    return [leaf for arg in args for leaf in _leaf_types(arg)]


def _is_number_field(name: str, hint) -> bool:
    leaves = _leaf_types(hint)
    return float in leaves or name.endswith(("_s", "_bps"))


def test_every_number_field_of_the_config_is_classified_once():
    classes = _config_classes()
    assert {"Experiment", "LinkConfig", "JobConfig", "RunConfig", "ComputeSpec", "CommPhase", "CCSpec",
            "Emulation", "Burst", "FidelityThresholds", "StragglerConfig"} <= set(classes)
    tables = (DILATED, SLOWED, KEPT)
    for name, cls in classes.items():
        for field, hint in typing.get_type_hints(cls).items():
            if not _is_number_field(field, hint):
                continue
            key = f"{name}.{field}"
            homes = [t for t in tables if key in t]
            assert len(homes) == 1, f"{key}: a number field in {len(homes)} of config/time_scale.py's tables " \
                                    "(DILATED x K, SLOWED / K, KEPT): say what time dilation does to it"
    for table in tables:
        for key in table:
            cls_name, field = key.split(".")
            assert field in {f.name for f in dataclasses.fields(classes[cls_name])}, f"{key}: no such field"


def _walk_pairs(a, b, path="experiment"):
    """(path, class.field, nominal, dilated) for every number field, and equality of the rest."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        hints = typing.get_type_hints(type(a))
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if _is_number_field(f.name, hints[f.name]) and not dataclasses.is_dataclass(x):
                yield f"{path}.{f.name}", f"{type(a).__name__}.{f.name}", x, y
            else:
                yield from _walk_pairs(x, y, f"{path}.{f.name}")
    elif isinstance(a, tuple | list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _walk_pairs(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            yield from _walk_pairs(a[key], b[key], f"{path}.{key}")
    elif not isinstance(a, types.FunctionType):
        assert a == b, f"{path}: {a!r} became {b!r} (dilation must leave it)"


def test_dilation_does_to_every_field_what_its_class_says():
    nominal = Experiment.from_dict(copy.deepcopy(RAW))
    dilated = dilate(nominal)
    exercised = set()
    for path, key, x, y in _walk_pairs(nominal, dilated):
        if x is None or y is None:
            assert x is None and y is None, path
            continue
        if key in DILATED:
            expected = x * K
        elif key in SLOWED:
            expected = x / K
        else:
            expected = x
        assert y == pytest.approx(expected, rel=1e-12), f"{path} ({key}): {x} -> {y}, expected {expected}"
        if x:
            exercised.add(key)
    # the experiment above gives every dilated and slowed field a value that is not 0
    assert set(DILATED) | set(SLOWED) <= exercised, set(DILATED) | set(SLOWED) - exercised


def test_bytes_queues_and_ecn_thresholds_stay_and_the_ideal_times_scale_by_k():
    nominal = Experiment.from_dict(copy.deepcopy(RAW))
    dilated = dilate(nominal)
    assert [j.bytes_per_iteration for j in dilated.jobs] == [j.bytes_per_iteration for j in nominal.jobs]
    assert [(li.queue_packets, li.ecn_threshold) for li in dilated.links] == \
        [(li.queue_packets, li.ecn_threshold) for li in nominal.links]
    for a, b in zip(nominal.jobs, dilated.jobs, strict=True):
        ideal_a, rate_a = ideal_iteration_s(a, NetworkPlan(nominal))
        ideal_b, rate_b = ideal_iteration_s(b, NetworkPlan(dilated))
        assert ideal_b == pytest.approx(K * ideal_a) and rate_b == pytest.approx(rate_a / K)


def test_a_derived_mltcp_idle_gap_is_the_dilated_jobs():
    nominal = Experiment.from_dict(copy.deepcopy(RAW))
    ring = nominal.jobs[0]
    assert ring.cc.idle_gap_derived
    assert dilate(nominal).jobs[0].cc.idle_gap_s == pytest.approx(K * ring.cc.idle_gap_s)


def test_time_scale_1_is_the_experiment_itself_and_k_round_trips_through_config_yaml():
    raw = copy.deepcopy(RAW)
    del raw["run"]["emulation"]["time_scale"]
    plain = Experiment.from_dict(raw)
    assert plain.run.emulation.time_scale == 1 and dilate(plain) is plain
    nominal = Experiment.from_dict(copy.deepcopy(RAW))
    written = experiment_to_raw(nominal)
    assert written["run"]["emulation"]["time_scale"] == K
    assert Experiment.from_dict(copy.deepcopy(written)) == nominal
    assert nominal.run.emulation.changed() == {"time_scale": K, "htb_burst": "2ms"}
    half = copy.deepcopy(RAW)
    half["run"]["emulation"]["time_scale"] = 2.5
    assert Experiment.from_dict(half).run.emulation.time_scale == 2.5


@pytest.mark.parametrize("value", [0.5, 0, -2, True, "5", "5x", None, 101, float("nan"), float("inf")])
def test_bad_time_scales_are_one_line_naming_the_path(value):
    raw = copy.deepcopy(RAW)
    raw["run"]["emulation"]["time_scale"] = value
    with pytest.raises(ConfigError) as err:
        Experiment.from_dict(raw)
    text = str(err.value)
    assert text.startswith("run.emulation.time_scale: expected a number from 1") and "\n" not in text


def test_a_link_dilated_below_htbs_lowest_rate_is_refused():
    raw = copy.deepcopy(RAW)
    raw["link_defaults"]["bw"] = "50kbit"
    raw["run"]["emulation"]["time_scale"] = 100
    raw["jobs"] = raw["jobs"][1:2]
    with pytest.raises(ConfigError, match=r"^run\.emulation\.time_scale: 100: the slowest link would run at 500"):
        Experiment.from_dict(raw)


def test_a_dilated_idle_gap_beyond_the_ccs_bound_is_refused():
    raw = copy.deepcopy(RAW)
    raw["jobs"][2]["cc"]["idle_gap"] = "5s"
    with pytest.raises(ConfigError, match=r"^run\.emulation\.time_scale: 5: job gap's MLTCP idle gap"):
        Experiment.from_dict(raw)


def test_a_sweep_can_set_the_time_scale_of_a_file_that_leaves_it_at_its_default():
    from mn_harness.sweep import Sweep, build_plan

    raw = copy.deepcopy(RAW)
    del raw["run"]["emulation"]
    runs = build_plan([None], ["run.emulation.time_scale=1,5"], 1)
    exps = Sweep(None, "scales", raw, runs).experiments()  # type: ignore[arg-type]
    assert [e.run.emulation.time_scale for e in exps] == [1, 5]

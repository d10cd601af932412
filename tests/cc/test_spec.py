"""Unit tests (no root) of CCSpec.from_dict: what a YAML `cc:` value may be, and that every
rejection is one line naming the YAML path, so users can find the mistake."""

import pytest

from mn_harness.cc.errors import CCConfigError
from mn_harness.cc.spec import CCSpec, parse_idle_gap
from mn_harness.cc.variants import (
    ADAPT_PATIENCE,
    DEFAULT_ADAPT,
    DEFAULT_CALM_BY,
    DEFAULT_DAMP,
    DEFAULT_DAMP_AFTER,
    DEFAULT_HOLD,
    DEFAULT_IDLE_GAP_S,
    DEFAULT_INTERCEPT,
    DEFAULT_RESTART,
    DEFAULT_SLOPE,
)
from mn_harness.errors import ConfigError


def test_plain_names():
    assert CCSpec.from_dict("reno", "jobs[0].cc") == CCSpec("reno")
    assert CCSpec.from_dict("MLTCP_reno", "jobs[0].cc").name == "mltcp-reno"
    assert CCSpec.from_dict("dctcp", "jobs[0].cc").is_bpf
    assert not CCSpec.from_dict("bbr", "jobs[0].cc").is_bpf


def test_mapping_with_parameters():
    spec = CCSpec.from_dict({"name": "mltcp-cubic", "slope": 2, "intercept": "0.25",
                             "idle_gap": "5ms"}, "jobs[1].cc")
    assert (spec.name, spec.slope, spec.intercept, spec.idle_gap_s) == \
        ("mltcp-cubic", 2.0, 0.25, 0.005)
    assert CCSpec("mltcp-reno").resolved() == (DEFAULT_SLOPE, DEFAULT_INTERCEPT,
                                               DEFAULT_IDLE_GAP_S, DEFAULT_RESTART, DEFAULT_ADAPT,
                                               DEFAULT_DAMP, DEFAULT_DAMP_AFTER, DEFAULT_CALM_BY, DEFAULT_HOLD)
    assert hash(spec) == hash(CCSpec("mltcp-cubic", 2.0, 0.25, 0.005))


def test_one_string_carries_the_parameters_too():
    """`name:key=value:...` (for --cc lists and sweep labels) parses to the mapping's spec."""
    assert CCSpec.from_dict("mltcp-cubic:slope=2:intercept=0.25:idle_gap=5ms", "--cc") == \
        CCSpec.from_dict({"name": "mltcp-cubic", "slope": 2, "intercept": "0.25",
                          "idle_gap": "5ms"}, "--cc")
    assert CCSpec.from_dict("MLTCP_reno: slope = 8", "--cc") == CCSpec("mltcp-reno", slope=8.0)


def test_restart_and_adapt_are_flags_of_the_mltcp_variants_and_part_of_the_identity():
    """Given or not (None: the variant's default, on for the mltcp-* variants, off for dctcp)."""
    spec = CCSpec.from_dict("mltcp-dctcp:slope=32:restart=on", "--cc")
    assert spec == CCSpec.from_dict({"name": "mltcp-dctcp", "slope": 32, "restart": True}, "--cc")
    assert spec.restart and CCSpec.from_dict("mltcp-dctcp:slope=32", "--cc").restart is None
    assert spec != CCSpec("mltcp-dctcp", slope=32.0)
    assert CCSpec.from_dict({"name": "mltcp-reno", "restart": False}, "x").restart is False
    fixed = CCSpec.from_dict("mltcp-dctcp:adapt=off", "--cc")
    assert fixed.adapt is False and not fixed.resolved().adapt and fixed.resolved().restart
    assert CCSpec("mltcp-dctcp").resolved()[3:5] == (True, True)
    assert CCSpec("dctcp").resolved()[3:5] == (False, False)
    assert fixed != CCSpec("mltcp-dctcp") != CCSpec("mltcp-dctcp", adapt=True)


def test_damp_is_a_whole_number_of_the_mltcp_variants_and_part_of_the_identity():
    """0..8 in a mapping or the one string; None: the variant's default (0, off, for now)."""
    spec = CCSpec.from_dict("mltcp-reno:damp=2", "--cc")
    assert spec == CCSpec.from_dict({"name": "mltcp-reno", "damp": 2}, "--cc") == CCSpec("mltcp-reno", damp=2)
    assert spec.resolved().damp == 2 and CCSpec("mltcp-reno").resolved().damp == DEFAULT_DAMP == 0
    assert spec != CCSpec("mltcp-reno") != CCSpec("mltcp-reno", damp=0)
    assert CCSpec.from_dict("mltcp-dctcp:damp=0:slope=32", "--cc").damp == 0
    assert CCSpec.from_dict({"name": "mltcp-cubic", "damp": "8"}, "x").resolved().damp == 8


def test_damp_reaches_the_compiled_instance_and_0_keeps_the_instances_name():
    from mn_harness.cc.build import fixed_params, instance_tag

    tags = {d: instance_tag(CCSpec("mltcp-reno", damp=d)) for d in (0, 1, 2)}
    assert len(set(tags.values())) == 3
    assert tags[0] == instance_tag(CCSpec("mltcp-reno"))  # the default by name: the same program
    assert fixed_params(CCSpec("mltcp-dctcp", damp=2)).damp == 2
    assert fixed_params(CCSpec("dctcp")).damp == 0


def test_damp_after_is_a_whole_number_up_to_the_patience_and_part_of_the_identity():
    """0..ADAPT_PATIENCE (a search ends when its count reaches the patience, so that value never
    damps); None: the variant's default (0: damped from the search's first iteration on)."""
    spec = CCSpec.from_dict("mltcp-reno:damp=2:damp_after=3", "--cc")
    assert spec == CCSpec.from_dict({"name": "mltcp-reno", "damp": 2, "damp_after": 3}, "--cc") \
        == CCSpec("mltcp-reno", damp=2, damp_after=3)
    assert spec.resolved().damp_after == 3
    assert CCSpec("mltcp-reno").resolved().damp_after == DEFAULT_DAMP_AFTER == 0
    assert spec != CCSpec("mltcp-reno", damp=2) != CCSpec("mltcp-reno", damp=2, damp_after=0)
    assert CCSpec.from_dict({"name": "mltcp-cubic", "damp_after": str(ADAPT_PATIENCE)}, "x").resolved().damp_after \
        == ADAPT_PATIENCE


def test_damp_after_reaches_the_compiled_instance_and_0_keeps_the_instances_name():
    from mn_harness.cc.build import fixed_params, instance_tag

    tags = {k: instance_tag(CCSpec("mltcp-reno", damp=2, damp_after=k)) for k in (0, 2, 3)}
    assert len(set(tags.values())) == 3
    assert tags[0] == instance_tag(CCSpec("mltcp-reno", damp=2))  # the default: the same program
    assert fixed_params(CCSpec("mltcp-dctcp", damp_after=2)).damp_after == 2
    assert fixed_params(CCSpec("dctcp")).damp_after == 0


def test_calm_by_is_a_whole_number_part_of_the_identity_and_0_keeps_the_instances_name():
    """0..MAX_CALM_BY; the one-string and mapping forms agree; 0 compiles the program the variant
    had before the parameter existed (the same kernel name)."""
    from mn_harness.cc.build import fixed_params, instance_tag
    from mn_harness.cc.spec import MAX_CALM_BY

    spec = CCSpec.from_dict("mltcp-reno:calm_by=6", "--cc")
    assert spec == CCSpec.from_dict({"name": "mltcp-reno", "calm_by": 6}, "--cc") == CCSpec("mltcp-reno", calm_by=6)
    assert spec.resolved().calm_by == 6 and CCSpec("mltcp-reno").resolved().calm_by == DEFAULT_CALM_BY > 0
    tags = {k: instance_tag(CCSpec("mltcp-reno", calm_by=k)) for k in (0, 6, 7, DEFAULT_CALM_BY)}
    assert len(set(tags.values())) == 4
    assert tags[DEFAULT_CALM_BY] == instance_tag(CCSpec("mltcp-reno"))  # the default by name: the same program
    assert fixed_params(CCSpec("mltcp-cubic", calm_by=7)).calm_by == 7 and fixed_params(CCSpec("dctcp")).calm_by == 0
    for bad in (-1, MAX_CALM_BY + 1, "six", 2.5, True):
        with pytest.raises(ConfigError, match=r"^jobs\[0\]\.cc\.calm_by: "):
            CCSpec.from_dict({"name": "mltcp-reno", "calm_by": bad}, "jobs[0].cc")
    with pytest.raises(ConfigError, match=r"^jobs\[0\]\.cc\.calm_by: only the mltcp-\* variants"):
        CCSpec.from_dict({"name": "dctcp", "calm_by": 6}, "jobs[0].cc")


@pytest.mark.parametrize("text,seconds", [("5ms", 0.005), ("200us", 0.0002), ("1s", 1.0),
                                          ("1.5ms", 0.0015), (0.02, 0.02), ("750ns", 7.5e-7)])
def test_durations(text, seconds):
    assert parse_idle_gap(text, "x") == pytest.approx(seconds)


@pytest.mark.parametrize("value,path_in_message", [
    ("vegas2", "jobs[0].cc:"),
    ({"name": "nope"}, "jobs[0].cc.name:"),
    ({"slope": 1}, "jobs[0].cc.name:"),
    ({"name": 3}, "jobs[0].cc.name:"),
    ({"name": "mltcp-reno", "slop": 1}, "jobs[0].cc.slop:"),
    ({"name": "mltcp-reno", "slope": "steep"}, "jobs[0].cc.slope:"),
    ({"name": "mltcp-reno", "slope": True}, "jobs[0].cc.slope:"),
    ({"name": "mltcp-reno", "slope": float("nan")}, "jobs[0].cc.slope:"),
    ({"name": "mltcp-reno", "slope": 100}, "jobs[0].cc.slope:"),
    ({"name": "mltcp-reno", "slope": -2, "intercept": 1}, "jobs[0].cc.slope:"),
    ({"name": "mltcp-reno", "intercept": 0}, "jobs[0].cc.intercept:"),
    ({"name": "mltcp-reno", "idle_gap": "5 parsecs"}, "jobs[0].cc.idle_gap:"),
    ({"name": "mltcp-reno", "idle_gap": "-5ms"}, "jobs[0].cc.idle_gap:"),
    ({"name": "mltcp-reno", "idle_gap": "1min"}, "jobs[0].cc.idle_gap:"),
    ({"name": "mltcp-reno", "idle_gap": 60}, "jobs[0].cc.idle_gap:"),
    ({"name": "reno", "slope": 1}, "jobs[0].cc.slope:"),
    ({"name": "dctcp", "intercept": 1}, "jobs[0].cc.intercept:"),
    ({"name": "cubic", "idle_gap": "5ms"}, "jobs[0].cc.idle_gap:"),
    (["reno"], "jobs[0].cc:"),
    ("mltcp-reno:slope", "jobs[0].cc:"),
    ("mltcp-reno:slope=", "jobs[0].cc:"),
    ("mltcp-reno:slop=1", "jobs[0].cc.slop:"),
    ("mltcp-reno:slope=1:slope=2", "jobs[0].cc.slope:"),
    ("mltcp-reno:slope=steep", "jobs[0].cc.slope:"),
    ("reno:slope=1", "jobs[0].cc.slope:"),
    ("nope:slope=1", "jobs[0].cc.name:"),
    ("mltcp-reno:restart=maybe", "jobs[0].cc.restart:"),
    ({"name": "mltcp-reno", "restart": 2}, "jobs[0].cc.restart:"),
    ({"name": "dctcp", "restart": True}, "jobs[0].cc.restart:"),
    ("cubic:restart=on", "jobs[0].cc.restart:"),
    ("mltcp-reno:adapt=sometimes", "jobs[0].cc.adapt:"),
    ({"name": "dctcp", "adapt": False}, "jobs[0].cc.adapt:"),
    ("reno:adapt=on", "jobs[0].cc.adapt:"),
    ("mltcp-reno:damp=9", "jobs[0].cc.damp:"),
    ("mltcp-reno:damp=-1", "jobs[0].cc.damp:"),
    ("mltcp-reno:damp=1.5", "jobs[0].cc.damp:"),
    ("mltcp-reno:damp=lots", "jobs[0].cc.damp:"),
    ({"name": "mltcp-reno", "damp": True}, "jobs[0].cc.damp:"),
    ({"name": "mltcp-reno", "damp": 1.0}, "jobs[0].cc.damp:"),
    ({"name": "mltcp-reno", "damp": 12}, "jobs[0].cc.damp:"),
    ({"name": "dctcp", "damp": 1}, "jobs[0].cc.damp:"),
    ("reno:damp=1", "jobs[0].cc.damp:"),
    ("mltcp-reno:damp_after=9", "jobs[0].cc.damp_after:"),
    ("mltcp-reno:damp_after=-1", "jobs[0].cc.damp_after:"),
    ("mltcp-reno:damp_after=two", "jobs[0].cc.damp_after:"),
    ({"name": "mltcp-reno", "damp_after": False}, "jobs[0].cc.damp_after:"),
    ({"name": "mltcp-reno", "damp_after": 2.0}, "jobs[0].cc.damp_after:"),
    ({"name": "dctcp", "damp_after": 1}, "jobs[0].cc.damp_after:"),
    ("cubic:damp_after=1", "jobs[0].cc.damp_after:"),
    (None, "jobs[0].cc:"),
])
def test_rejections_name_the_yaml_path(value, path_in_message):
    with pytest.raises(ConfigError) as exc:  # CCConfigError, or the units' ConfigError
        CCSpec.from_dict(value, "jobs[0].cc")
    message = str(exc.value)
    assert message.startswith(path_in_message), message
    assert "\n" not in message


def test_direct_construction_is_validated_too():
    with pytest.raises(CCConfigError):
        CCSpec("mltcp-reno", intercept=-1)
    with pytest.raises(CCConfigError):
        CCSpec("quic")
    with pytest.raises(CCConfigError, match=r"^cc\.damp:"):
        CCSpec("mltcp-reno", damp=9)
    with pytest.raises(CCConfigError, match=r"^cc\.damp_after:"):
        CCSpec("mltcp-reno", damp_after=ADAPT_PATIENCE + 1)


def test_idle_gap_default_is_derived_from_the_job_compute_time():
    """Half the compute phase, within [1 ms, 1 s]: always below the compute time, so every
    compute phase separates two iterations."""
    from mn_harness.cc.variants import MAX_DERIVED_IDLE_GAP_S, MIN_IDLE_GAP_S, idle_gap_for_compute

    assert idle_gap_for_compute(0.300) == pytest.approx(0.150)  # the demo
    assert idle_gap_for_compute(0.050) == pytest.approx(0.025)
    assert idle_gap_for_compute(0.0) == MIN_IDLE_GAP_S
    assert idle_gap_for_compute(30.0) == MAX_DERIVED_IDLE_GAP_S
    for compute in (0.003, 0.02, 0.08, 0.099):
        assert idle_gap_for_compute(compute) < compute
    spec = CCSpec("mltcp-cubic").for_compute(0.040)
    assert spec.idle_gap_s == pytest.approx(0.020) and spec.idle_gap_derived
    assert spec.resolved()[2] == pytest.approx(0.020)
    assert CCSpec("mltcp-cubic", idle_gap_s=0.01).for_compute(0.040).idle_gap_s == 0.01  # explicit wins
    assert CCSpec("cubic").for_compute(0.040) == CCSpec("cubic")  # kernel CCs have no gap
    assert spec == CCSpec("mltcp-cubic", idle_gap_s=0.020)  # one kernel instance for equal values


def test_jobs_get_their_own_gap_also_through_cc_overrides():
    from mn_harness.config import load_experiment
    from tests.helpers import TOPOLOGIES

    exp = load_experiment(TOPOLOGIES / "leaf-spine.yaml").with_cc(CCSpec.from_dict("mltcp-reno", "--cc"))
    assert [j.cc.idle_gap_s for j in exp.jobs] == pytest.approx([0.075] * 3)  # 150 ms compute
    raw = {"hosts": ["a", "b"], "switches": ["s"], "link_defaults": {"bw": "1Gbit"},
           "links": [{"endpoints": ["a", "s"]}, {"endpoints": ["b", "s"]}],
           "jobs": [{"name": "j", "workers": ["a", "b"], "bytes_per_iteration": "1MB", "compute": "30ms",
                     "iterations": 5, "cc": "mltcp-cubic"}]}
    from mn_harness.config import Experiment

    assert Experiment.from_dict(raw).jobs[0].cc.idle_gap_s == pytest.approx(0.015)
    # DDP overlap: only forward (1/3) and the slice producing the first bucket (1 MiB of 8 MiB
    # over backward, 2/3) are idle: 120 ms * (1/3 + 2/3 / 8) = 50 ms, half of it the gap. Half
    # the whole compute (60 ms) was longer than any pause, and the kernel saw no iteration.
    raw["jobs"][0].update(bytes_per_iteration="8MiB", compute="120ms",
                          overlap={"bucket": "2MiB", "first_bucket": "1MiB"})
    job = Experiment.from_dict(raw).jobs[0]
    assert job.shortest_idle_s == pytest.approx(0.050)
    assert job.cc.idle_gap_s == pytest.approx(0.025)
    raw["jobs"][0]["cc"] = {"name": "mltcp-reno", "idle_gap": "60ms"}
    assert [w for w in Experiment.from_dict(raw).warnings() if ".idle_gap:" in w] == [
        "jobs[0].cc.idle_gap: 60 ms is not below the job's idle time between iterations (50 ms): "
        "MLTCP sees no iteration boundary and behaves like its base CC (leave idle_gap out to "
        "derive it from the job)"]


def test_an_explicit_gap_not_below_compute_warns_in_one_line():
    warning = CCSpec("mltcp-reno", idle_gap_s=0.05).idle_gap_warning(0.05, "jobs[1].cc")
    assert warning.startswith("jobs[1].cc.idle_gap: 50 ms is not below the job's idle time between iterations (50 ms)")
    assert "\n" not in warning
    assert CCSpec("mltcp-reno", idle_gap_s=0.049).idle_gap_warning(0.05, "x") is None
    assert CCSpec("mltcp-reno").for_compute(0.01).idle_gap_warning(0.01, "x") is None  # derived
    assert CCSpec("reno").idle_gap_warning(0.0, "x") is None


def test_the_idle_share_of_an_overlapped_phase():
    """Forward plus the first bucket's backward slice; a phase that sends nothing is idle whole
    (the share the derived idle_gap used before OverlapConfig.idle_share existed)."""
    from mn_harness.config.workload import OverlapConfig

    overlap = OverlapConfig(bucket_bytes=2 << 20, first_bucket_bytes=1 << 20, backward=2 / 3)
    assert overlap.idle_share(8 << 20) == pytest.approx(1 / 3 + 2 / 3 / 8)
    assert overlap.idle_share(0) == 1.0


def test_hold_is_a_slope_up_to_the_searchs_part_of_the_identity_and_0_keeps_the_instances_name():
    """0..slope, for an adaptive mltcp-* variant only (without a search's end there is nothing to
    hold after); the one-string and mapping forms agree; 0 compiles the program the variant had
    before the parameter existed (the same kernel name)."""
    from mn_harness.cc.build import fixed_params, instance_tag

    spec = CCSpec.from_dict("mltcp-cubic:hold=4", "--cc")
    assert spec == CCSpec.from_dict({"name": "mltcp-cubic", "hold": "4"}, "--cc") == CCSpec("mltcp-cubic", hold=4.0)
    assert spec.resolved().hold == 4.0 and CCSpec("mltcp-cubic").resolved().hold == DEFAULT_HOLD == 0
    tags = {h: instance_tag(CCSpec("mltcp-reno", hold=h)) for h in (0.0, 2.0, 4.0)}
    assert len(set(tags.values())) == 3
    assert tags[0.0] == instance_tag(CCSpec("mltcp-reno"))
    assert fixed_params(spec).hold_fp == 4 * 1024 and fixed_params(CCSpec("dctcp")).hold_fp == 0
    assert CCSpec.from_dict("mltcp-reno:slope=8:hold=8", "--cc").resolved().hold == 8
    for bad, why in (({"hold": -1}, "outside"), ({"hold": DEFAULT_SLOPE + 1}, "outside"),
                     ({"slope": 4, "hold": 5}, "outside"), ({"hold": "x"}, "number"),
                     ({"hold": 2, "adapt": False}, "adaptive")):
        with pytest.raises(ConfigError, match=rf"^jobs\[0\]\.cc\.hold: .*{why}"):
            CCSpec.from_dict({"name": "mltcp-reno", **bad}, "jobs[0].cc")
    for name in ("cubic", "dctcp"):
        with pytest.raises(ConfigError, match=r"^jobs\[0\]\.cc\.hold: only the mltcp-\* variants"):
            CCSpec.from_dict({"name": name, "hold": 2}, "jobs[0].cc")

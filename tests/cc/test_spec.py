"""Unit tests (no root) of CCSpec.from_dict: what a YAML `cc:` value may be, and that every
rejection is one line naming the YAML path, so users can find the mistake."""

import pytest

from mn_harness.cc.errors import CCConfigError
from mn_harness.cc.spec import CCSpec, parse_idle_gap
from mn_harness.cc.variants import DEFAULT_IDLE_GAP_S, DEFAULT_INTERCEPT, DEFAULT_SLOPE
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
                                               DEFAULT_IDLE_GAP_S)
    assert hash(spec) == hash(CCSpec("mltcp-cubic", 2.0, 0.25, 0.005))


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

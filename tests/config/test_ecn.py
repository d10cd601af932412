"""ECN thresholds, run.tcp_ecn and run.queue_telemetry as written in experiment files."""

import pytest

from mn_harness.config import ConfigError, load_experiment_dict
from mn_harness.config.ecn import (
    DEFAULT_ECN_THRESHOLD,
    MAX_THRESHOLD_PACKETS,
    EcnThreshold,
    parse_ecn_threshold,
    queue_telemetry_directions,
    tcp_ecn_sysctl,
)
from mn_harness.p4.limits import FRAME_BYTES
from tests.helpers import two_switch_line as dumbbell


@pytest.mark.parametrize("raw,packets,nbytes", [
    (20, 20, 20 * FRAME_BYTES), ("30KB", 20, 30000), ("45420B", 30, 45420), ("1KiB", 1, 1024),
])
def test_thresholds_in_packets_or_bytes(raw, packets, nbytes):
    t = parse_ecn_threshold(raw, "x")
    assert t.threshold_packets() == packets and t.threshold_bytes() == nbytes and not t.off


@pytest.mark.parametrize("raw", ["off", "OFF", False])
def test_off_never_marks(raw):
    t = parse_ecn_threshold(raw, "x")
    assert t.off and t.threshold_bytes() is None and t.threshold_packets() is None
    assert t.describe() == "off"


@pytest.mark.parametrize("raw,words", [
    (0, "positive"), (-3, "positive"), (2.5, "whole number"), ("20Mb", "in bits"), (True, "expected"),
    (None, "expected"), ("lots", "expected a size"), (MAX_THRESHOLD_PACKETS + 1, "at most"),
    (f"{(MAX_THRESHOLD_PACKETS + 1) * FRAME_BYTES}B", "at most"),
])
def test_bad_thresholds_are_one_line_naming_the_path(raw, words):
    with pytest.raises(ConfigError) as err:
        parse_ecn_threshold(raw, "links[1].ecn_threshold")
    assert str(err.value).startswith("links[1].ecn_threshold: ") and words in str(err.value)
    assert "\n" not in str(err.value)


def test_link_and_switch_thresholds_parse_and_default_is_20_packets():
    raw = dumbbell()
    raw["switches"] = [{"name": "s1", "ecn_threshold": "30KB"}, "s2"]
    raw["links"][1]["ecn_threshold"] = 7
    exp = load_experiment_dict(raw)
    assert exp.switches[0].ecn_threshold == EcnThreshold(bytes=30000)
    assert exp.switches[1].ecn_threshold is None
    assert exp.links[1].ecn_threshold == EcnThreshold(packets=7) and exp.links[0].ecn_threshold is None
    assert DEFAULT_ECN_THRESHOLD == EcnThreshold(packets=20)


def test_link_defaults_take_no_threshold():
    raw = dumbbell()
    raw["link_defaults"]["ecn_threshold"] = 5
    with pytest.raises(ConfigError, match="^link_defaults.ecn_threshold: unknown key"):
        load_experiment_dict(raw)


def test_tcp_ecn():
    assert load_experiment_dict(dumbbell()).run.tcp_ecn == "auto"
    assert load_experiment_dict(dumbbell(tcp_ecn=True)).run.tcp_ecn is True
    assert [tcp_ecn_sysctl(v) for v in ("auto", True, False)] == [None, "1", "0"]
    for bad in (1, "yes", None):
        with pytest.raises(ConfigError, match="^run.tcp_ecn: expected auto, true or false"):
            load_experiment_dict(dumbbell(tcp_ecn=bad))


def test_queue_telemetry_links_both_directions_or_one():
    assert queue_telemetry_directions(load_experiment_dict(dumbbell())) is None  # every switch port
    assert queue_telemetry_directions(load_experiment_dict(dumbbell(queue_telemetry=False))) == set()
    exp = load_experiment_dict(dumbbell(queue_telemetry=["s2-s1", "h1->s1"]))
    assert queue_telemetry_directions(exp) == {("s1", "s2"), ("s2", "s1"), ("h1", "s1")}


@pytest.mark.parametrize("value,path,words", [
    (["s1-h2"], "run.queue_telemetry[0]", "no link between 's1' and 'h2'"),
    (["s1"], "run.queue_telemetry[0]", "expected a link"),
    ([3], "run.queue_telemetry[0]", "expected a link"),
    ([], "run.queue_telemetry", "expected true, false or a list"),
    ("s1-s2", "run.queue_telemetry", "expected true, false or a list"),
])
def test_queue_telemetry_refuses_unknown_links(value, path, words):
    with pytest.raises(ConfigError) as err:
        load_experiment_dict(dumbbell(queue_telemetry=value))
    assert str(err.value).startswith(f"{path}: ") and words in str(err.value)

"""config.yaml round trip: the dumped experiment is an experiment file that loads back to the
very same resolved configuration."""

from dataclasses import dataclass

import pytest

from mn_harness.config import Experiment, load_experiment
from mn_harness.config.dump import _covers, experiment_to_raw, experiment_to_yaml
from mn_harness.config.loader import parse_yaml
from tests.helpers import TOPOLOGIES, small_demo


def reload(experiment: Experiment) -> Experiment:
    return Experiment.from_dict(parse_yaml(experiment_to_yaml(experiment), "config.yaml"))


@pytest.mark.parametrize("path", sorted(TOPOLOGIES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_topology_round_trips(path):
    experiment = load_experiment(path)
    assert reload(experiment) == experiment


def test_odd_values_round_trip_exactly():
    raw = small_demo()
    raw["links"][2].update(bw=123456789.123, delay="1.5ms", queue=37)
    raw["links"][0]["bw"] = "1GBps"  # bytes: 8 Gbit/s
    raw["jobs"][0].update(cc={"name": "mltcp-reno", "slope": 2.5, "intercept": 0.75, "idle_gap": "20ms"},
                          compute=0.123456789, start_offset="7us")
    raw["jobs"][1].pop("bytes_per_iteration")
    raw["jobs"][1]["model_params"] = "6.25M"
    raw["run"].update(timeout="90s", throughput_bin="5ms", seed=-3, gso_max_segs=1)
    raw["switches"] = [{"name": "s1", "ecn_threshold": 12}, "s2"]
    experiment = Experiment.from_dict(raw, "odd")
    again = reload(experiment)
    assert again == experiment
    dumped = experiment_to_raw(experiment)
    assert dumped["links"][0]["bw"] == "8Gbit" and dumped["links"][2]["bw"] == 123456789.123
    assert dumped["jobs"][1]["bytes_per_iteration"] == "25MB"  # model_params resolved to bytes


def test_the_dump_is_a_file_the_cli_validates(tmp_path):
    from mn_harness.cli import main

    path = tmp_path / "config.yaml"
    path.write_text(experiment_to_yaml(Experiment.from_dict(small_demo(), "x")))
    assert main(["validate", str(path)]) == 0


def test_a_field_the_dump_does_not_write_is_an_error():
    @dataclass
    class Grown:
        name: str
        phases: int

    with pytest.raises(AssertionError, match="Grown.phases"):
        _covers(Grown("a", 1), {"name"})


def test_routing_warmup_and_a_derived_idle_gap_round_trip():
    raw = small_demo()
    raw.update(routing="ecmp")
    raw["run"]["warmup"] = 5
    raw["jobs"][0]["cc"] = "mltcp-cubic"  # idle gap derived from its 60 ms compute: 30 ms
    experiment = Experiment.from_dict(raw, "ecmp")
    again = reload(experiment)
    assert again == experiment and again.routing == "ecmp" and again.run.warmup == 5
    assert again.jobs[0].cc.idle_gap_s == experiment.jobs[0].cc.idle_gap_s == 0.03
    dumped = experiment_to_raw(experiment)
    assert dumped["jobs"][0]["cc"] == "mltcp-cubic"  # derived again on load, not frozen in

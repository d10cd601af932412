"""config.yaml round trip: the dumped experiment is an experiment file that loads back to the
very same resolved configuration."""

from dataclasses import dataclass

import pytest

from mn_harness.config import Experiment, load_experiment
from mn_harness.config.dump import _covers, experiment_to_raw, experiment_to_yaml
from mn_harness.config.loader import parse_yaml
from mn_harness.jobs.scaling import apply_scaling
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
    raw["jobs"][0].update(cc={"name": "mltcp-reno", "slope": 2.5, "intercept": 0.75, "idle_gap": "20ms",
                                              "damp": 2, "damp_after": 3, "calm_by": 7, "hold": 1.25},
                          compute=0.123456789, start_offset="7us")
    raw["jobs"][1].pop("bytes_per_iteration")
    raw["jobs"][1]["model_params"] = "6.25M"
    raw["run"].update(timeout="90s", throughput_bin="5ms", seed=-3, gso_max_segs=1)
    raw["switches"] = [{"name": "s1", "ecn_threshold": 12}, {"name": "s2", "ecn_threshold": "off"}]
    raw["links"][2]["ecn_threshold"] = "30KB"
    raw["links"][1]["ecn_threshold"] = "12345B"  # dumped with a unit: bytes, never packets
    raw["run"].update(tcp_ecn=True, queue_telemetry=["s1-s2", "h1->s1"])
    experiment = Experiment.from_dict(raw, "odd")
    again = reload(experiment)
    assert again == experiment
    dumped = experiment_to_raw(experiment)
    assert dumped["links"][0]["bw"] == "8Gbit" and dumped["links"][2]["bw"] == 123456789.123
    assert dumped["jobs"][0]["cc"]["damp_after"] == 3 and dumped["jobs"][0]["cc"]["calm_by"] == 7 \
        and dumped["jobs"][0]["cc"]["hold"] == 1.25
    assert dumped["jobs"][1]["bytes_per_iteration"] == "25MB"  # model_params resolved to bytes
    assert [link.get("ecn_threshold") for link in dumped["links"]] == [None, "12.345KB", "30KB", None, None]
    assert dumped["switches"] == [{"name": "s1", "ecn_threshold": 12}, {"name": "s2", "ecn_threshold": "off"}]


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


def test_workloads_round_trip_as_resolved_phases():
    """Phases, jitter, overlap, stragglers, servers, a pipeline, a broadcast root and a scaled
    preset: config.yaml holds the resolved phases (scaled bytes) and loads back equal."""
    raw = small_demo()
    raw["hosts"] += ["h5"]
    raw["links"].append({"endpoints": ["h5", "s1"]})
    raw["jobs"][0].update(bytes_per_iteration="4MB", compute={"mean": "50ms", "jitter": "10%"},
                          overlap={"bucket": "1MB"},
                          stragglers=[{"ranks": [1], "delay": "20ms", "probability": 0.3},
                                      {"ranks": [0], "slowdown": 1.25}])
    raw["jobs"][1] = {"name": "job2", "workers": ["h2", "h4"], "servers": ["h5"], "iterations": 2,
                      "phases": [{"compute": "10ms", "name": "fwd"},
                                 {"collective": "broadcast", "bytes": "1MB", "root": "h4"},
                                 {"collective": "parameter_server", "bytes": "2MB"},
                                 {"collective": "pipeline", "bytes": "100KB", "micro_batches": 3,
                                  "forward": "1ms", "backward": "2ms", "grad_bytes": "50KB"},
                                 {"collective": "all_gather", "bytes": "1MB", "blocking": False},
                                 {"compute": "5ms", "waits": [4]}]}
    experiment = Experiment.from_dict(raw, "workloads")
    assert reload(experiment) == experiment
    dumped = experiment_to_raw(experiment)["jobs"]
    assert dumped[1]["phases"][1]["participants"] == ["h4", "h2"]  # the root first
    assert dumped[1]["phases"][2]["participants"] == ["h2", "h4"]  # the servers are the job's

    scaled = small_demo()
    for job in scaled["jobs"]:
        del job["bytes_per_iteration"], job["compute"]
        job.update(model="resnet50", scale={"real_link": "100Gbit"})
    loaded = Experiment.from_dict(scaled, "scaled")
    # before the scaling step the file keeps the rule: loading it and scaling gives the same
    assert loaded.jobs[0].unscaled and experiment_to_raw(loaded)["jobs"][0]["scale"] == {"real_link": "100Gbit"}
    assert reload(loaded).jobs[0].unscaled
    experiment = apply_scaling(loaded)
    assert apply_scaling(reload(loaded)).jobs[0].phases == experiment.jobs[0].phases
    again = reload(experiment)
    assert again == experiment and again.jobs[0].bytes_per_iteration == experiment.jobs[0].bytes_per_iteration
    assert "scale" not in experiment_to_raw(experiment)["jobs"][0]  # resolved: not scaled twice

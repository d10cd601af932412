"""Config validation: every rejection is one line naming the YAML path."""

import copy

import pytest
import yaml

from mn_harness.config import ConfigError, Experiment, load_experiment
from tests.helpers import TOPOLOGIES

BASE = {
    "experiment": "t",
    "hosts": ["h1", "h2", "h3"],
    "switches": ["s1", "s2"],
    "link_defaults": {"bw": "100Mbit", "queue": 50},
    "links": [
        {"endpoints": ["h1", "s1"]},
        {"endpoints": ["h2", "s1"]},
        {"endpoints": ["s1", "s2"], "bw": "1Gbit"},
        {"endpoints": ["s2", "h3"]},
    ],
    "jobs": [
        {"name": "j1", "workers": ["h1", "h3"], "bytes_per_iteration": "1MB", "compute": "50ms",
         "iterations": 3, "cc": "reno"},
    ],
}


def build(mutate=None) -> Experiment:
    raw = copy.deepcopy(BASE)
    if mutate:
        mutate(raw)
    return Experiment.from_dict(raw)


def rejects(mutate, path: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        build(mutate)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: "), message
    assert words in message, message


def test_valid_experiment_resolves_units():
    exp = build()
    assert exp.links[2].bw_bps == 1e9
    assert exp.links[0].bw_bps == 100e6 and exp.links[0].queue_packets == 50
    assert exp.jobs[0].bytes_per_iteration == 1_000_000
    assert exp.jobs[0].compute_s == pytest.approx(0.05)
    assert exp.jobs[0].cc.name == "reno"


def test_model_params_are_fp32_bytes():
    def mutate(raw):
        del raw["jobs"][0]["bytes_per_iteration"]
        raw["jobs"][0]["model_params"] = "2.5M"

    assert build(mutate).jobs[0].bytes_per_iteration == 10_000_000


def test_unknown_top_level_key():
    rejects(lambda r: r.update(hostz=[]), "hostz", "unknown key")


def test_unknown_job_key():
    rejects(lambda r: r["jobs"][0].update(wrkers=["h1"]), "jobs[0].wrkers", "unknown key")


def test_unknown_link_key():
    rejects(lambda r: r["links"][1].update(bandwidth="1Gbit"), "links[1].bandwidth", "unknown key")


def test_unknown_host_in_job():
    rejects(lambda r: r["jobs"][0]["workers"].append("h9"), "jobs[0].workers[2]", "unknown host 'h9'")


def test_switch_as_worker():
    rejects(lambda r: r["jobs"][0]["workers"].append("s1"), "jobs[0].workers[2]", "a switch, not a host")


def test_unknown_link_endpoint():
    rejects(lambda r: r["links"][3]["endpoints"].__setitem__(1, "h7"), "links[3].endpoints[1]", "unknown node 'h7'")


def test_duplicate_node_name():
    rejects(lambda r: r["switches"].append("h2"), "switches[2]", "duplicate name 'h2'")


def test_duplicate_job_name():
    def mutate(raw):
        raw["jobs"].append(dict(raw["jobs"][0], workers=["h2", "h1"]))

    rejects(mutate, "jobs[1].name", "duplicate job name 'j1'")


def test_duplicate_link():
    rejects(lambda r: r["links"].append({"endpoints": ["s2", "s1"]}), "links[4]", "duplicate link")


def test_invalid_interface_name():
    rejects(lambda r: r["hosts"].__setitem__(0, "host-one"), "hosts[0]", "not a valid node name")


def test_name_too_long_for_interfaces():
    rejects(lambda r: r["switches"].__setitem__(0, "averylongswitch"), "switches[0]", "not a valid node name")


def test_bad_bandwidth_unit():
    rejects(lambda r: r["links"][2].update(bw="1 Gbyte"), "links[2].bw", "unknown unit 'Gbyte'")


def test_bad_size():
    rejects(lambda r: r["jobs"][0].update(bytes_per_iteration="lots"), "jobs[0].bytes_per_iteration", "expected a size")


def test_bad_duration():
    rejects(lambda r: r["jobs"][0].update(compute="50 parsecs"), "jobs[0].compute", "unknown unit")


def test_job_with_one_worker():
    rejects(lambda r: r["jobs"][0].update(workers=["h1"]), "jobs[0].workers", "at least 2 workers")


def test_worker_listed_twice():
    rejects(lambda r: r["jobs"][0].update(workers=["h1", "h1"]), "jobs[0].workers[1]", "appears twice")


def test_host_shared_by_two_jobs():
    def mutate(raw):
        raw["jobs"].append(dict(raw["jobs"][0], name="j2", workers=["h2", "h3"]))

    rejects(mutate, "jobs[1].workers[1]", "already runs job 'j1'")


def test_disconnected_topology():
    def mutate(raw):
        raw["switches"].append("s3")
        raw["links"][3]["endpoints"] = ["s3", "h3"]

    rejects(mutate, "links", "disconnected")


def test_host_without_link():
    def mutate(raw):
        raw["hosts"].append("h4")

    rejects(mutate, "hosts[3]", "has 0 links")


def test_unknown_collective():
    rejects(lambda r: r["jobs"][0].update(collective="tree"), "jobs[0].collective", "unknown collective")


def test_both_bytes_and_params():
    rejects(lambda r: r["jobs"][0].update(model_params="1M"), "jobs[0].bytes_per_iteration", "exactly one")


def test_unknown_dataplane():
    rejects(lambda r: r.update(run={"dataplane": "ovs"}), "run.dataplane", "unknown data plane")


def test_unknown_cc_name_names_the_path():
    rejects(lambda r: r["jobs"][0].update(cc="turbo"), "jobs[0].cc", "turbo")


def test_zero_iterations():
    rejects(lambda r: r["jobs"][0].update(iterations=0), "jobs[0].iterations", "positive integer")


def test_yaml_syntax_error_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: [h1, h2\nlinks: {")
    with pytest.raises(ConfigError) as info:
        load_experiment(bad)
    assert "\n" not in str(info.value) and "not valid YAML" in str(info.value)


def test_shipped_topologies_are_valid():

    files = sorted(TOPOLOGIES.glob("*.yaml"))
    assert len(files) >= 2
    for f in files:
        exp = load_experiment(f)
        assert exp.jobs and yaml.safe_load(f.read_text())["experiment"] == exp.name


def test_dataplane_override_rechecks_inc_jobs():
    exp = load_experiment(TOPOLOGIES / "inc-vs-ring-bmv2.yaml")
    with pytest.raises(ConfigError) as info:
        exp.with_run(dataplane="linux")
    assert "inc_allreduce needs all workers on one aggregation switch" in str(info.value)

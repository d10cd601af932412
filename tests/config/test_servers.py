"""`servers:`: placement (explicit, automatic: a leaf with its hosts on one server), the links
that cross, what a run spread over servers refuses, and config.yaml round trips."""

from __future__ import annotations

import copy

import pytest
import yaml

from mn_harness.config import load_experiment_dict
from mn_harness.config.dump import experiment_to_yaml
from mn_harness.config.experiment import Experiment
from mn_harness.config.servers import crossing_links, describe_placement, place
from mn_harness.errors import ConfigError
from tests.cli.bad_inputs import BASE

TWO = [{"name": "a", "address": "192.0.2.1"}, {"name": "b", "address": "192.0.2.2"}]


def leaf_spine(leaves: int = 4, per_leaf: int = 2, spines: int = 2) -> dict:
    hosts = [f"h{i}" for i in range(leaves * per_leaf)]
    switches = [f"l{i}" for i in range(leaves)] + [f"sp{i}" for i in range(spines)]
    links = [{"endpoints": [h, f"l{i // per_leaf}"]} for i, h in enumerate(hosts)]
    links += [{"endpoints": [f"l{i}", f"sp{k}"]} for i in range(leaves) for k in range(spines)]
    return {"hosts": hosts, "switches": switches, "link_defaults": {"bw": "100Mbit"}, "links": links,
            "jobs": [{"name": "j1", "workers": [hosts[0], hosts[-1]], "bytes_per_iteration": "1MB",
                      "compute": "10ms", "iterations": 3}]}


def with_servers(raw: dict, servers) -> Experiment:
    return load_experiment_dict({**copy.deepcopy(raw), "servers": servers})


def test_without_servers_nothing_changes():
    assert load_experiment_dict(BASE).servers == ()


def test_a_leaf_goes_with_its_hosts_and_only_fabric_links_cross():
    exp = with_servers(leaf_spine(), TWO)
    where = {n: s.name for s in exp.servers for n in s.nodes}
    for i in range(8):
        assert where[f"h{i}"] == where[f"l{i // 2}"]
    crossing = crossing_links(exp.servers, exp.links)
    assert crossing and all(link.a.startswith("l") and link.b.startswith("sp") for link, _, _ in crossing)
    sizes = sorted(len(s.nodes) for s in exp.servers)
    assert sizes[1] - sizes[0] <= 1  # 14 nodes: 7 and 7


def test_explicit_placement_is_kept_and_hosts_follow_their_switch():
    exp = with_servers(BASE, [{"name": "a", "address": "192.0.2.1", "nodes": ["s2"]},
                              {"name": "b", "address": "192.0.2.2"}])
    where = {n: s.name for s in exp.servers for n in s.nodes}
    assert where["s2"] == where["h3"] == where["h4"] == "a"
    assert where["s1"] == where["h1"] == where["h2"] == "b"
    assert [link.name for link, _, _ in crossing_links(exp.servers, exp.links)] == ["s1-s2"]


def test_the_placement_is_deterministic_and_balanced():
    a = place(["h1", "h2", "h3"], ["s1", "s2", "s3"], [("h1", "s1"), ("h2", "s2"), ("h3", "s3"), ("s1", "s2"),
                                                        ("s2", "s3")], ["x", "y"], {})
    assert a == {"s1": "x", "h1": "x", "s2": "y", "h2": "y", "s3": "x", "h3": "x"}


def test_config_yaml_records_the_placement_and_runs_the_same():
    exp = with_servers(leaf_spine(), TWO)
    again = Experiment.from_dict(yaml.safe_load(experiment_to_yaml(exp)))
    assert again == exp and again.servers == exp.servers


def test_validate_lines_name_every_server_and_crossing_link():
    exp = with_servers(BASE, TWO)
    lines = describe_placement(exp.servers, exp.links)
    assert lines[0].startswith("server a (root@192.0.2.1, port 22): ")
    assert "crossing link s1-s2: server a - server b (a tunnel)" in lines


@pytest.mark.parametrize("servers,path", [
    ([], "servers"),
    ("a", "servers"),
    ([{"name": "a"}], "servers[0].address"),
    ([{"name": "a", "address": "-oProxyCommand=x"}], "servers[0].address"),
    ([{"name": "a", "address": "192.0.2.1", "port": 0}], "servers[0].port"),
    ([{"name": "a", "address": "192.0.2.1", "user": "Root;x"}], "servers[0].user"),
    ([{"name": "a", "address": "192.0.2.1", "python": "python3"}], "servers[0].python"),
    ([{"name": "a", "address": "192.0.2.1", "nodes": ["zz"]}], "servers[0].nodes[0]"),
    ([{"name": "a", "address": "192.0.2.1", "nodes": ["s1"]}, {"name": "b", "address": "192.0.2.2",
                                                              "nodes": ["s1"]}], "servers[1].nodes[0]"),
    (TWO + [{"name": "a", "address": "192.0.2.3"}], "servers[2].name"),
    ([{"name": "a", "address": "192.0.2.1"}, {"name": "b", "address": "192.0.2.1"}], "servers[1].address"),
    ([{"name": "a", "address": "192.0.2.1", "nodes": ["h1", "h2", "h3", "h4", "s1", "s2"]},
      {"name": "b", "address": "192.0.2.2"}], "servers[1]"),
    ([{"name": "a", "address": "192.0.2.1", "extra": 1}], "servers[0].extra"),
])
def test_bad_servers_are_named(servers, path):
    with pytest.raises(ConfigError) as info:
        load_experiment_dict({**copy.deepcopy(BASE), "servers": servers})
    assert info.value.path == path, str(info.value)


@pytest.mark.parametrize("change,path", [
    ({"run": {"dataplane": "bmv2"}}, "run.dataplane"),
    ({"routing": "ecmp"}, "routing"),
    ({"run": {"isolated": True}}, "run.isolated"),
])
def test_what_cannot_run_across_servers_is_refused(change, path):
    with pytest.raises(ConfigError) as info:
        load_experiment_dict({**copy.deepcopy(BASE), **change, "servers": TWO})
    assert info.value.path == path


def test_a_dataplane_override_is_checked_too():
    exp = load_experiment_dict({**copy.deepcopy(BASE), "servers": TWO})
    with pytest.raises(ConfigError) as info:
        exp.with_run(dataplane="bmv2")
    assert info.value.path == "run.dataplane"

"""run.emulation (config/emulation.py): defaults, every choice parsed, one-line errors naming the
YAML path, written back to config.yaml, recorded in summary.json, checked against the topology."""

import copy

import pytest
import yaml

from mn_harness.config import Experiment
from mn_harness.config.dump import experiment_to_raw
from mn_harness.config.emulation import Burst, Emulation, record
from mn_harness.errors import ConfigError
from tests.helpers import TOPOLOGIES


def raw(**emulation):
    data = yaml.safe_load((TOPOLOGIES / "dumbbell-2jobs.yaml").read_text())
    if emulation:
        data.setdefault("run", {})["emulation"] = emulation
    return data


def test_defaults_are_the_projects_network():
    e = Experiment.from_dict(raw()).run.emulation
    assert e == Emulation()
    assert (e.switches, e.access_links, e.host_queue, e.queue_limit, e.cpu_placement, e.worker_main_thread) == \
        ("router", "shaped", "txqueuelen", "bytes", "shared", "realtime")
    assert e.htb_burst == e.htb_cburst == Burst(seconds=0.001) and e.htb_quantum is None
    assert e.changed() == {}


def test_every_choice_parses_and_round_trips_through_config_yaml():
    changes = {"switches": "bridge", "access_links": "unshaped", "host_queue": "link",
               "queue_limit": "packets", "htb_burst": "15KiB", "htb_cburst": "auto", "htb_quantum": "1514B",
               "cpu_placement": "split", "worker_main_thread": "fair"}
    exp = Experiment.from_dict(raw(**changes))
    e = exp.run.emulation
    assert e.htb_burst == Burst(bytes=15360) and e.htb_cburst.auto and e.htb_quantum == 1514
    again = Experiment.from_dict(copy.deepcopy(experiment_to_raw(exp)))
    assert again == exp
    assert set(e.changed()) == set(changes)
    summary = record(exp.run)
    assert summary["switches"] == "bridge" and summary["gso_max_segs"] == 16
    assert summary["worker_main_thread"] == "fair"
    assert summary["throughput_bin_s"] == 0.01 and summary["queue_telemetry"] is True


def test_a_burst_as_a_duration_keeps_four_frames_on_slow_links():
    e = Experiment.from_dict(raw(htb_burst="2ms")).run.emulation
    assert e.htb_burst.bytes_at(1e9) == 250000 and e.htb_burst.bytes_at(1e6) == 4 * 1514


@pytest.mark.parametrize("changes,path,words", [
    ({"switches": "ovs"}, "run.emulation.switches", "expected one of router, bridge"),
    ({"access_links": True}, "run.emulation.access_links", "expected one of shaped, unshaped"),
    ({"queue_limit": "frames"}, "run.emulation.queue_limit", "bytes, packets, txqueuelen"),
    ({"worker_main_thread": "fifo"}, "run.emulation.worker_main_thread", "expected one of fair, realtime"),
    ({"htb_burst": 15000}, "run.emulation.htb_burst", "a duration at the link rate"),
    ({"htb_burst": "15kb"}, "run.emulation.htb_burst", "is in bits"),
    ({"htb_cburst": "2s"}, "run.emulation.htb_cburst", "longer than"),
    ({"htb_quantum": "5GB"}, "run.emulation.htb_quantum", "at most"),
    ({"gso": 1}, "run.emulation.gso", "unknown key"),
])
def test_bad_choices_are_one_line_naming_the_path(changes, path, words):
    with pytest.raises(ConfigError) as err:
        Experiment.from_dict(raw(**changes))
    assert str(err.value).startswith(path) and words in str(err.value) and "\n" not in str(err.value)


def test_a_mapping_is_required():
    data = raw()
    data["run"]["emulation"] = "mininet"
    with pytest.raises(ConfigError, match=r"^run\.emulation: expected a mapping"):
        Experiment.from_dict(data)


def test_bridges_need_a_tree_and_one_path():
    leaf_spine = yaml.safe_load((TOPOLOGIES / "leaf-spine.yaml").read_text())
    leaf_spine.setdefault("run", {})["emulation"] = {"switches": "bridge"}
    with pytest.raises(ConfigError, match=r"^run\.emulation\.switches: bridge: the topology has a loop"):
        Experiment.from_dict(leaf_spine)
    data = raw(switches="bridge")
    data["routing"] = "ecmp"
    with pytest.raises(ConfigError, match="routing ecmp needs routers"):
        Experiment.from_dict(data)
    bmv2 = raw(switches="bridge")
    bmv2["run"]["dataplane"] = "bmv2"
    with pytest.raises(ConfigError, match=r"^run\.emulation\.switches: bridge: only on the linux"):
        Experiment.from_dict(bmv2)

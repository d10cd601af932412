"""The builder writes what an experiment file holds and validates it with the config package:
same rules, same defaults, errors naming the path."""

import inspect

import pytest

from mn_harness import ConfigError, ExperimentBuilder
from mn_harness.api.builder import as_experiment
from mn_harness.cc.spec import CCSpec
from mn_harness.config import Experiment, load_experiment
from tests.helpers import TOPOLOGIES, small_demo


def dumbbell() -> ExperimentBuilder:
    exp = ExperimentBuilder("py")
    h1, h2, h3, h4 = exp.add_hosts("h1", "h2", "h3", "h4")
    s1, s2 = exp.add_switches("s1", "s2")
    exp.link_defaults(bw="1Gbit", queue=100)
    exp.add_link(h1, s1)
    exp.add_link(h2, s1)
    assert exp.add_link(s1, s2, bw="500Mbit") == "s1-s2"
    exp.add_link(s2, h3)
    exp.add_link(s2, h4)
    exp.add_job("job1", [h1, h3], bytes_per_iteration="25MB", compute="300ms", iterations=30)
    exp.add_job("job2", [h2, h4], bytes_per_iteration="25MB", compute="300ms", iterations=30,
                start_offset="20ms", cc={"name": "mltcp-reno", "slope": 2})
    exp.set_run(dataplane="linux")
    return exp


def test_the_dumbbell_builds_like_the_shipped_file():
    built = dumbbell().build()
    shipped = load_experiment(TOPOLOGIES / "dumbbell-2jobs.yaml")
    assert built.hosts == shipped.hosts and built.switch_names == shipped.switch_names
    assert [(link.a, link.b) for link in built.links] == [(link.a, link.b) for link in shipped.links]
    assert built.links[2].bw_bps == 500e6 and built.links[0].queue_packets == 100
    assert built.jobs[1].cc == CCSpec("mltcp-reno", slope=2.0).for_compute(0.3)  # its idle gap from compute
    assert built.jobs[1].start_offset_s == 0.02
    assert built.jobs[0].cc.name == "cubic"  # the schema's default, not the builder's
    assert built.run.dataplane == "linux"


def test_a_bad_job_value_fails_where_it_is_added_naming_the_path():
    exp = dumbbell()
    with pytest.raises(ConfigError) as err:
        exp.add_job("job3", ["h1", "h2"], bytes_per_iteration="25Mb", compute="1ms", iterations=1)
    assert err.value.path == "jobs[2].bytes_per_iteration" and "in bits" in str(err.value)
    with pytest.raises(ConfigError, match=r"^jobs\[2\]\.cc\.slope: "):
        exp.add_job("job3", ["h1", "h2"], bytes_per_iteration="1MB", compute="1ms", iterations=1,
                    cc={"name": "reno", "slope": 2})


def test_whole_experiment_rules_fail_at_build_naming_the_path():
    exp = dumbbell()
    exp.add_job("job3", ["h1", "h9"], bytes_per_iteration="1MB", compute="1ms", iterations=1)
    with pytest.raises(ConfigError, match=r"^jobs\[2\]\.workers\[1\]: unknown host 'h9'"):
        exp.build()
    exp = dumbbell()
    exp.add_link("h1", "s2")
    with pytest.raises(ConfigError, match=r"^hosts\[0\]: host 'h1' has 2 links"):
        exp.build()
    with pytest.raises(ConfigError, match=r"^run\.dataplane: unknown data plane"):
        dumbbell().set_run(dataplane="ovs")


def test_other_schema_keys_pass_through_and_unknown_ones_are_the_loaders_error():
    exp = dumbbell()
    exp.set_run(throughput_bin="5ms", gso_max_segs=1)
    assert exp.build().run.gso_max_segs == 1
    with pytest.raises(ConfigError, match=r"^jobs\[2\]\.priority: unknown key"):
        exp.add_job("job3", ["h1", "h2"], bytes_per_iteration="1MB", compute="1ms", iterations=1, priority=1)
    with pytest.raises(ConfigError, match=r"^switches\[2\]\.colour: unknown key"):
        exp.add_switch("s3", colour="red")


@pytest.mark.parametrize("method, path", [("add_job", "jobs[0]"), ("set_run", "run"),
                                          ("add_switch", "switches[0]"), ("add_link", "links[0]")])
def test_every_typed_keyword_is_a_key_of_the_schema(method, path):
    """The builder's keywords are a convenience over the schema, never a copy that drifts:
    each is accepted by the config package (only an unknown key's error is about the key)."""
    params = [p for p in inspect.signature(getattr(ExperimentBuilder, method)).parameters.values()
              if p.kind is inspect.Parameter.KEYWORD_ONLY]
    for param in params:
        raw = small_demo()
        target = {"add_job": raw["jobs"][0], "set_run": raw["run"], "add_link": raw["links"][0]}.get(method)
        if method == "add_switch":
            raw["switches"][0] = target = {"name": "s1"}
        assert target is not None
        target[param.name] = {"cc": "reno", "inc": {}, "program": "ecn_telemetry"}.get(param.name, "x")
        try:
            Experiment.from_dict(raw)
        except ConfigError as exc:
            assert "unknown key" not in exc.detail, (param.name, str(exc))


def test_from_file_set_and_set_cc_edit_the_file_form():
    exp = ExperimentBuilder.from_file(TOPOLOGIES / "dumbbell-2jobs.yaml")
    exp.set("links[2].bw", "100Mbit").set("jobs[0].iterations", 3).set_cc("mltcp-cubic")
    built = exp.build()
    assert built.links[2].bw_bps == 100e6 and built.jobs[0].iterations == 3
    assert {job.cc.name for job in built.jobs} == {"mltcp-cubic"}
    with pytest.raises(ConfigError, match=r"^--set: config path 'jobs\[5\]\.compute'"):
        exp.set("jobs[5].compute", "1ms")
    again = ExperimentBuilder.from_experiment(built).build()
    assert again == built
    assert as_experiment(TOPOLOGIES / "dumbbell-2jobs.yaml").name == "dumbbell-2jobs"

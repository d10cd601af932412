"""YAML for inc_allreduce: `inc: {slots, scale}` options and the one-aggregation-switch check,
each rejection one line naming the YAML path."""

import copy

import pytest

from mn_harness.config import ConfigError, Experiment

BASE = {
    "hosts": ["h1", "h2", "h3", "h4"],
    "switches": [{"name": "s1", "program": "aggregation"}, "s2"],
    "link_defaults": {"bw": "20Mbit"},
    "links": [{"endpoints": ["h1", "s1"]}, {"endpoints": ["h2", "s1"]},
              {"endpoints": ["h3", "s1"]}, {"endpoints": ["s1", "s2"]},
              {"endpoints": ["h4", "s2"]}],
    "jobs": [{"name": "a", "workers": ["h1", "h2", "h3"], "collective": "inc_allreduce",
              "bytes_per_iteration": "64KB", "compute": "10ms", "iterations": 2}],
    "run": {"dataplane": "bmv2"},
}


def build(mutate=None):
    raw = copy.deepcopy(BASE)
    if mutate:
        mutate(raw)
    return Experiment.from_dict(raw)


def rejects(mutate, path, words):
    with pytest.raises(ConfigError) as info:
        build(mutate)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{path}: ") and words in msg, msg


def test_defaults_and_options():
    job = build().jobs[0]
    assert job.collective == "inc_allreduce" and job.inc.slots == 32 and job.inc.scale == 65536
    job = build(lambda r: r["jobs"][0].update(inc={"slots": 8, "scale": 1000})).jobs[0]
    assert (job.inc.slots, job.inc.scale) == (8, 1000.0)
    assert build(lambda r: r["run"].update(dataplane="auto")).jobs[0].inc is not None


def test_ring_jobs_have_no_inc_options():
    def ring(r):
        r["jobs"][0]["collective"] = "ring_allreduce"
    assert build(ring).jobs[0].inc is None
    rejects(lambda r: (ring(r), r["jobs"][0].update(inc={"slots": 4})), "jobs[0].inc",
            "only for collective: inc_allreduce")


@pytest.mark.parametrize("inc,path,words", [
    ({"slots": 0}, "jobs[0].inc.slots", "positive integer"),
    ({"slots": 5000}, "jobs[0].inc.slots", "at most 1024"),
    ({"scale": -1}, "jobs[0].inc.scale", "number > 0"),
    ({"scale": "big"}, "jobs[0].inc.scale", "number > 0"),
    ({"window": 3}, "jobs[0].inc.window", "unknown key"),
])
def test_bad_inc_options(inc, path, words):
    rejects(lambda r: r["jobs"][0].update(inc=inc), path, words)


MSG = "inc_allreduce needs all workers on one aggregation switch (bmv2 data plane, program: aggregation)"


def test_workers_on_two_switches():
    rejects(lambda r: r["jobs"][0].update(workers=["h1", "h4"]), "jobs[0].collective", MSG)


def test_switch_without_aggregation_program():
    rejects(lambda r: r.update(switches=["s1", "s2"]), "jobs[0].collective", MSG)


def test_linux_data_plane():
    rejects(lambda r: r["run"].update(dataplane="linux"), "jobs[0].collective", MSG)


def test_slot_pool_shared_by_jobs():
    def two(r):
        r["jobs"][0].update(workers=["h1", "h2"], inc={"slots": 600})
        r["jobs"].append({"name": "b", "workers": ["h3", "h4"], "bytes_per_iteration": "1KB",
                          "compute": "1ms", "iterations": 1})
    assert build(two).jobs[1].inc is None
    def two_inc(r):
        r["jobs"][0].update(workers=["h1"], inc={"slots": 600})
        r["jobs"][0]["workers"] = ["h1", "h2"]
        r["hosts"].append("h5")
        r["links"].append({"endpoints": ["h5", "s1"]})
        r["jobs"].append({"name": "b", "workers": ["h3", "h5"], "collective": "inc_allreduce",
                          "inc": {"slots": 600}, "bytes_per_iteration": "1KB",
                          "compute": "1ms", "iterations": 1})
    rejects(two_inc, "jobs[1].inc.slots", "need 1200 slots, the switch has 1024")

"""Limits the run would otherwise hit only after the namespaces are built are checked by
`validate`, in one line naming the YAML path."""

import pytest

from mn_harness.config import ConfigError, load_experiment_dict
from mn_harness.p4.limits import AGG_MAX_WORKERS, MAX_JOBS, MAX_PORTS, NO_MARKING


def star(n_hosts: int, switch="s1", jobs=None, dataplane="linux", program=None, **switch_opts) -> dict:
    hosts = [f"h{i}" for i in range(n_hosts)]
    sw = {"name": switch, **({"program": program} if program else {}), **switch_opts}
    return {
        "hosts": hosts, "switches": [sw], "link_defaults": {"bw": "10Mbit"},
        "links": [{"endpoints": [h, switch]} for h in hosts],
        "jobs": jobs or [{"name": "j", "workers": hosts[:2], "bytes_per_iteration": "1MB",
                          "compute": "10ms", "iterations": 1}],
        "run": {"dataplane": dataplane},
    }


def refused(raw, path, words):
    with pytest.raises(ConfigError) as info:
        load_experiment_dict(raw)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and words in message and "\n" not in message, message


def test_missing_p4_program_is_a_validate_error():
    refused(star(2, program="ecn_telemtry"), "switches[0].program", "no P4 program 'ecn_telemtry'")
    assert load_experiment_dict(star(2, program="aggregation")).switches[0].program == "aggregation"


def test_ecn_threshold_fits_the_p4_queue_depth_field():
    refused(star(2, ecn_threshold=NO_MARKING), "switches[0].ecn_threshold", "at most")


def test_ports_per_switch_on_bmv2():
    load_experiment_dict(star(MAX_PORTS - 1, dataplane="bmv2"))
    refused(star(MAX_PORTS, dataplane="bmv2"), "switches[0]", f"ports 1..{MAX_PORTS - 1}")
    load_experiment_dict(star(MAX_PORTS))  # the Linux data plane has no such limit
    with pytest.raises(ConfigError, match=f"ports 1..{MAX_PORTS - 1}"):
        load_experiment_dict(star(MAX_PORTS)).with_run(dataplane="bmv2")


def test_jobs_told_apart_on_bmv2():
    n = 2 * MAX_JOBS
    jobs = [{"name": f"j{i}", "workers": [f"h{2 * i}", f"h{2 * i + 1}"], "bytes_per_iteration": "1KB",
             "compute": "1ms", "iterations": 1} for i in range(MAX_JOBS)]
    raw = {"hosts": [f"h{i}" for i in range(n)], "switches": [f"s{i}" for i in range(n // 16)],
           "link_defaults": {"bw": "1Gbit"},
           "links": [{"endpoints": [f"h{i}", f"s{i // 16}"]} for i in range(n)]
           + [{"endpoints": [f"s{i}", f"s{i + 1}"]} for i in range(n // 16 - 1)],
           "jobs": jobs, "run": {"dataplane": "bmv2"}}
    refused(raw, "jobs", f"at most {MAX_JOBS - 1}")
    raw["jobs"] = jobs[:-1]
    load_experiment_dict(raw)


def test_aggregation_workers_fit_the_bitmap():
    n = AGG_MAX_WORKERS + 1
    job = {"name": "j", "workers": [f"h{i}" for i in range(n)], "collective": "inc_allreduce",
           "bytes_per_iteration": "64KB", "compute": "10ms", "iterations": 1}
    raw = star(n, jobs=[job], dataplane="bmv2", program="aggregation")
    refused(raw, "jobs[0].workers", f"at most {AGG_MAX_WORKERS}")


def test_interface_names_fit_ifnamsiz():
    refused(star(100, switch="abcdefghi"), "switches[0]", "longer than 15 characters")

"""The scale rule keeps a preset's iteration time T and communication fraction a (within 1%); it
is the step after loading, and the jobs layer refuses a job before it."""

import pytest

from mn_harness.config import Experiment
from mn_harness.config.presets import PRESETS
from mn_harness.jobs.ideal import ideal_iteration_s
from mn_harness.jobs.program import job_program
from mn_harness.jobs.scaling import apply_scaling
from mn_harness.jobs.specs import worker_specs
from mn_harness.network.plan import NetworkPlan


def dumbbell(access: str, core: str, job: dict) -> dict:
    hosts = ["h1", "h2", "h3", "h4"]
    links = [{"endpoints": ["h1", "s1"]}, {"endpoints": ["h2", "s1"]}, {"endpoints": ["s1", "s2"], "bw": core},
             {"endpoints": ["s2", "h3"]}, {"endpoints": ["s2", "h4"]}]
    return {"experiment": "scale", "hosts": hosts, "switches": ["s1", "s2"], "link_defaults": {"bw": access},
            "links": links, "jobs": [{"name": "j", "iterations": 2, **job}]}


def real_fraction(params: int, compute_s: float, real_bps: float, factor: float) -> float:
    comm = factor * 4 * params * 8 / real_bps
    return comm / (comm + compute_s)


@pytest.mark.parametrize("model", sorted(PRESETS))
@pytest.mark.parametrize("access,core", [("1Gbit", "1Gbit"), ("10Gbit", "1Gbit"), ("100Mbit", "1Gbit")])
@pytest.mark.parametrize("collective,workers,factor", [("ring_allreduce", ["h1", "h3"], 1.0),
                                                      ("ring_allreduce", ["h1", "h3", "h2", "h4"], 3.0),
                                                      ("tree_allreduce", ["h1", "h3"], 1.0)])
def test_scaled_preset_keeps_its_communication_fraction(model, access, core, collective, workers, factor):
    job = {"model": model, "workers": workers, "collective": collective, "scale": {"real_link": "100Gbit"}}
    if PRESETS[model].compute_s is None:
        job["compute"] = "500ms"
    exp = apply_scaling(Experiment.from_dict(dumbbell(access, core, job)))
    j = exp.jobs[0]
    # on the real cluster every link runs at 100 Gbit/s; the busiest link carries `factor` * S:
    # on 2 hosts S; the ring h1 h3 h2 h4 crosses the core twice per direction, 2 * 2(n-1)/n * S
    a = real_fraction(PRESETS[model].parameters, j.compute_s, 100e9, factor)
    assert j.scaled.comm_fraction == pytest.approx(a, rel=0.01)
    ideal, _ = ideal_iteration_s(j, NetworkPlan(exp))
    emulated = (ideal - j.compute_s) / ideal
    assert emulated == pytest.approx(a, rel=0.01)
    assert j.scaled.real_bytes_per_iteration == 4 * PRESETS[model].parameters
    assert j.bytes_per_iteration < j.scaled.real_bytes_per_iteration


def test_uniform_links_scale_bytes_by_the_rate_ratio():
    exp = apply_scaling(Experiment.from_dict(dumbbell("1Gbit", "1Gbit", {"model": "resnet50", "workers": ["h1", "h3"],
                                                                         "scale": {"real_link": "100Gbit"}})))
    assert exp.jobs[0].bytes_per_iteration == round(4 * 25_557_032 / 100)
    assert exp.jobs[0].scaled.emulated_link_bps == 1e9
    assert exp.to_dict()["jobs"][0]["scaled"]["bytes_per_iteration"] == exp.jobs[0].bytes_per_iteration


def test_loading_records_the_rule_and_the_step_applies_it_once(tmp_path):
    loaded = Experiment.from_dict(dumbbell("1Gbit", "1Gbit", {"model": "resnet50", "workers": ["h1", "h3"],
                                                              "scale": {"real_link": "100Gbit"}}))
    job = loaded.jobs[0]
    assert job.unscaled and job.scaled is None and job.bytes_per_iteration == 4 * 25_557_032
    # the jobs layer will not run or time the real cluster's bytes
    with pytest.raises(ValueError, match="scale rule is not applied"):
        job_program(job)
    with pytest.raises(ValueError, match="scale rule is not applied"):
        worker_specs(loaded, NetworkPlan(loaded), tmp_path, {"j": "cubic"})
    scaled = apply_scaling(loaded)
    assert not scaled.jobs[0].unscaled and scaled.jobs[0].bytes_per_iteration < job.bytes_per_iteration
    assert apply_scaling(scaled) is scaled  # nothing left to apply
    plain = Experiment.from_dict(dumbbell("1Gbit", "1Gbit", {"workers": ["h1", "h3"], "bytes_per_iteration": "1MB",
                                                             "compute": "10ms"}))
    assert apply_scaling(plain) is plain

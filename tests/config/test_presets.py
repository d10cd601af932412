"""Model presets: parameters -> fp32 gradient bytes, compute where a source gives it."""

import pytest

from mn_harness.config import ConfigError, Experiment
from mn_harness.config.presets import PRESETS
from tests.config.test_workload import BASE


def job_with(**fields) -> dict:
    raw = {**BASE, "jobs": [{"name": "j", "workers": ["h1", "h2"], "iterations": 2, **fields}]}
    return raw


def test_every_preset_has_a_source_and_gradient_bytes():
    assert set(PRESETS) == {"resnet50", "vgg16", "bert-large", "gpt2-small", "gpt2-xl"}
    for preset in PRESETS.values():
        assert preset.source and preset.measured_on and preset.parameters > 0
    assert PRESETS["resnet50"].parameters == 25_557_032 and PRESETS["vgg16"].parameters == 138_357_544
    job = Experiment.from_dict(job_with(model="resnet50")).jobs[0]
    assert job.bytes_per_iteration == 4 * 25_557_032
    assert job.compute_s == pytest.approx(0.104) and job.model.name == "resnet50"


def test_compute_overrides_the_preset_and_is_required_without_a_known_time():
    job = Experiment.from_dict(job_with(model="vgg16", compute="10ms")).jobs[0]
    assert job.compute_s == pytest.approx(0.01)
    with pytest.raises(ConfigError, match=r"^jobs\[0\]\.compute: .*gpt2-xl has no known compute time"):
        Experiment.from_dict(job_with(model="gpt2-xl"))
    assert Experiment.from_dict(job_with(model="gpt2-xl", compute="1s")).jobs[0].bytes_per_iteration == 6_232_000_000


def test_unknown_model_and_bad_scale_are_one_line():
    with pytest.raises(ConfigError, match=r"^jobs\[0\]\.model: unknown model 'resnet18' \(known: resnet50"):
        Experiment.from_dict(job_with(model="resnet18"))
    with pytest.raises(ConfigError, match=r"^jobs\[0\]\.scale\.real_link: "):
        Experiment.from_dict(job_with(model="resnet50", scale={"real_link": "fast"}))
    with pytest.raises(ConfigError, match=r"^jobs\[0\]\.scale\.speed: unknown key"):
        Experiment.from_dict(job_with(model="resnet50", scale={"speed": 1}))

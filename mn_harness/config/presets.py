"""Model presets (`model: resnet50`) and the rule that scales a job down to the emulated link.

A preset gives the parameter count (fp32 gradients: 4 bytes each) and, where a public source
gives it, the per-iteration compute time on a named GPU and batch. Each number's source is in
docs/workloads.md; where no source gives a number (GPT-2 XL's step time) the preset says so and
the job must set `compute:` itself — the harness does not guess.

Scaling (`scale: {real_link: 100Gbit}`): the real job spends a = T_comm / T of its iteration
time T communicating over `real_link`. On an emulated link of rate C' the same bytes would take
far longer, so the scaling keeps T (compute unchanged) and a, i.e. the communication time:
bytes become a * T * C' / 8 — every communication phase's bytes times (its communication time
on a network whose every link runs at `real_link`) / (its time on the emulated network). On
uniform links that is S * C' / real_link. The times come from the network plan's link loads
(mn_harness/jobs/scaling.py applies the rule once the network plan exists)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mn_harness.config.workload import _keys
from mn_harness.errors import ConfigError
from mn_harness.units import parse_bandwidth


@dataclass(frozen=True)
class Preset:
    name: str
    parameters: int
    compute_s: float | None  # None: no public per-step time found; the job must give compute
    measured_on: str
    source: str


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("resnet50", 25_557_032, 0.104, "A100-80GB, AMP, batch 256 (2470 img/s)",
           "parameters: torchvision models/resnet.py; time: NVIDIA DeepLearningExamples "
           "PyTorch/Classification/ConvNets/resnet50v1.5 README"),
    Preset("vgg16", 138_357_544, 0.253, "RTX 2080, batch 32 (126 img/s)",
           "parameters: torchvision models/vgg.py; time: a public RTX 2080 benchmark"),
    Preset("bert-large", 340_000_000, 0.373, "V100-32GB, seq 128, AMP, batch 64 (171.5 seq/s)",
           "parameters: google-research/bert README (~340M); time: NVIDIA DeepLearningExamples "
           "PyTorch/LanguageModeling/BERT README"),
    Preset("gpt2-small", 124_000_000, 0.560, "8x A100, gradient accumulation 5",
           "parameters and time: karpathy/nanoGPT README"),
    Preset("gpt2-xl", 1_558_000_000, None, "(no public per-step time found: give compute)",
           "parameters: karpathy/nanoGPT model.py"),
)}


def preset(name: Any, path: str) -> Preset:
    if name not in PRESETS:
        raise ConfigError(path, f"unknown model {name!r} (known: {', '.join(PRESETS)})")
    return PRESETS[name]


@dataclass(frozen=True)
class ScaleConfig:
    real_link_bps: float

    @classmethod
    def from_yaml(cls, raw: Any, path: str) -> ScaleConfig:
        _keys(raw, path, {"real_link"}, ("real_link",))
        return cls(parse_bandwidth(raw["real_link"], f"{path}.real_link"))


@dataclass(frozen=True)
class ScaledWorkload:
    """What the scaling did, recorded in config.yaml and summary.json."""

    real_link_bps: float
    emulated_link_bps: float  # the rate that bounds the job's largest phase on the emulated network
    real_bytes_per_iteration: int
    bytes_per_iteration: int  # after scaling
    comm_fraction: float  # a = communication time / (compute + communication time), kept

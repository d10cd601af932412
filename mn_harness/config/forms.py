"""The three ways a job's YAML says what an iteration does, turned into one phase list.

* `phases:` — the list (config.workload.parse_phases);
* the short form — one of `bytes_per_iteration`, `model_params` or `model:` (a preset,
  config.presets) with `compute` and `collective`: [compute, collective], optionally with
  DDP-style `overlap`;
* `trace:` — a Chakra execution trace (mn_harness/chakra), its path relative to the experiment
  file.

`scale:` (config.presets) may go with any of them; it is applied once the network plan is
known (mn_harness/jobs/scaling.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mn_harness import collectives
from mn_harness.config.presets import Preset, ScaleConfig, preset
from mn_harness.config.workload import (
    ComputeSpec,
    Phase,
    check_phases,
    parse_model_params,
    parse_overlap,
    parse_phases,
    two_phase,
)
from mn_harness.errors import ConfigError
from mn_harness.units import parse_size

FORMS = ("bytes_per_iteration", "model_params", "model", "phases", "trace")
SHORT_ONLY = ("compute", "collective", "overlap")
DEFAULT_COLLECTIVE = "ring_allreduce"
KEYS = set(FORMS) | set(SHORT_ONLY) | {"scale"}


@dataclass(frozen=True)
class Iteration:
    phases: tuple[Phase, ...]
    model: Preset | None = None
    scale: ScaleConfig | None = None
    trace: str | None = None


def parse_iteration(raw: Mapping, path: str, workers: tuple[str, ...], servers: tuple[str, ...],
                    base_dir: Path | None = None) -> Iteration:
    given = [k for k in FORMS if k in raw]
    if len(given) != 1:
        where = given[0] if given else "bytes_per_iteration"
        raise ConfigError(f"{path}.{where}", "give exactly one of bytes_per_iteration, model_params, "
                          "model, phases or trace")
    form = given[0]
    scale = ScaleConfig.from_yaml(raw["scale"], f"{path}.scale") if "scale" in raw else None
    if form in ("phases", "trace"):
        for key in SHORT_ONLY:
            if key in raw:
                raise ConfigError(f"{path}.{key}", f"not with {form} (a phase says it)")
        if form == "phases":
            return Iteration(parse_phases(raw["phases"], f"{path}.phases", workers, servers), scale=scale)
        return _trace(raw["trace"], f"{path}.trace", workers, servers, base_dir, scale)
    return _short_form(raw, path, form, workers, servers, scale)


def _short_form(raw: Mapping, path: str, form: str, workers: tuple[str, ...], servers: tuple[str, ...],
                scale: ScaleConfig | None) -> Iteration:
    collective = raw.get("collective", DEFAULT_COLLECTIVE)
    record = collectives.find(collective)
    if record is None or not record.short_form:
        hint = f" ({collective}: write it as a phase)" if record is not None and record.phase else ""
        raise ConfigError(f"{path}.collective", f"unknown collective {collective!r}{hint} "
                          f"(known: {', '.join(collectives.names(short_form=True))})")
    model = None
    if form == "bytes_per_iteration":
        nbytes = parse_size(raw["bytes_per_iteration"], f"{path}.bytes_per_iteration")
    elif form == "model_params":
        nbytes = parse_model_params(raw["model_params"], f"{path}.model_params")
    else:
        model = preset(raw["model"], f"{path}.model")
        nbytes = 4 * model.parameters  # fp32 gradients
    if "compute" in raw:
        compute = ComputeSpec.from_yaml(raw["compute"], f"{path}.compute")
    elif model is not None and model.compute_s is not None:
        compute = ComputeSpec(model.compute_s)
    else:
        why = f" (model {model.name} has no known compute time)" if model is not None else ""
        raise ConfigError(f"{path}.compute", f"required key is missing{why}")
    overlap = parse_overlap(raw["overlap"], f"{path}.overlap", record) if "overlap" in raw else None
    phases = two_phase(workers, servers, compute, collective, nbytes, overlap)
    check_phases(phases, path, servers)
    return Iteration(phases, model=model, scale=scale)


def _trace(raw: object, path: str, workers: tuple[str, ...], servers: tuple[str, ...],
           base_dir: Path | None, scale: ScaleConfig | None) -> Iteration:
    from mn_harness.chakra.phases import phases_from_trace  # only jobs that use a trace pay for it

    if not isinstance(raw, str) or not raw:
        raise ConfigError(path, f"expected the path of a Chakra trace file, got {raw!r}")
    file = Path(raw) if Path(raw).is_absolute() or base_dir is None else base_dir / raw
    phases = phases_from_trace(file, path, workers)
    check_phases(phases, path, servers)
    return Iteration(phases, scale=scale, trace=str(file))

"""A Chakra trace as a job's phase list (placeholder until the decoder lands)."""

from __future__ import annotations

from pathlib import Path

from mn_harness.config.workload import Phase
from mn_harness.errors import ConfigError


def phases_from_trace(path: Path, yaml_path: str, workers: tuple[str, ...]) -> tuple[Phase, ...]:
    raise ConfigError(yaml_path, "Chakra traces are not supported yet")

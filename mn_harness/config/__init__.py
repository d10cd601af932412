"""Experiment configuration: YAML → typed, frozen objects, validated once."""

from mn_harness.config.experiment import Experiment, load_experiment, load_experiment_dict
from mn_harness.config.model import JobConfig, LinkConfig, RunConfig, SwitchConfig
from mn_harness.errors import ConfigError

__all__ = ["ConfigError", "Experiment", "JobConfig", "LinkConfig", "RunConfig", "SwitchConfig",
           "load_experiment", "load_experiment_dict"]

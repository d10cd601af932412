"""mn-harness: emulate several DNN training jobs sharing a network, on one Linux machine.

`import mn_harness` is light (no Mininet, grpc or matplotlib; the worker that runs in every
emulated host imports this package too): the Python API's names load on first use.

    import mn_harness as mh
    exp = mh.ExperimentBuilder.from_file("topologies/dumbbell-2jobs.yaml").set("jobs[0].iterations", 10)
    results = mh.run(exp, cc="mltcp-reno")        # as root: sudo .venv/bin/python script.py
    print(results.metrics[["job", "mean_iter_s", "slowdown_mean"]])

docs/python-api.md is the guide."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

# name -> module that defines it (loaded when the name is first used)
_EXPORTS = {
    "ExperimentBuilder": "mn_harness.api.builder",
    "Results": "mn_harness.api.results",
    "run": "mn_harness.api",
    "network": "mn_harness.api",
    "load": "mn_harness.results.frames",
    "Experiment": "mn_harness.config",
    "load_experiment": "mn_harness.config",
    "ConfigError": "mn_harness.errors",
    "HarnessError": "mn_harness.errors",
    "RunError": "mn_harness.errors",
    "UsageError": "mn_harness.errors",
    "JobError": "mn_harness.jobs.errors",
}

if TYPE_CHECKING:
    from mn_harness.api import network, run
    from mn_harness.api.builder import ExperimentBuilder
    from mn_harness.api.results import Results
    from mn_harness.config import Experiment, load_experiment
    from mn_harness.errors import ConfigError, HarnessError, RunError, UsageError
    from mn_harness.jobs.errors import JobError
    from mn_harness.results.frames import load


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mn_harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = ["ConfigError", "Experiment", "ExperimentBuilder", "HarnessError", "JobError", "Results",
           "RunError", "UsageError", "__version__", "load", "load_experiment", "network", "run"]

"""Experiments from Python, validated exactly like an experiment file.

    exp = ExperimentBuilder("two-jobs")
    h1, h2, h3, h4 = exp.add_hosts("h1", "h2", "h3", "h4")
    s1, s2 = exp.add_switches("s1", "s2")
    exp.link_defaults(bw="1Gbit", queue=100)
    for h in (h1, h2): exp.add_link(h, s1)
    exp.add_link(s1, s2)
    for h in (h3, h4): exp.add_link(s2, h)
    exp.add_job("job1", [h1, h3], bytes_per_iteration="25MB", compute="300ms", iterations=30)
    exp.set_run(dataplane="linux")
    experiment = exp.build()          # mn_harness.config.Experiment, or ConfigError "jobs[0].compute: ..."

The builder does not know the schema: it writes the same mapping an experiment file holds (keys
as in YAML, values as in YAML: unit strings or numbers in SI base units) and hands it to the
config package's from_dict, so every rule, default and error message is the file's, and every
error names the path (`jobs[1].cc.slope`, `links[2].bw`) in the file's terms. The keyword
arguments are the common keys, typed; `**more` passes any other key of the schema (keys added
later work at once, and an unknown key is the loader's one-line error). A job or switch is
checked as it is added (the error points at the line that added it); the whole experiment
(references, connectivity, limits) when it is built."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mn_harness.cc.spec import CCSpec
from mn_harness.config import Experiment, JobConfig, RunConfig, SwitchConfig
from mn_harness.config.dump import cc_to_raw, experiment_to_raw
from mn_harness.config.loader import default_name, read_experiment_file
from mn_harness.config.overrides import apply_path
from mn_harness.jobs.scaling import apply_scaling

Number = int | float
Quantity = str | int | float  # "25MB", "300ms", "1Gbit", or a number in SI base units
CCValue = str | Mapping[str, Any] | CCSpec


def _given(**keys: Any) -> dict[str, Any]:
    """The keys that were given (None = not given: the schema's default applies)."""
    return {k: v for k, v in keys.items() if v is not None}


def _cc(value: CCValue | None) -> Any:
    if isinstance(value, CCSpec):
        return cc_to_raw(value)
    return dict(value) if isinstance(value, Mapping) else value


class ExperimentBuilder:
    def __init__(self, name: str = "experiment", description: str | None = None):
        self.raw: dict[str, Any] = {"experiment": name, "hosts": [], "switches": [], "links": [],
                                    "jobs": []}
        if description is not None:
            self.raw["description"] = description

    @classmethod
    def from_file(cls, path: str | Path) -> ExperimentBuilder:
        """Start from an experiment file (read by the one reader, mn_harness.config.loader)."""
        raw = read_experiment_file(path)
        raw.setdefault("experiment", default_name(path))
        return cls.from_raw(raw)

    @classmethod
    def from_experiment(cls, experiment: Experiment) -> ExperimentBuilder:
        """Start from a resolved experiment (e.g. a results folder's config)."""
        return cls.from_raw(experiment_to_raw(experiment))

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> ExperimentBuilder:
        builder = cls.__new__(cls)
        builder.raw = copy.deepcopy(dict(raw))
        for key in ("hosts", "switches", "links", "jobs"):
            builder.raw.setdefault(key, [])
        return builder

    def copy(self) -> ExperimentBuilder:
        return ExperimentBuilder.from_raw(self.raw)

    # -- nodes and links ---------------------------------------------------------------------
    def add_host(self, name: str) -> str:
        self.raw["hosts"].append(name)
        return name

    def add_hosts(self, *names: str) -> tuple[str, ...]:
        return tuple(self.add_host(n) for n in names)

    def add_switch(self, name: str, *, program: str | None = None, ecn_threshold: int | None = None,
                   **more: Any) -> str:
        keys = _given(program=program, ecn_threshold=ecn_threshold, **more)
        entry: Any = {"name": name, **keys} if keys else name
        SwitchConfig.from_dict(entry, f"switches[{len(self.raw['switches'])}]")
        self.raw["switches"].append(entry)
        return name

    def add_switches(self, *names: str) -> tuple[str, ...]:
        return tuple(self.add_switch(n) for n in names)

    def link_defaults(self, *, bw: Quantity | None = None, queue: int | None = None,
                      delay: Quantity | None = None, **more: Any) -> ExperimentBuilder:
        self.raw.setdefault("link_defaults", {}).update(_given(bw=bw, queue=queue, delay=delay, **more))
        return self

    def add_link(self, a: str, b: str, *, bw: Quantity | None = None, queue: int | None = None,
                 delay: Quantity | None = None, **more: Any) -> str:
        """Returns the link's name, `a-b` (what set_link_rate and --pcap take)."""
        self.raw["links"].append({"endpoints": [a, b], **_given(bw=bw, queue=queue, delay=delay, **more)})
        return f"{a}-{b}"

    # -- jobs and run options ----------------------------------------------------------------
    def add_job(self, name: str, workers: Sequence[str], *, bytes_per_iteration: Quantity | None = None,
                model_params: Quantity | None = None, compute: Quantity | None = None,
                iterations: int | None = None, collective: str | None = None,
                start_offset: Quantity | None = None, cc: CCValue | None = None,
                inc: Mapping[str, Any] | None = None, **more: Any) -> str:
        entry = {"name": name, "workers": list(workers),
                 **_given(collective=collective, bytes_per_iteration=bytes_per_iteration,
                          model_params=model_params, compute=compute, iterations=iterations,
                          start_offset=start_offset, cc=_cc(cc), inc=dict(inc) if inc else None, **more)}
        JobConfig.from_dict(entry, f"jobs[{len(self.raw['jobs'])}]")
        self.raw["jobs"].append(entry)
        return name

    def set_run(self, *, dataplane: str | None = None, seed: int | None = None,
                output_dir: str | None = None, slow_start_after_idle: bool | None = None,
                throughput_bin: Quantity | None = None, isolated: bool | None = None,
                timeout: Quantity | None = None, gso_max_segs: int | None = None,
                **more: Any) -> ExperimentBuilder:
        """Run options (the file's `run:`); given keys replace earlier ones."""
        run = {**self.raw.get("run", {}),
               **_given(dataplane=dataplane, seed=seed, output_dir=output_dir,
                        slow_start_after_idle=slow_start_after_idle, throughput_bin=throughput_bin,
                        isolated=isolated, timeout=timeout, gso_max_segs=gso_max_segs, **more)}
        RunConfig.from_dict(run, "run")
        self.raw["run"] = run
        return self

    def set_cc(self, cc: CCValue) -> ExperimentBuilder:
        """Every job's congestion control (the CLI's --cc)."""
        for job in self.raw["jobs"]:
            job["cc"] = _cc(cc)
        return self

    def set(self, path: str, value: Any) -> ExperimentBuilder:
        """One value by its path in the file, as `compare --set` takes it: `jobs[0].compute`,
        `links[2].bw`, `run.seed` (a new last key of an existing mapping is allowed)."""
        self.raw = apply_path(self.raw, path, value, create=True)
        return self

    def build(self) -> Experiment:
        """The validated experiment, its jobs scaled; ConfigError naming the path of the first
        bad value."""
        return apply_scaling(Experiment.from_dict(copy.deepcopy(self.raw), default_name="experiment"))


def as_experiment(what: ExperimentBuilder | Experiment | str | Path) -> Experiment:
    """An experiment, its jobs scaled, from a builder, an experiment (mn_harness.load_experiment
    leaves scale rules to this step) or an experiment file's path."""
    if isinstance(what, ExperimentBuilder):
        return what.build()
    if isinstance(what, Experiment):
        return apply_scaling(what)
    from mn_harness.config import load_experiment

    return apply_scaling(load_experiment(what))

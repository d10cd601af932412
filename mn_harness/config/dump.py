"""The resolved experiment as an experiment file: the inverse of `Experiment.from_dict`.

A results folder's `config.yaml` must be a file `mn-harness run` accepts and that reproduces the
run's resolved configuration: `Experiment.from_dict(experiment_to_raw(e)) == e` for every valid
experiment (tests/config/test_dump.py checks it on every shipped topology and on variants).
So every value is written in a form the loader reads back exactly: a unit string when it
round-trips (`1Gbit`, `300ms`, `25MB`), else the bare number in SI base units (bit/s, bytes,
seconds), which the loader reads as the same float. `link_defaults` and `model_params` are
resolved away (each link has its own bw/queue/delay/mtu; sizes are bytes).

Every dumper names the dataclass fields it writes and `_covers` checks that these are all of
them: a field added to a config dataclass without a line here fails loudly (in the round-trip
tests and at the first run), instead of being silently dropped from config.yaml."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import yaml

from mn_harness.cc.spec import CCSpec
from mn_harness.config.ecn import EcnThreshold
from mn_harness.config.experiment import Experiment
from mn_harness.config.model import IncConfig, JobConfig, LinkConfig, RunConfig, SwitchConfig
from mn_harness.config.servers import servers_to_raw
from mn_harness.config.workload import PHASE_OPTIONS, ComputePhase, ComputeSpec, Phase, StragglerConfig, two_phase
from mn_harness.frames import DEFAULT_MTU
from mn_harness.units import (
    format_bandwidth,
    format_duration,
    format_size,
    parse_bandwidth,
    parse_duration,
    parse_size,
)


def _covers(obj: Any, written: set[str]) -> None:
    missing = {f.name for f in dataclasses.fields(obj)} - written
    if missing:
        raise AssertionError(f"mn_harness.config.dump does not write {type(obj).__name__}."
                             f"{', '.join(sorted(missing))}: add it there (config.yaml must round-trip)")


def _exact(value: float, fmt: Callable[[float], str], parse: Callable[[object, str], float]) -> Any:
    """`fmt(value)` when the loader reads it back as exactly `value`, else the bare number."""
    text = fmt(value)
    try:
        if parse(text, "dump") == value:
            return text
    except ValueError:
        pass
    return int(value) if float(value).is_integer() else value


def bandwidth(bps: float) -> Any:
    return _exact(bps, format_bandwidth, parse_bandwidth)


def duration(seconds: float) -> Any:
    if seconds == 0:
        return 0
    return _exact(seconds, format_duration, parse_duration)


def size(nbytes: int) -> Any:
    return _exact(nbytes, format_size, parse_size)


def cc_to_raw(cc: CCSpec) -> Any:
    """A name, or {name, slope, intercept, idle_gap, restart, adapt, damp, damp_after, calm_by, hold}
    with only the parameters that were set (an idle gap derived from the job is left out: the loader
    derives the same one again, and it follows the compute time if the file is edited)."""
    _covers(cc, {"name", "slope", "intercept", "idle_gap_s", "restart", "adapt", "damp", "damp_after",
                "calm_by", "hold", "idle_gap_derived"})
    params: dict[str, Any] = {k: v for k, v in (("slope", cc.slope), ("intercept", cc.intercept), ("hold", cc.hold))
                              if v is not None}
    if cc.idle_gap_s is not None and not cc.idle_gap_derived:
        params["idle_gap"] = duration(cc.idle_gap_s)
    for key in ("restart", "adapt", "damp", "damp_after", "calm_by"):
        if getattr(cc, key) is not None:
            params[key] = getattr(cc, key)
    return {"name": cc.name, **params} if params else cc.name


def ecn_threshold_to_raw(threshold: EcnThreshold) -> Any:
    """Packets as a bare number, bytes always with a unit (a bare number reads as packets), or
    `off`."""
    _covers(threshold, {"packets", "bytes"})
    if threshold.off:
        return "off"
    if threshold.packets is not None:
        return threshold.packets
    text = size(threshold.bytes or 0)
    return text if isinstance(text, str) else f"{threshold.bytes}B"


def switch_to_raw(switch: SwitchConfig) -> Any:
    _covers(switch, {"name", "program", "ecn_threshold"})
    extra: dict[str, Any] = {"program": switch.program} if switch.program is not None else {}
    if switch.ecn_threshold is not None:
        extra["ecn_threshold"] = ecn_threshold_to_raw(switch.ecn_threshold)
    return {"name": switch.name, **extra} if extra else switch.name


def link_to_raw(link: LinkConfig) -> dict:
    _covers(link, {"a", "b", "bw_bps", "queue_packets", "delay_s", "ecn_threshold", "mtu"})
    raw: dict[str, Any] = {"endpoints": [link.a, link.b], "bw": bandwidth(link.bw_bps),
                           "queue": link.queue_packets}
    if link.mtu != DEFAULT_MTU:
        raw["mtu"] = link.mtu
    if link.delay_s:
        raw["delay"] = duration(link.delay_s)
    if link.ecn_threshold is not None:
        raw["ecn_threshold"] = ecn_threshold_to_raw(link.ecn_threshold)
    return raw


def inc_to_raw(inc: IncConfig) -> dict:
    _covers(inc, {"slots", "scale"})
    return {"slots": inc.slots, "scale": inc.scale}


def compute_to_raw(spec: ComputeSpec) -> Any:
    _covers(spec, {"mean_s", "jitter", "distribution"})
    if spec.jitter == 0 and spec.distribution == "normal":
        return duration(spec.mean_s)
    return {"mean": duration(spec.mean_s), "jitter": spec.jitter, "distribution": spec.distribution}


def phase_to_raw(phase: Phase) -> dict:
    """A resolved phase: explicit participants (a parameter server's servers are the job's),
    the scaled bytes; a trace's waits and non-blocking collectives as their keys."""
    if isinstance(phase, ComputePhase):
        _covers(phase, {"name", "compute", "waits", "kind"})
        raw: dict[str, Any] = {"compute": compute_to_raw(phase.compute), "name": phase.name}
        if phase.waits is not None:
            raw["waits"] = list(phase.waits)
        return raw
    _covers(phase, {"name", "collective", "bytes", "participants", "servers", "overlap", "blocking",
                    "micro_batches", "forward_s", "backward_s", "grad_bytes", "kind"})
    workers = phase.participants[:len(phase.participants) - phase.servers]
    raw = {"collective": phase.collective, "bytes": size(phase.bytes), "name": phase.name,
           "participants": list(workers)}
    if phase.overlap is not None:
        _covers(phase.overlap, {"bucket_bytes", "first_bucket_bytes", "backward"})
        raw["overlap"] = {"bucket": size(phase.overlap.bucket_bytes),
                          "first_bucket": size(phase.overlap.first_bucket_bytes), "backward": phase.overlap.backward}
    if not phase.blocking:
        raw["blocking"] = False
    for key in phase.record.phase_keys:  # its collective's own keys (a root is the first participant)
        if key in PHASE_OPTIONS:
            field, how = PHASE_OPTIONS[key]
            value = getattr(phase, field)
            raw[key] = duration(value) if how == "duration" else value
    return raw


def straggler_to_raw(s: StragglerConfig) -> dict:
    _covers(s, {"ranks", "delay_s", "probability", "slowdown"})
    raw: dict[str, Any] = {"ranks": list(s.ranks)}
    if s.delay_s or s.slowdown == 1.0:
        raw.update(delay=duration(s.delay_s), probability=s.probability)
    if s.slowdown != 1.0:
        raw["slowdown"] = s.slowdown
    return raw


def job_to_raw(job: JobConfig) -> dict:
    """The short form when the job is one (compute, then its collective, no jitter or overlap),
    else the resolved phase list. A preset, an applied scale rule or a trace are resolved away
    (they are in summary.json: `model`, `scaled`, `trace`)."""
    _covers(job, {"name", "workers", "bytes_per_iteration", "compute_s", "iterations", "collective",
                  "start_offset_s", "cc", "inc", "phases", "servers", "stragglers", "model", "scale", "scaled",
                  "trace"})
    raw: dict[str, Any] = {"name": job.name, "workers": list(job.workers)}
    if job.servers:
        raw["servers"] = list(job.servers)
    if job.phases == two_phase(job.workers, job.servers, ComputeSpec(job.compute_s), job.collective,
                               job.bytes_per_iteration):
        raw.update(collective=job.collective, bytes_per_iteration=size(job.bytes_per_iteration),
                   compute=duration(job.compute_s))
    else:
        raw["phases"] = [phase_to_raw(p) for p in job.phases]
    raw.update(iterations=job.iterations, start_offset=duration(job.start_offset_s), cc=cc_to_raw(job.cc))
    if job.unscaled:  # not yet applied: the file keeps the rule, so loading and scaling give the same
        assert job.scale is not None
        raw["scale"] = {"real_link": bandwidth(job.scale.real_link_bps)}
    if job.stragglers:
        raw["stragglers"] = [straggler_to_raw(s) for s in job.stragglers]
    if job.inc is not None:
        raw["inc"] = inc_to_raw(job.inc)
    return raw


def run_to_raw(run: RunConfig) -> dict:
    _covers(run, {"dataplane", "seed", "output_dir", "slow_start_after_idle", "throughput_bin_s",
                  "isolated", "timeout_s", "gso_max_segs", "tcp_ecn", "queue_telemetry", "warmup", "fidelity",
                  "shifts", "emulation"})
    raw: dict[str, Any] = {
        "dataplane": run.dataplane,
        "seed": run.seed,
        "output_dir": run.output_dir,
        "slow_start_after_idle": run.slow_start_after_idle,
        "throughput_bin": duration(run.throughput_bin_s),
        "isolated": run.isolated,
        "gso_max_segs": run.gso_max_segs,
        "tcp_ecn": run.tcp_ecn,
        "queue_telemetry": run.queue_telemetry if isinstance(run.queue_telemetry, bool)
        else list(run.queue_telemetry),
        "warmup": run.warmup,
        "fidelity": run.fidelity.to_yaml(),
        "emulation": run.emulation.to_yaml(),
    }
    if run.timeout_s is not None:
        raw["timeout"] = duration(run.timeout_s)
    if run.shifts.enabled:
        raw["shifts"] = run.shifts.to_yaml()
    return raw


def experiment_to_raw(experiment: Experiment) -> dict:
    """The experiment as the mapping an experiment file holds (plain lists, dicts, str, numbers)."""
    _covers(experiment, {"name", "hosts", "switches", "links", "jobs", "run", "description", "routing", "servers"})
    raw: dict[str, Any] = {"experiment": experiment.name}
    if experiment.description:
        raw["description"] = experiment.description
    raw.update({
        "hosts": list(experiment.hosts),
        "switches": [switch_to_raw(s) for s in experiment.switches],
        "links": [link_to_raw(link) for link in experiment.links],
        "routing": experiment.routing,
        "jobs": [job_to_raw(job) for job in experiment.jobs],
        "run": run_to_raw(experiment.run),
    })
    if experiment.servers:
        raw["servers"] = servers_to_raw(experiment.servers)
    return raw


HEADER = ("# The resolved experiment of this run (mn-harness writes it): a valid experiment file;\n"
          "# `mn-harness run config.yaml` runs the same configuration again.\n")


def experiment_to_yaml(experiment: Experiment) -> str:
    """config.yaml's text: a comment line, then the experiment in the file format."""
    return HEADER + yaml.safe_dump(experiment_to_raw(experiment), sort_keys=False,
                                   default_flow_style=None, width=100)


def complete_raw(raw: dict, default_name: str = "experiment") -> dict:
    """An experiment file's complete configuration, every default written out: what a --set path
    may name besides the file's own fields (config/overrides.py `known`). Raises ConfigError
    where `raw` alone does not validate; `raw` itself is left as it is."""
    return experiment_to_raw(Experiment.from_dict(copy.deepcopy(raw), default_name=default_name))

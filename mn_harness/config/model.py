"""Typed, frozen experiment configuration.

Everything downstream (network, data plane, congestion control, jobs, results) reads these
objects and never the raw YAML, so validation happens once, here, and every error names the
YAML path. Names become Linux interface names (`<node>-eth<N>`, at most 15 characters) and
process arguments, so they are restricted to a safe alphabet; nothing from YAML reaches a shell."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mn_harness import collectives
from mn_harness.cc.spec import CCSpec
from mn_harness.config.forms import KEYS as FORM_KEYS
from mn_harness.config.forms import parse_iteration
from mn_harness.config.presets import Preset, ScaleConfig, ScaledWorkload
from mn_harness.config.workload import (
    CommPhase,
    ComputePhase,
    ComputeSpec,
    Phase,
    StragglerConfig,
    two_phase,
)
from mn_harness.errors import ConfigError
from mn_harness.p4 import find_program, shipped_programs
from mn_harness.p4.limits import INC_MAX_SLOTS, NO_MARKING, QDEPTH_BITS
from mn_harness.units import parse_bandwidth, parse_duration

# `<name>-eth<NN>` must fit IFNAMSIZ-1 = 15 characters.
NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,8}")
EXPERIMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
COLLECTIVES = collectives.NAMES
DATAPLANES = ("auto", "linux", "bmv2")
ROUTINGS = ("shortest", "ecmp")  # network.plan: one shortest path per host pair, or per-flow ECMP
DEFAULT_WARMUP = 2  # iterations, as nccl-tests' -w: connection ramp-up and first-iteration effects


def check_keys(raw: Any, path: str, allowed: set[str], required: frozenset[str] | set[str] = frozenset()) -> None:
    if not isinstance(raw, Mapping):
        raise ConfigError(path, f"expected a mapping, got {type(raw).__name__}")
    for key in raw:
        if key not in allowed:
            raise ConfigError(
                f"{path}.{key}" if path else str(key),
                f"unknown key (allowed: {', '.join(sorted(allowed))})",
            )
    for key in sorted(required):
        if key not in raw:
            raise ConfigError(f"{path}.{key}" if path else key, "required key is missing")


def check_name(value: Any, path: str) -> str:
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise ConfigError(
            path,
            f"{value!r} is not a valid node name (a letter, then up to 8 letters, digits or _;"
            " it becomes part of interface names)",
        )
    return value


def _list(raw: Any, path: str) -> list:
    if not isinstance(raw, list):
        raise ConfigError(path, f"expected a list, got {type(raw).__name__}")
    return raw


def _positive_int(raw: Any, path: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        raise ConfigError(path, f"expected a positive integer, got {raw!r}")
    return raw


@dataclass(frozen=True)
class SwitchConfig:
    name: str
    program: str | None = None  # P4 program for the BMv2 data plane (default ecn_telemetry)
    ecn_threshold: int | None = None  # packets; BMv2 marks CE at or above this queue depth

    @classmethod
    def from_dict(cls, raw: Any, path: str) -> SwitchConfig:
        if isinstance(raw, str):
            return cls(check_name(raw, path))
        check_keys(raw, path, {"name", "program", "ecn_threshold"}, {"name"})
        threshold = raw.get("ecn_threshold")
        if threshold is not None:
            threshold = _positive_int(threshold, f"{path}.ecn_threshold")
            if threshold >= NO_MARKING:
                raise ConfigError(f"{path}.ecn_threshold", f"at most {NO_MARKING - 1} packets "
                                  f"(the P4 queue depth is {QDEPTH_BITS} bits), got {threshold}")
        program = raw.get("program")
        if program is not None:
            if not isinstance(program, str) or not program:
                raise ConfigError(f"{path}.program", f"expected a program name, got {program!r}")
            if find_program(program) is None:
                raise ConfigError(f"{path}.program", f"no P4 program {program!r} (shipped: "
                                  f"{', '.join(shipped_programs())}; or a path to a .p4 file)")
        return cls(check_name(raw["name"], f"{path}.name"), program, threshold)


@dataclass(frozen=True)
class LinkConfig:
    a: str
    b: str
    bw_bps: float
    queue_packets: int
    delay_s: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"

    @classmethod
    def from_dict(cls, raw: Any, path: str, defaults: Mapping) -> LinkConfig:
        check_keys(raw, path, {"endpoints", "bw", "queue", "delay"}, {"endpoints"})
        ends = _list(raw["endpoints"], f"{path}.endpoints")
        if len(ends) != 2:
            raise ConfigError(f"{path}.endpoints", f"a link has 2 endpoints, got {len(ends)}")
        a = check_name(ends[0], f"{path}.endpoints[0]")
        b = check_name(ends[1], f"{path}.endpoints[1]")
        if a == b:
            raise ConfigError(f"{path}.endpoints", f"a link cannot connect {a!r} to itself")
        merged = {**defaults, **raw}
        if "bw" not in merged:
            raise ConfigError(f"{path}.bw", "required key is missing (or set link_defaults.bw)")
        bw = parse_bandwidth(merged["bw"], f"{path}.bw")
        queue = _positive_int(merged.get("queue", 100), f"{path}.queue")
        delay = parse_duration(merged.get("delay", 0), f"{path}.delay")
        return cls(a, b, bw, queue, delay)




@dataclass(frozen=True)
class IncConfig:
    """Options of collective inc_allreduce (mn_harness/worker/inc.py, mn_harness/p4/programs/aggregation.p4)."""
    slots: int = 32  # window: chunks in flight per worker; the switch keeps 2 slots each
    scale: float = 65536.0  # fixed point: gradient value * scale, rounded, saturating at int32

    @classmethod
    def from_dict(cls, raw: Any, path: str) -> IncConfig:
        check_keys(raw, path, {"slots", "scale"})
        slots = _positive_int(raw.get("slots", cls.slots), f"{path}.slots")
        if slots > INC_MAX_SLOTS:
            raise ConfigError(f"{path}.slots", f"at most {INC_MAX_SLOTS} slots per job, got {slots}")
        scale = raw.get("scale", cls.scale)
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < 2**31:
            raise ConfigError(f"{path}.scale", f"expected a number > 0 and < 2^31, got {scale!r}")
        return cls(slots, float(scale))


@dataclass(frozen=True)
class JobConfig:
    """One training job. `phases` is what every iteration does (config.workload); the short
    form's fields stay for what reads them: `bytes_per_iteration` = the bytes of all its
    communication phases, `compute_s` = the mean compute of all its compute phases, `collective`
    = the short form's collective (with `phases`: the first communication phase's)."""

    name: str
    workers: tuple[str, ...]
    bytes_per_iteration: int
    compute_s: float
    iterations: int
    collective: str = "ring_allreduce"
    start_offset_s: float = 0.0
    cc: CCSpec = field(default_factory=lambda: CCSpec("cubic"))
    inc: IncConfig | None = None  # set for collective inc_allreduce
    phases: tuple[Phase, ...] = ()  # () = the short form's [compute, collective]
    servers: tuple[str, ...] = ()  # parameter-server hosts: ranks after the workers
    stragglers: tuple[StragglerConfig, ...] = ()
    # Where the phases came from (the preset, the scale rule and what it did, the trace file):
    # recorded, but not part of what the job is — two jobs with the same phases are equal, so
    # config.yaml, which holds the resolved phases, loads back to the same job.
    model: Preset | None = field(default=None, compare=False)
    scale: ScaleConfig | None = field(default=None, compare=False)
    scaled: ScaledWorkload | None = field(default=None, compare=False)  # jobs/scaling.py
    trace: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.phases:
            servers = self.servers if self.collective == "parameter_server" else ()
            object.__setattr__(self, "phases", two_phase(
                self.workers, servers, ComputeSpec(self.compute_s), self.collective, self.bytes_per_iteration))
        # the MLTCP idle gap fits the job unless the YAML sets one (cc.spec.CCSpec.for_compute);
        # also on dataclasses.replace, so `--cc mltcp-reno` gets each job's own gap
        object.__setattr__(self, "cc", self.cc.for_compute(self.shortest_compute_s))

    @property
    def n(self) -> int:
        """Workers (the ranks that compute)."""
        return len(self.workers)

    @property
    def shortest_compute_s(self) -> float:
        """The shortest compute phase of an iteration (mean): the longest idle time that is sure
        to separate two iterations on the job's sockets (phase lists: any compute phase may be
        the one between two iterations)."""
        return min((p.compute.mean_s for p in self.compute_phases), default=self.compute_s)

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every rank's host in rank order: the workers, then the servers."""
        return self.workers + self.servers

    @property
    def n_ranks(self) -> int:
        return len(self.hosts)

    def rank_of(self, host: str) -> int:
        return self.hosts.index(host)

    @property
    def comm_phases(self) -> tuple[CommPhase, ...]:
        return tuple(p for p in self.phases if isinstance(p, CommPhase))

    @property
    def compute_phases(self) -> tuple[ComputePhase, ...]:
        return tuple(p for p in self.phases if isinstance(p, ComputePhase))

    @classmethod
    def from_dict(cls, raw: Any, path: str, base_dir: Path | None = None) -> JobConfig:
        allowed = {"name", "workers", "servers", "iterations", "start_offset", "cc", "inc",
                   "stragglers"} | FORM_KEYS
        check_keys(raw, path, allowed, {"name", "workers", "iterations"})
        name = check_name(raw["name"], f"{path}.name")
        workers = _hosts(raw["workers"], f"{path}.workers")
        if len(workers) < 2:
            raise ConfigError(f"{path}.workers", f"a job needs at least 2 workers, got {len(workers)}")
        servers = _hosts(raw.get("servers", []), f"{path}.servers")
        for i, server in enumerate(servers):
            if server in workers:
                raise ConfigError(f"{path}.servers[{i}]", f"host {server!r} is already a worker")
        iteration = parse_iteration(raw, path, workers, servers, base_dir)
        comm = [p for p in iteration.phases if isinstance(p, CommPhase)]
        collective = comm[0].collective
        inc = None
        if collective == "inc_allreduce":
            inc = IncConfig.from_dict(raw.get("inc", {}), f"{path}.inc")
        elif "inc" in raw:
            raise ConfigError(f"{path}.inc", "only for collective: inc_allreduce")
        stragglers = raw.get("stragglers", [])
        if not isinstance(stragglers, list):
            raise ConfigError(f"{path}.stragglers", f"expected a list, got {type(stragglers).__name__}")
        cc = CCSpec.from_dict(raw.get("cc", "cubic"), f"{path}.cc")
        return cls(
            name=name,
            workers=workers,
            bytes_per_iteration=sum(p.bytes for p in comm),
            compute_s=sum(p.compute.mean_s for p in iteration.phases if isinstance(p, ComputePhase)),
            iterations=_positive_int(raw["iterations"], f"{path}.iterations"),
            collective=collective,
            start_offset_s=parse_duration(raw.get("start_offset", 0), f"{path}.start_offset"),
            cc=cc,
            inc=inc,
            phases=iteration.phases,
            servers=servers,
            stragglers=tuple(StragglerConfig.from_yaml(s, f"{path}.stragglers[{i}]", len(workers))
                             for i, s in enumerate(stragglers)),
            model=iteration.model,
            scale=iteration.scale,
            trace=iteration.trace,
        )


def _hosts(raw: Any, path: str) -> tuple[str, ...]:
    hosts = tuple(check_name(w, f"{path}[{i}]") for i, w in enumerate(_list(raw, path)))
    for i, host in enumerate(hosts):
        if host in hosts[:i]:
            raise ConfigError(f"{path}[{i}]", f"host {host!r} appears twice")
    return hosts


@dataclass(frozen=True)
class RunConfig:
    dataplane: str = "auto"
    seed: int = 1
    output_dir: str = "results"
    slow_start_after_idle: bool = False
    throughput_bin_s: float = 0.010
    isolated: bool = False
    timeout_s: float | None = None  # whole-run limit; default derived from the jobs
    gso_max_segs: int = 16  # cap on GSO super-packets (MTUs); 1 = offloads off, see shaping.py
    warmup: int = DEFAULT_WARMUP  # first iterations of each job left out of the statistics

    @classmethod
    def from_dict(cls, raw: Any, path: str) -> RunConfig:
        allowed = {"dataplane", "seed", "output_dir", "slow_start_after_idle", "throughput_bin",
                   "isolated", "timeout", "gso_max_segs", "warmup"}
        check_keys(raw, path, allowed)
        dataplane = raw.get("dataplane", "auto")
        if dataplane not in DATAPLANES:
            raise ConfigError(f"{path}.dataplane", f"unknown data plane {dataplane!r} (known: {', '.join(DATAPLANES)})")
        seed = raw.get("seed", 1)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"{path}.seed", f"expected an integer, got {seed!r}")
        for key in ("slow_start_after_idle", "isolated"):
            if not isinstance(raw.get(key, False), bool):
                raise ConfigError(f"{path}.{key}", f"expected true or false, got {raw[key]!r}")
        output_dir = raw.get("output_dir", "results")
        if not isinstance(output_dir, str) or not output_dir:
            raise ConfigError(f"{path}.output_dir", f"expected a directory path, got {output_dir!r}")
        timeout = raw.get("timeout")
        warmup = raw.get("warmup", DEFAULT_WARMUP)
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ConfigError(f"{path}.warmup", f"expected a whole number of iterations >= 0, got {warmup!r}")
        return cls(
            dataplane=dataplane,
            seed=seed,
            output_dir=output_dir,
            slow_start_after_idle=raw.get("slow_start_after_idle", False),
            throughput_bin_s=parse_duration(raw.get("throughput_bin", 0.01), f"{path}.throughput_bin",
                                            allow_zero=False),
            isolated=raw.get("isolated", False),
            gso_max_segs=_positive_int(raw.get("gso_max_segs", 16), f"{path}.gso_max_segs"),
            timeout_s=None if timeout is None else parse_duration(timeout, f"{path}.timeout", allow_zero=False),
            warmup=warmup,
        )

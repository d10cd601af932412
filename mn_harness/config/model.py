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
from mn_harness.config.ecn import EcnThreshold, parse_ecn_threshold, parse_queue_telemetry, parse_tcp_ecn
from mn_harness.config.emulation import Emulation
from mn_harness.config.fidelity import FidelityThresholds
from mn_harness.config.forms import DEFAULT_COLLECTIVE, FORMS, parse_iteration
from mn_harness.config.forms import KEYS as FORM_KEYS
from mn_harness.config.presets import Preset, ScaleConfig, ScaledWorkload
from mn_harness.config.shifts import ShiftSchedule
from mn_harness.config.workload import (
    MAX_COMPUTE_S,
    CommPhase,
    ComputePhase,
    ComputeSpec,
    Phase,
    StragglerConfig,
    two_phase,
)
from mn_harness.errors import ConfigError, shown
from mn_harness.frames import DEFAULT_MTU, MAX_MTU, MIN_MTU, frame_bytes
from mn_harness.p4 import find_program, shipped_programs
from mn_harness.p4.limits import INC_MAX_SLOTS
from mn_harness.units import parse_bandwidth, parse_duration

# `<name>-eth<NN>` must fit IFNAMSIZ-1 = 15 characters.
NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,8}")
EXPERIMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
DATAPLANES = ("auto", "linux", "bmv2")
ROUTINGS = ("shortest", "ecmp")  # network.plan: one shortest path per host pair, or per-flow ECMP
DEFAULT_WARMUP = 2  # iterations, as nccl-tests' -w: connection ramp-up and first-iteration effects

# Limits, checked here where each value is parsed, so `validate` refuses what a run would only
# hit after its network is built (or what no run could finish). Each bound is either what the
# kernel or tc can hold or far beyond anything one machine emulates; docs/experiments.md#limits
# says which.
TC_U32_MAX = 2**32 - 1
MIN_LINK_BPS = 1e3     # HTB keeps a class's burst as time in a u32 of 64 ns ticks (<= 275 s):
#                        its 4-frame burst takes 48 s at 1 kbit/s; tc refuses < 8 bit/s outright
MAX_LINK_BPS = 1e12    # 1 Tbit/s: 1 ms of burst (125 MB) stays far inside tc's u32 bytes
MAX_DELAY_S = 10.0     # one way, per link end
MAX_BYTES_PER_ITERATION = 10**12  # 1 TB (a 250G-parameter fp32 model)
INC_MAX_WORKERS2_BYTES = 2**28    # inc_allreduce: n^2 x S; each worker keeps every rank's inputs to
#                                   check the sum, ~13 n S bytes (218 MB measured for n=4, S=4 MiB)
MAX_ITERATIONS = 10**6
MAX_START_OFFSET_S = 86400.0      # a day
MAX_TIMEOUT_S = 7 * 86400.0       # a week
MIN_THROUGHPUT_BIN_S = 1e-3       # the workers sample tcp_info once per bin
MAX_THROUGHPUT_BIN_S = 60.0
MAX_GSO_SEGS = 65535              # the kernel's GSO_MAX_SEGS; `ip link` ignores larger values
MAX_SEED = 2**63 - 1


def check_keys(raw: Any, path: str, allowed: set[str], required: frozenset[str] | set[str] = frozenset()) -> None:
    if not isinstance(raw, Mapping):
        raise ConfigError(path, f"expected a mapping, got {type(raw).__name__}")
    for key in raw:
        if key not in allowed:
            raise ConfigError(
                f"{path}.{shown(key)}" if path else shown(key),
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


def _positive_int(raw: Any, path: str, maximum: int | None = None) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        raise ConfigError(path, f"expected a positive integer, got {raw!r}")
    if maximum is not None and raw > maximum:
        raise ConfigError(path, f"at most {maximum}, got {raw}")
    return raw


@dataclass(frozen=True)
class SwitchConfig:
    name: str
    program: str | None = None  # P4 program for the BMv2 data plane (default ecn_telemetry)
    ecn_threshold: EcnThreshold | None = None  # default of its egress ports (config/ecn.py)

    @classmethod
    def from_dict(cls, raw: Any, path: str, base_dir: Path | None = None) -> SwitchConfig:
        """`program`: a shipped program's name, or a .p4 file relative to `base_dir` (the
        experiment file's folder), kept as an absolute path."""
        if isinstance(raw, str):
            return cls(check_name(raw, path))
        check_keys(raw, path, {"name", "program", "ecn_threshold"}, {"name"})
        threshold = None
        if "ecn_threshold" in raw:
            threshold = parse_ecn_threshold(raw["ecn_threshold"], f"{path}.ecn_threshold")
        program = raw.get("program")
        if program is not None:
            if not isinstance(program, str) or not program:
                raise ConfigError(f"{path}.program", f"expected a program name, got {program!r}")
            if program not in shipped_programs():
                file = Path(program) if Path(program).is_absolute() or base_dir is None else base_dir / program
                if not program.endswith(".p4") or find_program(str(file)) is None:
                    raise ConfigError(f"{path}.program", f"no P4 program {program!r} (shipped: "
                                      f"{', '.join(shipped_programs())}; or a .p4 file, relative to "
                                      "the experiment file)")
                program = str(file.resolve())
        return cls(check_name(raw["name"], f"{path}.name"), program, threshold)


@dataclass(frozen=True)
class LinkConfig:
    a: str
    b: str
    bw_bps: float
    queue_packets: int
    delay_s: float = 0.0
    ecn_threshold: EcnThreshold | None = None  # for both switch ends; overrides the switch's
    mtu: int = DEFAULT_MTU  # both ends' interfaces; a queue's packets are frames of it

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"

    @property
    def frame_bytes(self) -> int:
        """A full-MTU frame of this link: the unit of its `queue` and packet ECN thresholds."""
        return frame_bytes(self.mtu)

    @classmethod
    def from_dict(cls, raw: Any, path: str, defaults: Mapping) -> LinkConfig:
        check_keys(raw, path, {"endpoints", "bw", "queue", "delay", "ecn_threshold", "mtu"}, {"endpoints"})
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
        if bw < MIN_LINK_BPS:
            raise ConfigError(f"{path}.bw", f"{merged['bw']!r}: a link's rate must be at least 1kbit "
                              "(tc's HTB cannot shape slower)")
        if bw > MAX_LINK_BPS:
            raise ConfigError(f"{path}.bw", f"{merged['bw']!r}: a link's rate must be at most 1Tbit "
                              "(its burst must fit tc's 32-bit field; no machine emulates more)")
        mtu = parse_mtu(merged.get("mtu", DEFAULT_MTU), f"{path}.mtu")
        queue = _positive_int(merged.get("queue", 100), f"{path}.queue")
        if queue * frame_bytes(mtu) > TC_U32_MAX:
            raise ConfigError(f"{path}.queue", f"at most {TC_U32_MAX // frame_bytes(mtu)} packets (the queue's "
                              f"{queue} x {frame_bytes(mtu)} bytes must fit tc's 32-bit limit), got {queue}")
        delay = parse_duration(merged.get("delay", 0), f"{path}.delay", max_s=MAX_DELAY_S)
        threshold = None
        if "ecn_threshold" in raw:
            threshold = parse_ecn_threshold(raw["ecn_threshold"], f"{path}.ecn_threshold")
        return cls(a, b, bw, queue, delay, threshold, mtu)


def parse_mtu(raw: Any, path: str) -> int:
    """A link's MTU in bytes: a whole number from MIN_MTU to MAX_MTU (mn_harness/frames.py)."""
    if isinstance(raw, bool) or not isinstance(raw, int) or not MIN_MTU <= raw <= MAX_MTU:
        raise ConfigError(path, f"expected an MTU in bytes from {MIN_MTU} to {MAX_MTU} (e.g. 1500 or 9000), "
                          f"got {raw!r}")
    return raw


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
    collective: str = DEFAULT_COLLECTIVE
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
            object.__setattr__(self, "phases", two_phase(
                self.workers, self.servers, ComputeSpec(self.compute_s), self.collective, self.bytes_per_iteration))
        # the MLTCP idle gap fits the job unless the YAML sets one (cc.spec.CCSpec.for_compute);
        # also on dataclasses.replace, so `--cc mltcp-reno` gets each job's own gap
        object.__setattr__(self, "cc", self.cc.for_compute(self.shortest_idle_s))

    @property
    def unscaled(self) -> bool:
        """Its `scale` rule is not applied yet (jobs.scaling): the bytes are the real cluster's."""
        return self.scale is not None and self.scaled is None

    @property
    def n_workers(self) -> int:
        """The ranks that compute (the job's `servers` do not)."""
        return len(self.workers)

    @property
    def shortest_idle_s(self) -> float:
        """The shortest stretch of an iteration in which the job's sockets are sure to be idle
        (mean): the longest idle time that is sure to separate two iterations (phase lists: any
        compute phase may be the one between two iterations). A compute phase overlapped by DDP
        buckets is idle only during its forward and the backward slice that produces the first
        bucket: with 120 ms of compute (8 MB, DDP defaults) that is 50 ms, and a gap derived from
        the whole 120 ms (60 ms) let MLTCP see 1 iteration boundary in 12 (bench/overlap.py)."""
        idle = []
        for index, phase in enumerate(self.phases):
            if not isinstance(phase, ComputePhase):
                continue
            nxt = self.phases[index + 1] if index + 1 < len(self.phases) else None
            share = nxt.overlap.idle_share(nxt.bytes) if isinstance(nxt, CommPhase) and nxt.overlap else 1.0
            idle.append(phase.compute.mean_s * share)
        return min(idle, default=self.compute_s)

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
        # the limits hold for the iteration as a whole, whichever form said it
        size_path = f"{path}.{next(k for k in FORMS if k in raw)}"
        size = sum(p.bytes for p in comm)
        if size > MAX_BYTES_PER_ITERATION:
            raise ConfigError(size_path, f"{size} bytes per iteration; at most 1TB")
        compute_s = sum(p.compute.mean_s for p in iteration.phases if isinstance(p, ComputePhase))
        if compute_s > MAX_COMPUTE_S:
            raise ConfigError(f"{path}.compute" if "compute" in raw else size_path,
                              f"{compute_s:g}s of compute per iteration; at most {MAX_COMPUTE_S:g}s")
        record = collectives.get(collective)
        if record.missing is not None and (missing := record.missing()):  # torch_*: PyTorch
            raise ConfigError(f"{path}.collective", f"{collective} needs {missing}")
        inc = None
        if record.engine == collectives.INC:
            inc = IncConfig.from_dict(raw.get("inc", {}), f"{path}.inc")
            if len(workers) ** 2 * size > INC_MAX_WORKERS2_BYTES:
                raise ConfigError(size_path, f"{size} bytes on {len(workers)} workers: inc_allreduce "
                                  "workers keep every rank's inputs in memory, so workers^2 x bytes "
                                  f"must stay <= {INC_MAX_WORKERS2_BYTES} (e.g. 16MiB on 4 workers)")
        elif "inc" in raw:
            raise ConfigError(f"{path}.inc", "only for collective: inc_allreduce")
        stragglers = raw.get("stragglers", [])
        if not isinstance(stragglers, list):
            raise ConfigError(f"{path}.stragglers", f"expected a list, got {type(stragglers).__name__}")
        cc = CCSpec.from_dict(raw.get("cc", "cubic"), f"{path}.cc")
        return cls(
            name=name,
            workers=workers,
            bytes_per_iteration=size,
            compute_s=compute_s,
            iterations=_positive_int(raw["iterations"], f"{path}.iterations", MAX_ITERATIONS),
            collective=collective,
            start_offset_s=parse_duration(raw.get("start_offset", 0), f"{path}.start_offset",
                                          max_s=MAX_START_OFFSET_S),
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
    tcp_ecn: str | bool = "auto"  # hosts' net.ipv4.tcp_ecn (config/ecn.py)
    queue_telemetry: bool | tuple[str, ...] = True  # sampled egress queues (config/ecn.py)
    warmup: int = DEFAULT_WARMUP  # first iterations of each job left out of the statistics
    fidelity: FidelityThresholds = FidelityThresholds()  # the emulation's checks (config/fidelity.py)
    shifts: ShiftSchedule = ShiftSchedule()  # CASSINI's time shifts as a baseline (config/shifts.py)
    emulation: Emulation = Emulation()  # the emulator's own choices (config/emulation.py)

    @classmethod
    def from_dict(cls, raw: Any, path: str) -> RunConfig:
        allowed = {"dataplane", "seed", "output_dir", "slow_start_after_idle", "throughput_bin",
                   "isolated", "timeout", "gso_max_segs", "tcp_ecn", "queue_telemetry", "warmup", "fidelity",
                   "shifts", "emulation"}
        check_keys(raw, path, allowed)
        dataplane = raw.get("dataplane", "auto")
        if dataplane not in DATAPLANES:
            raise ConfigError(f"{path}.dataplane", f"unknown data plane {dataplane!r} (known: {', '.join(DATAPLANES)})")
        seed = raw.get("seed", 1)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"{path}.seed", f"expected an integer, got {seed!r}")
        if abs(seed) > MAX_SEED:
            raise ConfigError(f"{path}.seed", "expected a 64-bit integer (|seed| < 2^63)")
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
            throughput_bin_s=_throughput_bin(raw.get("throughput_bin", 0.01), f"{path}.throughput_bin"),
            isolated=raw.get("isolated", False),
            gso_max_segs=_positive_int(raw.get("gso_max_segs", 16), f"{path}.gso_max_segs", MAX_GSO_SEGS),
            timeout_s=None if timeout is None else parse_duration(timeout, f"{path}.timeout", allow_zero=False,
                                                                  max_s=MAX_TIMEOUT_S),
            tcp_ecn=parse_tcp_ecn(raw.get("tcp_ecn", "auto"), f"{path}.tcp_ecn"),
            queue_telemetry=parse_queue_telemetry(raw.get("queue_telemetry", True),
                                                  f"{path}.queue_telemetry"),
            warmup=warmup,
            fidelity=FidelityThresholds.from_dict(raw.get("fidelity", True), f"{path}.fidelity"),
            shifts=ShiftSchedule.from_dict(raw.get("shifts"), f"{path}.shifts"),
            emulation=Emulation.from_dict(raw.get("emulation", {}), f"{path}.emulation"),
        )


def _throughput_bin(raw: Any, path: str) -> float:
    seconds = parse_duration(raw, path, allow_zero=False, max_s=MAX_THROUGHPUT_BIN_S)
    if seconds < MIN_THROUGHPUT_BIN_S:
        raise ConfigError(path, f"{raw!r} is shorter than 1ms (the workers sample once per bin)")
    return seconds

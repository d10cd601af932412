"""What one training iteration of a job does: a list of phases, and the forms that expand into it.

An iteration is a sequence of compute phases (the worker sleeps) and communication phases (a
collective of mn_harness/collectives over kernel TCP), repeated every iteration. The YAML says
it in one of three ways (docs/workloads.md):

* `phases:` — the list itself;
* the short form — `bytes_per_iteration` (or `model_params`, or a `model:` preset) + `compute`
  + `collective`: the two-phase iteration [compute, collective];
* `trace:` — a Chakra execution trace (mn_harness/chakra) turned into a phase list.

A compute phase has a mean duration, optional jitter (coefficient of variation) and a
distribution; the per-iteration draws and the stragglers are made by mn_harness/jobs/delays.py
from run.seed. A communication phase may overlap the compute phase before it, DDP style
(`overlap`: buckets all-reduced as backward produces them). Everything here is validated once
and every error names the YAML path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mn_harness import collectives
from mn_harness.collectives import Call, Collective, Schedule
from mn_harness.errors import ConfigError, shown
from mn_harness.units import parse_count, parse_duration, parse_fraction, parse_size

DISTRIBUTIONS = ("normal", "lognormal")
DDP_BUCKET_BYTES = 25 * 1024 * 1024  # PyTorch DDP bucket_cap_mb=25 (c10d reducer.hpp)
DDP_FIRST_BUCKET_BYTES = 1024 * 1024  # kDefaultFirstBucketBytes: the first bucket is smaller
DEFAULT_BACKWARD_SHARE = 2 / 3  # backward ~ 2x forward
MAX_PHASES = 256  # per iteration; a worker records a row per phase and iteration
MAX_COMPUTE_S = 3600.0  # compute per iteration (all phases), and any one delay: an hour
COMMON_PHASE_KEYS = {"collective", "bytes", "name", "participants", "overlap", "blocking"}
# The keys a collective's record may add to its phases (`phase_keys`) that set a CommPhase field:
# key -> (field, how it is read). `root` is not a field: it puts a participant first.
PHASE_OPTIONS = {"grad_bytes": ("grad_bytes", "size"), "micro_batches": ("micro_batches", "count"),
                 "forward": ("forward_s", "duration"), "backward": ("backward_s", "duration")}


def _keys(raw: Any, path: str, allowed: set[str], required: Sequence[str] = ()) -> Mapping:
    if not isinstance(raw, Mapping):
        raise ConfigError(path, f"expected a mapping, got {type(raw).__name__}")
    for key in raw:
        if key not in allowed:
            raise ConfigError(f"{path}.{shown(key)}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
    for key in required:
        if key not in raw:
            raise ConfigError(f"{path}.{key}", "required key is missing")
    return raw


def _positive_int(raw: Any, path: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        raise ConfigError(path, f"expected a positive integer, got {raw!r}")
    return raw


def _number(raw: Any, path: str, low: float, high: float | None = None) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw != raw or raw < low \
            or (high is not None and raw > high) or raw in (float("inf"), float("-inf")):
        bound = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
        raise ConfigError(path, f"expected a number {bound}, got {raw!r}")
    return float(raw)


@dataclass(frozen=True)
class ComputeSpec:
    """Mean duration; per-iteration draws have std = jitter * mean (0: always the mean)."""

    mean_s: float
    jitter: float = 0.0
    distribution: str = "normal"

    @classmethod
    def from_yaml(cls, raw: Any, path: str) -> ComputeSpec:
        if not isinstance(raw, Mapping):
            return cls(parse_duration(raw, path, max_s=MAX_COMPUTE_S))
        _keys(raw, path, {"mean", "jitter", "distribution"}, ("mean",))
        distribution = raw.get("distribution", "normal")
        if distribution not in DISTRIBUTIONS:
            raise ConfigError(f"{path}.distribution", f"unknown distribution {distribution!r} "
                              f"(known: {', '.join(DISTRIBUTIONS)})")
        return cls(parse_duration(raw["mean"], f"{path}.mean", max_s=MAX_COMPUTE_S),
                   parse_fraction(raw.get("jitter", 0), f"{path}.jitter"), distribution)


@dataclass(frozen=True)
class OverlapConfig:
    """DDP: the all-reduce is cut into buckets, each issued once backward has produced it."""

    bucket_bytes: int = DDP_BUCKET_BYTES
    first_bucket_bytes: int = DDP_FIRST_BUCKET_BYTES
    backward: float = DEFAULT_BACKWARD_SHARE  # share of the compute phase that is backward

    @classmethod
    def from_yaml(cls, raw: Any, path: str) -> OverlapConfig:
        _keys(raw, path, {"bucket", "first_bucket", "backward"})
        backward = parse_fraction(raw.get("backward", cls.backward), f"{path}.backward")
        if backward == 0:
            raise ConfigError(f"{path}.backward", "must be > 0 (no backward: nothing to overlap)")
        return cls(parse_size(raw.get("bucket", cls.bucket_bytes), f"{path}.bucket"),
                   parse_size(raw.get("first_bucket", cls.first_bucket_bytes), f"{path}.first_bucket"),
                   backward)

    def idle_share(self, total_bytes: int) -> float:
        """The share of the overlapped compute phase before the first bucket goes out (forward,
        and the backward slice that produces the first bucket): the only part of it in which
        the job's sockets are idle (jobs/program.py cuts the phase the same way). With nothing
        to send the whole phase is idle, as before this helper existed."""
        if total_bytes <= 0:
            return 1.0
        return (1 - self.backward) + self.backward * self.buckets(total_bytes)[0] / total_bytes

    def buckets(self, total_bytes: int) -> list[int]:
        """Bucket sizes in the order they are ready: the (smaller) first one, then full ones."""
        sizes, left, cap = [], total_bytes, min(self.first_bucket_bytes, self.bucket_bytes)
        while left > 0:
            sizes.append(min(cap, left))
            left -= sizes[-1]
            cap = self.bucket_bytes
        return sizes


@dataclass(frozen=True)
class StragglerConfig:
    """Ranks whose compute is delayed by `delay_s` with `probability` per iteration (drawn
    per rank and iteration) and/or always `slowdown` times slower."""

    ranks: tuple[int, ...]
    delay_s: float = 0.0
    probability: float = 1.0
    slowdown: float = 1.0

    @classmethod
    def from_yaml(cls, raw: Any, path: str, n_workers: int) -> StragglerConfig:
        _keys(raw, path, {"ranks", "delay", "probability", "slowdown"}, ("ranks",))
        ranks = raw["ranks"]
        if not isinstance(ranks, list) or not ranks:
            raise ConfigError(f"{path}.ranks", f"expected a list of worker ranks, got {ranks!r}")
        for i, r in enumerate(ranks):
            if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < n_workers:
                raise ConfigError(f"{path}.ranks[{i}]", f"expected a worker rank 0..{n_workers - 1}, got {r!r}")
        if "delay" not in raw and "slowdown" not in raw:
            raise ConfigError(path, "give a delay (with a probability) or a slowdown")
        if "probability" in raw and "delay" not in raw:
            raise ConfigError(f"{path}.probability", "only with a delay")
        return cls(tuple(ranks), parse_duration(raw.get("delay", 0), f"{path}.delay", max_s=MAX_COMPUTE_S),
                   parse_fraction(raw.get("probability", 1.0), f"{path}.probability"),
                   _number(raw.get("slowdown", 1.0), f"{path}.slowdown", 0.01, 100.0))


@dataclass(frozen=True)
class ComputePhase:
    name: str
    compute: ComputeSpec
    # indices of the communication phases this one waits for; None: every earlier one (the
    # sequential default; a trace says exactly which)
    waits: tuple[int, ...] | None = None
    kind: str = "compute"


@dataclass(frozen=True)
class CommPhase:
    name: str
    collective: str
    bytes: int  # S of the collective; the pipeline's: activation bytes per micro-batch
    participants: tuple[str, ...]  # hosts in collective order (broadcast: root first; pipeline:
    #                                stage order; parameter_server: workers, then servers)
    servers: int = 0  # parameter_server: the last `servers` participants
    overlap: OverlapConfig | None = None  # overlaps the compute phase before it
    blocking: bool = True  # False: the next phases run while it communicates (traces)
    micro_batches: int = 0  # pipeline only, and the next three
    forward_s: float = 0.0  # per micro-batch and stage
    backward_s: float = 0.0
    grad_bytes: int = 0  # per micro-batch backward (default: = bytes)
    kind: str = "comm"

    @property
    def record(self) -> Collective:
        return collectives.get(self.collective)

    def call(self, nbytes: int | None = None) -> Call:
        """This phase as a use of its collective on local ranks 0..len(participants)-1 (a
        bucket: `nbytes`)."""
        return Call(self.bytes if nbytes is None else nbytes, len(self.participants), self.servers,
                    max(1, self.micro_batches), self.grad_bytes, self.forward_s, self.backward_s)

    def schedule(self, nbytes: int | None = None) -> Schedule:
        return self.record.transfers(self.call(nbytes))


Phase = ComputePhase | CommPhase


def two_phase(workers: tuple[str, ...], servers: tuple[str, ...], compute: ComputeSpec,
              collective: str, nbytes: int, overlap: OverlapConfig | None = None) -> tuple[Phase, ...]:
    """The short form: compute, then the collective over every worker (and the job's servers
    when the collective uses them)."""
    if not collectives.get(collective).uses_servers:
        servers = ()
    return (ComputePhase("compute", compute),
            CommPhase(collective, collective, nbytes, workers + servers, len(servers), overlap))


def parse_phases(raw: Any, path: str, workers: tuple[str, ...], servers: tuple[str, ...]) -> tuple[Phase, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(path, "expected a non-empty list of phases")
    if len(raw) > MAX_PHASES:
        raise ConfigError(path, f"{len(raw)} phases; at most {MAX_PHASES} per iteration")
    phases: list[Phase] = []
    for i, item in enumerate(raw):
        p = f"{path}[{i}]"
        if not isinstance(item, Mapping) or ("compute" in item) == ("collective" in item):
            raise ConfigError(p, "a phase is a mapping with exactly one of 'compute' or 'collective'")
        if "compute" in item:
            _keys(item, p, {"compute", "name", "waits"})
            spec = ComputeSpec.from_yaml(item["compute"], f"{p}.compute")
            waits = _waits(item["waits"], f"{p}.waits", phases) if "waits" in item else None
            phases.append(ComputePhase(_name(item, p, "compute"), spec, waits))
        else:
            phases.append(parse_comm(item, p, workers, servers, phases))
    check_phases(phases, path, servers)
    return tuple(phases)


def _waits(raw: Any, path: str, before: Sequence[Phase]) -> tuple[int, ...]:
    """Indices of earlier communication phases (what a trace's dependencies say)."""
    if not isinstance(raw, list):
        raise ConfigError(path, f"expected a list of earlier communication phases' indices, got {raw!r}")
    for k, index in enumerate(raw):
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(before) \
                or before[index].kind != "comm":
            raise ConfigError(f"{path}[{k}]", f"{index!r} is not the index of an earlier communication phase")
    return tuple(raw)


def _name(item: Mapping, path: str, default: str) -> str:
    name = item.get("name", default)
    if not isinstance(name, str) or not name or len(name) > 64 or not name.isprintable():
        raise ConfigError(f"{path}.name", f"expected a short printable name, got {name!r}")
    return name


def parse_comm(item: Mapping, p: str, workers: tuple[str, ...], servers: tuple[str, ...],
               before: Sequence[Phase]) -> CommPhase:
    collective = item["collective"]
    record = collectives.find(collective)
    if record is None or not record.phase:
        why = " (only as the short form's collective)" if record is not None and record.short_form else ""
        raise ConfigError(f"{p}.collective", f"unknown collective {collective!r}{why} "
                          f"(known: {', '.join(collectives.names(phase=True))})")
    _keys(item, p, COMMON_PHASE_KEYS | set(record.phase_keys), ("bytes",) + record.required_keys)
    nbytes = parse_size(item["bytes"], f"{p}.bytes")
    hosts = participants(item, p, workers, record)
    if "root" in item:
        root = item["root"]
        if root not in hosts:
            raise ConfigError(f"{p}.root", f"{root!r} is not a participant ({', '.join(hosts)})")
        hosts = (root,) + tuple(h for h in hosts if h != root)
    overlap = None
    if "overlap" in item:
        overlap = parse_overlap(item["overlap"], f"{p}.overlap", record)
        if not before or before[-1].kind != "compute":
            raise ConfigError(f"{p}.overlap", "overlaps the compute phase before it: put one there")
    blocking = item.get("blocking", True)
    if not isinstance(blocking, bool):
        raise ConfigError(f"{p}.blocking", f"expected true or false, got {blocking!r}")
    if not blocking and (overlap or record.pipeline_pass):
        raise ConfigError(f"{p}.blocking", "only for a plain collective (not with overlap or pipeline)")
    options = {field: _option(item[key], f"{p}.{key}", how)
               for key, (field, how) in PHASE_OPTIONS.items() if key in record.phase_keys and key in item}
    if "grad_bytes" in record.phase_keys:
        options.setdefault("grad_bytes", nbytes)
    ps_servers = servers if record.uses_servers else ()
    return CommPhase(_name(item, p, collective), collective, nbytes, hosts + ps_servers, len(ps_servers),
                     overlap=overlap, blocking=blocking, **options)


def _option(raw: Any, path: str, how: str) -> Any:
    if how == "count":
        return _positive_int(raw, path)
    if how == "duration":
        return parse_duration(raw, path, max_s=MAX_COMPUTE_S)
    return parse_size(raw, path, allow_zero=True)


def parse_overlap(raw: Any, path: str, record: Collective) -> OverlapConfig:
    if not record.bucketable:
        raise ConfigError(path, f"only for {' or '.join(collectives.names(bucketable=True))}")
    return OverlapConfig.from_yaml(raw, path)


def participants(item: Mapping, p: str, workers: tuple[str, ...], record: Collective) -> tuple[str, ...]:
    if "participants" not in item:
        hosts = workers
    else:
        raw = item["participants"]
        if not isinstance(raw, list):
            raise ConfigError(f"{p}.participants", f"expected a list of the job's workers, got {raw!r}")
        for k, h in enumerate(raw):
            if h not in workers:
                raise ConfigError(f"{p}.participants[{k}]", f"{h!r} is not one of the job's workers "
                                  f"({', '.join(workers)})")
            if h in raw[:k]:
                raise ConfigError(f"{p}.participants[{k}]", f"{h!r} appears twice")
        hosts = tuple(raw)
    if len(hosts) < record.least_participants:
        raise ConfigError(f"{p}.participants", f"{record.name} needs at least {record.least_participants} "
                          f"workers, got {len(hosts)}")
    return hosts


def check_phases(phases: Sequence[Phase], path: str, servers: tuple[str, ...]) -> None:
    """Rules that need the whole list: a communication phase, servers used iff declared."""
    comm = [ph for ph in phases if isinstance(ph, CommPhase)]
    if not comm:
        raise ConfigError(path, "an iteration needs at least one communication phase")
    users = [ph.collective for ph in comm if ph.record.uses_servers]
    if users and not servers:
        raise ConfigError(path, f"collective {users[0]} needs the job's `servers` (hosts)")
    if servers and not users:
        raise ConfigError(path, f"the job has servers but no {' or '.join(collectives.names(uses_servers=True))} phase")


def parse_model_params(raw: Any, path: str) -> int:
    """fp32 gradients: 4 bytes per parameter."""
    return 4 * parse_count(raw, path)

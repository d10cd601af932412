"""The collectives by name: one record each, and the lookups every layer makes instead of
testing names.

A record (`Collective`) holds what the harness knows about a collective apart from how a worker
moves its bytes: its schedule (who sends what to whom, schedule.py), its ideal-time arithmetic,
its bus bandwidth factor (bandwidth.py), where an experiment file may name it (a job's short
form, a phase) and which phase keys it takes, whether DDP may cut it into buckets, whether it
needs the job's servers, which worker runs it, and what this machine must have for it. The
records of the shipped collectives are made next to their schedules (ring.py, tree.py, ...) and
registered in mn_harness/collectives/__init__.py; a new collective is a module with its schedule
and its record, registered there, and a test. tests/collectives/test_registry.py registers one
from a test alone and runs it through validation, the program, the ideal time and config.yaml.

Standard library only: the worker looks collectives up inside each emulated host."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from mn_harness.collectives.schedule import Schedule

# Which worker runs a collective (mn_harness/worker/main.py): the synthetic worker plays its
# schedule over kernel TCP; torch.distributed (gloo) makes the traffic itself; the in-network
# aggregation worker sends to a BMv2 switch that adds.
SYNTHETIC, TORCH, INC = "synthetic", "torch", "inc"
ENGINES = (SYNTHETIC, TORCH, INC)


@dataclass(frozen=True)
class Call:
    """One use of a collective: what its schedule and its arithmetic read. `ranks` are the local
    ranks 0..ranks-1 (the participants in order; a parameter server's servers are the last
    `servers` of them). The pipeline's `nbytes` are the activation bytes of one micro-batch, and
    the rest of the fields are its own."""

    nbytes: int
    ranks: int
    servers: int = 0
    micro_batches: int = 1
    grad_bytes: int | None = None
    forward_s: float = 0.0
    backward_s: float = 0.0


@dataclass(frozen=True)
class Ideal:
    """A collective's time alone on the network, and what bounds it."""

    seconds: float
    bottleneck_bps: float  # rate of the link (or path) that bounds it
    bottleneck: str | None  # that link's label; None where a path, not a link, bounds it


class Network(Protocol):
    """The network as one use of a collective sees it: local ranks placed on hosts, links by
    label (mn_harness/jobs/ideal.py adapts the network plan to it)."""

    def link_loads(self, schedule: Schedule) -> dict[str, int]:
        """Bytes each directed link carries when the schedule runs."""
        ...

    def link_bps(self, link: str) -> float:
        ...

    def path_bps(self, src: int, dst: int) -> float:
        """Rate of the slowest link on the path from local rank src to dst."""
        ...


@dataclass(frozen=True)
class Collective:
    """Everything the harness knows about one collective, by its YAML name.

    Arithmetic: `schedule` gives the transfers (None: the collective has no TCP schedule, and
    then `sends`, `pairs` and `wire_time` say what the schedule would); `busbw` the nccl-tests
    bus bandwidth factor for n participants (a parameter server's: its workers); `ideal`
    overrides the ideal time where the busiest link does not bound it (a pipeline's bubble)."""

    name: str  # the `collective:` value of a job or a phase
    schedule: Callable[[Call], Schedule] | None
    busbw: Callable[[int], float] | None
    engine: str = SYNTHETIC  # ENGINES
    short_form: bool = True  # may be a job's `collective:` (compute, then this over every worker)
    phase: bool = True  # may be a phase's `collective:`
    phase_keys: tuple[str, ...] = ()  # keys its phases take beyond every phase's (config.workload)
    required_keys: tuple[str, ...] = ()  # ... and those of them a phase must give
    bucketable: bool = False  # DDP `overlap` may cut it into buckets issued during backward
    uses_servers: bool = False  # runs between the job's workers and its `servers`
    least_participants: int = 2  # participants before the servers
    pipeline_pass: bool = False  # runs its own compute from the worker's main thread (1F1B)
    torch_call: str | None = None  # the torch.distributed function (engine TORCH)
    counterpart: str | None = None  # the synthetic collective that moves what this one does
    missing: Callable[[], str | None] | None = None  # what this machine lacks to run it, or None
    ideal: Callable[[Call, Network], Ideal] | None = None
    wire_time: Callable[[Call, Network], Ideal] | None = None  # without a schedule
    sends: Callable[[Call], list[int]] | None = None  # without a schedule: bytes per local rank
    pairs: Callable[[Call], list[tuple[int, int]]] | None = None  # without a schedule

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"collective {self.name!r}: unknown engine {self.engine!r}")
        if self.schedule is None and None in (self.wire_time, self.sends, self.pairs):
            raise ValueError(f"collective {self.name!r} has no schedule: give wire_time, sends and pairs")
        if not set(self.required_keys) <= set(self.phase_keys):
            raise ValueError(f"collective {self.name!r}: required keys must be among its phase keys")

    def transfers(self, call: Call) -> Schedule:
        if self.schedule is None:
            raise ValueError(f"collective {self.name!r} has no schedule of transfers")
        return self.schedule(call)

    def bytes_sent(self, call: Call) -> list[int]:
        """What each local rank puts on the wire."""
        if self.schedule is None:
            assert self.sends is not None
            return self.sends(call)
        return self.schedule(call).bytes_sent_per_rank()

    def directed_pairs(self, call: Call) -> list[tuple[int, int]]:
        """(src, dst) local ranks whose traffic the network carries, sorted."""
        if self.schedule is None:
            assert self.pairs is not None
            return self.pairs(call)
        return self.schedule(call).directed_pairs()

    @property
    def has_busbw(self) -> bool:
        return self.busbw is not None or self.counterpart is not None

    def busbw_factor(self, n: int) -> float:
        """nccl-tests' factor for n participants; a collective without its own takes its
        counterpart's (torch_allreduce: all-reduce's)."""
        if self.busbw is not None:
            return self.busbw(n)
        if self.counterpart is not None:
            return get(self.counterpart).busbw_factor(n)
        raise ValueError(f"no bus bandwidth convention for {self.name!r}")

    def time_on_wire(self, call: Call, network: Network) -> Ideal:
        """The time its bytes take when only the links count: the busiest link's bytes over
        that link's rate (the scale rule compares it on two networks)."""
        if self.schedule is None:
            assert self.wire_time is not None
            return self.wire_time(call, network)
        return busiest_link(self.schedule(call), network)

    def ideal_time(self, call: Call, network: Network) -> Ideal:
        """Its duration alone on the network (the slowdown baseline's part)."""
        return self.ideal(call, network) if self.ideal is not None else self.time_on_wire(call, network)


def busiest_link(schedule: Schedule, network: Network) -> Ideal:
    """Every directed link loaded with the bytes that cross it, perfect pipelining: the link
    with the most bytes per rate bounds the collective (ties: the first label)."""
    loads = network.link_loads(schedule)
    link = max(sorted(loads), key=lambda label: loads[label] / network.link_bps(label))
    rate = network.link_bps(link)
    return Ideal(loads[link] * 8 / rate, rate, link)


RECORDS: dict[str, Collective] = {}


def register(record: Collective) -> Collective:
    if record.name in RECORDS:
        raise ValueError(f"collective {record.name!r} is registered already")
    if record.counterpart is not None and record.counterpart not in RECORDS:
        raise ValueError(f"collective {record.name!r}: its counterpart {record.counterpart!r} is not registered")
    RECORDS[record.name] = record
    return record


def find(name: object) -> Collective | None:
    return RECORDS.get(name) if isinstance(name, str) else None


def get(name: str) -> Collective:
    record = find(name)
    if record is None:
        raise ValueError(f"unknown collective {name!r} (known: {', '.join(RECORDS)})")
    return record


def names(**properties: object) -> tuple[str, ...]:
    """Registered names in registration order, of the records whose fields have the given
    values: names(phase=True), names(engine=TORCH)."""
    return tuple(r.name for r in RECORDS.values() if all(getattr(r, k) == v for k, v in properties.items()))

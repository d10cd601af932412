"""The operations of a job's program: what every rank runs per iteration, in order.

mn_harness/jobs/program.py builds them from the job's phases, the worker spec carries them as
JSON objects (`op` names the kind) and mn_harness/worker/program.py runs them:

* `ComputeOp`    sleep `fraction` of compute phase `k`'s duration this iteration;
* `CollectiveOp` a collective on job ranks `ranks` (in the collective's order); `is_async`:
  issued on the worker's communication stream while the next operations run;
* `PipelineOp`   a pipeline pass (1F1B, with its own compute) on `ranks`;
* `WaitOp`       until the async collectives `ids` have finished.

`phase` is the index of the phase an operation comes from (its rows in phases.csv). Standard
library only: the worker reads them inside each emulated host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mn_harness import collectives
from mn_harness.collectives import Call, Collective, Schedule


@dataclass(frozen=True)
class ComputeOp:
    name: str
    phase: int
    k: int  # which compute phase of the iteration (its duration this iteration)
    fraction: float

    def to_json(self) -> dict[str, Any]:
        return {"op": "compute", "name": self.name, "phase": self.phase, "k": self.k, "fraction": self.fraction}


@dataclass(frozen=True)
class CollectiveOp:
    name: str
    phase: int
    id: int  # the collective's number in the program (tags, waits)
    collective: str
    bytes: int
    ranks: tuple[int, ...]
    servers: int = 0
    is_async: bool = False

    @property
    def record(self) -> Collective:
        return collectives.get(self.collective)

    def call(self) -> Call:
        return Call(self.bytes, len(self.ranks), self.servers)

    def schedule(self) -> Schedule:
        return self.record.transfers(self.call())

    def to_json(self) -> dict[str, Any]:
        return {"op": "comm", "name": self.name, "phase": self.phase, "id": self.id, "collective": self.collective,
                "bytes": self.bytes, "ranks": list(self.ranks), "servers": self.servers, "async": self.is_async}


@dataclass(frozen=True)
class PipelineOp(CollectiveOp):
    """Posted from the worker's main thread, never async; `bytes` are the activations of one
    micro-batch."""

    micro_batches: int = 1
    forward_s: float = 0.0  # per micro-batch and stage
    backward_s: float = 0.0
    grad_bytes: int = 0

    def call(self) -> Call:
        return Call(self.bytes, len(self.ranks), self.servers, max(1, self.micro_batches), self.grad_bytes,
                    self.forward_s, self.backward_s)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "op": "pipeline", "micro_batches": self.micro_batches,
                "forward_s": self.forward_s, "backward_s": self.backward_s, "grad_bytes": self.grad_bytes}


@dataclass(frozen=True)
class WaitOp:
    ids: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"op": "wait", "ids": list(self.ids)}


ProgramOp = ComputeOp | CollectiveOp | WaitOp  # PipelineOp is a CollectiveOp


def op_from_json(raw: dict[str, Any]) -> ProgramOp:
    kind = raw["op"]
    if kind == "compute":
        return ComputeOp(raw["name"], raw["phase"], raw["k"], raw["fraction"])
    if kind == "wait":
        return WaitOp(tuple(raw["ids"]))
    common = (raw["name"], raw["phase"], raw["id"], raw["collective"], raw["bytes"], tuple(raw["ranks"]),
              raw.get("servers", 0), raw.get("async", False))
    if kind == "comm":
        return CollectiveOp(*common)
    if kind == "pipeline":
        return PipelineOp(*common, raw["micro_batches"], raw["forward_s"], raw["backward_s"], raw["grad_bytes"])
    raise ValueError(f"unknown program operation {kind!r}")

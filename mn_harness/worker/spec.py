"""What one worker needs to know, passed from the harness as a JSON file.

The worker runs inside an emulated host with nothing but the standard library, so the spec is
plain data, not the harness's config objects."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mn_harness.worker.program_ops import CollectiveOp, ComputeOp, ProgramOp, op_from_json


@dataclass(frozen=True)
class WorkerSpec:
    job: str
    rank: int
    ips: tuple[str, ...]  # every rank's address, in rank order (workers, then servers)
    port: int  # the port every rank listens on
    collective: str
    bytes_per_iteration: int
    compute_s: float
    iterations: int
    start_offset_s: float
    cc: str  # kernel congestion-control name for TCP_CONGESTION
    iterations_path: str  # JSON lines, one per iteration
    throughput_path: str  # JSON lines, one per iteration (bins of that iteration)
    bin_s: float = 0.010
    connect_timeout_s: float = 20.0
    src_port: int = 0  # the port a rank connects from (a fixed 5-tuple for ECMP); 0: any
    # The iteration (mn_harness/jobs/program.py): operations, and this rank's compute seconds
    # per iteration and compute phase (jobs/delays.py) with the phases' means. Empty: the short
    # form [compute_s, collective over every rank].
    program: list[ProgramOp] = field(default_factory=list)
    compute_plan: list[list[float]] = field(default_factory=list)
    compute_means: list[float] = field(default_factory=list)
    computes: bool = True  # False for a parameter server: it skips compute phases
    transport: dict[str, Any] = field(default_factory=dict)  # worker.tunables.Tunables overrides
    realtime_main: bool = False  # run.emulation.worker_main_thread realtime (worker/threads.py, ComputeSleep)
    # inc_allreduce only (mn_harness/worker/inc.py); defaults keep ring-only callers unchanged
    agg_switch_ip: str | None = None  # None: the host's default gateway
    agg_job_id: int = 0  # 1..63, the job's id on the aggregation switch
    agg_port: int = 0  # 0: 48640 + agg_job_id
    inc_slots: int = 32  # window positions the switch holds for the job (2 slots each)
    inc_window: int = 0  # outstanding chunks; 0: inc_slots
    inc_scale: float = 65536.0  # fixed point: value * scale, rounded, clipped to int32
    inc_seed: int = 1  # deterministic inputs, verified every iteration
    inc_timeout_s: float = 0.05  # minimum retransmission timeout

    @property
    def n_ranks(self) -> int:
        """Every rank of the job, servers included (torch's world size)."""
        return len(self.ips)

    def ops(self) -> list[ProgramOp]:
        """The program, or the short form's [compute, collective over every rank]."""
        return self.program or [
            ComputeOp("compute", 0, 0, 1.0),
            CollectiveOp(self.collective, 1, 0, self.collective, self.bytes_per_iteration,
                         tuple(range(self.n_ranks)))]

    def durations(self, iteration: int) -> list[float]:
        """Seconds of each compute phase in `iteration` for this rank."""
        return self.compute_plan[iteration] if self.compute_plan else [self.compute_s]

    def means(self) -> list[float]:
        return self.compute_means or [self.compute_s]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "program": [op.to_json() for op in self.program]}

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json()))

    @classmethod
    def load(cls, path: str | Path) -> WorkerSpec:
        raw = json.loads(Path(path).read_text())
        raw["ips"] = tuple(raw["ips"])
        raw["program"] = [op_from_json(op) for op in raw.get("program", [])]
        return cls(**raw)

"""What one worker needs to know, passed from the harness as a JSON file.

The worker runs inside an emulated host with nothing but the standard library, so the spec is
plain data, not the harness's config objects."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class WorkerSpec:
    job: str
    rank: int
    ips: tuple[str, ...]  # ring order; rank r sends to r+1 and receives from r-1
    port: int
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

    @property
    def n(self) -> int:
        return len(self.ips)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: str | Path) -> WorkerSpec:
        raw = json.loads(Path(path).read_text())
        raw["ips"] = tuple(raw["ips"])
        return cls(**raw)

"""Compile the egress program for one port configuration (shared build cache:
mn_harness/bpf/toolchain.py).

Why compile-time parameters: `tc filter add ... bpf obj` loads an object as it is, and the
program must be right from its first packet (a threshold of 0 written a moment too late would
mark everything). One object per distinct (threshold, limit, tracker, rate, burst, jobs): a
topology with equal links needs one compile, and the cache makes later runs compile nothing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mn_harness.bpf import toolchain
from mn_harness.bpf.toolchain import ObjectBuilder

SOURCE = Path(__file__).resolve().parent / "bpf" / "egress_queue.bpf.c"
SECTION = "tc"
PROGRAM_NAME = "mnh_egress"  # the function in SOURCE: the kernel's name for the program
TRACKERS = {"backlog": 1, "vq": 2}  # MNH_TRACK_BACKLOG, MNH_TRACK_VQ
RATE_FP_SHIFT = 20  # MNH_VQ_RATE_FP: bytes per ns << 20


def default_cache_dir() -> Path:
    """$MN_HARNESS_EGRESS_CACHE, else /var/cache/mn-harness/egress as root, else ~/.cache/..."""
    return toolchain.default_cache_dir("egress", "MN_HARNESS_EGRESS_CACHE")


@dataclass(frozen=True)
class EgressConfig:
    """What one port's program is compiled with."""

    mark_bytes: int | None   # CE-mark ECT packets joining a queue of at least this many bytes
    limit_bytes: int         # the leaf FIFO's limit (drops are counted, the FIFO makes them)
    rate_bps: float          # link rate (the virtual queue's drain)
    burst_bytes: int         # HTB's burst (the virtual queue's credit)
    jobs: int                # job ids 0..jobs-1 counted apart (0 = no job)
    tracker: str = "backlog"  # "backlog" (the qdisc's own) or "vq" (virtual queue)
    compare: bool = False    # backlog tracker that also runs the virtual queue (benchmark)

    def defines(self) -> list[str]:
        if self.tracker not in TRACKERS:
            raise ValueError(f"unknown tracker {self.tracker!r}")
        rate_fp = max(1, round(self.rate_bps / 8 / 1e9 * (1 << RATE_FP_SHIFT)))
        return [f"-DMNH_MARK_BYTES={self.mark_bytes or 0}ULL",
                f"-DMNH_LIMIT_BYTES={self.limit_bytes}ULL",
                f"-DMNH_TRACK={TRACKERS[self.tracker]}",
                f"-DMNH_COMPARE={1 if self.compare and self.tracker == 'backlog' else 0}",
                f"-DMNH_VQ_RATE_FP={rate_fp}ULL",
                f"-DMNH_VQ_BURST_BYTES={self.burst_bytes}",
                f"-DMNH_JOBS={max(1, self.jobs)}"]


class EgressBuilder(ObjectBuilder):
    def build(self, config: EgressConfig) -> Path:
        obj, compiled = self.compile(SOURCE, config.defines(), "egress_queue")
        if compiled:
            self.log(f"ecn: compiled {SOURCE.name} ({config.tracker}) -> {obj}")
        return obj

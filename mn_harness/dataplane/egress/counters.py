"""The egress program's per-CPU counters (struct mnh_counters in bpf/egress_queue.bpf.c), decoded
and turned into one queue.csv interval.

COUNTER_FIELDS mirrors the C struct field by field (name, number of u64s; "jobs" = MNH_JOBS);
tests/dataplane/egress/test_counters.py parses the C source and fails when they differ. Counters
are cumulative and summed over CPUs; the interval maximum is kept per epoch (the sampler advances
the epoch at each read), so the maximum of the interval that just ended is the largest
`max_depth` among the CPUs whose `max_epoch` is that epoch; `last_*` come from the CPU that saw
the latest packet."""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

from mn_harness.p4.limits import FRAME_BYTES

COUNTER_FIELDS: tuple[tuple[str, int | str], ...] = (
    ("frames", 1), ("byte_count", 1), ("depth_sum", 1), ("marks", 1), ("drop_frames", 1),
    ("drop_packets", 1), ("ect_frames", 1), ("not_ect_frames", 1), ("ce_frames", 1),
    ("max_epoch", 2), ("max_depth", 2), ("last_ns", 1), ("last_depth", 1), ("last_backlog", 1),
    ("last_vq", 1), ("job_bytes", "jobs"), ("job_marks", "jobs"),
)
SUMMED = ("frames", "byte_count", "depth_sum", "marks", "drop_frames", "drop_packets", "ect_frames",
          "not_ect_frames", "ce_frames")


def counters_size(jobs: int) -> int:
    return 8 * sum(jobs if n == "jobs" else int(n) for _, n in COUNTER_FIELDS)


@functools.cache
def _layout(jobs: int) -> tuple[struct.Struct, dict[str, slice]]:
    """One Struct for a CPU's whole value and each field's slice of it (decoding runs ~100
    times a second per port: one unpack per CPU instead of one per field)."""
    fields, at = {}, 0
    for name, n in COUNTER_FIELDS:
        count = jobs if n == "jobs" else int(n)
        fields[name] = slice(at, at + count)
        at += count
    return struct.Struct(f"<{at}Q"), fields


@dataclass(frozen=True)
class Counters:
    """One read of a port's counters, all CPUs together. Depths in bytes."""

    frames: int
    byte_count: int
    depth_sum: int
    marks: int
    drop_frames: int
    drop_packets: int
    ect_frames: int
    not_ect_frames: int
    ce_frames: int
    epoch_max: dict[int, int]   # epoch -> largest depth seen in it (over CPUs)
    last_ns: int                # CLOCK_MONOTONIC ns of the latest packet
    last_depth: int             # the tracked depth right after it was queued
    last_backlog: int
    last_vq: int
    job_bytes: tuple[int, ...]
    job_marks: tuple[int, ...]

    @classmethod
    def decode(cls, raw: bytes, ncpus: int, stride: int, jobs: int) -> Counters:
        fmt, at = _layout(jobs)
        cpus = [fmt.unpack_from(raw, cpu * stride) for cpu in range(ncpus)]
        summed = [sum(col) for col in zip(*cpus, strict=True)] if ncpus > 1 else list(cpus[0])
        epoch_max: dict[int, int] = {}
        for c in cpus:
            for epoch, depth in zip(c[at["max_epoch"]], c[at["max_depth"]], strict=True):
                epoch_max[epoch] = max(epoch_max.get(epoch, 0), depth)
        last = at["last_ns"].start
        latest = max(cpus, key=lambda c: c[last])
        totals = {name: summed[at[name].start] for name in SUMMED}
        return cls(**totals, epoch_max=epoch_max,
                   last_ns=latest[last], last_depth=latest[at["last_depth"].start],
                   last_backlog=latest[at["last_backlog"].start],
                   last_vq=latest[at["last_vq"].start],
                   job_bytes=tuple(summed[at["job_bytes"]]), job_marks=tuple(summed[at["job_marks"]]))


@dataclass(frozen=True)
class Interval:
    """What happened at one port between two reads; depths in full frames of the port's link
    (FRAME_BYTES at the default MTU)."""

    frames: int
    depth: float        # mean depth the interval's frames joined (0 when none came)
    depth_max: float
    marks: int
    drops: int          # frames that found the FIFO full
    job_bytes: tuple[int, ...]
    job_marks: tuple[int, ...]


def interval(old: Counters, new: Counters, closed_epoch: int, frame_bytes: int = FRAME_BYTES) -> Interval:
    """`new` - `old`, with the maximum of epoch `closed_epoch` (the one the read just closed)."""
    frames = new.frames - old.frames
    depth_sum = new.depth_sum - old.depth_sum
    mean = depth_sum / frames / frame_bytes if frames > 0 else 0.0
    peak = new.epoch_max.get(closed_epoch, 0) / frame_bytes if frames > 0 else 0.0
    return Interval(frames, mean, max(peak, mean), new.marks - old.marks,
                    new.drop_frames - old.drop_frames,
                    tuple(n - o for n, o in zip(new.job_bytes, old.job_bytes, strict=True)),
                    tuple(n - o for n, o in zip(new.job_marks, old.job_marks, strict=True)))

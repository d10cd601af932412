"""The Python view of the egress program's counters: in step with the C struct, decoded over
CPUs, and turned into queue.csv intervals."""

import re
import struct

import pytest

from mn_harness.dataplane.egress.build import SOURCE
from mn_harness.dataplane.egress.counters import COUNTER_FIELDS, Counters, counters_size, interval
from mn_harness.p4.limits import FRAME_BYTES


def c_struct_fields() -> list[tuple[str, int | str]]:
    body = re.search(r"struct mnh_counters \{(.*?)\};", SOURCE.read_text(), re.S).group(1)
    out: list[tuple[str, int | str]] = []
    for line in body.splitlines():
        m = re.match(r"\s*__u64 (\w+)(?:\[(\w+)\])?;", line)
        if m:
            n = m.group(2)
            out.append((m.group(1), 1 if n is None else ("jobs" if n == "MNH_JOBS" else int(n))))
    return out


def test_fields_mirror_the_c_struct():
    assert tuple(c_struct_fields()) == COUNTER_FIELDS
    assert counters_size(3) == 8 * (9 + 4 + 4 + 2 * 3)


def pack(jobs: int, **values) -> bytes:
    out = b""
    for name, n in COUNTER_FIELDS:
        count = jobs if n == "jobs" else int(n)
        v = values.get(name, 0)
        out += struct.pack(f"<{count}Q", *(v if isinstance(v, (list, tuple)) else [v] * count))
    return out


def test_decode_sums_cpus_takes_the_latest_packet_and_the_epoch_maximum():
    cpu0 = pack(2, frames=10, byte_count=15140, depth_sum=10 * 3028, marks=2, max_epoch=[4, 5],
                max_depth=[9000, 100], last_ns=50, last_depth=7, job_bytes=[0, 15140], job_marks=[0, 2])
    cpu1 = pack(2, frames=5, byte_count=7570, depth_sum=5 * 1514, marks=1, max_epoch=[4, 3],
                max_depth=[12000, 99999], last_ns=60, last_depth=3, last_backlog=3, job_bytes=[70, 7500],
                job_marks=[0, 1])
    c = Counters.decode(cpu0 + cpu1, ncpus=2, stride=len(cpu0), jobs=2)
    assert (c.frames, c.byte_count, c.marks) == (15, 22710, 3)
    assert c.epoch_max == {4: 12000, 5: 100, 3: 99999}
    assert (c.last_ns, c.last_depth, c.last_backlog) == (60, 3, 3)
    assert c.job_bytes == (70, 22640) and c.job_marks == (0, 3)


def test_interval_means_per_frame_in_packets_and_the_closed_epoch_maximum():
    old = Counters.decode(pack(1, frames=10, depth_sum=0, max_epoch=[0, 0]), 1, counters_size(1), 1)
    new = Counters.decode(pack(1, frames=30, depth_sum=20 * 10 * FRAME_BYTES, marks=4, drop_frames=2,
                               max_epoch=[6, 7], max_depth=[30 * FRAME_BYTES, FRAME_BYTES],
                               job_bytes=[5]), 1, counters_size(1), 1)
    iv = interval(old, new, closed_epoch=6)
    assert iv.frames == 20 and iv.depth == pytest.approx(10.0) and iv.depth_max == pytest.approx(30.0)
    assert (iv.marks, iv.drops, iv.job_bytes) == (4, 2, (5,))
    quiet = interval(new, new, closed_epoch=7)
    assert (quiet.frames, quiet.depth, quiet.depth_max) == (0, 0.0, 0.0)

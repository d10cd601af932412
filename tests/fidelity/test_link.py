"""The link invariant's arithmetic, run by the kernel program itself on hand-built dequeue
timelines (BPF_PROG_TEST_RUN of its syscall twin), and the Python view of its map in step with
the C source."""

from __future__ import annotations

import re

import pytest

from mn_harness.fidelity import link
from mn_harness.fidelity.link import Egress, LinkGapProgram, LinkGaps, bucket_bounds
from mn_harness.p4.limits import FRAME_BYTES

RATE = 100e6  # bit/s: a 1514-byte frame takes 121.12 us
FRAME_NS = round(FRAME_BYTES * 8 / RATE * 1e9)


def c_link_fields() -> list[str]:
    body = re.search(r"struct mnh_link \{(.*?)\};", link.SOURCE.read_text(), re.S).group(1)
    return re.findall(r"__u64 (\w+);", body)


def c_define(name: str) -> int:
    return int(re.search(rf"#define {name} (\d+)", link.SOURCE.read_text()).group(1))


def test_fields_and_constants_mirror_the_c_source():
    assert tuple(c_link_fields()) == link.LINK_FIELDS
    assert c_define("MNH_HIST_BUCKETS") == link.HIST_BUCKETS
    assert c_define("MNH_HIST_SUB_BITS") == link.HIST_SUB_BITS
    assert c_define("MNH_FP_SHIFT") == link.FP_SHIFT
    assert c_define("MNH_SIZE_CLASSES") == link.SIZE_CLASSES


def test_histogram_buckets_tile_the_line():
    highs = [bucket_bounds(i) for i in range(link.HIST_BUCKETS)]
    assert highs[0] == (0, 1)
    for (_, hi), (lo, _) in zip(highs, highs[1:], strict=False):
        assert hi == lo
    assert all((hi - lo) / lo <= 0.125 for lo, hi in highs[8:])


@pytest.fixture(scope="module")
def program():
    prog = LinkGapProgram(log=lambda *_: None)
    yield prog
    prog.close()


_KEYS = iter(range(1, 1 << 30))


@pytest.fixture
def egress(program):
    """A fresh map entry (an egress no namespace has: only the timeline feeds it)."""
    e = Egress("s1->s2", 0, next(_KEYS), RATE)
    program.put(e, FRAME_BYTES, 0.10)
    return e


def backlogged(n: int, start: int = 0, size: int = FRAME_BYTES, gap: int = FRAME_NS) -> list[tuple[int, int, int]]:
    return [(start + i * gap, size, 5) for i in range(n)]


@pytest.mark.root
def test_a_backlogged_link_with_a_known_stall_is_flagged(program, egress):
    events = backlogged(100)
    stall_at = events[-1][0] + FRAME_NS + 500_000  # 500 us late
    events.append((stall_at, FRAME_BYTES, 5))
    program.feed(egress, events)
    gaps = program.read(egress)
    assert gaps.gaps == 100 and gaps.within == 99 and gaps.late == 1 and gaps.early == 0
    p100 = gaps.excess_quantile_ns(1.0)
    assert 500_000 <= p100 <= 500_000 * 1.125  # the stall, to the histogram's resolution
    assert gaps.excess_quantile_ns(0.5) == 0
    assert gaps.size_gaps[1] == 100 and gaps.size_within[1] == 99


@pytest.mark.root
def test_an_idle_gap_is_not_counted(program, egress):
    events = backlogged(10)
    last = events[-1][0]
    events[-1] = (last, FRAME_BYTES, 0)  # the queue ran empty behind this packet
    events.append((last + 10_000_000, FRAME_BYTES, 3))  # 10 ms later: idle, not late
    events.append((last + 10_000_000 + FRAME_NS, FRAME_BYTES, 3))
    program.feed(egress, events)
    gaps = program.read(egress)
    assert gaps.dequeues == 12 and gaps.gaps == 10 and gaps.within == 10 and gaps.late == 0


@pytest.mark.root
def test_a_burst_after_a_late_timer_is_early_and_small_packets_start_no_gap(program, egress):
    t = 0
    events = [(t, FRAME_BYTES, 5)]
    t += FRAME_NS + 60_000          # late by half a frame
    events.append((t, FRAME_BYTES, 5))
    t += FRAME_NS - 60_000          # the catch-up: early
    events.append((t, FRAME_BYTES, 5))
    t += FRAME_NS
    events.append((t, 66, 5))       # an ACK: the gap after it is not counted
    events.append((t + 1_000, FRAME_BYTES * 4, 5))
    events.append((t + 1_000 + 4 * FRAME_NS, FRAME_BYTES, 0))  # a 4-frame GSO packet, on time
    program.feed(egress, events)
    gaps = program.read(egress)
    assert (gaps.gaps, gaps.within, gaps.late, gaps.early) == (4, 2, 1, 1)
    assert gaps.size_gaps[4] == 1 and gaps.size_within[4] == 1
    assert gaps.rate_ratio == pytest.approx(1.0)  # the catch-up gave back what the late timer took


@pytest.mark.root
def test_a_rate_change_moves_the_serialisation_time(program, egress):
    program.set_rate(egress, RATE / 2)
    program.feed(egress, backlogged(11, gap=2 * FRAME_NS))
    gaps = program.read(egress)
    assert gaps.gaps == 10 and gaps.within == 10


@pytest.mark.root
def test_differences_between_reads(program, egress):
    program.feed(egress, backlogged(5))
    first = program.read(egress)
    # 5 ms later with packets queued all along: a late gap, then 4 on time
    program.feed(egress, backlogged(5, start=5 * FRAME_NS + 5_000_000))
    delta = program.read(egress) - first
    assert isinstance(delta, LinkGaps) and delta.dequeues == 5 and delta.gaps == 5 and delta.late == 1

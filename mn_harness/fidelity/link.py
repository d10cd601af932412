"""The link invariant on every shaped egress: the kernel program (bpf/link_gaps.bpf.c), its
loading and attachment, and what it counted.

Loading: bpftool loads the object and pins it in a BPF file system mounted inside a private
mount namespace (a child `unshare --mount` that lives for a moment); this process takes fds
of the programs and the map through /proc/<child>/root and the child goes, and with it every
pin. The tracepoint attachment is an fd of this process: when the run ends, or this process
dies, the program detaches and the kernel frees it. Nothing is left on the machine to clean.

The layout of struct mnh_link is mirrored here (LINK_FIELDS); tests/fidelity/test_link.py
parses the C source to keep them in step."""

from __future__ import annotations

import os
import struct
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mn_harness.bpf import syscall, toolchain
from mn_harness.bpf.errors import BpfError, BpfUnavailable
from mn_harness.bpf.toolchain import ObjectBuilder
from mn_harness.p4.limits import FRAME_BYTES

SOURCE = Path(__file__).resolve().parent / "bpf" / "link_gaps.bpf.c"
DEQUEUE_PROGRAM = "mnh_dequeue"
TIMELINE_PROGRAM = "mnh_timeline"
MAP_NAME = "mnh_links"
FP_SHIFT = 16
HIST_SUB_BITS = 3
HIST_BUCKETS = 320
# struct mnh_link, in order (all __u64), before the histogram
SIZE_CLASSES = 17  # gaps by the frames dequeued before them: 1..15, 16 or more
LINK_FIELDS = ("ns_per_byte_fp", "min_bytes", "tol_permille", "last_ns", "last_ideal_ns", "last_class",
               "dequeues", "bytes", "gaps", "within", "late", "early", "gap_ns", "ideal_ns")
_HEAD = struct.Struct(f"<{len(LINK_FIELDS)}Q")
_HIST = struct.Struct(f"<{HIST_BUCKETS}Q")
_SIZES = struct.Struct(f"<{2 * SIZE_CLASSES}Q")
VALUE_SIZE = _HEAD.size + _HIST.size + _SIZES.size
_KEY = struct.Struct("<II")
_EVENT = struct.Struct("<IIQQQ")  # struct mnh_timeline_event


def default_cache_dir() -> Path:
    """$MN_HARNESS_FIDELITY_CACHE, else /var/cache/mn-harness/fidelity as root, else ~/.cache/..."""
    return toolchain.default_cache_dir("fidelity", "MN_HARNESS_FIDELITY_CACHE")


def bucket_bounds(index: int) -> tuple[int, int]:
    """[low, high) of the excess (ns) histogram bucket `index`, as excess_bucket() fills it."""
    sub = 1 << HIST_SUB_BITS
    if index < sub:
        return index, index + 1
    octave = (index >> HIST_SUB_BITS) + HIST_SUB_BITS - 1
    step = 1 << (octave - HIST_SUB_BITS)
    low = (1 << octave) + (index & (sub - 1)) * step
    return low, low + step


def ns_per_byte_fp(rate_bps: float) -> int:
    """Serialisation time of one byte at `rate_bps`, in ns << FP_SHIFT."""
    return max(1, round(8e9 / rate_bps * (1 << FP_SHIFT)))


@dataclass(frozen=True)
class Egress:
    """One monitored egress: a shaped interface in a node's namespace."""

    name: str  # the directed link, e.g. "s1->s2"
    netns: int  # inode of the node's network namespace
    ifindex: int
    rate_bps: float
    frame_bytes: int = FRAME_BYTES  # a full frame of its link's MTU: the least dequeue a counted gap follows

    def key(self) -> bytes:
        return _KEY.pack(self.netns, self.ifindex)


@dataclass(frozen=True)
class LinkGaps:
    """What the program counted on one egress."""

    dequeues: int
    bytes_dequeued: int
    gaps: int  # counted gaps: after a full-size dequeue that left packets queued
    within: int
    late: int
    early: int
    gap_ns: int
    ideal_ns: int
    excess_hist: tuple[int, ...]
    size_gaps: tuple[int, ...]  # counted gaps by frames dequeued before them (index 16: 16 or more)
    size_within: tuple[int, ...]

    @classmethod
    def parse(cls, raw: bytes) -> LinkGaps:
        head = dict(zip(LINK_FIELDS, _HEAD.unpack_from(raw, 0), strict=True))
        sizes = _SIZES.unpack_from(raw, _HEAD.size + _HIST.size)
        return cls(head["dequeues"], head["bytes"], head["gaps"], head["within"], head["late"],
                   head["early"], head["gap_ns"], head["ideal_ns"], _HIST.unpack_from(raw, _HEAD.size),
                   sizes[:SIZE_CLASSES], sizes[SIZE_CLASSES:])

    def __sub__(self, other: LinkGaps) -> LinkGaps:
        def minus(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(x - y for x, y in zip(a, b, strict=True))
        return LinkGaps(self.dequeues - other.dequeues, self.bytes_dequeued - other.bytes_dequeued,
                        self.gaps - other.gaps, self.within - other.within, self.late - other.late,
                        self.early - other.early, self.gap_ns - other.gap_ns, self.ideal_ns - other.ideal_ns,
                        minus(self.excess_hist, other.excess_hist), minus(self.size_gaps, other.size_gaps),
                        minus(self.size_within, other.size_within))

    @property
    def within_share(self) -> float | None:
        return self.within / self.gaps if self.gaps else None

    def excess_quantile_ns(self, q: float) -> float | None:
        """The q-quantile of the excess (gap beyond serialisation time, 0 when not late), from
        the histogram: the upper bound of the bucket it falls in (at most 12.5% above)."""
        total = sum(self.excess_hist)
        if not total:
            return None
        rank, seen = q * total, 0
        for index, count in enumerate(self.excess_hist):
            seen += count
            if seen >= rank and count:
                return float(0 if index == 0 else bucket_bounds(index)[1])
        return float(bucket_bounds(HIST_BUCKETS - 1)[1])

    @property
    def rate_ratio(self) -> float | None:
        """Serialisation time over gap time while backlogged: the achieved rate as a share of the
        configured one (< 1: the link lost time; > 1: it sent faster than the line)."""
        return self.ideal_ns / self.gap_ns if self.gap_ns else None


def empty_value(egress: Egress, min_bytes: int, tolerance: float) -> bytes:
    head = [0] * len(LINK_FIELDS)
    head[0], head[1], head[2] = ns_per_byte_fp(egress.rate_bps), min_bytes, round(tolerance * 1000)
    return _HEAD.pack(*head) + _HIST.pack(*([0] * HIST_BUCKETS)) + _SIZES.pack(*([0] * 2 * SIZE_CLASSES))


class LinkGapProgram:
    """The loaded program and its map (no attachment yet)."""

    def __init__(self, log=print, cache_dir: Path | None = None):
        tools = toolchain.check_toolchain()
        builder = ObjectBuilder(cache_dir or default_cache_dir(), log=log)
        builder.tools = tools
        obj, compiled = builder.compile(SOURCE, [], "link_gaps")
        if compiled:
            log(f"fidelity: compiled {SOURCE.name} -> {obj}")
        self.fds = load_pinned(obj, tools["bpftool"], (DEQUEUE_PROGRAM, TIMELINE_PROGRAM), (MAP_NAME,))
        self.map = syscall.BpfMap.from_fd(self.fds[MAP_NAME])
        self._attached: int | None = None

    def attach(self) -> None:
        if self._attached is None:
            self._attached = syscall.raw_tracepoint_open(self.fds[DEQUEUE_PROGRAM])

    def put(self, egress: Egress, min_bytes: int, tolerance: float) -> None:
        self.map.update(egress.key(), empty_value(egress, min_bytes, tolerance))

    def set_rate(self, egress: Egress, rate_bps: float) -> None:
        """A link's rate changed: later gaps are measured against the new serialisation time."""
        raw = self.map.lookup(egress.key())
        if raw is not None:
            value = bytearray(raw[:VALUE_SIZE])
            struct.pack_into("<Q", value, 0, ns_per_byte_fp(rate_bps))
            self.map.update(egress.key(), bytes(value))

    def run_stats(self) -> tuple[int, int]:
        """(ns, runs) the tracepoint program ran (0, 0 unless kernel.bpf_stats_enabled)."""
        return syscall.prog_run_stats(self.fds[DEQUEUE_PROGRAM])

    def read(self, egress: Egress) -> LinkGaps | None:
        raw = self.map.lookup(egress.key())
        return None if raw is None else LinkGaps.parse(raw)

    def feed(self, egress: Egress, events: Iterable[tuple[int, int, int]]) -> None:
        """Hand-built dequeues (now_ns, bytes, packets left queued) through the same arithmetic
        as the tracepoint's, one BPF_PROG_TEST_RUN each."""
        for now_ns, nbytes, queued in events:
            ret = syscall.prog_test_run(self.fds[TIMELINE_PROGRAM],
                                        _EVENT.pack(egress.netns, egress.ifindex, now_ns, nbytes, queued))
            if ret != 0:
                raise BpfError(f"{egress.name}: no map entry for the timeline")

    def close(self) -> None:
        self.map.close()
        for fd in ([self._attached] if self._attached is not None else []) + list(self.fds.values()):
            try:
                os.close(fd)
            except OSError:
                pass
        self._attached = None
        self.fds = {}


_LOADER = """set -e
mount -t bpf bpf /sys/fs/bpf
"$1" prog loadall "$2" /sys/fs/bpf/prog pinmaps /sys/fs/bpf/maps
echo ready
read _
"""


def load_pinned(obj: Path, bpftool: str, programs: Sequence[str], maps: Sequence[str]) -> dict[str, int]:
    """fds of `programs` and `maps` of `obj`, loaded by bpftool inside a private mount namespace
    that is gone when this returns (see the module docstring)."""
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", _LOADER, "loader",
                             bpftool, str(obj)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    fds: dict[str, int] = {}
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            proc.wait(timeout=30)
            err = toolchain.last_line(proc.stderr.read() if proc.stderr else "")
            raise BpfUnavailable(f"loading {obj.name} failed: {err}")
        root = f"/proc/{proc.pid}/root/sys/fs/bpf"
        for name in programs:
            fds[name] = syscall.obj_get(f"{root}/prog/{name}")
        for name in maps:
            fds[name] = syscall.obj_get(f"{root}/maps/{name}")
    except BaseException:
        for fd in fds.values():
            os.close(fd)
        raise
    finally:
        try:
            assert proc.stdin is not None
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return fds

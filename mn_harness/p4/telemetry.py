"""Read the telemetry counters of mn_harness/p4/programs/ecn_telemetry.p4 over P4Runtime and
turn two reads into one sample per egress port.

Why counters read over P4Runtime (see also the header of ecn_telemetry.p4): BMv2's P4Runtime
server cannot read registers; counters cost the data path one increment each and never make it
wait; one Read RPC per switch per sample fetches only the cells of the watched ports and jobs
(ports x (3 + 64 histogram buckets) + ports x jobs x 2 cells). The request is serialized once and
the answer decoded without protobuf's pure-Python parser (CounterReadPlan): 2 ports and 8 jobs
(166 cells) take ~1.3 ms per sample on this 2-core machine, so 50 samples/s cost ~5% of a core in
the collector and ~1% in the switch.

A queue depth is a gauge and counters only add, so the program counts packets per queue-depth
bucket; the difference of two reads is the depth distribution seen by every packet of the
interval, from which `sample` derives the mean and maximum depth (exact with bucket width 1, i.e.
queues up to 63 packets).

    reader = TelemetryReader(conn, "s1", ports=[1, 2], jobs=[1, 2], bucket_shift={1: 0, 2: 1})
    reader.sample()           # first call: baseline, returns []
    for s in reader.sample(): # PortSample per port since the previous call
        ...
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .entries import job_port_index, port_index, qdepth_index
from .limits import QBUCKETS

if TYPE_CHECKING:  # the runtime loads grpc; the delta math here needs none
    from .runtime import CounterReadPlan

COUNTERS = ("port_enq", "port_tx", "port_marks", "qdepth_hist", "job_tx", "job_marks")


@dataclass(frozen=True)
class DepthStats:
    packets: int        # packets that went through the queue in the interval
    mean: float         # mean depth (packets) they saw at enqueue; 0 when no packets
    max: float          # largest depth seen (bucket midpoint; exact when the width is 1)


def bucket_value(bucket: int, shift: int) -> float:
    """Representative depth of a histogram bucket: its midpoint; the last bucket is open-ended
    and stands for its lower edge."""
    low = bucket << shift
    if shift == 0 or bucket >= QBUCKETS - 1:
        return float(low)
    return low + ((1 << shift) - 1) / 2


def histogram_stats(counts: Sequence[int], shift: int) -> DepthStats:
    total = sum(counts)
    if total <= 0:
        return DepthStats(0, 0.0, 0.0)
    mean = sum(c * bucket_value(b, shift) for b, c in enumerate(counts)) / total
    top = max(b for b, c in enumerate(counts) if c > 0)
    return DepthStats(total, mean, bucket_value(top, shift))


@dataclass(frozen=True)
class PortSample:
    time: float                 # time.time() of the read that closes the interval
    interval: float             # seconds since the previous read
    switch: str
    port: int
    tx_packets: int             # left the egress queue in the interval
    tx_bytes: int
    enq_packets: int            # sent towards the queue in the interval
    marks: int                  # CE marks this switch set on the port in the interval
    depth: DepthStats
    job_bytes: dict[int, int] = field(default_factory=dict)
    job_marks: dict[int, int] = field(default_factory=dict)


@dataclass
class Snapshot:
    time: float
    cells: dict[str, dict[int, tuple[int, int]]]  # counter -> index -> (packets, bytes)


def _delta(new: Mapping[int, tuple[int, int]], old: Mapping[int, tuple[int, int]], index: int
           ) -> tuple[int, int]:
    n = new.get(index, (0, 0))
    o = old.get(index, (0, 0))
    # Counters never go down unless the pipeline was reset; then count from zero.
    dp, db = n[0] - o[0], n[1] - o[1]
    return (n[0], n[1]) if dp < 0 or db < 0 else (dp, db)


def samples_between(old: Snapshot, new: Snapshot, switch: str, ports: Iterable[int],
                    jobs: Iterable[int], bucket_shift: Mapping[int, int]) -> list[PortSample]:
    jobs = list(jobs)
    out = []
    for port in ports:
        pi = port_index(port)
        tx = _delta(new.cells["port_tx"], old.cells["port_tx"], pi)
        enq = _delta(new.cells["port_enq"], old.cells["port_enq"], pi)
        marks = _delta(new.cells["port_marks"], old.cells["port_marks"], pi)[0]
        hist = [_delta(new.cells["qdepth_hist"], old.cells["qdepth_hist"],
                       qdepth_index(port, b))[0] for b in range(QBUCKETS)]
        jb = {j: _delta(new.cells["job_tx"], old.cells["job_tx"], job_port_index(j, port))[1]
              for j in jobs}
        jm = {j: _delta(new.cells["job_marks"], old.cells["job_marks"],
                        job_port_index(j, port))[0] for j in jobs}
        out.append(PortSample(new.time, new.time - old.time, switch, port, tx[0], tx[1], enq[0],
                              marks, histogram_stats(hist, bucket_shift.get(port, 0)), jb, jm))
    return out


class TelemetryReader:
    """Samples one switch. `conn` is a SwitchConnection with the ecn_telemetry P4Info set."""

    def __init__(self, conn, switch: str, ports: Iterable[int], jobs: Iterable[int] = (0,),
                 bucket_shift: Mapping[int, int] | None = None):
        self.conn = conn
        self.switch = switch
        self.ports = sorted(set(ports))
        self.jobs = sorted(set(jobs))
        self.bucket_shift = dict(bucket_shift or {})
        self._last: Snapshot | None = None
        self._plan: CounterReadPlan | None = None

    def wanted(self) -> dict[str, list[int]]:
        pis = sorted({port_index(p) for p in self.ports})
        return {
            "port_enq": pis,
            "port_tx": pis,
            "port_marks": pis,
            "qdepth_hist": [qdepth_index(p, b) for p in self.ports for b in range(QBUCKETS)],
            "job_tx": [job_port_index(j, p) for j in self.jobs for p in self.ports],
            "job_marks": [job_port_index(j, p) for j in self.jobs for p in self.ports],
        }

    def snapshot(self) -> Snapshot:
        if self._plan is None:
            self._plan = self.conn.counter_read_plan(self.wanted())
        cells = self._plan.read()
        return Snapshot(time.time(), cells)

    def sample(self) -> list[PortSample]:
        snap = self.snapshot()
        last, self._last = self._last, snap
        if last is None:
            return []
        return samples_between(last, snap, self.switch, self.ports, self.jobs,
                               self.bucket_shift)

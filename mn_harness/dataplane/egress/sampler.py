"""The Linux data plane's queue.csv source: every sampled port's egress program read once per
sample (two bpf(2) calls per port: close the epoch, read the counters) and turned into
QueueSample rows (mn_harness/dataplane/queue_csv.py writes them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mn_harness.dataplane.egress.counters import Counters, interval
from mn_harness.dataplane.egress.program import EgressProgram
from mn_harness.dataplane.queue_csv import QueueSample
from mn_harness.p4.limits import FRAME_BYTES


@dataclass
class SampledPort:
    switch: str           # the node (a switch, or a host named in run.queue_telemetry)
    port: int
    link: str             # e.g. s1->s2
    program: EgressProgram
    drops_known: bool = True  # False behind netem (it limits packets): drops not counted
    frame_bytes: int = FRAME_BYTES  # the link's full frame: queue.csv's depths count them
    last: Counters | None = None


class EgressSampler:
    """Callable for QueueCollector: one QueueSample per port since the previous call (the first
    call returns [] and sets the baseline)."""

    def __init__(self, ports: Sequence[SampledPort], job_names: Sequence[str]):
        self.ports = list(ports)
        self.job_names = list(job_names)  # job id i + 1 -> job_names[i]

    def __call__(self) -> list[QueueSample]:
        out = []
        for p in self.ports:
            new = p.program.read()
            old, p.last = p.last, new
            if old is None:
                continue
            iv = interval(old, new, p.program.epoch - 1, p.frame_bytes)
            jobs = {name: iv.job_bytes[i + 1] for i, name in enumerate(self.job_names)
                    if i + 1 < len(iv.job_bytes)}
            marks = {name: iv.job_marks[i + 1] for i, name in enumerate(self.job_names)
                     if i + 1 < len(iv.job_marks)}
            out.append(QueueSample(p.switch, p.port, p.link, iv.depth, round(iv.depth_max, 2),
                                   iv.frames, iv.marks, iv.drops if p.drops_known else None, jobs, marks))
        return out

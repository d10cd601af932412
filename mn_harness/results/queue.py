"""Queue telemetry summary: queue.csv rows → summary.json's `queue`, `ecn_marks`, `telemetry`.

Both data planes feed rows to a `QueueSummary` while they write queue.csv
(mn_harness/dataplane/queue_csv.py); `summarise_queue_csv` recomputes the same fields from a
file. The fields: `queue` per `switch:port` (link, max_depth, packet-weighted mean_depth,
packets, marks, drops — None where the data plane cannot see drops), `ecn_marks` per job and
`telemetry` (samples, samples_per_s)."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

from mn_harness.results.schema import QUEUE_JOB_PREFIX


class QueueSummary:
    """Accumulates queue.csv rows into the summary fields."""

    def __init__(self, job_names: Iterable[str]):
        self.job_names = list(job_names)
        self.ports: dict[str, dict] = {}
        self.ecn_marks = {j: 0 for j in self.job_names}
        self.samples = 0
        self.first_t: float | None = None
        self.last_t: float | None = None

    def add_tick(self, t: float) -> None:
        self.samples += 1
        self.first_t = t if self.first_t is None else self.first_t
        self.last_t = t

    def add_row(self, switch: str, port, link: str, depth: float, depth_max: float, packets: int,
                marks: int, job_marks: dict[str, int] | None = None, drops: int | None = None) -> None:
        p = self.ports.setdefault(f"{switch}:{port}", {"link": link, "max_depth": 0.0,
                                                       "_depth_sum": 0.0, "packets": 0, "marks": 0,
                                                       "drops": None})
        p["max_depth"] = max(p["max_depth"], depth_max)
        p["_depth_sum"] += depth * packets
        p["packets"] += packets
        p["marks"] += marks
        if drops is not None:
            p["drops"] = (p["drops"] or 0) + drops
        for job, n in (job_marks or {}).items():
            self.ecn_marks[job] = self.ecn_marks.get(job, 0) + n

    def result(self) -> dict:
        queue = {}
        for key, p in self.ports.items():
            queue[key] = {"link": p["link"], "max_depth": p["max_depth"],
                          "mean_depth": round(p["_depth_sum"] / p["packets"], 3) if p["packets"] else 0.0,
                          "packets": p["packets"], "marks": p["marks"], "drops": p["drops"]}
        span = (self.last_t - self.first_t) if self.samples > 1 and self.first_t is not None \
            and self.last_t is not None else 0.0
        rate = round((self.samples - 1) / span, 1) if span > 0 else 0.0
        return {"queue": queue, "ecn_marks": dict(self.ecn_marks),
                "telemetry": {"samples": self.samples, "samples_per_s": rate}}


def summarise_queue_csv(path: Path | str, job_marks: dict[str, int] | None = None) -> dict:
    """Summary fields from a queue.csv (per-port max / packet-weighted mean depth, marks,
    sample rate). Per-job marks are not in the file; pass them if known."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        jobs = [c[len(QUEUE_JOB_PREFIX):] for c in reader.fieldnames or []
                if c.startswith(QUEUE_JOB_PREFIX)]
        summary = QueueSummary(jobs)
        ticks = set()
        for r in reader:
            t = float(r["t"])
            if t not in ticks:
                ticks.add(t)
                summary.add_tick(t)
            depth = float(r["depth"])
            drops = r.get("drops")
            summary.add_row(r["switch"], r["port"], r.get("link", ""), depth,
                            float(r.get("depth_max") or depth), int(float(r.get("packets") or 0)),
                            int(float(r["marks"] or 0)),
                            drops=None if drops in (None, "") else int(float(drops)))
    result = summary.result()
    result["ecn_marks"] = dict(job_marks or {})
    return result

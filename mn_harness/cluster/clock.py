"""Each server's clock against the head's: estimated, applied to its workers' times, bounded.

The workers' times are seconds since t0 on their server's CLOCK_MONOTONIC. On one machine every
namespace shares that clock; on several, each server's runs from its own boot. So the head
estimates every server's offset (its clock minus the head's) from probes over the agent's line,
as Cristian's algorithm does: the head notes t1, the agent answers with its clock ts, the head
notes t2; then ts - (t1 + t2) / 2 is the offset, wrong by at most half the round trip (the
agent read its clock somewhere between t1 and t2). Of PROBES probes the one with the shortest
round trip is kept: queueing on the way only lengthens a trip, so the shortest says the most.

Before the run the estimate gives each server its own t0 (the head's t0 plus the offset), so
its workers start together with everyone else's. After the run it is estimated again: clocks
drift (tens of ppm for unsynchronised crystals, ~1 ms a minute), so the offset at time t is the
line through the two estimates, and every iteration and phase time of the server's workers is
corrected by how far the line moved since the start. What is left is the error bound: at any
time between the estimates, the line is within the larger of the two bounds of the true offset
(when the drift was steady over the run). That bound, per server, is what summary.json records
(provenance `servers`, fidelity `servers`), and a run whose bound exceeds `run.fidelity.
clock_error` × the shortest mean iteration time is not faithful: its jobs' overlap and phase
order across servers could be an artefact of the clocks."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

PROBES = 20


@dataclass(frozen=True)
class ClockEstimate:
    offset_s: float  # server clock - head clock
    error_s: float  # |estimate - truth| <= this (half the shortest round trip)
    rtt_s: float  # the shortest round trip
    at_s: float  # when, on the head's clock (the middle of that probe)
    probes: int

    def as_dict(self) -> dict:
        return {"offset_ms": round(self.offset_s * 1e3, 4), "error_ms": round(self.error_s * 1e3, 4),
                "rtt_min_ms": round(self.rtt_s * 1e3, 4), "probes": self.probes}


def estimate(samples: Iterable[tuple[float, float, float]]) -> ClockEstimate:
    """From (t1, ts, t2) probes: the head sent at t1, the server read ts, the head had the
    answer at t2."""
    samples = list(samples)
    if not samples:
        raise ValueError("no clock probes")
    t1, ts, t2 = min(samples, key=lambda s: s[2] - s[0])
    mid = (t1 + t2) / 2
    return ClockEstimate(offset_s=ts - mid, error_s=(t2 - t1) / 2, rtt_s=t2 - t1, at_s=mid, probes=len(samples))


def probe(ask: Callable[[], float], now: Callable[[], float], n: int = PROBES) -> ClockEstimate:
    """`n` probes: `ask()` returns the server's clock, `now()` reads ours."""
    samples = []
    for _ in range(n):
        t1 = now()
        ts = ask()
        t2 = now()
        samples.append((t1, ts, t2))
    return estimate(samples)


@dataclass(frozen=True)
class ClockTrack:
    """One server's clock over a run: the estimate before (applied at the start) and after."""

    before: ClockEstimate
    after: ClockEstimate | None = None

    @property
    def drift(self) -> float:
        """Seconds the offset moved per second of the head's clock (0 without an after estimate)."""
        if self.after is None or self.after.at_s <= self.before.at_s:
            return 0.0
        return (self.after.offset_s - self.before.offset_s) / (self.after.at_s - self.before.at_s)

    @property
    def error_s(self) -> float:
        """The bound on the corrected times' error: the larger of the two estimates' bounds; the
        start's bound and how far the offset moved, when there is no after estimate."""
        if self.after is None:
            return self.before.error_s
        return max(self.before.error_s, self.after.error_s)

    def shift_s(self, t_since_t0: float, t0_head: float) -> float:
        """What to add to a time since t0 on this server to make it one on the head's clock."""
        return -self.drift * (t0_head + t_since_t0 - self.before.at_s)

    def as_dict(self) -> dict:
        out = {"before": self.before.as_dict(), "after": self.after.as_dict() if self.after else None,
               "drift_ppm": round(self.drift * 1e6, 3), "error_ms": round(self.error_s * 1e3, 4)}
        return out


TIME_KEYS = ("t_start", "t_comm_start", "t_comm_end", "t_end")


def correct_record(record: dict, shift: Callable[[float], float]) -> dict:
    """An iteration line of a worker with its times (and its phases') moved by shift(t)."""
    out = dict(record)
    for key in TIME_KEYS:
        if isinstance(out.get(key), (int, float)):
            out[key] = round(out[key] + shift(out[key]), 6)
    phases = out.get("phases")
    if isinstance(phases, list):
        out["phases"] = [{**p, **{k: round(p[k] + shift(p[k]), 6) for k in ("t_start", "t_end")
                                  if isinstance(p.get(k), (int, float))}} if isinstance(p, dict) else p
                         for p in phases]
    return out


def correct_file(path: Path, track: ClockTrack, t0_head: float) -> int:
    """Rewrite a worker's iterations.jsonl on the head's clock; the lines corrected. A line cut
    by a kill (not JSON) and everything after it stay as they were."""
    lines = path.read_text().splitlines(keepends=True)
    out, done = [], 0
    for n, line in enumerate(lines):
        try:
            record = json.loads(line)
        except ValueError:
            out.extend(lines[n:])
            break
        out.append(json.dumps(correct_record(record, lambda t: track.shift_s(t, t0_head))) + "\n")
        done += 1
    path.write_text("".join(out))
    return done

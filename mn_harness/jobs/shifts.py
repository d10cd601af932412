"""CASSINI's time shifts, run (`run.shifts: cassini`, config/shifts.py): the baseline that reaches
interleaving by scheduling instead of by congestion control.

CASSINI (NSDI 2024) computes a time shift per job sharing a link (jobs/cassini.py: the joint
rotation of its affinity component on the unified circle), delays each job's iterations by it,
and re-applies the shifts when a job drifts. Here:

* **Shifts applied**: each job of a shared link starts at its start offset plus its shift
  (`start_shifts`, added to the worker's start offset in jobs/specs.py).
* **Drift detected**: while the jobs run, `ShiftScheduler` follows each job's communication
  starts (the earliest rank's, per complete iteration). Job j's phase belongs at
  `E + σ·(shift_j + compute_j)` modulo its period `σ·T_j`, where T_j is its ideal period,
  `σ` the component's pace (the slowest job's recent iteration time, holds left out, over its
  ideal: jobs slower than ideal by the same factor keep their shifts) and E the component's
  epoch. Each job's last communication start is measured against the start nearest in time to
  it of the job that reported last (iteration times vary by tens of percent where phases meet, so σ is only
  roughly each one's period: over at most half a period that matters little). For each job
  taken as the reference the others need delays `(target − start) mod σT`; the reference with
  the least total delay to apply wins (delays only: a job cannot be hurried, so the job that is
  ahead waits). A job is off when both ways round it is more than `drift`·σT from its target.
* **Re-applied**: every job that is off gets its delay as a hold at the start of an iteration
  it has not begun (two after the last one it reported: the next one is already computing);
  the worker sleeps there, inside the iteration, so the iteration time counts what the
  schedule cost (iterations.csv `hold_s`). Until every held job has reported the held iteration
  its component is not judged again.

`ShiftScheduler` is pure (observations in, corrections out); `ShiftDriver` feeds it from the
workers' iteration lines and sends each correction to every rank of the job (`DELAY <iteration>
<seconds>` on the worker's stdin, mn_harness/worker/holds.py)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from mn_harness.config import Experiment
from mn_harness.jobs.affinity import components, link_groups
from mn_harness.jobs.cassini import job_demands, predict
from mn_harness.network.plan import NetworkPlan

SETTLE_ITERATIONS = 2  # iterations every job of a component reports before it is judged (TCP ramp-up)
PACE_WINDOW = 5  # recent iterations the pace σ is the median of


@dataclass(frozen=True)
class JobShift:
    """One job's place on CASSINI's circle."""

    job: str
    component: int  # its affinity component (jobs in one are shifted against each other)
    shift_s: float  # CASSINI's time shift: the delay of its start
    period_s: float  # its ideal iteration time
    comm_at_s: float  # where its communication begins in its iteration (its compute)

    @property
    def target_s(self) -> float:
        """Where its communication begins on the component's circle: its shift, then its compute."""
        return self.shift_s + self.comm_at_s


@dataclass(frozen=True)
class Correction:
    job: str
    iteration: int  # the hold comes at the start of this iteration
    delay_s: float


def job_shifts(experiment: Experiment, plan: NetworkPlan) -> dict[str, JobShift]:
    """The jobs that share a link, with CASSINI's shift (the joint rotation of their component)."""
    prediction = predict(experiment, plan)
    demands = job_demands(experiment, plan)
    out: dict[str, JobShift] = {}
    for index, (jobs, _) in enumerate(components(link_groups(plan.link_jobs()))):
        for job in jobs:
            pj = prediction.jobs[job]
            out[job] = JobShift(job, index, pj.shift_s, pj.period_s, demands[job].compute_s)
    return out


def start_shifts(experiment: Experiment, plan: NetworkPlan) -> dict[str, float]:
    """Seconds to add to each job's start offset: CASSINI's shifts with `run.shifts` on, else none."""
    if not experiment.run.shifts.enabled:
        return {}
    return {job: s.shift_s for job, s in job_shifts(experiment, plan).items()}


@dataclass
class _Seen:
    """What the scheduler knows of one job: its last complete iteration's communication start and
    its recent natural iteration times (holds left out)."""

    iteration: int = -1
    comm_start: float = 0.0
    starts: list[float] = field(default_factory=list)  # its recent communication starts, oldest first
    natural: list[float] = field(default_factory=list)
    pending: int | None = None  # a hold was sent for this iteration and no held iteration since reported


class ShiftScheduler:
    """Decides the holds that keep each job on its CASSINI shift (the module's docstring)."""

    def __init__(self, shifts: Mapping[str, JobShift], drift: float):
        self.shifts = dict(shifts)
        self.drift = drift
        self.seen = {job: _Seen() for job in self.shifts}
        self.corrections: list[Correction] = []  # every one decided, in order

    def observe(self, job: str, iteration: int, comm_start: float, natural_s: float, held: bool = False) -> None:
        """Job `job` completed `iteration`: its earliest rank began communicating at `comm_start`,
        the iteration took `natural_s` without its hold, and `held` says whether it had one (a
        hold that came late for its iteration is taken at the next: until a held iteration at or
        after the one asked for is reported, the job's position is the one before the hold)."""
        seen = self.seen.get(job)
        if seen is None or iteration <= seen.iteration:
            return
        seen.iteration, seen.comm_start = iteration, comm_start
        seen.starts = [*seen.starts, comm_start][-PACE_WINDOW:]
        seen.natural = [*seen.natural, natural_s][-PACE_WINDOW:]
        if seen.pending is not None and iteration >= seen.pending and held:
            seen.pending = None

    def pace(self, jobs: Sequence[str]) -> float:
        """σ: the slowest job's recent median natural iteration time over its ideal period."""
        return max(statistics.median(self.seen[j].natural) / self.shifts[j].period_s for j in jobs)

    def decide(self) -> list[Correction]:
        """The holds to send now (empty when every judged job is within its drift)."""
        out: list[Correction] = []
        by_component: dict[int, list[str]] = {}
        for job, shift in self.shifts.items():
            by_component.setdefault(shift.component, []).append(job)
        for jobs in by_component.values():
            if len(jobs) < 2 or any(self.seen[j].pending is not None or
                                    self.seen[j].iteration + 1 < SETTLE_ITERATIONS for j in jobs):
                continue
            out += self._component(jobs)
        self.corrections += out
        return out

    def errors(self, jobs: Sequence[str], sigma: float) -> dict[str, float]:
        """How late each job's last communication start is against its target, relative to the
        job that reported last (seconds, wrapped into half a period either way): from that job's
        communication start nearest in time to it, so the pace's error counts over at most half
        a period, and a job's newest start is judged once another job has one near it."""
        base = max(jobs, key=lambda j: self.seen[j].comm_start)
        out = {}
        for j in jobs:
            start = self.seen[j].comm_start
            near = min(self.seen[base].starts, key=lambda c: abs(c - start))
            period = sigma * self.shifts[j].period_s
            late = (start - near - sigma * (self.shifts[j].target_s - self.shifts[base].target_s)) % period
            out[j] = late - period if late > period / 2 else late
        return out

    def delays(self, jobs: Sequence[str], sigma: float, reference: str) -> dict[str, float]:
        """The delay that brings each job onto its target with `reference` where it is: in
        [0, σ·T_j)."""
        late = self.errors(jobs, sigma)
        return {j: (late[reference] - late[j]) % (sigma * self.shifts[j].period_s) for j in jobs}

    def off(self, delay: float, period: float) -> bool:
        """Is a job whose delay to its target is `delay` (of a period `period`) beyond the drift,
        ahead of its target and behind it?"""
        return min(delay, period - delay) > self.drift * period

    def _component(self, jobs: list[str]) -> list[Correction]:
        sigma = self.pace(jobs)
        periods = {j: sigma * self.shifts[j].period_s for j in jobs}
        best: dict[str, float] | None = None
        best_cost = float("inf")
        for reference in jobs:
            delays = self.delays(jobs, sigma, reference)
            cost = sum(d for j, d in delays.items() if self.off(d, periods[j]))
            if cost < best_cost - 1e-9:
                best, best_cost = delays, cost
        assert best is not None
        out = []
        for job in jobs:
            if self.off(best[job], periods[job]):
                target = self.seen[job].iteration + 2
                self.seen[job].pending = target
                out.append(Correction(job, target, round(best[job], 6)))
        return out


class ShiftDriver:
    """Feeds a ShiftScheduler from the workers' iteration lines (JSON lines, appended and flushed
    per iteration) and sends its corrections: `send(job, line)` writes a line to every rank of the
    job."""

    def __init__(self, scheduler: ShiftScheduler, ranks: Mapping[str, Sequence[str]],
                 send: Callable[[str, str], None]):
        self.scheduler = scheduler
        self.paths = {job: list(paths) for job, paths in ranks.items() if job in scheduler.shifts}
        self.send = send
        self._offsets: dict[str, int] = {}
        self._rows: dict[tuple[str, int], list[dict]] = {}

    def tick(self) -> list[Correction]:
        """Read what the workers appended, observe every iteration all ranks of a job reported,
        decide and send."""
        for job, paths in self.paths.items():
            for path in paths:
                for row in self._new_rows(path):
                    key = (job, int(row["iteration"]))
                    self._rows.setdefault(key, []).append(row)
                    if len(self._rows[key]) == len(paths):
                        self._observe(job, self._rows.pop(key))
        corrections = self.scheduler.decide()
        for c in corrections:
            self.send(c.job, f"DELAY {c.iteration} {c.delay_s!r}")
        return corrections

    def _observe(self, job: str, rows: list[dict]) -> None:
        holds = [float(r.get("hold_s") or 0.0) for r in rows]
        natural = max(float(r.get("t_end", r["t_comm_end"])) - float(r["t_start"]) - hold
                      for r, hold in zip(rows, holds, strict=True))
        self.scheduler.observe(job, int(rows[0]["iteration"]), min(float(r["t_comm_start"]) for r in rows),
                               natural, held=any(h > 0 for h in holds))

    def _new_rows(self, path: str) -> list[dict]:
        """Complete lines appended to `path` since the last read (a line being written waits)."""
        try:
            with open(path, "rb") as f:
                f.seek(self._offsets.get(path, 0))
                data = f.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self._offsets[path] = self._offsets.get(path, 0) + end
        rows = []
        for line in data[:end].splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
        return rows

"""CASSINI's compatibility prediction (NSDI 2024), from the experiment and its routed plan,
before anything runs: `validate` prints it, summary.json records it ("cassini"), the report
puts it next to the measured slowdowns.

The model (../shared/REFERENCE.md, "CASSINI"):

* Job j repeats with period T_j = its ideal iteration time (jobs.ideal) and communicates for
  c_j = T_j − its compute per iteration (the ideal collectives' time; the short form: bytes sent
  per worker / its bottleneck rate r_j), after its compute. A job with several phases is taken
  as one compute then one communication block per iteration, and time a collective overlaps
  compute (DDP buckets) is left out of c_j: an approximation for those. On a directed
  link l it then demands B_jl · 8 / c_j, the bytes it puts on l per iteration (jobs.ideal's
  link loads) spread over its communication, at most k_jl · r_j (k_jl = its flows crossing l:
  network.plan.link_ranks; the bound where c_j leaves out overlapped time, and for in-network
  aggregation, which has no schedule). Two flows of one ring crossing the same link (a 4-worker
  ring across a dumbbell) share it in c_j already, so each counts at half the rate, not at r_j.
* Unified circle: perimeter P = LCM of the periods, on a grid of `quantum_s` (the smallest of
  QUANTA_S that keeps P within MAX_TICKS ticks; periods are rounded to it). Rotating job j by
  ρ_j, the compatibility score of link l with capacity C is
      score_l = 1 − mean over the circle of max(0, Σ_j demand_j(t − ρ_j) − C) / C,
  1 when the phases can be rotated apart completely. The time shift of j is ρ_j mod T_j.
* Best rotation: grid search (exhaustive over ROTATION_STEPS positions per job for small
  sets, coordinate descent from two starts otherwise, then refined tick by tick), minimising
  the summed excess over the links (spread evenly among equally good rotations, `_penalty`).
  Per link alone (`score`, `shifts_s`), and jointly for every connected component of the
  affinity graph (jobs.affinity), one rotation per job for all its links (`joint_score`):
  where the graph has a loop the per-link optima may not be realisable at once (circular
  dependency).
* Predicted slowdown of a link = 1 + mean excess / C = 2 − score: the traffic above capacity
  at the best rotation is sent in added time, which stretches the circle and every iteration
  on it by that much. Two jobs that each communicate 60% of their iteration at the link rate:
  the best rotation still overlaps 20% of the period, score 0.8, slowdown 1.2 (the link needs
  1.2 periods); with the phases aligned (rotation 0, `aligned_score`: what fair sharing gives
  when they start together) 0.4, i.e. (1 − a) + N·a = 1.6. A job's predicted slowdown is the
  largest over its shared links, at the joint rotation; 1.0 for a job that shares nothing."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from mn_harness.config import Experiment
from mn_harness.jobs.affinity import components, link_groups, loops
from mn_harness.jobs.ideal import bytes_sent_per_worker, ideal_iteration_s, link_bytes_per_iteration
from mn_harness.network.plan import NetworkPlan

QUANTA_S = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
MAX_TICKS = 6000
ROTATION_STEPS = 72
EXHAUSTIVE_LIMIT = 6000  # rotation combinations searched exhaustively
MAX_PASSES = 50
SPREAD = 1.0  # weight of the squared excess in the rotation search (see _penalty)


@dataclass(frozen=True)
class JobDemand:
    """What a job puts on the network per iteration, in the model's terms."""

    period_s: float
    compute_s: float
    comm_s: float
    rate_bps: float
    link_bytes: Mapping[str, int] | None = None  # per directed link, per iteration (None: unknown)

    def on_link(self, link: str, flows: int) -> float:
        """What the job demands of `link` while it communicates, `flows` of its flows crossing it."""
        bound = flows * self.rate_bps
        nbytes = (self.link_bytes or {}).get(link)
        if not nbytes or self.comm_s <= 0:
            return bound
        return min(bound, nbytes * 8 / self.comm_s)


@dataclass
class LinkPrediction:
    link: str
    jobs: list[str]
    capacity_bps: float
    demand_bps: dict[str, float]
    score: float  # best rotation for this link alone
    shifts_s: dict[str, float]
    slowdown: float  # 2 - score
    aligned_score: float
    aligned_slowdown: float
    joint_score: float  # at the rotation of the link's whole affinity component
    joint_slowdown: float


@dataclass
class JobPrediction:
    period_s: float
    comm_fraction: float
    shift_s: float  # joint rotation of its component (0 without shared links)
    slowdown: float  # max over its shared links of the joint slowdown
    aligned_slowdown: float
    links: list[str]


@dataclass
class Prediction:
    links: dict[str, LinkPrediction]
    jobs: dict[str, JobPrediction]
    loops: list[list[str]]
    quantum_s: dict[str, float] = field(default_factory=dict)  # per component, by its first job

    def to_dict(self) -> dict:
        return asdict(self)

    def lines(self) -> list[str]:
        """What `validate` prints: per shared link (links with the same numbers on one line),
        then the loops, then per job."""
        by_text: dict[str, list[str]] = {}
        for lp in self.links.values():
            shifts = ", ".join(f"{j} {s * 1e3:.0f} ms" for j, s in lp.shifts_s.items())
            joint = "" if abs(lp.joint_score - lp.score) < 1e-6 else \
                f"; with one shift per job for all links {lp.joint_score:.3f} -> {lp.joint_slowdown:.2f}x"
            text = (f"({', '.join(lp.jobs)}): compatibility {lp.score:.3f} -> predicted slowdown "
                    f"{lp.slowdown:.2f}x at shifts {shifts}{joint} (phases aligned: "
                    f"{lp.aligned_score:.3f} -> {lp.aligned_slowdown:.2f}x)")
            by_text.setdefault(text, []).append(lp.link)
        out = [f"  CASSINI {', '.join(links)} {text}" for text, links in by_text.items()]
        for loop in self.loops:
            out.append("  circular dependency (affinity-graph loop): " + " - ".join(loop))
        shared = {j: jp for j, jp in self.jobs.items() if jp.links}
        if shared:
            out.append("  predicted per job (best shifts / aligned): " + ", ".join(
                f"{j} {jp.slowdown:.2f}x / {jp.aligned_slowdown:.2f}x" for j, jp in shared.items()))
        return out


def job_demands(experiment: Experiment, plan: NetworkPlan) -> dict[str, JobDemand]:
    out = {}
    for job in experiment.jobs:
        period, rate = ideal_iteration_s(job, plan)
        comm = period - job.compute_s
        if comm <= 0:  # everything overlaps compute: the busiest rank's bytes at the bottleneck
            comm = min(period, bytes_sent_per_worker(job) * 8 / rate)
        out[job.name] = JobDemand(period, period - comm, comm, rate, link_bytes_per_iteration(job, plan))
    return out


def predict(experiment: Experiment, plan: NetworkPlan) -> Prediction:
    """The prediction for every link shared by >= 2 jobs of a routed plan."""
    demands = job_demands(experiment, plan)
    ranks = plan.link_ranks()
    caps = plan.link_bps()
    groups = link_groups(plan.link_jobs())
    links: dict[str, LinkPrediction] = {}
    jobs: dict[str, JobPrediction] = {}
    quanta: dict[str, float] = {}
    for comp_jobs, comp_groups in components(groups):
        comp_links = [link for g in comp_groups for link in g.links]
        circle = Circle({j: demands[j] for j in comp_jobs})
        quanta[comp_jobs[0]] = circle.quantum_s
        load = {link: {j: demands[j].on_link(link, len(ranks[link][j])) for j in ranks[link]}
                for link in comp_links}
        joint = circle.best(comp_jobs, {link: load[link] for link in comp_links}, caps)
        for link in comp_links:
            lj = list(load[link])
            own = circle.best(lj, {link: load[link]}, caps)
            aligned = circle.score({j: 0 for j in lj}, load[link], caps[link])
            joint_score = circle.score(joint, load[link], caps[link])
            own_score = max(circle.score(own, load[link], caps[link]), joint_score)
            links[link] = LinkPrediction(
                link=link, jobs=lj, capacity_bps=caps[link], demand_bps=load[link],
                score=own_score, shifts_s={j: circle.shift_s(j, own[j]) for j in lj},
                slowdown=2 - own_score, aligned_score=aligned, aligned_slowdown=2 - aligned,
                joint_score=joint_score, joint_slowdown=2 - joint_score)
        for j in comp_jobs:
            mine = [lp for lp in (links[link] for link in comp_links) if j in lp.jobs]
            jobs[j] = JobPrediction(
                period_s=demands[j].period_s, comm_fraction=demands[j].comm_s / demands[j].period_s,
                shift_s=circle.shift_s(j, joint[j]), slowdown=max(lp.joint_slowdown for lp in mine),
                aligned_slowdown=max(lp.aligned_slowdown for lp in mine), links=[lp.link for lp in mine])
    for name, d in demands.items():
        jobs.setdefault(name, JobPrediction(d.period_s, d.comm_s / d.period_s, 0.0, 1.0, 1.0, []))
    return Prediction(links, {j.name: jobs[j.name] for j in experiment.jobs}, loops(groups), quanta)


class Circle:
    """The unified circle of a set of jobs: per job its period in ticks and its demand
    profile (1 while communicating) over the whole perimeter."""

    def __init__(self, demands: Mapping[str, JobDemand]):
        self.demands = dict(demands)
        self.quantum_s, self.ticks, self.perimeter = _grid([d.period_s for d in demands.values()],
                                                           list(demands))
        self.profile: dict[str, np.ndarray] = {}
        for job, d in demands.items():
            n = self.ticks[job]
            start = min(n - 1, round(d.compute_s / self.quantum_s))
            length = 0 if d.comm_s <= 0 else min(n - start, max(1, round(d.comm_s / self.quantum_s)))
            one = np.zeros(n)
            one[start:start + length] = 1.0
            self.profile[job] = np.tile(one, self.perimeter // n + 1)[: self.perimeter]

    def shift_s(self, job: str, rotation: int) -> float:
        return (rotation % self.ticks[job]) * self.quantum_s

    def _rolled(self, job: str, rotation: int) -> np.ndarray:
        return np.roll(self.profile[job], rotation)

    def score(self, rotation: Mapping[str, int], load: Mapping[str, float], capacity: float) -> float:
        total = np.zeros(self.perimeter)
        for j, bps in load.items():
            total += bps * self._rolled(j, rotation[j])
        return float(1.0 - np.maximum(0.0, total - capacity).mean() / capacity)

    def _cost(self, rotation: Mapping[str, int], loads: Mapping[str, Mapping[str, float]],
              caps: Mapping[str, float]) -> float:
        return sum(_penalty(1.0 - self.score(rotation, load, caps[link])) for link, load in loads.items())

    def _best_of(self, job: str, options: Sequence[int], rotation: Mapping[str, int],
                 loads: Mapping[str, Mapping[str, float]], caps: Mapping[str, float]) -> tuple[int, float]:
        """The best of `options` for `job`, the others at `rotation`: (position, cost of the
        links `job` loads), vectorised over the options."""
        rolled = np.stack([self._rolled(job, r) for r in options])
        cost = np.zeros(len(options))
        for link, load in loads.items():
            if job not in load:
                continue
            base = np.zeros(self.perimeter)
            for j, bps in load.items():
                if j != job:
                    base += bps * self._rolled(j, rotation[j])
            cost += _penalty(np.maximum(0.0, base + load[job] * rolled - caps[link]).mean(axis=1) / caps[link])
        i = int(np.argmin(cost))
        return options[i], float(cost[i])

    def best(self, jobs: Sequence[str], loads: Mapping[str, Mapping[str, float]],
             caps: Mapping[str, float]) -> dict[str, int]:
        """Rotations (ticks) of `jobs` minimising the summed excess over `loads`' links; the
        first job stays at 0 (only relative rotations matter)."""
        jobs = list(jobs)
        free = jobs[1:]
        rotation = {j: 0 for j in jobs}
        if not free:
            return rotation
        step = {j: max(1, self.ticks[j] // ROTATION_STEPS) for j in free}
        grids = {j: list(range(0, self.ticks[j], step[j])) for j in free}
        if math.prod(len(g) for g in grids.values()) <= EXHAUSTIVE_LIMIT:
            *outer, last = free
            best_cost = math.inf
            for combo in itertools.product(*(grids[j] for j in outer)):
                trial = {**rotation, **dict(zip(outer, combo, strict=True))}
                r, _ = self._best_of(last, grids[last], trial, loads, caps)
                cost = self._cost({**trial, last: r}, loads, caps)
                if cost < best_cost - 1e-12:
                    best_cost, best = cost, {**trial, last: r}
            rotation = best
        else:
            starts = [rotation, {j: round(i * self.ticks[j] / len(jobs)) % self.ticks[j]
                                 for i, j in enumerate(jobs)}]
            rotation = min((self._descend(s, grids, loads, caps) for s in starts),
                           key=lambda r: self._cost(r, loads, caps))
        around = {j: sorted({(rotation[j] + d) % self.ticks[j] for d in range(-step[j], step[j] + 1)})
                  for j in free}
        return self._centre(self._descend(rotation, around, loads, caps), free, loads, caps)

    def _centre(self, rotation: Mapping[str, int], jobs: Sequence[str], loads: Mapping[str, Mapping[str, float]],
                caps: Mapping[str, float]) -> dict[str, int]:
        """Each of `jobs` in turn moved to the middle of the run of neighbouring rotations that
        cost what its rotation costs (the others where they are). Why: where the phases fit with
        room to spare many rotations score the same, and the search returns the first, a phase
        that ends where the next begins; real phases run longer than the ideal (headers, the
        window's ramp), so a runnable shift keeps the room on both sides (run.shifts,
        jobs/shifts.py). Repeated until no job moves, so the room is shared out evenly."""
        rot = dict(rotation)
        for _ in range(MAX_PASSES):  # again until none moves: three or more jobs spread out evenly
            moved = False
            for j in jobs:
                n = self.ticks[j]
                cost = self._cost(rot, loads, caps)
                ends = []
                for direction in (-1, 1):
                    d = 0
                    while abs(d) < n // 2 and self._cost({**rot, j: (rot[j] + d + direction) % n}, loads, caps) \
                            <= cost + 1e-12:
                        d += direction
                    ends.append(d)
                shift = (ends[0] + ends[1]) // 2
                if shift:
                    rot[j], moved = (rot[j] + shift) % n, True
            if not moved:
                break
        return rot

    def _descend(self, rotation: Mapping[str, int], grids: Mapping[str, Sequence[int]],
                 loads: Mapping[str, Mapping[str, float]], caps: Mapping[str, float]) -> dict[str, int]:
        """Coordinate descent: each job of `grids` in turn moves to its best position there
        given the others, until nothing improves."""
        rot = dict(rotation)
        cost = self._cost(rot, loads, caps)
        for _ in range(MAX_PASSES):
            improved = False
            for j, options in grids.items():
                r, _ = self._best_of(j, options, rot, loads, caps)
                new = self._cost({**rot, j: r}, loads, caps)
                if new < cost - 1e-12:
                    rot[j], cost, improved = r, new, True
            if not improved:
                break
        return rot


def _penalty(excess):
    """The search's cost of a link's mean excess: the excess itself (CASSINI's objective), plus
    SPREAD·excess² so that among rotations with the same total excess the one spreading it over
    the links wins (three jobs on a loop: each link a third of the unavoidable excess, not one
    link all of it, which would predict a slowdown for two jobs and none for the third)."""
    return excess + SPREAD * excess * excess


def _grid(periods: Sequence[float], names: Sequence[str]) -> tuple[float, dict[str, int], int]:
    """(quantum, period in ticks per job, perimeter in ticks): the finest quantum whose LCM
    stays within MAX_TICKS; beyond the coarsest, the perimeter is capped (an approximation)."""
    for q in QUANTA_S:
        ticks = {n: max(1, round(p / q)) for n, p in zip(names, periods, strict=True)}
        perimeter = math.lcm(*ticks.values())
        if perimeter <= MAX_TICKS:
            return q, ticks, perimeter
    return q, ticks, max(MAX_TICKS, max(ticks.values()))

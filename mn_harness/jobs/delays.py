"""How long each rank computes in each compute phase of each iteration: jitter and stragglers,
drawn from run.seed so a run can be repeated exactly.

Per (job, rank) two independent random streams (`random.Random` seeded with a string, which
Python hashes with SHA-512: the same on every machine and run, whatever PYTHONHASHSEED):

* jitter: every compute phase of every iteration draws its duration around the phase's mean,
  std = jitter * mean; `normal` is clipped at 0, `lognormal` has exactly that mean and std;
* stragglers (config.workload.StragglerConfig): each straggler entry has its own stream; per
  iteration it draws once and, with its probability, adds its delay to the rank's first compute
  phase of that iteration; its `slowdown` multiplies all the rank's compute.

Parameter servers (ranks >= job.n_workers) do not compute. The worker sleeps exactly these durations and
records, per phase row, the planned mean and the delay applied (duration - mean)."""

from __future__ import annotations

import math
import random

from mn_harness.config import JobConfig
from mn_harness.config.workload import ComputeSpec


def draw(spec: ComputeSpec, rng: random.Random) -> float:
    if spec.jitter == 0 or spec.mean_s == 0:
        return spec.mean_s
    if spec.distribution == "lognormal":
        sigma2 = math.log1p(spec.jitter ** 2)
        return rng.lognormvariate(math.log(spec.mean_s) - sigma2 / 2, math.sqrt(sigma2))
    return max(0.0, rng.gauss(spec.mean_s, spec.jitter * spec.mean_s))


def compute_plan(job: JobConfig, rank: int, seed: int) -> list[list[float]]:
    """[iteration][compute phase] -> seconds for `rank`."""
    specs = [p.compute for p in job.compute_phases]
    if rank >= job.n_workers:
        return [[0.0] * len(specs) for _ in range(job.iterations)]
    jitter = random.Random(f"mn-harness:{seed}:{job.name}:{rank}:jitter")
    mine = [(random.Random(f"mn-harness:{seed}:{job.name}:{rank}:straggler{i}"), s)
            for i, s in enumerate(job.stragglers) if rank in s.ranks]
    slowdown = math.prod(s.slowdown for _, s in mine)
    plan = []
    for _ in range(job.iterations):
        durations = [draw(spec, jitter) * slowdown for spec in specs]
        for rng, straggler in mine:
            if rng.random() < straggler.probability and durations:
                durations[0] += straggler.delay_s
        plan.append(durations)
    return plan

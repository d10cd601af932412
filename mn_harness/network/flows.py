"""The flows the jobs put on the network, known before anything runs.

A ring job's traffic is one TCP connection per ring hop: rank r connects to rank r+1 and sends
its share of every step over it (the ACKs come back on the same connection). With ECMP the path
of a connection depends on its 5-tuple, so the 5-tuple must be known to the plan and the same
every run: job j (Experiment.job_ids()) listens on TCP port BASE_PORT + j and connects *from*
SOURCE_PORT_BASE + j (the worker binds it; one worker per host, so the pair of hosts already
tells the flows apart). With the seed fixed, ECMP's hash then picks the same paths every run.

The seed of that hash (`ecmp_hash_seed`) comes from `run.seed`, for both data planes: Linux's
`net.ipv4.fib_multipath_hash_seed` (0 there means "random", so 0 is never used) and the P4
program's hash input on BMv2."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mn_harness.config import Experiment

BASE_PORT = 40000          # + job id: the port each worker listens on (its left neighbour connects)
SOURCE_PORT_BASE = 45000   # + job id: the port each worker connects from (to its right neighbour)
TCP = 6
MAX_HASH_SEED = 2**32 - 1  # both data planes take a 32-bit seed


@dataclass(frozen=True)
class Flow:
    """One connection carrying a job's data from host `src` to host `dst` (rank `rank` sends)."""

    job: str
    rank: int
    src: str
    dst: str
    sport: int
    dport: int
    proto: int = TCP

    @property
    def label(self) -> str:
        return f"{self.job} r{self.rank} {self.src}:{self.sport}->{self.dst}:{self.dport}"


def ring_hops(workers: tuple[str, ...]) -> list[tuple[str, str]]:
    """(sender, receiver) of every rank of a ring: rank r sends to rank r+1."""
    n = len(workers)
    return [(workers[r], workers[(r + 1) % n]) for r in range(n)]


def listen_port(job_id: int) -> int:
    return BASE_PORT + job_id


def source_port(job_id: int) -> int:
    return SOURCE_PORT_BASE + job_id


def job_flows(experiment: Experiment) -> tuple[Flow, ...]:
    """Every job's flows, in job then rank order."""
    ids = experiment.job_ids()
    return tuple(Flow(job.name, rank, a, b, source_port(ids[job.name]), listen_port(ids[job.name]))
                 for job in experiment.jobs for rank, (a, b) in enumerate(ring_hops(job.workers)))


def ecmp_hash_seed(run_seed: int) -> int:
    """The 32-bit, never-zero ECMP hash seed for `run.seed` (any integer)."""
    return run_seed % MAX_HASH_SEED + 1

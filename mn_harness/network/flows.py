"""The flows the jobs put on the network, known before anything runs.

A job's ranks keep one persistent full-duplex TCP connection per pair of ranks that exchange
data in any of its collectives (mn_harness/worker/transport.py): the higher rank connects to the
lower one. A flow here is one direction of such a connection that carries data, from the
sending rank's host to the receiving rank's (its ACKs come back the other way). With ECMP the
path of a flow depends on its 5-tuple, so the 5-tuple must be known to the plan and the same
every run: job j (Experiment.job_ids()) listens on TCP port BASE_PORT + j and connects *from*
SOURCE_PORT_BASE + j (the worker binds it; one rank per host, so the pair of hosts already
tells the connections apart). Data from the connecting rank goes SOURCE_PORT_BASE + j ->
BASE_PORT + j, data towards it the other way. With the seed fixed, ECMP's hash then picks the
same paths every run.

The seed of that hash (`ecmp_hash_seed`) comes from `run.seed`, for both data planes: Linux's
`net.ipv4.fib_multipath_hash_seed` (0 there means "random", so 0 is never used) and the P4
program's hash input on BMv2."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mn_harness.config import Experiment, JobConfig

BASE_PORT = 40000          # + job id: the port each worker listens on (its left neighbour connects)
SOURCE_PORT_BASE = 45000   # + job id: the port each worker connects from (to its right neighbour)
TCP = 6
MAX_HASH_SEED = 2**32 - 1  # both data planes take a 32-bit seed


@dataclass(frozen=True)
class Flow:
    """One direction of a connection carrying a job's data from host `src` to host `dst` (rank
    `rank` sends)."""

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


def listen_port(job_id: int) -> int:
    return BASE_PORT + job_id


def source_port(job_id: int) -> int:
    return SOURCE_PORT_BASE + job_id


def job_pairs(job: JobConfig) -> list[tuple[str, str]]:
    """Directed (src host, dst host) pairs the job's communication phases send over, in
    first-use order (inc_allreduce: its ring hops, as the aggregation is classified)."""
    pairs: list[tuple[str, str]] = []
    for phase in job.comm_phases:
        hosts = phase.participants
        for a, b in phase.record.directed_pairs(phase.call()):
            if (hosts[a], hosts[b]) not in pairs:
                pairs.append((hosts[a], hosts[b]))
    return pairs


def job_flows(experiment: Experiment) -> tuple[Flow, ...]:
    """Every job's flows, in job order, then in the order its collectives first use them."""
    ids = experiment.job_ids()
    flows = []
    for job in experiment.jobs:
        listen, source = listen_port(ids[job.name]), source_port(ids[job.name])
        for a, b in job_pairs(job):
            rank = job.rank_of(a)
            dials = rank > job.rank_of(b)  # the higher rank connects (worker.transport)
            flows.append(Flow(job.name, rank, a, b, source if dials else listen, listen if dials else source))
    return tuple(flows)


def ecmp_hash_seed(run_seed: int) -> int:
    """The 32-bit, never-zero ECMP hash seed for `run.seed` (any integer)."""
    return run_seed % MAX_HASH_SEED + 1

"""Control-plane state for mn_harness/p4/programs/aggregation.p4 (in-network aggregation for
inc_allreduce), computed from the NetworkPlan; mn_harness.p4.bringup writes it to the switch.

Per aggregation job on a switch:
  - `agg_job` (job id, UDP port) -> slot base and count in the shared pool, worker count,
    multicast group;
  - a multicast group with one replica per worker (egress port, instance = rank + 1);
  - `agg_result_dst` (job id, replica id) -> the worker's IP/MAC and its gateway's IP/port MAC,
    written on each result copy.
Slots: a job with `slots` window positions uses 2 * slots physical slots (two copies per
position, see the program's header); `allocate_slots` packs the jobs into the pool and says in
one line when they do not fit. The packets are the worker's (mn_harness/worker/inc.py); the
limits both sides use are mn_harness/p4/limits.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import AGGREGATION_PROGRAM, PROGRAMS_DIR
from .entries import Entry, job_ids
from .errors import P4Error
from .limits import AGG_MAX_JOB_ID, AGG_MAX_WORKERS, AGG_POOL, AGG_PORT_BASE, AGG_STATS_KINDS

AGGREGATION_P4 = PROGRAMS_DIR / f"{AGGREGATION_PROGRAM}.p4"
STATS = ("added", "duplicate", "stale", "results", "saturated", "resent", "bad")


class AggregationError(P4Error):
    pass


@dataclass(frozen=True)
class AggWorker:
    rank: int
    port: int            # switch port the worker's host hangs off
    ip: str
    mac: str
    gateway_ip: str      # the address the worker sends to (its side of the switch)
    port_mac: str        # the switch port's MAC


@dataclass(frozen=True)
class AggJob:
    job_id: int          # 1..63, in the packets and the switch's tables
    workers: tuple[AggWorker, ...]
    slots: int           # window positions; 2 * slots physical slots
    slot_base: int = 0   # first physical slot (allocate_slots sets it)

    @property
    def udp_port(self) -> int:
        return agg_udp_port(self.job_id)

    @property
    def mcast_group(self) -> int:
        return self.job_id

    @property
    def physical_slots(self) -> int:
        return 2 * self.slots


def agg_udp_port(job_id: int) -> int:
    return AGG_PORT_BASE + job_id


def plan_worker(plan, host: str, rank: int) -> AggWorker:
    """A worker's addresses from a NetworkPlan: its host hangs off the switch by its only link."""
    intf = plan.gateway(host)
    switch_port = next(i.port for i in plan.interfaces[intf.peer_node] if i.peer_node == host)
    return AggWorker(rank, switch_port, plan.host_ip[host], intf.mac, intf.peer_ip, intf.peer_mac)


def aggregation_switch(plan, workers: Sequence[str]) -> str | None:
    """The one switch every worker hangs off, or None."""
    switches = {plan.gateway(h).peer_node for h in workers}
    return switches.pop() if len(switches) == 1 else None


def plan_agg_jobs(plan, slots: dict[str, int]) -> dict[str, list[AggJob]]:
    """Switch -> its aggregation jobs (slot ranges allocated) for the plan's jobs named in
    `slots` (job name -> window slots); job ids are the telemetry ids (entries.job_ids)."""
    ids = job_ids(plan)
    per_switch: dict[str, list[AggJob]] = {}
    for job in plan.experiment.jobs:
        if job.name not in slots:
            continue
        switch = aggregation_switch(plan, job.workers)
        if switch is None:
            raise AggregationError(f"job {job.name}: inc_allreduce needs all workers on one "
                                   "aggregation switch")
        workers = tuple(plan_worker(plan, h, r) for r, h in enumerate(job.workers))
        per_switch.setdefault(switch, []).append(AggJob(ids[job.name], workers, slots[job.name]))
    return {sw: allocate_slots(jobs) for sw, jobs in per_switch.items()}


def allocate_slots(jobs: Sequence[AggJob], pool: int = AGG_POOL) -> list[AggJob]:
    """Give each job a disjoint slot range, in order."""
    out, base = [], 0
    for job in jobs:
        if not 1 <= job.job_id <= AGG_MAX_JOB_ID:
            raise AggregationError(f"aggregation job id {job.job_id} outside 1..{AGG_MAX_JOB_ID}")
        if not 2 <= len(job.workers) <= AGG_MAX_WORKERS:
            raise AggregationError(f"aggregation job {job.job_id}: {len(job.workers)} workers "
                                   f"(2..{AGG_MAX_WORKERS} supported)")
        if base + job.physical_slots > pool:
            raise AggregationError(f"aggregation slots: jobs need {sum(j.physical_slots for j in jobs)}"
                                   f" physical slots (2 per window slot), the switch has {pool}")
        out.append(AggJob(job.job_id, job.workers, job.slots, base))
        base += job.physical_slots
    return out


def job_entries(job: AggJob) -> list[Entry]:
    entries = [Entry("agg_job", {"hdr.agg.job": job.job_id, "udp_dst": job.udp_port},
                     "agg_set_job", {"slot_base": job.slot_base,
                                     "slot_count": job.physical_slots,
                                     "nworkers": len(job.workers),
                                     "mcast_group": job.mcast_group})]
    for w in job.workers:
        entries.append(Entry("agg_result_dst", {"hdr.agg.job": job.job_id,
                                                "standard_metadata.egress_rid": w.rank + 1},
                             "set_result_dst", {"dst_ip": w.ip, "src_ip": w.gateway_ip,
                                                "dst_mac": w.mac, "src_mac": w.port_mac}))
    return entries


def replicas(job: AggJob) -> list[tuple[int, int]]:
    """(egress port, instance) per worker; the instance is the egress_rid = rank + 1."""
    return [(w.port, w.rank + 1) for w in job.workers]


def stats_indices(job_id: int) -> list[int]:
    return [job_id * AGG_STATS_KINDS + k for k in range(len(STATS))]


def read_stats(conn, job_id: int) -> dict[str, int]:
    """Packets per kind from the `agg_stats` counter (added, duplicate, stale, ...)."""
    got = conn.read_counter("agg_stats", stats_indices(job_id))
    base = job_id * AGG_STATS_KINDS
    return {name: got[base + k].packets for k, name in enumerate(STATS)}

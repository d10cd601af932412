"""Table entries for mn_harness/p4/programs/ecn_telemetry.p4, computed from the harness's
NetworkPlan. No switch needed.

There is one routing algorithm in the project: NetworkPlan's shortest paths (hop count, ties
broken by node name), which the Linux data plane also uses. `switch_specs(plan)` turns the plan
into plain per-switch data (ports with their MACs, one route per host); `switch_entries(spec)`
turns that into `Entry` objects with P4Info *names*, which mn_harness.p4.bringup writes over a
SwitchConnection.

Routing: every host gets a /32 in `ipv4_lpm` on every switch: egress port = the route's
interface, source MAC = that interface's MAC, destination MAC = the next hop's MAC (the host's
own on the last switch, the next switch's port MAC before). With ECMP a route with several
equal-cost next hops becomes `ecmp_group(base, count, seed)` and `count` `ecmp_members` entries
from `base` on, one `forward` per next hop in the plan's (name) order; routes with the same next
hops share one group. `arp_responder` answers every ARP
request on a port with that port's MAC (proxy ARP), so hosts need no static neighbour entries.

ECN and queue histogram: `egress_port_cfg` per port from the threshold (packets) and the queue
depth (for the histogram's bucket width, see `qbucket_shift`).

Jobs: `job_classify` entries (ternary, priorities) map flows to job ids; with no entries the
switch uses the packet's DSCP as the job id. `plan_job_rules(plan)` derives them from the
experiment: each host runs one worker, so the address pair of a ring hop a->b (either
direction: data one way, ACKs the other) identifies its job; job ids are 1, 2, ... in job order
(0 stays "unclassified").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mn_harness.network.flows import ecmp_hash_seed

from .errors import P4Error
from .limits import ECMP_MEMBERS, MAX_JOBS, MAX_PORTS, NO_MARKING, PORT_MASK, QBUCKET_MAX_SHIFT, QBUCKETS

if TYPE_CHECKING:
    from mn_harness.network.plan import NetworkPlan


class TopologyError(P4Error):
    """The plan cannot be turned into entries (too many ports or jobs, bad values, ...)."""


@dataclass(frozen=True)
class PortSpec:
    port: int
    mac: str
    peer: str          # node at the other end


@dataclass(frozen=True)
class NextHopSpec:
    port: int
    src_mac: str
    dst_mac: str


@dataclass(frozen=True)
class RouteSpec:
    dst_host: str
    dst_ip: str
    next_hops: tuple[NextHopSpec, ...]  # several: an ECMP group

    @property
    def port(self) -> int:
        return self.next_hops[0].port

    @property
    def src_mac(self) -> str:
        return self.next_hops[0].src_mac

    @property
    def dst_mac(self) -> str:
        return self.next_hops[0].dst_mac


@dataclass(frozen=True)
class SwitchSpec:
    """What one switch needs to forward, as plain data (derived from a NetworkPlan)."""
    name: str
    device_id: int
    ports: tuple[PortSpec, ...]
    routes: tuple[RouteSpec, ...]
    ecmp_seed: int = 0  # the hash seed of its ECMP groups (network.flows.ecmp_hash_seed)

    def port_numbers(self) -> list[int]:
        return sorted(p.port for p in self.ports)

    def port_to(self, peer: str) -> int:
        return next(p.port for p in self.ports if p.peer == peer)


def switch_specs(plan: NetworkPlan) -> dict[str, SwitchSpec]:
    """Per switch: ports and routes from the plan; device ids 1, 2, ... in switch order."""
    seed = ecmp_hash_seed(plan.experiment.run.seed)
    specs = {}
    for device_id, name in enumerate(plan.experiment.switch_names, 1):
        ports = tuple(PortSpec(i.port, i.mac, i.peer_node) for i in plan.interfaces.get(name, []))
        for p in ports:
            if not 0 <= p.port < MAX_PORTS:
                raise TopologyError(f"switch {name} has port {p.port}: ecn_telemetry.p4 supports "
                                    f"ports 0..{MAX_PORTS - 1} (MAX_PORTS)")
        routes = tuple(RouteSpec(r.dst_host, r.dst_ip,
                                 tuple(NextHopSpec(h.out.port, h.out.mac, h.mac) for h in r.next_hops))
                       for r in plan.routes[name])
        specs[name] = SwitchSpec(name, device_id, ports, routes, seed)
    return specs


def job_ids(plan: NetworkPlan) -> dict[str, int]:
    """Job name -> telemetry job id: 1, 2, ... in job order (0 = unclassified)."""
    ids = plan.experiment.job_ids()
    if len(ids) >= MAX_JOBS:
        raise TopologyError(f"{len(ids)} jobs: ecn_telemetry.p4 tells at most {MAX_JOBS - 1} apart")
    return ids


def plan_job_rules(plan: NetworkPlan) -> list[JobRule]:
    """job_classify rules: TCP between two hosts the job's collectives connect (both
    directions, one persistent connection per pair) -> job."""
    ids = job_ids(plan)
    rules: list[JobRule] = []
    seen: set[tuple[str, str]] = set()
    for job in plan.experiment.jobs:
        for a, b in plan.job_pairs(job):
            for src, dst in ((a, b), (b, a)):
                if src == dst or (src, dst) in seen:
                    continue
                seen.add((src, dst))
                rules.append(JobRule(job=ids[job.name], src=plan.host_ip[src],
                                     dst=plan.host_ip[dst], protocol=6))
    return rules


def qbucket_shift(queue_depth: int | None) -> int:
    """Smallest shift so that QBUCKETS buckets of width 2**shift cover depths 0..queue_depth."""
    depth = 64 if queue_depth is None else int(queue_depth)
    shift = 0
    while (depth >> shift) > QBUCKETS - 1:
        shift += 1
    return min(shift, QBUCKET_MAX_SHIFT)


@dataclass(frozen=True)
class Entry:
    table: str
    match: Mapping[str, Any] | None
    action: str
    params: Mapping[str, Any] = field(default_factory=dict)
    priority: int | None = None
    default: bool = False


@dataclass(frozen=True)
class JobRule:
    """Flows of a job, for `job_classify`: any field left None is a wildcard.
    Addresses may carry a prefix ("10.0.1.0/24")."""
    job: int
    src: str | None = None
    dst: str | None = None
    protocol: int | None = None
    src_port: int | None = None
    dst_port: int | None = None
    dscp: int | None = None
    priority: int = 10


def _prefix_mask(spec: str) -> tuple[str, int]:
    if "/" in spec:
        addr, plen = spec.split("/", 1)
        bits = int(plen)
        if not 0 <= bits <= 32:
            raise TopologyError(f"bad prefix {spec!r}")
        return addr, ((1 << bits) - 1) << (32 - bits) if bits else 0
    return spec, 0xFFFFFFFF


def job_entries(rules: Iterable[JobRule]) -> list[Entry]:
    out = []
    for r in rules:
        if not 0 <= r.job < MAX_JOBS:
            raise TopologyError(f"job id {r.job} outside 0..{MAX_JOBS - 1}")
        match: dict[str, Any] = {}
        if r.src is not None:
            match["hdr.ipv4.srcAddr"] = _prefix_mask(r.src)
        if r.dst is not None:
            match["hdr.ipv4.dstAddr"] = _prefix_mask(r.dst)
        if r.protocol is not None:
            match["hdr.ipv4.protocol"] = (r.protocol, 0xFF)
        if r.src_port is not None:
            match["l4_src"] = (r.src_port, 0xFFFF)
        if r.dst_port is not None:
            match["l4_dst"] = (r.dst_port, 0xFFFF)
        if r.dscp is not None:
            match["hdr.ipv4.dscp"] = (r.dscp, 0x3F)
        out.append(Entry("job_classify", match, "set_job", {"job": r.job},
                         priority=r.priority))
    return out


def switch_entries(spec: SwitchSpec, *, ecn_threshold: int | None = None,
                   port_thresholds: Mapping[int, int | None] | None = None,
                   queue_depths: Mapping[int, int] | None = None,
                   job_rules: Iterable[JobRule] = (), port_cfg: bool = True) -> list[Entry]:
    """All entries of one switch. `ecn_threshold` (packets) applies to every port unless
    `port_thresholds` overrides it; None means no marking. `queue_depths` (packets, per port)
    sets the histogram bucket width. `port_cfg=False` leaves egress_port_cfg alone."""
    entries: list[Entry] = []
    for p in sorted(spec.ports, key=lambda p: p.port):
        entries.append(Entry("arp_responder", {"standard_metadata.ingress_port": p.port},
                             "arp_reply", {"port_mac": p.mac}))
    entries += route_entries(spec)
    port_thresholds = dict(port_thresholds or {})
    queue_depths = dict(queue_depths or {})
    for port in spec.port_numbers() if port_cfg else ():
        threshold = port_thresholds.get(port, ecn_threshold)
        threshold = NO_MARKING if threshold is None else int(threshold)
        if not 0 <= threshold <= NO_MARKING:
            raise TopologyError(f"ECN threshold {threshold} outside 0..{NO_MARKING} packets")
        entries.append(Entry("egress_port_cfg", {"standard_metadata.egress_port": port},
                             "set_port_cfg", {"threshold": threshold,
                                              "bucket_shift": qbucket_shift(
                                                  queue_depths.get(port))}))
    entries.extend(job_entries(job_rules))
    return entries


def _forward(hop: NextHopSpec) -> dict[str, Any]:
    return {"port": hop.port, "src_mac": hop.src_mac, "dst_mac": hop.dst_mac}


def route_entries(spec: SwitchSpec) -> list[Entry]:
    """`ipv4_lpm` per host: forward, or ecmp_group over `ecmp_members` (one group per distinct
    set of next hops, members in the plan's order)."""
    entries: list[Entry] = []
    groups: dict[tuple[NextHopSpec, ...], int] = {}
    for r in sorted(spec.routes, key=lambda r: r.dst_host):
        match = {"hdr.ipv4.dstAddr": f"{r.dst_ip}/32"}
        if len(r.next_hops) == 1:
            entries.append(Entry("ipv4_lpm", match, "forward", _forward(r.next_hops[0])))
            continue
        if r.next_hops not in groups:
            base = sum(len(g) for g in groups)
            if base + len(r.next_hops) > ECMP_MEMBERS:
                raise TopologyError(f"switch {spec.name}: ECMP groups need more than {ECMP_MEMBERS} "
                                    "members (ECMP_MEMBERS)")
            groups[r.next_hops] = base
            entries += [Entry("ecmp_members", {"meta.ecmp_member": base + i}, "forward", _forward(hop))
                        for i, hop in enumerate(r.next_hops)]
        entries.append(Entry("ipv4_lpm", match, "ecmp_group",
                             {"base": groups[r.next_hops], "count": len(r.next_hops),
                              "seed": spec.ecmp_seed}))
    return entries


def port_index(port: int) -> int:
    return port & PORT_MASK


def job_port_index(job: int, port: int) -> int:
    """Index into job_tx / job_marks."""
    return job * MAX_PORTS + port_index(port)


def qdepth_index(port: int, bucket: int) -> int:
    return port_index(port) * QBUCKETS + bucket

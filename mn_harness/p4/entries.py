"""Table entries for p4src/ecn_telemetry.p4, computed from a topology. No switch needed.

Input is a small neutral description (hosts with IP and MAC, switches with device ids, links
between named nodes with the switch port numbers); the harness's network plan is converted into
it. Output is, per switch, a list of `Entry` objects with P4Info *names* that
`install_entries()` writes over a SwitchConnection.

Routing: every host gets a /32 in `ipv4_lpm` on every switch, along a shortest path (hop count;
ties broken by node name so the result is deterministic). The last switch rewrites the
destination MAC to the host's; earlier switches rewrite it to the next switch's port MAC. Every
switch port has its own MAC (`port_mac`), used as source MAC and answered by `arp_responder`
(proxy ARP), so hosts need no static neighbour entries.

ECN and queue histogram: `egress_port_cfg` per port from the threshold (packets) and the queue
depth (for the histogram's bucket width, see `qbucket_shift`).

Jobs: `job_classify` entries (ternary, priorities) map flows to job ids; with no entries the
switch uses the packet's DSCP as the job id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import P4Error

QBUCKETS = 64            # must match QBUCKETS in ecn_telemetry.p4
MAX_PORTS = 32           # must match MAX_PORTS
MAX_JOBS = 64            # must match MAX_JOBS
NO_MARKING = (1 << 19) - 1


class TopologyError(P4Error):
    """The topology cannot be turned into entries (disconnected, bad port numbers, ...)."""


@dataclass(frozen=True)
class Host:
    name: str
    ip: str
    mac: str


@dataclass(frozen=True)
class Switch:
    name: str
    device_id: int


@dataclass(frozen=True)
class Link:
    """A link between two nodes; `*_port` is the BMv2 port number on a switch end, None on a
    host end."""
    a: str
    b: str
    a_port: int | None = None
    b_port: int | None = None


@dataclass
class Topology:
    hosts: dict[str, Host] = field(default_factory=dict)
    switches: dict[str, Switch] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)

    def add_host(self, name: str, ip: str, mac: str) -> Host:
        self.hosts[name] = Host(name, ip, mac)
        return self.hosts[name]

    def add_switch(self, name: str, device_id: int) -> Switch:
        self.switches[name] = Switch(name, device_id)
        return self.switches[name]

    def add_link(self, a: str, b: str, a_port: int | None = None,
                 b_port: int | None = None) -> Link:
        link = Link(a, b, a_port, b_port)
        self.links.append(link)
        return link

    # -- derived -----------------------------------------------------------------------------
    def validate(self) -> None:
        nodes = set(self.hosts) | set(self.switches)
        if set(self.hosts) & set(self.switches):
            raise TopologyError(f"names used for both a host and a switch: "
                                f"{sorted(set(self.hosts) & set(self.switches))}")
        used: dict[tuple[str, int], Link] = {}
        for link in self.links:
            for node, port in ((link.a, link.a_port), (link.b, link.b_port)):
                if node not in nodes:
                    raise TopologyError(f"link {link.a}-{link.b}: unknown node {node!r}")
                if node in self.switches:
                    if port is None or not 0 <= port < MAX_PORTS:
                        raise TopologyError(f"link {link.a}-{link.b}: switch {node} needs a port "
                                            f"number 0..{MAX_PORTS - 1}, got {port}")
                    if (node, port) in used:
                        raise TopologyError(f"switch {node} port {port} used by two links")
                    used[(node, port)] = link
        for h in self.hosts:
            if not any(h in (lk.a, lk.b) for lk in self.links):
                raise TopologyError(f"host {h} has no link")
        ids = [s.device_id for s in self.switches.values()]
        if len(ids) != len(set(ids)):
            raise TopologyError(f"duplicate switch device ids: {sorted(ids)}")

    def neighbours(self, node: str) -> list[tuple[str, int | None, int | None]]:
        """(neighbour, my port, its port), sorted by neighbour name then port."""
        out = []
        for lk in self.links:
            if lk.a == node:
                out.append((lk.b, lk.a_port, lk.b_port))
            elif lk.b == node:
                out.append((lk.a, lk.b_port, lk.a_port))
        return sorted(out, key=lambda t: (t[0], t[1] if t[1] is not None else -1))

    def switch_ports(self, switch: str) -> list[int]:
        return sorted(p for _, p, _ in self.neighbours(switch) if p is not None)


def port_mac(device_id: int, port: int) -> str:
    """The MAC of a switch port: locally administered, unique per (device id, port)."""
    if not 0 <= device_id < 1 << 24 or not 0 <= port < 256:
        raise TopologyError(f"device id {device_id} / port {port} out of range for a port MAC")
    octets = [0x02, (device_id >> 16) & 0xFF, (device_id >> 8) & 0xFF, device_id & 0xFF, 0x00,
              port]
    return ":".join(f"{o:02x}" for o in octets)


def qbucket_shift(queue_depth: int | None) -> int:
    """Smallest shift so that QBUCKETS buckets of width 2**shift cover depths 0..queue_depth."""
    depth = 64 if queue_depth is None else int(queue_depth)
    shift = 0
    while (depth >> shift) > QBUCKETS - 1:
        shift += 1
    return min(shift, 18)


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


def next_hops(topo: Topology, switch: str) -> dict[str, tuple[int, str]]:
    """For every host: (egress port on `switch`, first node on a shortest path) by BFS."""
    # BFS from the switch; first hop remembered per reached node.
    first: dict[str, tuple[int, str]] = {}
    seen = {switch}
    frontier: deque[str] = deque()
    for nb, my_port, _ in topo.neighbours(switch):
        if nb in seen:
            continue
        seen.add(nb)
        first[nb] = (my_port, nb)  # type: ignore[assignment]
        if nb in topo.switches:
            frontier.append(nb)
    while frontier:
        node = frontier.popleft()
        for nb, _, _ in topo.neighbours(node):
            if nb in seen:
                continue
            seen.add(nb)
            first[nb] = first[node]
            if nb in topo.switches:  # hosts do not forward
                frontier.append(nb)
    missing = sorted(set(topo.hosts) - set(first))
    if missing:
        raise TopologyError(f"switch {switch} cannot reach host(s) {', '.join(missing)}: the "
                            "topology is not connected")
    return {h: first[h] for h in topo.hosts}


def switch_entries(topo: Topology, switch: str, *, ecn_threshold: int | None = None,
                   port_thresholds: Mapping[int, int] | None = None,
                   queue_depths: Mapping[int, int] | None = None,
                   job_rules: Iterable[JobRule] = ()) -> list[Entry]:
    """All entries of one switch. `ecn_threshold` (packets) applies to every port unless
    `port_thresholds` overrides it; None means no marking. `queue_depths` (packets, per port)
    sets the histogram bucket width."""
    sw = topo.switches[switch]
    entries: list[Entry] = []
    neighbours = {my_port: (nb, nb_port) for nb, my_port, nb_port in topo.neighbours(switch)}
    for port in topo.switch_ports(switch):
        entries.append(Entry("arp_responder", {"standard_metadata.ingress_port": port},
                             "arp_reply", {"port_mac": port_mac(sw.device_id, port)}))
    for host, (port, nb) in sorted(next_hops(topo, switch).items()):
        if nb in topo.hosts:
            dst_mac = topo.hosts[nb].mac
        else:
            nb_port = neighbours[port][1]
            dst_mac = port_mac(topo.switches[nb].device_id, nb_port)
        entries.append(Entry("ipv4_lpm", {"hdr.ipv4.dstAddr": f"{topo.hosts[host].ip}/32"},
                             "forward", {"port": port,
                                         "src_mac": port_mac(sw.device_id, port),
                                         "dst_mac": dst_mac}))
    port_thresholds = dict(port_thresholds or {})
    queue_depths = dict(queue_depths or {})
    for port in topo.switch_ports(switch):
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


def install_entries(conn, entries: Iterable[Entry], batch: int = 100) -> int:
    """Write entries over a SwitchConnection whose P4Info is set; returns how many. Default
    actions are modified one by one, the rest inserted in batches of `batch`."""
    info = conn.p4info
    pending = []
    count = 0
    for e in entries:
        if e.default:
            conn.set_default_action(e.table, e.action, e.params)
            count += 1
            continue
        pending.append(info.table_entry(e.table, e.match, e.action, e.params, e.priority))
        if len(pending) >= batch:
            conn.write(pending)
            count += len(pending)
            pending = []
    if pending:
        conn.write(pending)
        count += len(pending)
    return count


def port_index(port: int) -> int:
    return port & (MAX_PORTS - 1)


def job_port_index(job: int, port: int) -> int:
    """Index into job_tx / job_marks."""
    return job * MAX_PORTS + port_index(port)


def qdepth_index(port: int, bucket: int) -> int:
    return port_index(port) * QBUCKETS + bucket

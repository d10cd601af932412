"""The addressing and routing plan for an experiment, computed before anything is created.

Pure data: both data planes (Linux routers, BMv2) consume the same plan, so they forward on
the same shortest paths and the results (ideal times, which jobs share which link) do not
depend on the data plane. Each link is its own /24 (`10.<i/256>.<i%256>.0/24`, end a = .1,
end b = .2) and hosts have exactly one link, so a host's address is its link-a/b address and
its gateway is the switch end of that link. Routes are hop-count shortest paths with ties
broken by node name, so loops in the topology (leaf-spine) are fine and runs are repeatable."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from mn_harness.collectives import INC, Schedule
from mn_harness.config import Experiment, JobConfig, LinkConfig
from mn_harness.config.workload import CommPhase


@dataclass(frozen=True)
class Interface:
    node: str
    name: str  # e.g. s1-eth2
    port: int  # BMv2 port number; hosts count from 0, switches from 1
    ip: str
    prefix_len: int
    mac: str
    link: LinkConfig
    peer_node: str
    peer_name: str
    peer_ip: str
    peer_mac: str


@dataclass(frozen=True)
class Route:
    switch: str
    dst_host: str
    dst_ip: str
    out: Interface  # the switch's egress interface
    next_hop_node: str
    next_hop_ip: str
    next_hop_mac: str


@dataclass(frozen=True)
class Hop:
    src: str
    dst: str
    link: LinkConfig

    @property
    def label(self) -> str:
        return f"{self.src}->{self.dst}"


class NetworkPlan:
    def __init__(self, experiment: Experiment):
        self.experiment = experiment
        self.interfaces: dict[str, list[Interface]] = {}
        self._by_link_end: dict[tuple[int, str], Interface] = {}
        self._plan_interfaces()
        self.host_ip = {h: self.interfaces[h][0].ip for h in experiment.hosts}
        self._next_hop = self._plan_next_hops()
        self.routes = self._plan_routes()

    def _plan_interfaces(self) -> None:
        exp = self.experiment
        hosts = set(exp.hosts)
        counters = {n: (0 if n in hosts else 1) for n in exp.hosts + exp.switch_names}
        raw = []
        for i, link in enumerate(exp.links):
            net = f"10.{i // 256}.{i % 256}"
            ends = []
            for end_index, node in enumerate((link.a, link.b)):
                port = counters[node]
                counters[node] += 1
                ends.append((node, f"{node}-eth{port}", port, f"{net}.{end_index + 1}",
                             f"02:00:{i // 256:02x}:{i % 256:02x}:00:{end_index + 1:02x}"))
            raw.append((i, link, ends))
        for i, link, ends in raw:
            for me, peer in ((ends[0], ends[1]), (ends[1], ends[0])):
                intf = Interface(me[0], me[1], me[2], me[3], 24, me[4], link,
                                 peer[0], peer[1], peer[3], peer[4])
                self.interfaces.setdefault(me[0], []).append(intf)
                self._by_link_end[(i, me[0])] = intf

    def _plan_next_hops(self) -> dict[tuple[str, str], str]:
        """(node, dst_host) -> neighbour on a shortest path, ties broken by name."""
        adj = self.experiment.neighbours()
        hosts = set(self.experiment.hosts)
        nxt: dict[tuple[str, str], str] = {}
        for dst in self.experiment.hosts:
            dist = {dst: 0}
            todo = deque([dst])
            while todo:
                node = todo.popleft()
                # hosts do not forward: do not expand through a host other than dst
                if node in hosts and node != dst:
                    continue
                for peer, _ in adj[node]:
                    if peer not in dist:
                        dist[peer] = dist[node] + 1
                        todo.append(peer)
            for node in adj:
                if node == dst or node not in dist:
                    continue
                candidates = sorted(
                    peer for peer, _ in adj[node]
                    if dist.get(peer) == dist[node] - 1 and (peer == dst or peer not in hosts)
                )
                if candidates:
                    nxt[(node, dst)] = candidates[0]
        return nxt

    def _interface_towards(self, node: str, peer: str) -> Interface:
        for intf in self.interfaces[node]:
            if intf.peer_node == peer:
                return intf
        raise KeyError(f"{node} has no link to {peer}")

    def _plan_routes(self) -> dict[str, list[Route]]:
        routes: dict[str, list[Route]] = {}
        for switch in self.experiment.switch_names:
            entries = []
            for dst in self.experiment.hosts:
                peer = self._next_hop[(switch, dst)]
                out = self._interface_towards(switch, peer)
                entries.append(Route(switch, dst, self.host_ip[dst], out, peer, out.peer_ip, out.peer_mac))
            routes[switch] = entries
        return routes

    def gateway(self, host: str) -> Interface:
        """The host's only interface; its peer is the default gateway."""
        return self.interfaces[host][0]

    def path(self, src: str, dst: str) -> list[Hop]:
        """Directed hops a packet from host src to host dst crosses."""
        hops = []
        node = src
        while node != dst:
            peer = self._next_hop[(node, dst)]
            hops.append(Hop(node, peer, self._interface_towards(node, peer).link))
            node = peer
            if len(hops) > len(self._next_hop) + 1:
                raise RuntimeError(f"routing loop from {src} to {dst}")
        return hops

    def path_rate_bps(self, src: str, dst: str) -> float:
        return min(h.link.bw_bps for h in self.path(src, dst))

    def ring_hops(self, workers: tuple[str, ...]) -> list[tuple[str, str]]:
        n = len(workers)
        return [(workers[r], workers[(r + 1) % n]) for r in range(n)]

    def job_bottleneck_bps(self, workers: tuple[str, ...]) -> float:
        """Slowest link any ring hop of the workers crosses (the in-network aggregation's
        baseline; the collectives use their own link loads, schedule_link_loads)."""
        return min(self.path_rate_bps(a, b) for a, b in self.ring_hops(workers))

    def job_pairs(self, job: JobConfig) -> list[tuple[str, str]]:
        """Directed (src host, dst host) pairs the job's communication phases send over, in
        first-use order (inc_allreduce: its ring hops, as the aggregation is classified)."""
        if job.collective == INC:
            return self.ring_hops(job.workers)
        pairs: list[tuple[str, str]] = []
        for phase in job.comm_phases:
            hosts = phase.participants
            for a, b in phase.schedule().directed_pairs():
                if (hosts[a], hosts[b]) not in pairs:
                    pairs.append((hosts[a], hosts[b]))
        return pairs

    def schedule_link_loads(self, schedule: Schedule, hosts: tuple[str, ...]) -> dict[str, int]:
        """Bytes each directed link carries when `schedule` runs on `hosts` (local rank i on
        hosts[i]), along the plan's routes."""
        return schedule.link_loads(lambda a, b: [hop.label for hop in self.path(hosts[a], hosts[b])])

    def phase_link_loads(self, phase: CommPhase, nbytes: int | None = None) -> dict[str, int]:
        return self.schedule_link_loads(phase.schedule(nbytes), phase.participants)

    def link_ranks(self) -> dict[str, dict[str, list[int]]]:
        """Directed link label -> job -> ranks whose sending sockets carry data across it: the
        throughput of exactly those ranks is what the link carries (a rank that sends to
        several peers over different links counts on each)."""
        out: dict[str, dict[str, list[int]]] = {}
        for job in self.experiment.jobs:
            for a, b in self.job_pairs(job):
                rank = job.rank_of(a)
                for hop in self.path(a, b):
                    ranks = out.setdefault(hop.label, {}).setdefault(job.name, [])
                    if rank not in ranks:
                        ranks.append(rank)
        return out

    def link_bps(self) -> dict[str, float]:
        return {f"{i.node}->{i.peer_node}": i.link.bw_bps for intfs in self.interfaces.values() for i in intfs}

    def link_jobs(self) -> dict[str, list[str]]:
        """Directed link label -> jobs whose traffic crosses it (in job order)."""
        shared: dict[str, list[str]] = {}
        for job in self.experiment.jobs:
            for a, b in self.job_pairs(job):
                for hop in self.path(a, b):
                    names = shared.setdefault(hop.label, [])
                    if job.name not in names:
                        names.append(job.name)
        return shared

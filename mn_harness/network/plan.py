"""The addressing and routing plan for an experiment, computed before anything is created.

Pure data: both data planes (Linux routers, BMv2) consume the same plan, so they forward on
the same paths and the results (ideal times, which jobs share which link) do not depend on the
data plane. Each link is its own /24 (`10.<i/256>.<i%256>.0/24`, end a = .1, end b = .2) and
hosts have exactly one link, so a host's address is its link-a/b address and its gateway is the
switch end of that link.

Routing (`routing:` in the experiment) works on hop-count shortest paths, so loops in the
topology (leaf-spine) are fine:

* `shortest` (default): one path per host pair, equal-cost ties broken by node name, so runs
  are repeatable and every flow between two hosts takes the same path.
* `ecmp`: every switch keeps all its equal-cost next hops towards a host (in name order) and the
  data plane picks one per flow by hashing the flow's 5-tuple with a seed, at every switch:
  Linux multipath routes, or the P4 program's hash-selected next hop. Which path a flow takes
  is then the data plane's decision. The plan knows each flow's candidate paths
  (network.flows: the 5-tuples are fixed), and `resolve(choose)` — the data plane's chooser —
  fixes the choice at every switch, giving a plan in which every flow has exactly one path.

Per-flow paths are what link sharing is computed from: `link_jobs` and `link_ranks` (which
jobs' and ranks' data crosses each directed link) and each job's bottleneck. In an unresolved
ECMP plan a flow counts on every link of every candidate path (what it *may* share) and its
bottleneck is the slowest candidate."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mn_harness.collectives import Schedule
from mn_harness.config import Experiment, JobConfig, LinkConfig
from mn_harness.config.workload import CommPhase
from mn_harness.network.flows import Flow, job_flows, job_pairs


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
class NextHop:
    out: Interface  # the switch's egress interface
    node: str
    ip: str
    mac: str


@dataclass(frozen=True)
class Route:
    """A switch's route to one host: one next hop, or (ECMP) every equal-cost one, by name."""

    switch: str
    dst_host: str
    dst_ip: str
    next_hops: tuple[NextHop, ...]

    @property
    def out(self) -> Interface:
        return self.next_hops[0].out

    @property
    def next_hop_node(self) -> str:
        return self.next_hops[0].node

    @property
    def next_hop_ip(self) -> str:
        return self.next_hops[0].ip

    @property
    def next_hop_mac(self) -> str:
        return self.next_hops[0].mac

    @property
    def multipath(self) -> bool:
        return len(self.next_hops) > 1


@dataclass(frozen=True)
class Hop:
    src: str
    dst: str
    link: LinkConfig

    @property
    def label(self) -> str:
        return f"{self.src}->{self.dst}"


# The data plane's choice at a switch: (switch, node the packet came from, flow, candidate next
# nodes in name order) -> the chosen next node.
Chooser = Callable[[str, str, Flow, tuple[str, ...]], str]


class NetworkPlan:
    def __init__(self, experiment: Experiment, choices: Mapping[tuple[str, Flow], str] | None = None):
        self.experiment = experiment
        self.routing = experiment.routing
        self.interfaces: dict[str, list[Interface]] = {}
        self._by_link_end: dict[tuple[int, str], Interface] = {}
        self._plan_interfaces()
        self.host_ip = {h: self.interfaces[h][0].ip for h in experiment.hosts}
        self._candidates = self._plan_next_hops()
        # each pair of neighbours' smallest link MTU, from the experiment's links: on one server of
        # a run spread over several, `interfaces` holds that server's nodes only
        self._link_mtu: dict[frozenset[str], int] = {}
        for link in experiment.links:
            key = frozenset((link.a, link.b))
            self._link_mtu[key] = min(link.mtu, self._link_mtu.get(key, link.mtu))
        self.routes = self._plan_routes()
        self.flows = job_flows(experiment)
        self._choices = dict(choices or {})  # (switch, flow) -> next node, for ECMP
        self._flow_paths = {flow: self._walk(flow) for flow in self.flows}

    # -- addressing --------------------------------------------------------------------------
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

    def gateway(self, host: str) -> Interface:
        """The host's only interface; its peer is the default gateway."""
        return self.interfaces[host][0]

    def interface_towards(self, node: str, peer: str) -> Interface:
        for intf in self.interfaces[node]:
            if intf.peer_node == peer:
                return intf
        raise KeyError(f"{node} has no link to {peer}")

    # -- routing -----------------------------------------------------------------------------
    def _plan_next_hops(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """(node, dst_host) -> every neighbour on a shortest path to dst, in name order."""
        adj = self.experiment.neighbours()
        hosts = set(self.experiment.hosts)
        nxt: dict[tuple[str, str], tuple[str, ...]] = {}
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
                candidates = tuple(sorted(
                    peer for peer, _ in adj[node]
                    if dist.get(peer) == dist[node] - 1 and (peer == dst or peer not in hosts)
                ))
                if candidates:
                    nxt[(node, dst)] = candidates
        return nxt

    def next_hops(self, node: str, dst: str) -> tuple[str, ...]:
        """Where `node` may forward a packet for host `dst`: one neighbour with shortest-path
        routing (ties by name), every equal-cost one with ECMP."""
        candidates = self._candidates[(node, dst)]
        return candidates if self.routing == "ecmp" else candidates[:1]

    def _plan_routes(self) -> dict[str, list[Route]]:
        routes: dict[str, list[Route]] = {}
        for switch in self.experiment.switch_names:
            entries = []
            for dst in self.experiment.hosts:
                hops = []
                for peer in self.next_hops(switch, dst):
                    out = self.interface_towards(switch, peer)
                    hops.append(NextHop(out, peer, out.peer_ip, out.peer_mac))
                entries.append(Route(switch, dst, self.host_ip[dst], tuple(hops)))
            routes[switch] = entries
        return routes

    def path(self, src: str, dst: str) -> list[Hop]:
        """Directed hops from host src to host dst along the first equal-cost path by name (the
        only path with shortest-path routing)."""
        return self._hops([src, *self._first_path(src, dst)])

    def _first_path(self, src: str, dst: str) -> list[str]:
        nodes, node = [], src
        while node != dst:
            node = self._candidates[(node, dst)][0]
            nodes.append(node)
        return nodes

    def path_mtu(self, src: str, dst: str) -> int:
        """The smallest MTU of any link host src's packets to host dst may cross: every
        equal-cost path counts, whichever the data plane (ECMP) picks."""
        mtus, todo, seen = [], [src], {src}
        while todo:
            node = todo.pop()
            for peer in self._candidates.get((node, dst), ()):
                mtus.append(self._link_mtu[frozenset((node, peer))])
                if peer not in seen:
                    seen.add(peer)
                    todo.append(peer)
        return min(mtus)

    def route_mtus(self, host: str) -> dict[str, int]:
        """Destination address -> path MTU, for every other host whose path MTU from `host` is
        below the MTU of `host`'s own link: the host's route to it carries that MTU, so TCP
        sends segments every link on the way takes (no ICMP round trip to find it out)."""
        own = self.gateway(host).link.mtu
        if all(link.mtu >= own for link in self.experiment.links):
            return {}
        return {self.host_ip[dst]: mtu for dst in self.experiment.hosts
                if dst != host and (mtu := self.path_mtu(host, dst)) < own}

    def _hops(self, nodes: list[str]) -> list[Hop]:
        return [Hop(a, b, self.interface_towards(a, b).link) for a, b in zip(nodes, nodes[1:], strict=False)]

    # -- flows -------------------------------------------------------------------------------
    def _walk(self, flow: Flow) -> list[list[str]]:
        """Every node sequence `flow` may take (one once the choices are made)."""
        paths: list[list[str]] = []
        todo = [[flow.src]]
        while todo:
            nodes = todo.pop()
            node = nodes[-1]
            if node == flow.dst:
                paths.append(nodes)
                continue
            chosen = self._choices.get((node, flow))
            options = (chosen,) if chosen is not None else self.next_hops(node, flow.dst)
            todo.extend([*nodes, peer] for peer in reversed(options))
        return paths

    @property
    def resolved(self) -> bool:
        """True when every flow has exactly one path (always, with shortest-path routing)."""
        return all(len(paths) == 1 for paths in self._flow_paths.values())

    def resolve(self, choose: Chooser) -> NetworkPlan:
        """The plan with the data plane's choice made at every switch with several next hops
        for every flow (`choose` is asked once per flow and such switch, along the path)."""
        choices: dict[tuple[str, Flow], str] = {}
        for flow in self.flows:
            prev, node = flow.src, self.next_hops(flow.src, flow.dst)[0]
            while node != flow.dst:
                options = self.next_hops(node, flow.dst)
                nxt = options[0]
                if len(options) > 1:
                    nxt = choose(node, prev, flow, options)
                    if nxt not in options:
                        raise ValueError(f"{node}: chose {nxt!r} for {flow.label}, not one of {options}")
                    choices[(node, flow)] = nxt
                prev, node = node, nxt
        return NetworkPlan(self.experiment, choices)

    def for_experiment(self, experiment: Experiment) -> NetworkPlan:
        """This plan, its data plane's choices included, over `experiment`: the same topology
        and jobs at other rates and times (a dilated run's experiment as written:
        config/time_scale.py)."""
        return NetworkPlan(experiment, self._choices)

    def flow_paths(self, flow: Flow) -> list[list[Hop]]:
        """The flow's path (resolved) or every candidate path (unresolved ECMP)."""
        return [self._hops(nodes) for nodes in self._flow_paths[flow]]

    def flow_nodes(self, flow: Flow) -> list[str]:
        """The nodes the flow's data crosses (the first candidate when unresolved): what
        summary.json records as its `flow_paths` entry's path."""
        return list(self._flow_paths[flow][0])

    def pair_path(self, src: str, dst: str, job: str | None = None) -> list[Hop]:
        """The hops job `job`'s data from host src to host dst crosses: its flow's path (the
        first candidate when unresolved); without a job or flow, `path`."""
        for flow in self.flows:
            if flow.job == job and flow.src == src and flow.dst == dst:
                return self.flow_paths(flow)[0]
        return self.path(src, dst)

    def path_rate_bps(self, src: str, dst: str, job: str | None = None) -> float:
        return min(h.link.bw_bps for h in self.pair_path(src, dst, job))

    def job_flows(self, job: str) -> list[Flow]:
        return [f for f in self.flows if f.job == job]

    def job_pairs(self, job: JobConfig) -> list[tuple[str, str]]:
        return job_pairs(job)

    def schedule_link_loads(self, schedule: Schedule, hosts: tuple[str, ...], job: str | None = None) -> dict[str, int]:
        """Bytes each directed link carries when `schedule` runs on `hosts` (local rank i on
        hosts[i]), along the plan's routes (with `job`: along its flows' paths, ECMP's choice)."""
        return schedule.link_loads(lambda a, b: [hop.label for hop in self.pair_path(hosts[a], hosts[b], job)])

    def phase_link_loads(self, phase: CommPhase, nbytes: int | None = None, job: str | None = None) -> dict[str, int]:
        return self.schedule_link_loads(phase.schedule(nbytes), phase.participants, job)

    def link_ranks(self) -> dict[str, dict[str, list[int]]]:
        """Directed link label -> job -> ranks whose sending sockets carry data across it: the
        throughput of exactly those ranks is what the link carries (a rank that sends to
        several peers over different links counts on each)."""
        out: dict[str, dict[str, list[int]]] = {}
        for flow in self.flows:
            for path in self.flow_paths(flow):
                for hop in path:
                    ranks = out.setdefault(hop.label, {}).setdefault(flow.job, [])
                    if flow.rank not in ranks:
                        ranks.append(flow.rank)
        return out

    def link_bps(self) -> dict[str, float]:
        return {f"{i.node}->{i.peer_node}": i.link.bw_bps for intfs in self.interfaces.values() for i in intfs}

    def link_jobs(self) -> dict[str, list[str]]:
        """Directed link label -> jobs whose traffic crosses it (in job order)."""
        return {link: list(jobs) for link, jobs in self.link_ranks().items()}

"""CASSINI's affinity graph: jobs on one side, shared links on the other, an edge where a job's
traffic crosses a link. Time shifts chosen link by link are consistent only if the graph has no
loop; a loop (job A shares link 1 with B, B link 2 with C, C link 3 with A) is exactly the
circular dependency MLTCP's authors name as an open problem.

Links that carry exactly the same set of jobs are one node ("link group"): the two directions
of a ring hop, or a chain of links on the same path, constrain the same rotations, and counting
them separately would report a loop for every pair of jobs sharing a bidirectional path.

Pure functions over {link: [jobs]}; the loops are the fundamental cycles of a spanning forest
(one per edge outside it), each written as alternating job and link-group names, first node
repeated at the end."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LinkGroup:
    """Shared links with the same jobs; `name` joins the link labels with '+'."""

    links: tuple[str, ...]
    jobs: tuple[str, ...]

    @property
    def name(self) -> str:
        return "+".join(self.links)


def link_groups(link_jobs: Mapping[str, Sequence[str]]) -> list[LinkGroup]:
    """Links shared by >= 2 jobs, grouped by their job set, in first-seen order."""
    groups: dict[frozenset[str], list[str]] = {}
    order: dict[frozenset[str], tuple[str, ...]] = {}
    for link, jobs in link_jobs.items():
        unique = tuple(dict.fromkeys(jobs))
        if len(unique) < 2:
            continue
        key = frozenset(unique)
        groups.setdefault(key, []).append(link)
        order.setdefault(key, unique)
    return [LinkGroup(tuple(links), order[key]) for key, links in groups.items()]


def components(groups: Sequence[LinkGroup]) -> list[tuple[list[str], list[LinkGroup]]]:
    """Connected components of the affinity graph: (jobs, link groups), in first-seen order."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for g in groups:
        for job in g.jobs[1:]:
            parent[find(job)] = find(g.jobs[0])
    out: dict[str, tuple[list[str], list[LinkGroup]]] = {}
    for g in groups:
        jobs, gs = out.setdefault(find(g.jobs[0]), ([], []))
        gs.append(g)
        jobs.extend(j for j in g.jobs if j not in jobs)
    return list(out.values())


def loops(groups: Sequence[LinkGroup]) -> list[list[str]]:
    """The affinity graph's independent loops: [job, group, job, group, ..., job] (first node
    repeated). Empty when the shifts of every link can be realised at once."""
    adj: dict[str, list[str]] = {}
    for g in groups:
        node = "link:" + g.name
        for job in g.jobs:
            adj.setdefault("job:" + job, []).append(node)
            adj.setdefault(node, []).append("job:" + job)
    parent: dict[str, str | None] = {}
    depth: dict[str, int] = {}
    tree_edges: set[frozenset[str]] = set()
    for root in adj:
        if root in parent:
            continue
        parent[root], depth[root] = None, 0
        todo = [root]
        while todo:  # breadth-first: short fundamental cycles
            node = todo.pop(0)
            for peer in adj[node]:
                if peer not in parent:
                    parent[peer], depth[peer] = node, depth[node] + 1
                    tree_edges.add(frozenset((node, peer)))
                    todo.append(peer)
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    for node, peers in adj.items():
        for peer in peers:
            edge = frozenset((node, peer))
            if edge in tree_edges or edge in seen:
                continue
            seen.add(edge)
            found.append(_cycle(node, peer, parent, depth))
    return found


def _cycle(a: str, b: str, parent: Mapping[str, str | None], depth: Mapping[str, int]) -> list[str]:
    """a up the tree to the common ancestor, down to b, back to a over the edge a-b; written
    from its first job on, that job repeated at the end."""
    left, right = [a], [b]
    while left[-1] != right[-1]:
        side = left if depth[left[-1]] >= depth[right[-1]] else right
        up = parent[side[-1]]
        assert up is not None  # a and b are in one tree
        side.append(up)
    nodes = left + list(reversed(right[:-1]))
    first_job = next(i for i, n in enumerate(nodes) if n.startswith("job:"))
    nodes = nodes[first_job:] + nodes[:first_job]
    names = [n.split(":", 1)[1] for n in nodes]
    return names + [names[0]]

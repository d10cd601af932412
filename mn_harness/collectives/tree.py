"""Tree all-reduce as NCCL does it: a double binary tree (NCCL src/graph/trees.cc).

The first tree is NCCL's binary tree rooted at rank 0 — a rank's parent and children follow from
its lowest set bit, so leaves and inner nodes alternate. The second tree is its mirror
(rank r plays n-1-r) when n is even, or the first shifted by one rank when n is odd. Every rank
is then an inner node in at most one tree, so the two trees together use every link in both
directions. Each tree all-reduces half of the buffer: its blocks travel up to the root, adding
at every hop (step = the sender's height), then back down (step = H + the sender's depth, H the
tree's height). Channel t is tree t, so the two halves proceed independently; pipelined by
segments, a tree takes about its busiest link's bytes / rate.

Bytes: every non-root rank of a tree sends its half once up; every inner rank sends the half
to each child. With n = 2 both trees are one edge and a rank sends S, like the ring; with more
ranks an inner rank sends up to 2S (ring: 2(n-1)/n * S), so on hosts with one link each the
tree's bus bandwidth is bounded below the link rate (see bandwidth.bound_fraction)."""

from __future__ import annotations

from mn_harness.collectives.bandwidth import allreduce_factor
from mn_harness.collectives.registry import Collective
from mn_harness.collectives.schedule import Schedule, Transfer, need_ranks

Tree = tuple[list[int], list[list[int]]]  # parent per rank (-1 = root), children per rank


def btree(n: int, rank: int) -> tuple[int, list[int]]:
    """(parent, children) of `rank` in NCCL's binary tree on n ranks rooted at 0."""
    bit = 1
    while bit < n and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, ([bit >> 1] if n > 1 else [])
    parent = (rank ^ bit) | (bit << 1)
    if parent >= n:
        parent = rank ^ bit
    low = bit >> 1
    children = []
    if low:
        children.append(rank - low)  # always within bounds
        while low and rank + low >= n:
            low >>= 1
        if low:
            children.append(rank + low)
    return parent, children


def double_tree(n: int) -> tuple[Tree, Tree]:
    need_ranks("tree all-reduce", n)
    first: Tree = ([btree(n, r)[0] for r in range(n)], [btree(n, r)[1] for r in range(n)])
    if n % 2:
        def mapped(r: int) -> int:
            return (r + 1) % n
        base = [(r - 1) % n for r in range(n)]
    else:
        def mapped(r: int) -> int:
            return n - 1 - r
        base = [n - 1 - r for r in range(n)]
    parents, children = [], []
    for r in range(n):
        up, down = btree(n, base[r])
        parents.append(-1 if up == -1 else mapped(up))
        children.append([mapped(c) for c in down])
    return first, (parents, children)


def _depths_heights(tree: Tree) -> tuple[list[int], list[int]]:
    parents, children = tree
    n = len(parents)
    depth = [0] * n
    for r in range(n):
        v, d = r, 0
        while parents[v] != -1:
            v, d = parents[v], d + 1
        depth[r] = d
    height = [0] * n
    for r in sorted(range(n), key=lambda v: -depth[v]):
        height[r] = 1 + max((height[c] for c in children[r]), default=-1)
    return depth, height


def tree_transfers(tree: Tree, channel: int, nbytes: int) -> list[Transfer]:
    parents, children = tree
    depth, height = _depths_heights(tree)
    top = max(height)
    out = [Transfer(height[r], channel, channel, r, parents[r], nbytes, reduce=True)
           for r in range(len(parents)) if parents[r] != -1]
    out += [Transfer(top + depth[r], channel, channel, r, c, nbytes)
            for r in range(len(parents)) for c in children[r]]
    return out


def tree_allreduce(total_bytes: int, n: int) -> Schedule:
    first_half = -(-total_bytes // 2)
    halves = (first_half, total_bytes - first_half)
    transfers = []
    for channel, tree in enumerate(double_tree(n)):
        if halves[channel]:
            transfers += tree_transfers(tree, channel, halves[channel])
    return Schedule("tree_allreduce", n, total_bytes, tuple(transfers))


TREE_ALLREDUCE = Collective("tree_allreduce", lambda c: tree_allreduce(c.nbytes, c.ranks), allreduce_factor,
                            bucketable=True)

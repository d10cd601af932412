"""NCCL's double binary tree: the trees themselves, bytes per rank, and the all-reduce's meaning."""

import pytest

from mn_harness.collectives import tree
from tests.helpers import run_schedule

S = 12_000_000


def test_btree_matches_nccls_14_rank_picture():
    # NCCL src/graph/trees.cc: 0 -> 8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 13; 10 -> 9, 11 ...
    kids = {r: tree.btree(14, r)[1] for r in range(14)}
    assert kids[0] == [8] and kids[8] == [4, 12] and kids[4] == [2, 6] and kids[12] == [10, 13]
    assert kids[10] == [9, 11] and kids[2] == [1, 3] and kids[13] == [] and kids[1] == []
    assert tree.btree(14, 13)[0] == 12 and tree.btree(14, 8)[0] == 0 and tree.btree(14, 0)[0] == -1


def test_second_tree_mirrors_for_even_and_shifts_for_odd_n():
    (p1, _), (p2, c2) = tree.double_tree(4)
    assert p1 == [-1, 2, 0, 2]  # 0 - 2 - {1, 3}
    assert p2 == [1, 3, 1, -1] and c2[1] == [2, 0]  # mirrored: 3 - 1 - {2, 0}
    (q1, _), (q2, _) = tree.double_tree(5)
    assert q1 == [-1, 2, 4, 2, 0]
    assert q2 == [1, -1, 3, 0, 3]  # shifted by one: root 1


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 13])
def test_double_tree_is_two_spanning_trees_and_inner_in_at_most_one(n):
    trees = tree.double_tree(n)
    for parents, children in trees:
        assert parents.count(-1) == 1
        assert sorted(c for kids in children for c in kids) == sorted(r for r in range(n) if parents[r] != -1)
        for r in range(n):
            assert all(parents[c] == r for c in children[r])
    if n > 2:
        inner = [{r for r in range(n) if children[r]} for _, children in trees]
        assert len(inner[0] & inner[1]) <= 1  # NCCL's point: inner nodes differ between the trees


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 13])
def test_tree_allreduce_gives_every_rank_both_halves_reduced(n):
    sched = tree.tree_allreduce(S, n)
    end = run_schedule(sched, [{0: {r}, 1: {r}} for r in range(n)])
    assert all(end[r][h] == set(range(n)) for r in range(n) for h in (0, 1))


def test_tree_bytes_per_rank_for_two_and_four_ranks():
    assert tree.tree_allreduce(S, 2).bytes_sent_per_rank() == [S, S]  # like the ring
    # 4 ranks: rank 2 is inner in tree 1 (up + two children), rank 1 in tree 2: 2S each
    assert tree.tree_allreduce(S, 4).bytes_sent_per_rank() == [S, 2 * S, 2 * S, S]
    odd = tree.tree_allreduce(S + 1, 2)
    assert sum(t.nbytes for t in odd.transfers if t.src == 0) == S + 1


def test_tree_steps_go_up_by_height_then_down_by_depth():
    sched = tree.tree_allreduce(S, 4)
    first = sorted((t.step, t.src, t.dst) for t in sched.transfers if t.channel == 0)
    # tree 0 - 2 - {1, 3}: leaves up at step 0, 2 up at step 1, root down at 2, 2 down at 3
    assert first == [(0, 1, 2), (0, 3, 2), (1, 2, 0), (2, 0, 2), (3, 2, 1), (3, 2, 3)]
    assert all(t.reduce == (t.step < 2) for t in sched.transfers if t.channel == 0)

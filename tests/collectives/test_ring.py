"""Ring collectives: bytes per rank (nccl-tests conventions) and the schedule's meaning."""

import pytest

from mn_harness.collectives import ring
from tests.helpers import run_schedule

S = 24_000_000  # divisible by every n below


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_ring_allreduce_sends_2_n_minus_1_over_n_of_s(n):
    assert ring.steps(n) == 2 * (n - 1)
    assert ring.chunk_bytes(S, n) == S // n
    assert ring.bytes_sent_per_worker(S, n) == 2 * (n - 1) * S // n
    sched = ring.ring_allreduce(S, n)
    assert sched.bytes_sent_per_rank() == [2 * (n - 1) * S // n] * n
    assert [sched.received_by(r) for r in range(n)] == [2 * (n - 1) * S // n] * n
    assert sched.steps == 2 * (n - 1)


@pytest.mark.parametrize("make", [ring.reduce_scatter, ring.all_gather])
@pytest.mark.parametrize("n", [2, 3, 5])
def test_reduce_scatter_and_all_gather_send_n_minus_1_over_n(make, n):
    sched = make(S, n)
    assert sched.steps == n - 1
    assert sched.bytes_sent_per_rank() == [(n - 1) * S // n] * n


def test_rounding_up_moves_whole_bytes_every_step():
    assert ring.chunk_bytes(10, 3) == 4
    assert ring.bytes_sent_per_worker(10, 3) == 16
    assert ring.ring_allreduce(10, 3).sent_by(0) == 16


def test_single_rank_is_rejected():
    with pytest.raises(ValueError):
        ring.steps(1)
    with pytest.raises(ValueError):
        ring.ring_allreduce(10, 1)


def test_each_step_sends_to_the_right_and_receives_from_the_left():
    n = 4
    sched = ring.ring_allreduce(S, n)
    for step in range(sched.steps):
        moves = sched.at_step(step)
        assert sorted((t.src, t.dst) for t in moves) == [(r, (r + 1) % n) for r in range(n)]
    # step 0 of reduce-scatter: rank r sends block r-1; step 0 of all-gather: its own block r
    assert {t.src: t.chunk for t in sched.at_step(0)} == {0: 3, 1: 0, 2: 1, 3: 2}
    assert {t.src: t.chunk for t in sched.at_step(n - 1)} == {0: 0, 1: 1, 2: 2, 3: 3}
    assert all(t.reduce == (t.step < n - 1) for t in sched.transfers)
    assert sched.directed_pairs() == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert sched.peers_of(0) == {1, 3}


@pytest.mark.parametrize("n", [2, 3, 4, 7])
def test_ring_allreduce_leaves_every_rank_with_every_contribution(n):
    start = [{c: {r} for c in range(n)} for r in range(n)]
    end = run_schedule(ring.ring_allreduce(S, n), start)
    assert all(end[r][c] == set(range(n)) for r in range(n) for c in range(n))


@pytest.mark.parametrize("n", [2, 3, 6])
def test_reduce_scatter_leaves_rank_r_with_block_r_reduced(n):
    end = run_schedule(ring.reduce_scatter(S, n), [{c: {r} for c in range(n)} for r in range(n)])
    assert all(end[r][r] == set(range(n)) for r in range(n))


@pytest.mark.parametrize("n", [2, 3, 6])
def test_all_gather_gives_everyone_every_block(n):
    end = run_schedule(ring.all_gather(S, n), [{r: {r}} for r in range(n)])
    assert all(end[r][c] == {c} for r in range(n) for c in range(n))


@pytest.mark.parametrize("n", [2, 3, 5])
def test_broadcast_is_a_chain_from_rank_0(n):
    sched = ring.broadcast(S, n)
    assert [(t.step, t.src, t.dst) for t in sched.transfers] == [(k, k, k + 1) for k in range(n - 1)]
    assert sched.bytes_sent_per_rank() == [S] * (n - 1) + [0]
    end = run_schedule(sched, [{0: {0}}] + [{} for _ in range(n - 1)])
    assert all(end[r][0] == {0} for r in range(n))

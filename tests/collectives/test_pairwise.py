"""All-to-all and parameter server: who sends what to whom, and the bytes."""

import pytest

from mn_harness.collectives import pairwise
from tests.helpers import run_schedule

S = 12_000_000


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_all_to_all_sends_each_peer_its_block_once(n):
    sched = pairwise.all_to_all(S, n)
    assert not sched.dependent and sched.steps == n - 1
    assert sched.bytes_sent_per_rank() == [(n - 1) * S // n] * n
    got = {(t.src, t.dst) for t in sched.transfers}
    assert got == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert all(t.chunk == t.dst for t in sched.transfers)
    for step in range(sched.steps):  # every rank sends and receives exactly one block per step
        moves = sched.at_step(step)
        assert sorted(t.src for t in moves) == list(range(n)) == sorted(t.dst for t in moves)


def test_all_to_all_step_k_goes_k_ranks_ahead():
    assert sorted((t.src, t.dst) for t in pairwise.all_to_all(S, 3).at_step(1)) == [(0, 2), (1, 0), (2, 1)]


@pytest.mark.parametrize("workers,servers", [(2, 1), (3, 1), (4, 2), (2, 3)])
def test_parameter_server_push_then_pull(workers, servers):
    n = workers + servers
    sched = pairwise.parameter_server(S, n, servers)
    shard = -(-S // servers)
    sent = sched.bytes_sent_per_rank()
    assert sent[:workers] == [servers * shard] * workers
    assert sent[workers:] == [workers * shard] * servers
    assert all(t.step == 0 and t.reduce and t.dst >= workers for t in sched.transfers if t.src < workers)
    assert all(t.step == 1 and not t.reduce and t.dst < workers for t in sched.transfers if t.src >= workers)
    start = [{j: {w} for j in range(servers)} for w in range(workers)] + [{} for _ in range(servers)]
    end = run_schedule(sched, start)
    assert all(end[w][j] == set(range(workers)) for w in range(workers) for j in range(servers))


def test_parameter_server_needs_a_server_and_a_worker():
    with pytest.raises(ValueError):
        pairwise.parameter_server(S, 3, 0)
    with pytest.raises(ValueError):
        pairwise.parameter_server(S, 2, 2)

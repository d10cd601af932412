"""nccl-tests bandwidth conventions and the one-link-per-host bound."""

import pytest

from mn_harness import collectives
from mn_harness.collectives import bandwidth


def test_busbw_factors_follow_nccl_tests():
    assert bandwidth.busbw_factor("ring_allreduce", 4) == pytest.approx(1.5)
    assert bandwidth.busbw_factor("tree_allreduce", 4) == pytest.approx(1.5)
    for name in ("reduce_scatter", "all_gather", "all_to_all"):
        assert bandwidth.busbw_factor(name, 4) == pytest.approx(0.75)
    assert bandwidth.busbw_factor("broadcast", 4) == 1.0
    # 1 GB all-reduced by 4 ranks in 1 s: algbw 1 GB/s, busbw 1.5 GB/s
    assert bandwidth.busbw("ring_allreduce", 10**9, 4, 1.0) == pytest.approx(1.5e9)
    with pytest.raises(ValueError):
        bandwidth.busbw_factor("gather", 2)


@pytest.mark.parametrize("name", ["ring_allreduce", "reduce_scatter", "all_gather", "all_to_all"])
@pytest.mark.parametrize("n", [2, 4, 8])
def test_ring_family_can_reach_the_link_rate(name, n):
    sched = collectives.schedule(name, 8_000_000, n)
    assert bandwidth.bound_fraction(name, 8_000_000, n, max(sched.bytes_sent_per_rank())) == pytest.approx(1.0)


def test_tree_bound_is_below_one_beyond_two_ranks():
    for n, bound in ((2, 1.0), (4, 0.75), (8, 0.875)):
        sched = collectives.schedule("tree_allreduce", 8_000_000, n)
        got = bandwidth.bound_fraction("tree_allreduce", 8_000_000, n, max(sched.bytes_sent_per_rank()))
        assert got == pytest.approx(bound)


def test_every_scheduled_collective_has_a_schedule_and_a_convention():
    for name in collectives.names(engine=collectives.SYNTHETIC):
        sched = collectives.schedule(name, 1_000_000, 4, servers=1, micro_batches=2)
        assert sched.collective == name and sched.transfers
        assert bandwidth.busbw_factor(name, 3 if name == "parameter_server" else 4) > 0
    with pytest.raises(ValueError):
        collectives.schedule("gather", 10, 2)

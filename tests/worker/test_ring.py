"""Ring all-reduce arithmetic (nccl-tests conventions)."""


import pytest

from mn_harness.worker import ring


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_ring_sends_2_n_minus_1_over_n_of_s(n):
    s = 24_000_000  # divisible by every n above
    assert ring.steps(n) == 2 * (n - 1)
    assert ring.chunk_bytes(s, n) == s // n
    assert ring.bytes_sent_per_worker(s, n) == 2 * (n - 1) * s // n


def test_ring_rounds_chunks_up():
    assert ring.chunk_bytes(10, 3) == 4
    assert ring.bytes_sent_per_worker(10, 3) == 16


def test_ring_rejects_single_worker():
    with pytest.raises(ValueError):
        ring.steps(1)


def test_bus_bandwidth_matches_nccl_convention():
    # 1 GB all-reduced by 4 workers in 1 s: algbw 1 GB/s, busbw 1.5 GB/s
    assert ring.bus_bandwidth(10**9, 4, 1.0) == pytest.approx(1.5e9)

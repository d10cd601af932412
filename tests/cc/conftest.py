"""Fixtures of the real-kernel congestion-control tests (tests/cc/kernel_net.py): the shaped
network, one per test module, and a manager whose BPF congestion controls must all be gone from
the kernel once the test ends."""

from __future__ import annotations

import pytest

from mn_harness.cc.manager import CongestionControlManager, available_congestion_controls
from tests.cc.kernel_net import FIFO_LIMIT, veth_pair


@pytest.fixture(scope="module")
def net():
    with veth_pair(limit=FIFO_LIMIT):
        yield


@pytest.fixture
def manager(tmp_path):
    with CongestionControlManager(log=lambda m: None) as m:
        yield m
    for name in m.registered_names():
        assert name not in available_congestion_controls()

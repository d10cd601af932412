"""bench/forwarding.py on the real kernel: TCP crosses the router namespace both ways, the busy
cores are read over the same seconds, and nothing of its own is left behind."""

import os
import shutil
import subprocess

import pytest

from tests.helpers import bench_module

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3 (apt-get install iperf3)")]


def own_namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith("mnhfw")]


@pytest.mark.parametrize("gso_max_segs,switch", [(1, "router"), (16, "router"), (16, "bridge")])
def test_the_kernel_forwards_both_ways_and_leaves_nothing_behind(gso_max_segs, switch):
    """Offloads off and capped (shaping.offload_commands); routed, and bridged."""
    forwarding = bench_module("forwarding")
    before = own_namespaces()
    r = forwarding.measure(seconds=1.0, gso_max_segs=gso_max_segs, switch=switch)
    # a veth route forwards far more than the emulated links' rates on any machine this runs on
    assert r.gbps > 0.1 and 0 < r.busy_cores <= (os.cpu_count() or 1)
    assert r.gbps_per_core == pytest.approx(r.gbps / r.busy_cores)
    assert 0 <= r.steal < 1
    assert own_namespaces() == before

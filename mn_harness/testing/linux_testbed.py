"""A Linux data-plane network brought up from an experiment without starting its jobs, with test
traffic (mn_harness/testing/traffic.py) run in its hosts: for the ECN/queue tests and benchmarks.

    with linux_network(raw_experiment) as (network, plan, dataplane):
        rx = in_host(network, "h2", "udp-recv", "9000", "0.5")
        ...
        traffic_result(rx)"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from mn_harness.config import Experiment
from mn_harness.dataplane.linux import LinuxDataplane
from mn_harness.network.emulated import EmulatedNetwork
from mn_harness.network.plan import NetworkPlan


def bulk_flow_topology() -> dict:
    """h1 -2 Gbit/s- s1 -1 Gbit/s- h2: one bulk flow from h1 queues at s1's port towards h2
    (100 frames, ECN threshold 20 packets). The job only makes the file valid; the traffic is
    started with in_host."""
    return {"hosts": ["h1", "h2"], "switches": ["s1"],
            "links": [{"endpoints": ["h1", "s1"], "bw": "2Gbit", "queue": 1000},
                      {"endpoints": ["s1", "h2"], "bw": "1Gbit", "queue": 100, "ecn_threshold": 20}],
            "jobs": [{"name": "j", "workers": ["h1", "h2"], "bytes_per_iteration": "1MB",
                      "compute": "10ms", "iterations": 1}],
            "run": {"dataplane": "linux"}}


@contextmanager
def linux_network(raw: dict, **dataplane_options) -> Iterator[tuple[EmulatedNetwork, NetworkPlan, LinuxDataplane]]:
    """The network of experiment `raw` on the Linux data plane, up: yields (network, plan,
    dataplane); always torn down (traffic processes started with in_host, namespaces, veths,
    egress programs), also when the body raises or is interrupted: a traffic process left
    running would keep its host's namespace alive."""
    exp = Experiment.from_dict(raw, "egress-testbed")
    plan = NetworkPlan(exp)
    dataplane = LinuxDataplane(log=lambda *_: None, **dataplane_options)
    network = EmulatedNetwork(exp, plan, dataplane)
    _TRAFFIC[id(network)] = []
    try:
        network.build()
        yield network, plan, dataplane
    finally:
        try:
            for proc in _TRAFFIC.pop(id(network), []):
                _end(proc)
        finally:
            network.stop()


# traffic processes per network (id of the EmulatedNetwork), ended when linux_network exits
_TRAFFIC: dict[int, list[subprocess.Popen]] = {}


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    if proc.stdout is not None:
        proc.stdout.close()


def in_host(network: EmulatedNetwork, host: str, *argv: str) -> subprocess.Popen:
    """`python -m mn_harness.testing.traffic ARGV` in `host`'s namespace, stdout piped; ended
    by linux_network's teardown if still running."""
    proc = subprocess.Popen(["mnexec", "-a", str(network.nodes[host].pid), sys.executable, "-m",
                             "mn_harness.testing.traffic", *argv], stdout=subprocess.PIPE, text=True)
    _TRAFFIC.setdefault(id(network), []).append(proc)
    return proc


def traffic_result(proc: subprocess.Popen, timeout: float = 60) -> dict:
    """The JSON line a traffic process ends with (after an optional {"ready": true})."""
    out, _ = proc.communicate(timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])

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
from contextlib import contextmanager

from mn_harness.config import Experiment
from mn_harness.dataplane.linux import LinuxDataplane
from mn_harness.network.emulated import EmulatedNetwork
from mn_harness.network.plan import NetworkPlan


@contextmanager
def linux_network(raw: dict, **dataplane_options) -> Iterator[tuple[EmulatedNetwork, NetworkPlan, LinuxDataplane]]:
    """The network of experiment `raw` on the Linux data plane, up: yields (network, plan,
    dataplane); always torn down (namespaces, veths, egress programs)."""
    exp = Experiment.from_dict(raw, "egress-testbed")
    plan = NetworkPlan(exp)
    dataplane = LinuxDataplane(log=lambda *_: None, **dataplane_options)
    network = EmulatedNetwork(exp, plan, dataplane)
    try:
        network.build()
        yield network, plan, dataplane
    finally:
        network.stop()


def in_host(network: EmulatedNetwork, host: str, *argv: str) -> subprocess.Popen:
    """`python -m mn_harness.testing.traffic ARGV` in `host`'s namespace, stdout piped."""
    return subprocess.Popen(["mnexec", "-a", str(network.nodes[host].pid), sys.executable, "-m",
                             "mn_harness.testing.traffic", *argv], stdout=subprocess.PIPE, text=True)


def traffic_result(proc: subprocess.Popen, timeout: float = 60) -> dict:
    """The JSON line a traffic process ends with (after an optional {"ready": true})."""
    out, _ = proc.communicate(timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])

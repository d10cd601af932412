"""The kernel's own forwarding rate on this machine, the yardstick for the emulation's goodput per
core (bench/scale.py): one route, no shaping, no BPF, no Python. Two namespaces joined through a
router namespace by veth pairs (a -> r -> b), frames of the same size and GSO cap as an emulated
run's (MTU, `gso_max_segs`), and iperf3 moving TCP both ways at once (`--bidir`: a 2-worker
ring all-reduce's two directions) as fast as it can for `seconds`. The machine's busy cores over
the same seconds (/proc/stat, the VM's steal left out) turn it into Gbit/s per core.

Everything is created under names of its own (mnhfw<pid>-a/r/b) and removed afterwards; the
traffic stays between these namespaces. Needs root and iperf3; run it under the measurement
lock like any network."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass

from mn_harness.fidelity.cpu_load import CpuTimes, read_times
from mn_harness.network.shaping import offload_commands

ADDR = {"a": ("10.199.1.1", "10.199.1.2"), "b": ("10.199.2.1", "10.199.2.2")}  # (router end, host end)


@dataclass(frozen=True)
class ForwardingRate:
    gbps: float            # TCP goodput, both directions together
    busy_cores: float      # cores busy meanwhile, steal left out (the whole machine's)
    steal: float           # share of the cores' time the VM's host took
    before_cores: float    # cores the machine kept busy in the seconds before, without this traffic

    @property
    def gbps_per_core(self) -> float:
        return self.gbps / self.busy_cores if self.busy_cores else 0.0


def _load(seconds: float) -> tuple[float, float]:
    """(busy cores with steal left out, steal share) of the whole machine over the next `seconds`."""
    before = read_times()
    time.sleep(seconds)
    return _busy(before, read_times())


def _busy(before: CpuTimes, after: CpuTimes) -> tuple[float, float]:
    total, idle, steal = (x - y for x, y in zip(after, before, strict=True))
    if total <= 0:
        return 0.0, 0.0
    return (total - idle - steal) / total * (os.cpu_count() or 1), steal / total


def _sh(*argv: str, ns: str | None = None, check: bool = True) -> str:
    cmd = ["ip", "netns", "exec", ns, *argv] if ns else list(argv)
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=60).stdout


def measure(seconds: float = 5.0, gso_max_segs: int = 16, mtu: int = 1500) -> ForwardingRate:
    tag = f"mnhfw{os.getpid()}"
    ns = {k: f"{tag}-{k}" for k in "arb"}
    server: subprocess.Popen | None = None
    try:
        for name in ns.values():
            _sh("ip", "netns", "add", name)
        for side in "ab":
            router_end, host_end = f"{tag}{side}r", f"{tag}{side}h"
            _sh("ip", "link", "add", router_end, "netns", ns["r"], "type", "veth", "peer", "name", host_end,
                "netns", ns[side])
            for where, intf, addr in ((ns["r"], router_end, ADDR[side][0]), (ns[side], host_end, ADDR[side][1])):
                _sh("ip", "link", "set", intf, "mtu", str(mtu), ns=where)
                for argv in offload_commands(intf, gso_max_segs):  # as an emulated run's interfaces
                    _sh(*argv, ns=where, check=False)
                _sh("ip", "addr", "add", f"{addr}/24", "dev", intf, ns=where)
                _sh("ip", "link", "set", intf, "up", ns=where)
                _sh("ip", "link", "set", "lo", "up", ns=where)
            _sh("ip", "route", "add", "default", "via", ADDR[side][0], ns=ns[side])
        _sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=ns["r"])
        server = subprocess.Popen(["ip", "netns", "exec", ns["b"], "iperf3", "-s", "-1", "-B", ADDR["b"][1]],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        other_cores, _ = _load(1.0)  # the machine's other load: on a shared machine it is in busy_cores too
        before = read_times()
        out = _sh("iperf3", "-c", ADDR["b"][1], "-t", f"{seconds:g}", "--bidir", "-J", ns=ns["a"])
        busy, steal = _busy(before, read_times())
        end = json.loads(out)["end"]
        gbps = (end["sum_received"]["bits_per_second"] + end["sum_received_bidir_reverse"]["bits_per_second"]) / 1e9
        return ForwardingRate(gbps, busy, steal, other_cores)
    finally:
        if server is not None and server.poll() is None:
            server.kill()
            server.wait()
        for name in ns.values():
            _sh("ip", "netns", "del", name, check=False)


if __name__ == "__main__":
    r = measure()
    print(f"{r.gbps:.2f} Gbit/s, {r.busy_cores:.2f} cores busy, {r.gbps_per_core:.2f} Gbit/s per core, "
          f"steal {r.steal:.1%}; {r.before_cores:.2f} cores busy just before, without this traffic")

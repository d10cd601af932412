"""The kernel's own forwarding rate on this machine, the yardstick for the emulation's goodput per
core (bench/scale.py): one route, no shaping, no BPF, no Python. Two namespaces joined through a
router namespace by veth pairs (a -> r -> b), frames of the same size and GSO cap as an emulated
run's (MTU, `gso_max_segs`), and iperf3 moving TCP both ways at once (`--bidir`: a 2-worker
ring all-reduce's two directions) as fast as it can for `seconds`. The machine's busy cores over
the same seconds (/proc/stat, the VM's steal left out) turn it into Gbit/s per core.

Everything is created under names of its own (mnhfw<pid>-a/r/b) and removed afterwards; the
traffic stays between these namespaces. Needs root and iperf3; run it under the measurement
lock like any network.

`switch="bridge"` puts a Linux bridge in the middle namespace instead (a and b on one subnet, the
bridge's netfilter calls off, as run.emulation.switches: bridge builds it): the two give the
kernel's cost per packet of L3 forwarding against L2 switching on this machine.

Usage: sudo .venv/bin/python bench/forwarding.py [--switches router,bridge] [--reps 3] [--seconds 5]"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass

from mn_harness.fidelity.cpu_load import CpuTimes, read_times
from mn_harness.network.shaping import offload_commands

ADDR = {"a": ("10.199.1.1", "10.199.1.2"), "b": ("10.199.2.1", "10.199.2.2")}  # (router end, host end)
BRIDGED = {"a": "10.199.1.2", "b": "10.199.1.3"}  # the hosts' addresses on the bridge's one subnet
SWITCHES = ("router", "bridge")


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


def measure(seconds: float = 5.0, gso_max_segs: int = 16, mtu: int = 1500, switch: str = "router") -> ForwardingRate:
    if switch not in SWITCHES:
        raise ValueError(f"switch: one of {', '.join(SWITCHES)}, got {switch!r}")
    bridged = switch == "bridge"
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
            host_addr = BRIDGED[side] if bridged else ADDR[side][1]
            for where, intf, addr in ((ns["r"], router_end, None if bridged else ADDR[side][0]),
                                      (ns[side], host_end, host_addr)):
                _sh("ip", "link", "set", intf, "mtu", str(mtu), ns=where)
                for argv in offload_commands(intf, gso_max_segs):  # as an emulated run's interfaces
                    _sh(*argv, ns=where, check=False)
                if addr is not None:
                    _sh("ip", "addr", "add", f"{addr}/24", "dev", intf, ns=where)
                _sh("ip", "link", "set", intf, "up", ns=where)
                _sh("ip", "link", "set", "lo", "up", ns=where)
            if not bridged:
                _sh("ip", "route", "add", "default", "via", ADDR[side][0], ns=ns[side])
        if bridged:
            _bridge(ns["r"], [f"{tag}ar", f"{tag}br"])
        else:
            _sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=ns["r"])
        target = BRIDGED["b"] if bridged else ADDR["b"][1]
        server = subprocess.Popen(["ip", "netns", "exec", ns["b"], "iperf3", "-s", "-1", "-B", target],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        other_cores, _ = _load(1.0)  # the machine's other load: on a shared machine it is in busy_cores too
        before = read_times()
        out = _sh("iperf3", "-c", target, "-t", f"{seconds:g}", "--bidir", "-J", ns=ns["a"])
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


def _bridge(ns: str, ports: list[str]) -> None:
    """A bridge in `ns` over `ports`, as the bridge data plane builds a switch (STP off, the
    bridge's netfilter calls off where br_netfilter is there)."""
    from mn_harness.dataplane.bridge import BRIDGE, BRIDGE_NF_SYSCTLS

    for key in BRIDGE_NF_SYSCTLS:
        _sh("sysctl", "-qw", f"{key}=0", ns=ns, check=False)
    _sh("ip", "link", "add", BRIDGE, "type", "bridge", "stp_state", "0", ns=ns)
    for port in ports:
        _sh("ip", "link", "set", port, "master", BRIDGE, ns=ns)
    _sh("ip", "link", "set", BRIDGE, "up", ns=ns)


def main() -> None:
    import argparse
    import statistics

    from common import DEFAULT_LOCK, ChunkedLock, mean_ci  # bench/common.py, beside this file

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--switches", default="router", help="router, bridge or both, comma-separated")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--lock", default=DEFAULT_LOCK, help="the measurement lock ('' for none)")
    args = ap.parse_args()
    switches = [s for s in args.switches.split(",") if s]
    for s in switches:
        if s not in SWITCHES:
            ap.error(f"--switches: one of {', '.join(SWITCHES)}, got {s!r}")
    lock = ChunkedLock(args.lock or None)
    got: dict[str, list[ForwardingRate]] = {s: [] for s in switches}
    for rep in range(args.reps):
        for s in switches:  # round robin: a slow minute of the machine hits both alike
            with lock.run():
                r = measure(args.seconds, switch=s)
            got[s].append(r)
            print(f"[{rep + 1}/{args.reps}] {s}: {r.gbps:.2f} Gbit/s on {r.busy_cores:.2f} cores = "
                  f"{r.gbps_per_core:.2f} Gbit/s per core, steal {r.steal:.1%}, "
                  f"{r.before_cores:.2f} cores busy just before", flush=True)
    lock.release()
    for s, rs in got.items():
        print(f"{s}: {mean_ci([r.gbps for r in rs], 2)} Gbit/s, {mean_ci([r.gbps_per_core for r in rs], 2)} "
              f"Gbit/s per busy core (n={len(rs)}, mean ± 95% CI), steal "
              f"{statistics.mean(r.steal for r in rs):.1%}")
    if set(got) == set(SWITCHES):
        ratio = [b.gbps_per_core / r.gbps_per_core for r, b in zip(got["router"], got["bridge"], strict=True)
                 if r.gbps_per_core]
        print(f"bridge / router per core, paired by repetition: {mean_ci(ratio, 3)}")


if __name__ == "__main__":
    main()

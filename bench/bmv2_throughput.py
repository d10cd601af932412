#!/usr/bin/env python3
"""How fast may links be on BMv2? iperf3 (TCP, one flow) across one switch and across a 3-switch
path, for several configured link rates, printed as a fraction of the configured rate.

    sudo .venv/bin/python bench/bmv2_throughput.py [--rates 10,50,100,200,0] [--hops 1,3]
                                                   [--duration 5] [--queue 100] [--reps 5]

A configured rate r sets every switch egress queue to r Mbit/s of full-size frames
(`set_queue_rate`, packets/s) with `--queue` packets of depth: the bottleneck is BMv2's own queue,
as in an experiment. Rate 0 leaves the queues unlimited and measures what BMv2 forwards at all on
this CPU. A fraction well below 1 means BMv2 cannot keep up with that link rate here: choose
slower links for experiments on dataplane: bmv2.

Per path length and rate one test bed is built, one warm-up iperf3 run (1 s, left out) primes ARP,
the path and the CPU caches, then `--reps` runs are measured: mean and 95% CI (Student t) of the
goodput and of the fraction. The last line is `key=value` pairs: `<hops>sw_<rate>` = the mean
fraction (or Mbit/s for unlimited), and `toolchain=` the simple_switch_grpc measured (compare
builds by pointing P4_TOOLCHAIN at each).

Needs root, BMv2 (simple_switch_grpc, simple_switch_CLI), p4c-bm2-ss, iperf3 and the package
installed in the interpreter that runs it (the venv's editable install).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

from common import pm  # bench/common.py, which makes the package importable

from mn_harness.network.plan import NetworkPlan
from mn_harness.p4.limits import FRAME_BYTES
from mn_harness.p4.toolchain import find_toolchain
from mn_harness.results.stats import mean_ci95
from mn_harness.testing import LinkQueue, P4Testbed, make_plan


def path_topology(hops: int) -> NetworkPlan:
    """h1 - s1 - ... - s<hops> - h2."""
    switches = [f"s{i}" for i in range(1, hops + 1)]
    nodes = ["h1", *switches, "h2"]
    return make_plan(["h1", "h2"], switches, list(zip(nodes, nodes[1:], strict=False)))


def iperf(tb: P4Testbed, duration: float) -> tuple[float, int]:
    """One TCP iperf3 run h1 -> h2: (goodput Mbit/s, retransmits)."""
    server = tb.host_popen("h2", ["iperf3", "-s", "-1", "-p", "5201"])
    time.sleep(0.5)
    client = tb.host_run("h1", ["iperf3", "-c", tb.ip("h2"), "-p", "5201", "-t",
                                str(duration), "-J"], check=False, timeout=duration + 60)
    server.wait(timeout=30)
    try:
        result = json.loads(client.stdout)
        bps = result["end"]["sum_received"]["bits_per_second"]
        retrans = result["end"]["sum_sent"].get("retransmits", 0)
    except (ValueError, KeyError):
        raise SystemExit(f"iperf3 failed: {client.stdout[-500:]} {client.stderr[-500:]}") from None
    return bps / 1e6, int(retrans)


def measure(hops: int, rate_mbit: float, duration: float, queue: int, reps: int) -> dict:
    plan = path_topology(hops)
    queues = {}
    if rate_mbit:
        for sw in plan.experiment.switch_names:
            for intf in plan.interfaces[sw]:
                queues[(sw, intf.port)] = LinkQueue(rate_mbit=rate_mbit, depth=queue)
    with P4Testbed(plan, queues=queues) as tb:
        tb.host_run("h1", ["ping", "-c", "2", "-i", "0.2", "-W", "2", tb.ip("h2")], check=False)
        iperf(tb, 1.0)  # warm-up, left out
        runs = [iperf(tb, duration) for _ in range(reps)]
    mbit = [m for m, _ in runs]
    mean, _, ci = mean_ci95(mbit)
    return {"hops": hops, "rate_mbit": rate_mbit, "runs_mbit": [round(m, 2) for m in mbit],
            "achieved_mbit": mean, "ci_mbit": ci,
            "fraction": (mean / rate_mbit) if rate_mbit else None,
            "ci_fraction": (ci / rate_mbit) if rate_mbit and ci is not None else None,
            "retransmits": sum(r for _, r in runs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="10,50,100,200,0",
                    help="configured link rates in Mbit/s, comma-separated; 0 = unlimited")
    ap.add_argument("--hops", default="1,3", help="path lengths in switches, comma-separated")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per iperf3 run")
    ap.add_argument("--queue", type=int, default=100, help="egress queue depth, packets")
    ap.add_argument("--reps", type=int, default=5, help="measured iperf3 runs per configuration")
    ap.add_argument("--json", action="store_true", help="print one JSON object per configuration too")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bmv2_throughput: needs root (namespaces, veths)", file=sys.stderr)
        return 2
    tc = find_toolchain()
    if not tc.complete:
        print(f"bmv2_throughput: {tc.missing_reason()}", file=sys.stderr)
        return 2
    if shutil.which("iperf3") is None:
        print("bmv2_throughput: iperf3 not found (apt-get install iperf3)", file=sys.stderr)
        return 2
    rates = [float(r) for r in args.rates.split(",")]
    hops = [int(h) for h in args.hops.split(",")]
    print(f"BMv2 throughput, TCP iperf3 {args.duration:.0f}s x {args.reps} runs (+1 warm-up) per "
          f"configuration, queue {args.queue} packets, {os.cpu_count()} CPUs, "
          f"{tc.bin('simple_switch_grpc')}")
    print("achieved = TCP goodput; with full-size frames the most a link carries is "
          f"1448/{FRAME_BYTES} = {1448 / FRAME_BYTES:.3f} of its rate")
    print(f"{'switches':>8} {'configured':>12} {'achieved (95% CI)':>22} {'fraction':>13} {'retrans':>8}")
    keys = []
    for h in hops:
        for r in rates:
            res = measure(h, r, args.duration, args.queue, args.reps)
            conf = f"{r:.0f} Mbit/s" if r else "unlimited"
            frac = pm(res["fraction"], res["ci_fraction"], 2, sign=" +-") if res["fraction"] is not None else "-"
            print(f"{h:>8} {conf:>12} {pm(res['achieved_mbit'], res['ci_mbit'], 1, sign=' +-'):>17} Mb/s "
                  f"{frac:>13} {res['retransmits']:>8}", flush=True)
            if args.json:
                print(json.dumps(res), flush=True)
            value = res["fraction"] if r else res["achieved_mbit"]
            keys.append(f"{h}sw_{f'{r:g}mbit' if r else 'unlimited_mbit'}={value:.3g}")
    print(" ".join(keys + [f"reps={args.reps}", f"toolchain={tc.bin('simple_switch_grpc')}"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

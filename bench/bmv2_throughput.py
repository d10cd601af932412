#!/usr/bin/env python3
"""How fast may links be on BMv2? iperf3 (TCP, one flow) across one switch and across a 3-switch
path, for several configured link rates, printed as a fraction of the configured rate.

    sudo .venv/bin/python bench/bmv2_throughput.py [--rates 10,50,100,200,0] [--hops 1,3]
                                                   [--duration 5] [--queue 100]

A configured rate r sets every switch egress queue to r Mbit/s of full-size frames
(`set_queue_rate`, packets/s) with `--queue` packets of depth: the bottleneck is BMv2's own queue,
as in an experiment. Rate 0 leaves the queues unlimited and measures what BMv2 forwards at all on
this CPU. A fraction well below 1 means BMv2 cannot keep up with that link rate here: choose
slower links for experiments on dataplane: bmv2.

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

from mn_harness.network.plan import NetworkPlan
from mn_harness.p4.limits import FRAME_BYTES
from mn_harness.p4.toolchain import find_toolchain
from mn_harness.testing import LinkQueue, P4Testbed, make_plan


def path_topology(hops: int) -> NetworkPlan:
    """h1 - s1 - ... - s<hops> - h2."""
    switches = [f"s{i}" for i in range(1, hops + 1)]
    nodes = ["h1", *switches, "h2"]
    return make_plan(["h1", "h2"], switches, list(zip(nodes, nodes[1:], strict=False)))


def measure(hops: int, rate_mbit: float, duration: float, queue: int) -> dict:
    plan = path_topology(hops)
    queues = {}
    if rate_mbit:
        for sw in plan.experiment.switch_names:
            for intf in plan.interfaces[sw]:
                queues[(sw, intf.port)] = LinkQueue(rate_mbit=rate_mbit, depth=queue)
    with P4Testbed(plan, queues=queues) as tb:
        # warm up ARP and the path
        tb.host_run("h1", ["ping", "-c", "2", "-i", "0.2", "-W", "2", tb.ip("h2")], check=False)
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
            raise SystemExit(f"iperf3 failed: {client.stdout[-500:]} "
                             f"{client.stderr[-500:]}") from None
    mbit = bps / 1e6
    return {"hops": hops, "rate_mbit": rate_mbit, "achieved_mbit": mbit,
            "fraction": (mbit / rate_mbit) if rate_mbit else None, "retransmits": retrans}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="10,50,100,200,0",
                    help="configured link rates in Mbit/s, comma-separated; 0 = unlimited")
    ap.add_argument("--hops", default="1,3", help="path lengths in switches, comma-separated")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per iperf3 run")
    ap.add_argument("--queue", type=int, default=100, help="egress queue depth, packets")
    ap.add_argument("--json", action="store_true", help="print one JSON object per run too")
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
    print(f"BMv2 throughput, TCP iperf3 {args.duration:.0f}s, queue {args.queue} packets, "
          f"{os.cpu_count()} CPUs")
    print("achieved = TCP goodput; with full-size frames the most a link carries is "
          f"1448/{FRAME_BYTES} = {1448 / FRAME_BYTES:.3f} of its rate")
    print(f"{'switches':>8} {'configured':>12} {'achieved':>12} {'fraction':>9} {'retrans':>8}")
    for h in hops:
        for r in rates:
            res = measure(h, r, args.duration, args.queue)
            conf = f"{r:.0f} Mbit/s" if r else "unlimited"
            frac = f"{res['fraction']:.2f}" if res["fraction"] is not None else "-"
            print(f"{h:>8} {conf:>12} {res['achieved_mbit']:>8.1f} Mb/s {frac:>9} "
                  f"{res['retransmits']:>8}", flush=True)
            if args.json:
                print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Acting on the network while the jobs run: halve the shared link's rate mid-run.

    sudo .venv/bin/python examples/mid_run.py
    sudo .venv/bin/python examples/mid_run.py --small --at 2 --rate 100Mbit

A callback at network-up looks at the live Mininet network (a route in h1), one at each
iteration halves the s1-s2 rate when job1 finishes iteration --at; afterwards the script
compares the jobs' throughput before and after the change (summary.json's `link_changes` has
its time)."""

import argparse
import sys
from pathlib import Path

import mn_harness as mh

TOPOLOGY = Path(__file__).resolve().parent.parent / "topologies" / "dumbbell-2jobs.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at", type=int, default=4, help="job1's iteration after which the rate changes")
    parser.add_argument("--rate", default="500Mbit", help="the new s1-s2 rate")
    parser.add_argument("--small", action="store_true", help="8 iterations of 2 MB")
    parser.add_argument("--out", help="put the results folder under this directory")
    args = parser.parse_args()
    exp = mh.ExperimentBuilder.from_file(TOPOLOGY)
    if args.small:
        for i in range(2):
            exp.set(f"jobs[{i}].iterations", 8).set(f"jobs[{i}].bytes_per_iteration", "2MB")
            exp.set(f"jobs[{i}].compute", "60ms")

    def network_up(session):
        print("h1 routes:", session.net["h1"].cmd("ip route").strip().replace("\n", "; "))

    def each_iteration(session, job, iteration):
        if job == "job1" and iteration == args.at - 1:
            session.set_link_rate("s1-s2", args.rate)

    try:
        with mh.network(exp, out=args.out, on_network_up=network_up, on_iteration=each_iteration) as s:
            s.start_jobs()
            s.wait_jobs()
    except mh.HarnessError as exc:
        print(f"mid_run.py: {exc}", file=sys.stderr)
        return exc.exit_code
    results = mh.Results(s.results_dir)
    change = (results.summary.link_changes or [])[0]
    tp = results.throughput
    tp = tp[tp.bytes > 0]
    before, after = tp[tp.t < change.t], tp[tp.t >= change.t]
    print(f"s1-s2 set to {change.bw_bps / 1e6:g} Mbit/s at t={change.t:.2f}s")
    for name, part in (("before", before), ("after", after)):
        print(f"  {name}: median per-worker rate while sending {part.rate_bps.median() / 1e6:.0f} Mbit/s")
    print(f"results: {results.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The demo dumbbell, built in Python: two 2-worker jobs whose rings cross one shared link.

    sudo .venv/bin/python examples/dumbbell.py                 # 30 iterations, as the demo
    sudo .venv/bin/python examples/dumbbell.py --cc mltcp-reno --small

Prints each job's mean iteration time and slowdown; the results folder has the CSVs, plots
(--plots) and harness.log."""

import argparse
import sys

import mn_harness as mh


def dumbbell(iterations: int, size: str, compute: str, cc: str) -> mh.ExperimentBuilder:
    exp = mh.ExperimentBuilder("py-dumbbell", description="the demo dumbbell, from Python")
    h1, h2, h3, h4 = exp.add_hosts("h1", "h2", "h3", "h4")
    s1, s2 = exp.add_switches("s1", "s2")
    exp.link_defaults(bw="1Gbit", queue=100)   # queue in packets
    exp.add_link(h1, s1)
    exp.add_link(h2, s1)
    exp.add_link(s1, s2)                        # the shared bottleneck
    exp.add_link(s2, h3)
    exp.add_link(s2, h4)
    exp.add_job("job1", [h1, h3], bytes_per_iteration=size, compute=compute, iterations=iterations, cc=cc)
    exp.add_job("job2", [h2, h4], bytes_per_iteration=size, compute=compute, iterations=iterations, cc=cc,
                start_offset="20ms")
    exp.set_run(dataplane="linux")
    return exp


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default="cubic", help="every job's congestion control")
    parser.add_argument("--small", action="store_true", help="4 iterations of 2 MB (a quick check)")
    parser.add_argument("--out", help="put the results folder under this directory")
    parser.add_argument("--plots", action="store_true", help="also write plots/ (PNG and PDF)")
    args = parser.parse_args()
    exp = dumbbell(4, "2MB", "60ms", args.cc) if args.small else dumbbell(30, "25MB", "300ms", args.cc)
    try:
        results = mh.run(exp, out=args.out, plots=args.plots)
    except mh.HarnessError as exc:  # a bad value (exit 2) or a failed run (exit 1): one line
        print(f"dumbbell.py: {exc}", file=sys.stderr)
        return exc.exit_code
    print(results.metrics[["job", "cc", "n_iterations", "mean_iter_s", "slowdown_mean"]].to_string(index=False))
    print(f"results: {results.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

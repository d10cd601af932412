"""A sweep in a plain Python loop: the demo at several bottleneck rates, one DataFrame at the end.

    sudo .venv/bin/python examples/sweep.py                      # 250, 500, 1000 Mbit/s
    sudo .venv/bin/python examples/sweep.py --rates 100Mbit,200Mbit --small

Each run is labelled with its rate, so `mn_harness.load()` of all the folders is one tidy table
to group by label and job (the same as loading a `mn-harness compare` folder)."""

import argparse
import sys
from pathlib import Path

import mn_harness as mh

TOPOLOGY = Path(__file__).resolve().parent.parent / "topologies" / "dumbbell-2jobs.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="250Mbit,500Mbit,1Gbit", help="bottleneck rates, comma-separated")
    parser.add_argument("--cc", default="cubic", help="every job's congestion control")
    parser.add_argument("--small", action="store_true", help="4 iterations of 2 MB per run")
    parser.add_argument("--out", help="put the results folders under this directory")
    args = parser.parse_args()
    folders = []
    try:
        for rate in args.rates.split(","):
            exp = mh.ExperimentBuilder.from_file(TOPOLOGY).set("links[2].bw", rate)  # s1-s2
            if args.small:
                for i in range(2):
                    exp.set(f"jobs[{i}].iterations", 4).set(f"jobs[{i}].bytes_per_iteration", "2MB")
                    exp.set(f"jobs[{i}].compute", "60ms")
            results = mh.run(exp, out=args.out, cc=args.cc, label=rate, quiet=True)
            print(f"{rate}: {results.status} -> {results.path}")
            folders.append(results.path)
    except mh.HarnessError as exc:
        print(f"sweep.py: {exc}", file=sys.stderr)
        return exc.exit_code
    metrics = mh.load(folders).metrics  # one row per run and job; .iterations has every row
    print(metrics[["label", "job", "cc", "n_iterations", "mean_iter_s", "p99_iter_s", "slowdown_mean"]]
          .to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""inc_allreduce vs ring all-reduce on the same BMv2 topology, measured in one run of this script.

Runs topologies/inc-vs-ring-bmv2.yaml (or --topology; 4 workers on one switch running
aggregation.p4) with the job's collective set to ring_allreduce, then to inc_allreduce, and
prints per variant the mean
iteration and communication time and the bytes per iteration on the bottleneck (the busiest
switch egress port, from the switch's own per-job byte counters in queue.csv), then inc/ring
ratios.

BMv2 limits a queue in packets/s (the harness converts a link's bit rate assuming 1514-byte
frames), so inc's 310-byte frames get only ~1/5 of the configured bit rate. `--pps-fair` adds a
third run where the inc links are scaled by 1514/310 so the switch's packet rate equals the
configured bit rate for inc frames (what a real link would give); both are printed.

    sudo .venv/bin/python bench/inc_vs_ring.py [--iterations 10] [--size 256KB] [--bw 10Mbit]
                                               [--pps-fair] [--topology FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

import yaml
from common import TOPOLOGIES  # bench/common.py, which makes the package importable

from mn_harness.collectives import ring
from mn_harness.config import Experiment
from mn_harness.p4.limits import FRAME_BYTES
from mn_harness.results.loaders import load_run
from mn_harness.runner import run_experiment
from mn_harness.units import parse_bandwidth, parse_size
from mn_harness.worker import inc

DEFAULT_TOPOLOGY = TOPOLOGIES / "inc-vs-ring-bmv2.yaml"
INC_FRAME = inc.PAYLOAD_BYTES + inc.WIRE_OVERHEAD


def run(collective: str, args, out: Path, bw_scale: float = 1.0) -> dict:
    raw = yaml.safe_load(Path(args.topology).read_text())
    job = raw["jobs"][0]
    job.update(collective=collective, iterations=args.iterations, bytes_per_iteration=args.size)
    if collective != "inc_allreduce":
        job.pop("inc", None)
    raw["link_defaults"]["bw"] = f"{parse_bandwidth(args.bw, 'bw') * bw_scale:.0f}bit"
    exp = Experiment.from_dict(raw, f"bench-{collective}")
    results = run_experiment(exp, out_root=out, log=lambda *_: None)
    run = load_run(results)
    if run.summary.status != "completed":
        raise SystemExit(f"{collective}: run did not complete: {run.summary.status}")
    rows = run.iterations
    per_port: Counter = Counter()
    for q in run.queue or []:
        per_port[(q.switch, q.port)] += q.job_bytes.get(job["name"], 0.0)
    # the in-network aggregation worker's own count of chunks sent again (its JSON lines only)
    raw_rows = [json.loads(line) for p in (results / "raw").glob("*.iterations.jsonl")
                for line in p.read_text().splitlines()]
    return {
        "iter_s": run.summary.jobs[job["name"]].mean_iter_s,
        "comm_s": sum(r.comm_time for r in rows) / len(rows),
        "bottleneck_bytes": max(per_port.values()) / args.iterations,
        "sent_bytes": sum(r.bytes_sent for r in rows) / len(rows),
        "retransmits": sum(r.get("retransmits", 0) for r in raw_rows),
        "dir": results,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default=DEFAULT_TOPOLOGY,
                    help="the experiment (4 workers on one aggregation switch); default: %(default)s")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--size", default="256KB", help="bytes per iteration (gradient size)")
    ap.add_argument("--bw", default="10Mbit", help="every link's rate")
    ap.add_argument("--pps-fair", action="store_true",
                    help="also run inc with links scaled so BMv2's packet rate matches inc frames")
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="inc-vs-ring-"))
    variants = [("ring_allreduce", 1.0), ("inc_allreduce", 1.0)]
    if args.pps_fair:
        variants.append(("inc_allreduce", FRAME_BYTES / INC_FRAME))
    res = {}
    for collective, scale in variants:
        label = collective if scale == 1.0 else f"{collective} (pps-fair x{scale:.2f})"
        print(f"running {label} ...", flush=True)
        res[label] = run(collective, args, out, scale)
    size = res["ring_allreduce"]
    n = 4
    print(f"\n4 workers on one BMv2 switch, {args.size} per iteration, links {args.bw}, "
          f"{args.iterations} iterations; results under {out}")
    print(f"{'variant':<40} {'iter ms':>8} {'comm ms':>8} {'bottleneck B/iter':>18} "
          f"{'sent B/iter':>12} {'retx':>5}")
    for label, r in res.items():
        print(f"{label:<40} {r['iter_s'] * 1e3:8.1f} {r['comm_s'] * 1e3:8.1f} "
              f"{r['bottleneck_bytes']:18.0f} {r['sent_bytes']:12.0f} {r['retransmits']:5d}")
    base = size
    print("\nratios inc / ring:")
    for label, r in res.items():
        if label == "ring_allreduce":
            continue
        print(f"  {label:<38} iteration time {r['iter_s'] / base['iter_s']:.2f}  "
              f"comm time {r['comm_s'] / base['comm_s']:.2f}  "
              f"bottleneck bytes {r['bottleneck_bytes'] / base['bottleneck_bytes']:.2f}")
    s = parse_size(args.size, "size")
    expect = inc.wire_bytes_per_iteration(s) / (ring.bytes_sent_per_worker(s, n) * FRAME_BYTES / 1448)
    print(f"  expected bottleneck bytes ratio (frames, no loss, ring ACKs ignored): {expect:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One training worker inside an emulated host.

Protocol with the harness (stdin/stdout, one line each):
  worker -> `READY` once its connections are up;
  harness -> `GO <t0>` where t0 is a CLOCK_MONOTONIC time shared by every worker of every job
  (one machine, one monotonic clock), so start offsets are exact and connection set-up jitter
  does not decide by chance whether jobs overlap;
  harness -> `DELAY <iteration> <seconds>` at any time after GO, with `run.shifts`: hold that
  iteration's start (worker/holds.py);
  worker -> `DONE` at the end.
Each iteration runs the job's program (worker/program.py: compute phases by sleeping,
collectives over one persistent full-duplex TCP connection per pair of ranks that talk, each
socket using the job's congestion control; worker/transport.py); torch_* collectives are run
by torch.distributed instead (worker/torch_worker.py). One JSON line per iteration,
with its phases, is appended and flushed, so a killed run keeps what it measured.

Usage: python -m mn_harness.worker SPEC.json"""

from __future__ import annotations

import json
import sys
import time

from mn_harness import collectives
from mn_harness.worker import tcpinfo, threads
from mn_harness.worker.bins import BinSampler, throughput_line
from mn_harness.worker.collective import CommStream
from mn_harness.worker.holds import Holds
from mn_harness.worker.program import IterationRunner, my_peers
from mn_harness.worker.spec import WorkerSpec
from mn_harness.worker.transport import Transport, TransportError
from mn_harness.worker.tunables import Tunables


def wait_for_go() -> float:
    line = sys.stdin.readline().split()
    if len(line) != 2 or line[0] != "GO":
        raise SystemExit(f"worker: expected 'GO <t0>' on stdin, got {line!r}")
    return float(line[1])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    spec = WorkerSpec.load(argv[0])
    engine = collectives.get(spec.collective).engine
    if engine == collectives.INC:
        from mn_harness.worker import inc

        return inc.run(spec, wait_for_go)
    if engine == collectives.TORCH:  # real traffic: torch.distributed (gloo) makes it
        from mn_harness.worker import torch_worker

        return torch_worker.run(spec, wait_for_go)
    try:
        return run(spec)
    except (TransportError, ValueError) as exc:
        raise SystemExit(f"worker: {spec.job} rank {spec.rank}: {exc}") from None


def run(spec: WorkerSpec) -> int:
    transport = Transport(spec.rank, spec.ips, spec.port, spec.cc, Tunables.from_overrides(spec.transport),
                          spec.src_port)
    transport.connect(my_peers(spec), spec.connect_timeout_s)
    print("READY", flush=True)
    t0 = wait_for_go()
    holds = Holds(sys.stdin).start()
    stream = CommStream()
    stream.start()
    runner = IterationRunner(spec, transport, stream, t0)
    if spec.realtime_main and (refused := threads.enter_realtime()) is not None:
        print(f"worker: {spec.job} rank {spec.rank}: main thread stays in the fair class "
              f"(SCHED_FIFO refused: {refused})", file=sys.stderr, flush=True)
    sockets = transport.sockets()
    sampler = BinSampler(lambda: tcpinfo.combined(tcpinfo.sender_state(s) for s in sockets), t0, spec.bin_s)
    delay = t0 + spec.start_offset_s - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    sampler.start()
    with open(spec.iterations_path, "a") as it_out, open(spec.throughput_path, "a") as tp_out:
        for iteration in range(spec.iterations):
            it_out.write(json.dumps(runner.run(iteration, holds.take(iteration))) + "\n")
            it_out.flush()
            tp_out.write(throughput_line(spec, iteration, sampler.take()))
            tp_out.flush()
    stream.stop()
    sampler.stop.set()
    sampler.join()
    transport.finish()
    sampler.flush()  # every byte acknowledged by the end is in the timeline
    transport.release()
    tp_remaining = sampler.take()
    if tp_remaining:
        with open(spec.throughput_path, "a") as tp_out:
            tp_out.write(throughput_line(spec, spec.iterations, tp_remaining))
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

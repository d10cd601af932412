"""One training worker inside an emulated host.

Protocol with the harness (stdin/stdout, one line each):
  worker -> `READY` once its ring connections are up;
  harness -> `GO <t0>` where t0 is a CLOCK_MONOTONIC time shared by every worker of every job
  (one machine, one monotonic clock), so start offsets are exact and connection set-up jitter
  does not decide by chance whether jobs overlap;
  worker -> `DONE` at the end.
Each iteration: compute (sleep), then the collective over persistent kernel TCP connections to
the ring neighbours, each socket using the job's congestion control. One JSON line per
iteration is appended and flushed, so a killed run keeps what it measured.

Usage: python -m mn_harness.worker SPEC.json"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time

from mn_harness.worker import ring, tcpinfo
from mn_harness.worker.spec import WorkerSpec

BUF_BYTES = 1 << 20


class Sender(threading.Thread):
    """Sends step chunks to the right neighbour while the main thread receives from the left:
    both directions of a ring step run at once, as in NCCL."""

    def __init__(self, sock: socket.socket):
        super().__init__(daemon=True)
        self.sock = sock
        self.buf = memoryview(bytearray(BUF_BYTES))
        self.todo = threading.Semaphore(0)
        self.done = threading.Semaphore(0)
        self.nbytes = 0
        self.error: BaseException | None = None

    def send(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.todo.release()

    def wait(self) -> None:
        self.done.acquire()
        if self.error:
            raise self.error

    def run(self) -> None:
        while True:
            self.todo.acquire()
            try:
                left = self.nbytes
                while left > 0:
                    k = min(left, BUF_BYTES)
                    self.sock.sendall(self.buf[:k])
                    left -= k
            except BaseException as exc:  # reported by wait() in the main thread
                self.error = exc
            self.done.release()


class ThroughputSampler(threading.Thread):
    """Samples bytes acked on the sending socket every bin (a getsockopt per bin, no per-packet
    work) and keeps the bins until the iteration's line is written."""

    def __init__(self, sock: socket.socket, t0: float, bin_s: float):
        super().__init__(daemon=True)
        self.sock, self.t0, self.bin_s = sock, t0, bin_s
        self.bins: list[tuple[float, int]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def run(self) -> None:
        last = tcpinfo.bytes_acked(self.sock)
        k = 0
        while not self.stop.is_set():
            k += 1
            deadline = self.t0 + k * self.bin_s
            delay = deadline - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                now_acked = tcpinfo.bytes_acked(self.sock)
            except OSError:
                return
            if now_acked != last:
                with self.lock:
                    self.bins.append((round((k - 1) * self.bin_s, 6), now_acked - last))
            last = now_acked

    def take(self) -> list[tuple[float, int]]:
        with self.lock:
            bins, self.bins = self.bins, []
        return bins


def _set_cc(sock: socket.socket, cc: str) -> None:
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    except OSError as exc:
        raise SystemExit(f"worker: congestion control {cc!r} not available: {exc.strerror}") from None


def connect_ring(spec: WorkerSpec) -> tuple[socket.socket, socket.socket]:
    """Returns (to_right, from_left). Listening first, then connecting with retries, lets all
    workers start in any order."""
    me = spec.ips[spec.rank]
    right = spec.ips[(spec.rank + 1) % spec.n]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    _set_cc(listener, spec.cc)
    listener.bind((me, spec.port))
    listener.listen(1)
    deadline = time.monotonic() + spec.connect_timeout_s
    to_right = None
    while to_right is None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        _set_cc(sock, spec.cc)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if spec.src_port:  # the plan's 5-tuple: ECMP hashes it to the same path every run
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((me, spec.src_port))
            sock.connect((right, spec.port))
            to_right = sock
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise SystemExit(f"worker: cannot connect to right neighbour {right}:{spec.port}") from None
            time.sleep(0.05)
    listener.settimeout(max(0.1, deadline - time.monotonic()))
    try:
        from_left, _ = listener.accept()
    except TimeoutError:
        raise SystemExit("worker: left neighbour never connected") from None
    listener.close()
    from_left.settimeout(None)
    _set_cc(from_left, spec.cc)
    return to_right, from_left


def recv_exact(sock: socket.socket, nbytes: int, buf: memoryview) -> None:
    left = nbytes
    while left > 0:
        got = sock.recv_into(buf, min(left, len(buf)))
        if got == 0:
            raise ConnectionError("left neighbour closed the connection")
        left -= got


def ring_allreduce(spec: WorkerSpec, sender: Sender, from_left: socket.socket, buf: memoryview) -> int:
    chunk = ring.chunk_bytes(spec.bytes_per_iteration, spec.n)
    for _ in range(ring.steps(spec.n)):
        # step k+1 forwards what step k received, so each step waits for its receive
        sender.send(chunk)
        recv_exact(from_left, chunk, buf)
        sender.wait()
    return ring.steps(spec.n) * chunk


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
    if spec.collective == "inc_allreduce":
        from mn_harness.worker import inc

        return inc.run(spec, wait_for_go)
    if spec.collective != "ring_allreduce":
        raise SystemExit(f"worker: collective {spec.collective!r} is not implemented by this worker")
    to_right, from_left = connect_ring(spec)
    print("READY", flush=True)
    t0 = wait_for_go()
    sender = Sender(to_right)
    sender.start()
    sampler = ThroughputSampler(to_right, t0, spec.bin_s)
    buf = memoryview(bytearray(BUF_BYTES))
    start = t0 + spec.start_offset_s
    delay = start - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    sampler.start()
    with open(spec.iterations_path, "a") as it_out, open(spec.throughput_path, "a") as tp_out:
        for iteration in range(spec.iterations):
            t_start = time.monotonic()
            time.sleep(spec.compute_s)
            t_comm_start = time.monotonic()
            sent = ring_allreduce(spec, sender, from_left, buf)
            t_comm_end = time.monotonic()
            it_out.write(json.dumps({
                "job": spec.job, "rank": spec.rank, "iteration": iteration,
                "t_start": round(t_start - t0, 6), "t_comm_start": round(t_comm_start - t0, 6),
                "t_comm_end": round(t_comm_end - t0, 6), "bytes_sent": sent,
            }) + "\n")
            it_out.flush()
            tp_out.write(json.dumps({"job": spec.job, "rank": spec.rank, "iteration": iteration,
                                     "bin_s": spec.bin_s, "bins": sampler.take()}) + "\n")
            tp_out.flush()
    sampler.stop.set()
    to_right.shutdown(socket.SHUT_WR)
    # drain until the left neighbour closes, so nobody's last bytes are reset
    while from_left.recv_into(buf):
        pass
    tp_remaining = sampler.take()
    if tp_remaining:
        with open(spec.throughput_path, "a") as tp_out:
            tp_out.write(json.dumps({"job": spec.job, "rank": spec.rank, "iteration": spec.iterations,
                                     "bin_s": spec.bin_s, "bins": tp_remaining}) + "\n")
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

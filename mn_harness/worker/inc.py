"""inc_allreduce: all-reduce by in-network aggregation on a BMv2 switch (mn_harness/p4/programs/aggregation.p4).

Each worker cuts its gradient (S bytes of fp32 = S/4 values) into chunks of VECLEN values,
converts them to signed 32-bit fixed point (value * scale, rounded; values beyond int32 are
clipped and counted), and sends every chunk once, in a UDP packet, to its gateway (the
aggregation switch). The switch adds the chunks of all n workers in a slot and multicasts the sum
to every worker. So a worker sends S bytes (plus headers) per iteration, not 2(n-1)/n * S.

Packet (UDP payload, big endian; must match aggregation.p4):
    job u16 | slot u16 | seq u32 | worker u8 | nworkers u8 | flags u8 | pad u8 | VECLEN x i32
flags: 1 RESULT (from the switch), 2 SATURATED (some element of the sum saturated).

Window and slots: chunk seq s (1, 2, ... for the whole run, per job) uses lane (s-1) % W and copy
((s-1) // W) % 2, i.e. slot 2*lane + copy, so a job with window W needs 2W switch slots. At most
W chunks are outstanding: the next chunk of a lane (s + W) is sent only when the result of s
has arrived. That rule is what makes slot reuse safe (see aggregation.p4): a slot copy is
overwritten only after every worker has received the result it held.

Loss: a chunk without result after the RTO (3 x smoothed RTT, at least `inc_timeout_s`; 4 x
`inc_timeout_s` before the first sample; doubling on each repeat) is sent again; the switch does
not add a duplicate twice and re-sends a stored result to a worker that lost it. Results of
chunks no longer outstanding are ignored.

Verification: inputs are deterministic (seeded per job and rank), so every worker computes all
workers' fixed-point inputs and their sum once, and checks each iteration's result (iteration i
rotates the vectors by i * 7919 elements, so iterations differ). A mismatch ends the worker with
one line and exit code 1. Chunks the switch marks SATURATED are checked element-wise as "exact
sum or an int32 bound" and counted.

Per iteration the worker writes the same JSON line (with its two phases) as the TCP
collectives, plus `saturated` (input
values clipped by the fixed-point conversion), `sat_chunks` (results marked SATURATED) and
`retransmits` (chunks sent again). bytes_sent = UDP payload bytes this worker sent, retransmissions
included. Standard library only: the worker runs inside an emulated host.
"""

from __future__ import annotations

import json
import math
import random
import select
import socket
import struct
import sys
import time
from collections.abc import Callable, Sequence

from mn_harness.p4.limits import AGG_FLAG_RESULT as FLAG_RESULT
from mn_harness.p4.limits import AGG_FLAG_SATURATED as FLAG_SATURATED
from mn_harness.p4.limits import AGG_MAX_WORKERS as MAX_INC_WORKERS
from mn_harness.p4.limits import AGG_PORT_BASE
from mn_harness.p4.limits import AGG_VECLEN as VECLEN
from mn_harness.p4.limits import MAX_JOBS as MAX_INC_JOBS  # job ids 1..MAX_JOBS-1
from mn_harness.worker.bins import SendBins, throughput_line
from mn_harness.worker.holds import Holds
from mn_harness.worker.program import record
from mn_harness.worker.threads import ComputeSleep

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
HEADER = struct.Struct("!HHIBBBB")
HEADER_BYTES = HEADER.size        # 12
PACKET = struct.Struct(f"!HHIBBBB{VECLEN}i")
PAYLOAD_BYTES = PACKET.size       # 12 + 4 * VECLEN
WIRE_OVERHEAD = 14 + 20 + 8       # Ethernet + IPv4 + UDP, per packet
ROTATE = 7919


class IncError(Exception):
    pass


# -- fixed point ------------------------------------------------------------------------------
def to_fixed(values: Sequence[float], scale: float) -> tuple[list[int], int]:
    """round(v * scale) clipped to int32; returns (ints, how many were clipped)."""
    out = []
    clipped = 0
    for v in values:
        x = v * scale
        if x != x:  # NaN
            raise IncError("cannot convert NaN to fixed point")
        if x >= INT32_MAX:
            out.append(INT32_MAX)
            clipped += x > INT32_MAX
        elif x <= INT32_MIN:
            out.append(INT32_MIN)
            clipped += x < INT32_MIN
        else:
            out.append(round(x))
    return out, clipped


def from_fixed(values: Sequence[int], scale: float) -> list[float]:
    return [v / scale for v in values]


def saturating_add(a: int, b: int) -> int:
    """What the switch does per element."""
    return max(INT32_MIN, min(INT32_MAX, a + b))


# -- packets ----------------------------------------------------------------------------------
def encode(job: int, slot: int, seq: int, worker: int, nworkers: int, values: Sequence[int],
           flags: int = 0) -> bytes:
    """One packet; `values` shorter than VECLEN are padded with zeros."""
    if len(values) > VECLEN:
        raise IncError(f"at most {VECLEN} values per packet, got {len(values)}")
    vals = list(values) + [0] * (VECLEN - len(values))
    return PACKET.pack(job, slot, seq & 0xFFFFFFFF, worker, nworkers, flags, 0, *vals)


def decode(data: bytes | bytearray | memoryview) -> tuple[int, int, int, int, int, int, tuple[int, ...]]:
    """-> (job, slot, seq, worker, nworkers, flags, values)."""
    if len(data) < PAYLOAD_BYTES:
        raise IncError(f"short aggregation packet: {len(data)} bytes, need {PAYLOAD_BYTES}")
    job, slot, seq, worker, nworkers, flags, _pad, *vals = PACKET.unpack_from(data)
    return job, slot, seq, worker, nworkers, flags, tuple(vals)


def slot_of(seq: int, window: int) -> int:
    """Slot for chunk `seq` (>= 1): 2 * lane + copy."""
    lane = (seq - 1) % window
    copy = ((seq - 1) // window) % 2
    return 2 * lane + copy


def chunks(n_values: int) -> int:
    return max(1, math.ceil(n_values / VECLEN))


def n_values(bytes_per_iteration: int) -> int:
    return max(1, math.ceil(bytes_per_iteration / 4))


def bytes_sent_per_iteration(bytes_per_iteration: int) -> int:
    """UDP payload bytes a worker sends per iteration without loss."""
    return chunks(n_values(bytes_per_iteration)) * PAYLOAD_BYTES


def wire_bytes_per_iteration(bytes_per_iteration: int) -> int:
    """Ethernet frame bytes a worker sends per iteration without loss."""
    return chunks(n_values(bytes_per_iteration)) * (PAYLOAD_BYTES + WIRE_OVERHEAD)


# -- deterministic inputs ---------------------------------------------------------------------
def worker_floats(seed: int, job: str, rank: int, count: int) -> list[float]:
    rng = random.Random(f"inc/{seed}/{job}/{rank}")
    return [rng.uniform(-1.0, 1.0) for _ in range(count)]


def expected_inputs(seed: int, job: str, n: int, count: int, scale: float
                    ) -> tuple[list[list[int]], list[int], list[int]]:
    """(fixed inputs per rank, clipped count per rank, exact sum) for a job."""
    inputs, clipped = [], []
    for r in range(n):
        ints, c = to_fixed(worker_floats(seed, job, r, count), scale)
        inputs.append(ints)
        clipped.append(c)
    total = [sum(col) for col in zip(*inputs, strict=True)]
    return inputs, clipped, total


def rotate(values: list[int], iteration: int) -> list[int]:
    k = (iteration * ROTATE) % len(values)
    return values[k:] + values[:k]


def check_result(got: Sequence[int], exact: Sequence[int], sat_chunks: set[int]) -> int | None:
    """Index of the first element that is wrong, or None. In a chunk the switch marked
    saturated an element may also be an int32 bound."""
    if list(got) == list(exact):
        return None
    for i, (g, e) in enumerate(zip(got, exact, strict=True)):
        if g != e and not (i // VECLEN in sat_chunks and g in (INT32_MIN, INT32_MAX)):
            return i
    return None


# -- the protocol -----------------------------------------------------------------------------
class IncSession:
    """One worker's side: a UDP socket to the switch and the run-wide chunk sequence."""

    def __init__(self, *, job_id: int, rank: int, n: int, my_ip: str, switch_ip: str,
                 port: int, window: int, min_rto_s: float = 0.05, max_rto_s: float = 2.0,
                 give_up_s: float = 60.0, sock: socket.socket | None = None):
        if not 1 <= window <= 0xFFFF // 2:
            raise IncError(f"window {window} outside 1..{0xFFFF // 2}")
        if not 2 <= n <= MAX_INC_WORKERS or not 0 <= rank < n:
            raise IncError(f"rank {rank} of {n} workers (2..{MAX_INC_WORKERS} supported)")
        self.job_id, self.rank, self.n = job_id, rank, n
        self.dest = (switch_ip, port)
        self.window = window
        self.min_rto, self.max_rto, self.give_up_s = min_rto_s, max_rto_s, give_up_s
        self.next_seq = 1
        self.srtt: float | None = None
        self.sock = sock or socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if sock is None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            self.sock.bind((my_ip, port))
        self.on_send: Callable[[float, int], None] | None = None

    def close(self) -> None:
        self.sock.close()

    def _rto(self) -> float:
        # before the first RTT sample: 4 x the minimum (a first window of n * W packets queues
        # in the switch), like TCP's conservative initial RTO
        base = 4 * self.min_rto if self.srtt is None else max(self.min_rto, 3 * self.srtt)
        return min(base, self.max_rto)

    def allreduce(self, values: Sequence[int]) -> tuple[list[int], dict]:
        """Sum `values` (int32) with the other workers'; returns (sum, stats)."""
        count = len(values)
        n_chunks = chunks(count)
        first = self.next_seq
        last = first + n_chunks - 1
        result = [0] * (n_chunks * VECLEN)
        padded = list(values) + [0] * (n_chunks * VECLEN - count)
        pack = PACKET.pack
        sendto = self.sock.sendto
        job, rank, n, dest, window = self.job_id, self.rank, self.n, self.dest, self.window
        sent_bytes = 0
        retransmits = 0
        sat_chunks: set[int] = set()
        # seq -> [packet, last send time, first send time, rto, retransmitted]
        outstanding: dict[int, list] = {}
        on_send = self.on_send

        def send(seq: int) -> None:
            nonlocal sent_bytes
            k = seq - first
            pkt = pack(job, slot_of(seq, window), seq & 0xFFFFFFFF, rank, n, 0, 0,
                       *padded[k * VECLEN:(k + 1) * VECLEN])
            now = time.monotonic()
            sendto(pkt, dest)
            sent_bytes += len(pkt)
            if on_send:
                on_send(now, len(pkt))
            outstanding[seq] = [pkt, now, now, self._rto(), False]

        for seq in range(first, min(last, first + window - 1) + 1):
            send(seq)
        buf = bytearray(PAYLOAD_BYTES + 64)
        unpack_header = HEADER.unpack_from
        started = time.monotonic()
        while outstanding:
            now = time.monotonic()
            deadline = min(o[1] + o[3] for o in outstanding.values())
            wait = deadline - now
            if wait > 0:
                ready, _, _ = select.select([self.sock], [], [], wait)
            else:
                ready = []
            if ready:
                # drain everything queued without blocking
                while True:
                    try:
                        got = self.sock.recv_into(buf, len(buf), socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        break
                    if got < PAYLOAD_BYTES:
                        continue
                    r_job, _slot, r_seq, _w, _n, flags, _pad = unpack_header(buf)
                    if r_job != job or not flags & FLAG_RESULT:
                        continue
                    # sequence numbers wrap at 2^32: map back into [first, last]
                    seq = first + ((r_seq - first) & 0xFFFFFFFF)
                    entry = outstanding.pop(seq, None)
                    if entry is None:
                        continue  # a duplicate result or one from an earlier iteration
                    t_now = time.monotonic()
                    if not entry[4]:  # Karn: RTT only from chunks sent once
                        rtt = t_now - entry[2]
                        self.srtt = rtt if self.srtt is None else 0.875 * self.srtt + 0.125 * rtt
                    k = seq - first
                    result[k * VECLEN:(k + 1) * VECLEN] = PACKET.unpack_from(buf)[7:]
                    if flags & FLAG_SATURATED:
                        sat_chunks.add(k)
                    nxt = seq + window
                    if nxt <= last:
                        send(nxt)
                continue
            now = time.monotonic()
            for seq, o in outstanding.items():
                if now - o[1] >= o[3]:
                    if now - o[2] > self.give_up_s:
                        raise IncError(f"chunk {seq} got no result from the switch "
                                       f"{dest[0]}:{dest[1]} in {self.give_up_s:.0f}s "
                                       f"({retransmits} retransmissions)")
                    sendto(o[0], dest)
                    sent_bytes += len(o[0])
                    if on_send:
                        on_send(now, len(o[0]))
                    retransmits += 1
                    o[1] = now
                    o[3] = min(o[3] * 2, self.max_rto)
                    o[4] = True
        self.next_seq = last + 1
        stats = {"bytes_sent": sent_bytes, "retransmits": retransmits,
                 "sat_chunks": sorted(sat_chunks), "elapsed": time.monotonic() - started}
        return result[:count], stats


def default_gateway() -> str | None:
    """IPv4 default gateway of this namespace, from /proc/net/route."""
    try:
        with open("/proc/net/route") as f:
            next(f)
            for line in f:
                parts = line.split()
                if len(parts) > 2 and parts[1] == "00000000":
                    return socket.inet_ntoa(struct.pack("<I", int(parts[2], 16)))
    except OSError:
        return None
    return None


def run(spec, wait_for_go: Callable[[], float]) -> int:
    """The worker's main loop for collective inc_allreduce (same READY/GO protocol and
    iteration lines as ring all-reduce)."""
    switch_ip = spec.agg_switch_ip or default_gateway()
    if not switch_ip:
        raise SystemExit("worker: inc_allreduce needs the aggregation switch address "
                         "(agg_switch_ip) or a default gateway")
    if not 1 <= spec.agg_job_id < MAX_INC_JOBS:
        raise SystemExit(f"worker: inc_allreduce job id {spec.agg_job_id} outside 1..{MAX_INC_JOBS - 1}")
    window = spec.inc_window or spec.inc_slots
    if window > spec.inc_slots:
        raise SystemExit(f"worker: inc window {window} exceeds the job's {spec.inc_slots} slots")
    count = n_values(spec.bytes_per_iteration)
    inputs, clipped, total = expected_inputs(spec.inc_seed, spec.job, spec.n_ranks, count, spec.inc_scale)
    mine = inputs[spec.rank]
    del inputs
    try:
        session = IncSession(job_id=spec.agg_job_id, rank=spec.rank, n=spec.n_ranks,
                             my_ip=spec.ips[spec.rank], switch_ip=switch_ip,
                             port=spec.agg_port or AGG_PORT_BASE + spec.agg_job_id,
                             window=window, min_rto_s=spec.inc_timeout_s)
    except (OSError, IncError) as exc:
        raise SystemExit(f"worker: inc_allreduce socket: {exc}") from None
    print("READY", flush=True)
    t0 = wait_for_go()
    holds = Holds(sys.stdin).start()
    bins = SendBins(t0, spec.bin_s)
    session.on_send = bins.add
    start = t0 + spec.start_offset_s
    delay = start - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    compute = ComputeSleep(spec.realtime_main, f"{spec.job} rank {spec.rank}")
    with open(spec.iterations_path, "a") as it_out, open(spec.throughput_path, "a") as tp_out:
        for iteration in range(spec.iterations):
            t_start, cpu_start = time.monotonic(), time.process_time()
            hold = holds.take(iteration)
            seconds = spec.durations(iteration)[0]
            compute(hold + seconds)
            t_compute_end = time.monotonic()
            values = rotate(mine, iteration)
            t_comm_start = time.monotonic()
            try:
                got, stats = session.allreduce(values)
            except IncError as exc:
                raise SystemExit(f"worker: inc_allreduce {spec.job} rank {spec.rank} "
                                 f"iteration {iteration}: {exc}") from None
            t_comm_end = time.monotonic()
            exact = rotate(total, iteration)
            bad = check_result(got, exact, set(stats["sat_chunks"]))
            if bad is not None:
                raise SystemExit(f"worker: inc_allreduce result mismatch: job {spec.job} rank "
                                 f"{spec.rank} iteration {iteration} element {bad}: got "
                                 f"{got[bad]}, expected {exact[bad]}")
            it_out.write(json.dumps({
                "job": spec.job, "rank": spec.rank, "iteration": iteration,
                "t_start": round(t_start - t0, 6), "t_comm_start": round(t_comm_start - t0, 6),
                "t_comm_end": round(t_comm_end - t0, 6), "bytes_sent": stats["bytes_sent"],
                "t_end": round(t_comm_end - t0, 6), "hold_s": round(hold, 6),
                "cpu_s": round(time.process_time() - cpu_start, 6),
                "saturated": clipped[spec.rank], "sat_chunks": len(stats["sat_chunks"]),
                "retransmits": stats["retransmits"],
                "phases": [
                    record(0, "compute", "compute", "", None, t_start + hold - t0, t_compute_end - t0,
                           planned=spec.means()[0], delay=seconds - spec.means()[0]),
                    record(1, spec.collective, "comm", spec.collective, spec.bytes_per_iteration,
                           t_comm_start - t0, t_comm_end - t0, stats["bytes_sent"])],
            }) + "\n")
            it_out.flush()
            tp_out.write(throughput_line(spec, iteration, bins.take()))
            tp_out.flush()
    session.close()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - run through mn_harness.worker
    sys.exit("run through: python -m mn_harness.worker SPEC.json")

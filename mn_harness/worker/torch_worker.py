"""torch_* collectives: the job's traffic made by torch.distributed (gloo backend) itself.

One process group per job: rank 0's emulated address hosts the rendezvous store (TCP port
BASE_PORT + job id, the port the synthetic ring would use) and gloo binds its device to the
host's emulated interface (GLOO_SOCKET_IFNAME), so nothing leaves the emulated network. gloo
opens its own sockets, so their congestion control is the namespace default the harness set
in this host (mn_harness/cc/namespace.py); before reporting READY the worker reads every one of
its connections from the kernel (sock_diag) and exits with one line if any uses another CC.

Per iteration, as the synthetic worker: compute by sleep (this rank's seeded durations: jitter
and stragglers as in the synthetic mode), then the collective on a fp32 tensor of the job's
bytes; the same JSON lines with their two phase records (bytes_sent = what gloo sends from this
rank, collectives/gloo.py) and throughput bins (bytes acknowledged on the job's gloo connections,
summed, read by sock_diag exact lookups each bin: the job's sockets are never touched).

torch is imported before READY (it takes seconds) and kept to one intra-op and one inter-op
thread, so a 2-core machine can host several workers."""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import socket
import struct
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from mn_harness import collectives
from mn_harness.collectives.gloo import INSTALL_HINT
from mn_harness.worker import tcpinfo
from mn_harness.worker.bins import BinSampler, throughput_line
from mn_harness.worker.holds import Holds
from mn_harness.worker.program import record
from mn_harness.worker.sockdiag import SockDiag, TcpSocket, job_connections
from mn_harness.worker.spec import WorkerSpec
from mn_harness.worker.threads import ComputeSleep

SIOCGIFADDR = 0x8915
CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x20000, 0x1000, 0x4000, 1 << 18
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def interface_of(ip: str) -> str:
    """The interface holding `ip` in this namespace (for GLOO_SOCKET_IFNAME)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _index, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address
            if socket.inet_ntoa(raw[20:24]) == ip:
                return name
    finally:
        probe.close()
    raise SystemExit(f"worker: no interface holds {ip} in this host")


def keep_name_lookups_local(resolv: str) -> None:
    """torch's c10d socket code formats every address with getnameinfo(), i.e. a reverse DNS
    query to the machine's resolver: from inside an emulated host that packet would head for an
    address outside the emulated network. The worker (root in its host) moves into a private
    mount namespace whose /etc/resolv.conf names only 127.0.0.1, the host's own loopback,
    where nothing answers: lookups fail at once and nothing leaves the namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open(resolv, "w") as f:
        f.write("# mn-harness torch worker: no resolver inside the emulated network\nnameserver 127.0.0.1\n")
    steps = ((lambda: libc.unshare(CLONE_NEWNS)), "unshare(CLONE_NEWNS)"), \
        ((lambda: libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)), "make / private"), \
        ((lambda: libc.mount(resolv.encode(), b"/etc/resolv.conf", None, MS_BIND, None)), "bind resolv.conf")
    for call, what in steps:
        if call() != 0:
            err = ctypes.get_errno()
            raise SystemExit(f"worker: cannot keep name lookups inside the host ({what}: {os.strerror(err)})")


def sockets_file(spec: WorkerSpec) -> Path:
    """<job>-r<rank>.sockets.json next to the iteration lines: what the kernel reported."""
    path = spec.iterations_path
    stem = path[:-len(".iterations.jsonl")] if path.endswith(".iterations.jsonl") else path
    return Path(stem + ".sockets.json")


def check_congestion_control(spec: WorkerSpec, sockets: list[TcpSocket]) -> None:
    """Every connection between this worker and its job's peers must use the job's CC."""
    me = spec.ips[spec.rank]
    mine = job_connections(sockets, me, set(spec.ips) - {me})
    sockets_file(spec).write_text(json.dumps([
        {"src": f"{s.src}:{s.sport}", "dst": f"{s.dst}:{s.dport}", "cc": s.cc} for s in mine]))
    if not mine:
        raise SystemExit(f"worker: {spec.job} rank {spec.rank}: the kernel lists no connection "
                         f"from {me} to the job's other workers")
    wrong = [s for s in mine if s.cc != spec.cc]
    if wrong:
        s = wrong[0]
        raise SystemExit(f"worker: {spec.job} rank {spec.rank}: connection {s.src}:{s.sport} -> "
                         f"{s.dst}:{s.dport} uses congestion control {s.cc}, not the job's "
                         f"{spec.cc} ({len(wrong)} of {len(mine)} connections)")


class GlooSenders:
    """The sender state (bytes acknowledged, window, chrono times) of the job's data connections
    (the rendezvous store excluded), combined over sockets. gloo makes its connections when the
    process group is created, so they are found once (one dump, before READY) and then read by
    exact lookup each bin; a socket that closes keeps its last state, so no count goes back."""

    def __init__(self, diag: SockDiag, spec: WorkerSpec, sockets: list[TcpSocket]):
        self.diag = diag
        me = spec.ips[spec.rank]
        self.sockets = job_connections(sockets, me, set(spec.ips) - {me}, frozenset({spec.port}))
        self.last = {s.cookie: s.sender for s in self.sockets}

    def __call__(self) -> tcpinfo.SenderState:
        for s in self.sockets:
            now = self.diag.lookup(s)
            if now is not None:
                self.last[s.cookie] = now.sender
        return tcpinfo.combined(self.last.values())


def _collective(call: str | None, tensor, n: int) -> Callable[[], object]:
    """The collective's torch.distributed function (its record's `torch_call`) on the job's
    tensor, with the output buffers it needs."""
    import torch
    import torch.distributed as dist

    if call == "all_reduce":
        return lambda: dist.all_reduce(tensor)
    if call == "all_gather_into_tensor":
        part = tensor[: tensor.numel() // n].clone()
        out = torch.empty(part.numel() * n, dtype=tensor.dtype)
        return lambda: dist.all_gather_into_tensor(out, part)
    if call == "reduce_scatter_tensor":
        whole = tensor[: (tensor.numel() // n) * n]
        out = torch.empty(whole.numel() // n, dtype=tensor.dtype)
        return lambda: dist.reduce_scatter_tensor(out, whole)
    if call == "all_to_all_single":
        whole = tensor[: (tensor.numel() // n) * n]
        out = torch.empty_like(whole)
        return lambda: dist.all_to_all_single(out, whole)
    if call == "broadcast":
        return lambda: dist.broadcast(tensor, src=0)
    raise SystemExit(f"worker: torch.distributed.{call} is not implemented by the torch worker")


def run(spec: WorkerSpec, wait_for_go: Callable[[], float]) -> int:
    for var in THREAD_ENV:
        os.environ[var] = "1"
    me = spec.ips[spec.rank]
    os.environ["GLOO_SOCKET_IFNAME"] = interface_of(me)
    keep_name_lookups_local(str(sockets_file(spec).with_suffix(".resolv.conf")))
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise SystemExit(f"worker: {spec.collective} needs {INSTALL_HINT}") from None
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    collective = collectives.get(spec.collective)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://{spec.ips[0]}:{spec.port}", rank=spec.rank,
                                world_size=spec.n_ranks, timeout=timedelta(seconds=spec.connect_timeout_s))
    except Exception as exc:  # rendezvous failures come as RuntimeError/DistStoreError etc.
        raise SystemExit(f"worker: {spec.job} rank {spec.rank}: torch.distributed rendezvous at "
                         f"{spec.ips[0]}:{spec.port} failed: {' '.join(str(exc).split())[:300]}") from None
    tensor = torch.ones(max(spec.n_ranks, (spec.bytes_per_iteration + 3) // 4), dtype=torch.float32)
    op = _collective(collective.torch_call, tensor, spec.n_ranks)
    dist.barrier()  # every pair of ranks connected before the check and the start
    diag = SockDiag()
    sockets = diag.tcp_sockets()
    check_congestion_control(spec, sockets)
    sent = collective.bytes_sent(collectives.Call(spec.bytes_per_iteration, spec.n_ranks))[spec.rank]
    print("READY", flush=True)
    t0 = wait_for_go()
    holds = Holds(sys.stdin).start()
    sampler = BinSampler(GlooSenders(diag, spec, sockets), t0, spec.bin_s)
    start = t0 + spec.start_offset_s
    delay = start - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    sampler.start()
    compute = ComputeSleep(spec.realtime_main, f"{spec.job} rank {spec.rank}")
    with open(spec.iterations_path, "a") as it_out, open(spec.throughput_path, "a") as tp_out:
        for iteration in range(spec.iterations):
            planned, seconds = spec.means()[0], spec.durations(iteration)[0]  # jitter, stragglers
            t_start, cpu_start = time.monotonic(), time.process_time()
            hold = holds.take(iteration)
            compute(hold + seconds)
            t_comm_start = time.monotonic()
            op()
            t_comm_end, cpu_s = time.monotonic(), time.process_time() - cpu_start
            it_out.write(json.dumps({
                "job": spec.job, "rank": spec.rank, "iteration": iteration,
                "t_start": round(t_start - t0, 6), "t_comm_start": round(t_comm_start - t0, 6),
                "t_comm_end": round(t_comm_end - t0, 6), "t_end": round(t_comm_end - t0, 6), "bytes_sent": sent,
                "hold_s": round(hold, 6), "cpu_s": round(cpu_s, 6),
                "phases": [record(0, "compute", "compute", "", None, t_start + hold - t0, t_comm_start - t0,
                                  planned=planned, delay=seconds - planned),
                           record(1, spec.collective, "comm", spec.collective, spec.bytes_per_iteration,
                                  t_comm_start - t0, t_comm_end - t0, sent)],
            }) + "\n")
            it_out.flush()
            tp_out.write(throughput_line(spec, iteration, sampler.take()))
            tp_out.flush()
    dist.barrier()  # nobody tears down connections a peer still reads from
    time.sleep(2 * spec.bin_s)  # the last acknowledgements into the last bin
    sampler.stop.set()
    sampler.join(1.0)
    remaining = sampler.take()
    if remaining:
        with open(spec.throughput_path, "a") as tp_out:
            tp_out.write(throughput_line(spec, spec.iterations, remaining))
    dist.destroy_process_group()
    diag.close()
    print("DONE", flush=True)
    # Every file is closed and flushed. The interpreter's own teardown with torch loaded costs
    # about a second of CPU per worker (measured here: 1.1-1.3 s for a process that imported
    # torch; both cores saturated for 1.4 s after four workers ended, ~4 s after eight), which
    # would slow the jobs still running on this machine, as it would not in a cluster: leave
    # without it.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":  # pragma: no cover - run through mn_harness.worker
    sys.exit("run through: python -m mn_harness.worker SPEC.json")

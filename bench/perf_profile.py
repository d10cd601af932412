"""Where a run's CPU goes: `perf record -a -g` on the software cpu-clock event while the jobs run,
every sample's stack classified into one component (the kernel's data-plane stages, TCP in the
hosts, the BPF programs, the Python workers' threads, the samplers, the harness) and into the
context it ran in (which thread, and whether as a softirq).

Why perf on cpu-clock: hardware counters are often missing on VMs, and cpu-clock samples every
core at a fixed period of its own time, idle included, so samples / period is CPU time. Why
stacks, not per-process times: the kernel's packet processing (veth, HTB, forwarding, the
receiving host's TCP) runs as a softirq on whichever thread sent the packet or on ksoftirqd, so
per-process CPU time mixes the data plane into the workers; the stack says what the time was
spent on.

Classification (`classify`): a kernel stack is walked from its leaf towards the root and the
first frame that names a component decides (so `kmem_cache_free` under `veth_xmit` is veth's,
a payload copy under `tcp_recvmsg` is the copy's); a sample whose leaf is in user space is its
thread's Python (or other user code). Thread roles: the workers name their threads
(mn_harness/worker/threads.py), the harness's threads are named by Python's threading and read
from this process, the workers' and the node shells' pids are given by the bench.

Used by bench/profile.py; tests/bench/test_perf_profile.py checks the rules on real stacks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mn_harness.dataplane.queue_csv import QueueCollector

PERIOD_NS = 1_000_000  # one sample per millisecond of each core's time

# (component, frame-name pattern), tried in this order on each frame from the leaf up; the first
# frame that matches any decides. Generic helpers (locks, allocators, entry code) match none, so
# their time goes to the subsystem that called them.
KERNEL_RULES: tuple[tuple[str, str], ...] = (
    ("fidelity link program (qdisc_dequeue tracepoint)",
     r"mnh_dequeue|__bpf_trace_qdisc_dequeue|bpf_trace_run\d"),
    ("egress BPF program (ECN marking, queue counters)",
     r"mnh_egress|^tcx_run|^sch_handle_egress|^tcf_classify|^cls_bpf"),
    ("other BPF (congestion control programs)",
     r"^bpf_prog_|^bpf_struct_ops|^__bpf_prog_enter|^__bpf_prog_exit|^bpf_trampoline"),
    ("GSO segmentation", r"^skb_segment|gso_segment"),
    ("payload copy (user <-> socket)",
     r"copy_user|^_copy_to_iter|^_copy_from_iter|^copy_page_to_iter|^copy_page_from_iter|^skb_copy_datagram_iter"
     r"|^__skb_datagram_iter|^simple_copy_to_iter|^rep_movs|^skb_do_copy_data_nocache"),
    ("veth (namespace crossing)", r"^veth_"),
    ("qdisc: HTB shaping and FIFO",
     r"^htb_|^qdisc_|^__qdisc_run|^sch_direct_xmit|^bfifo|^pfifo|^netem_|^red_|^__dev_xmit_skb|^dev_qdisc_enqueue"
     r"|^qdisc_watchdog|^tbf_"),
    ("GRO", r"gro_|_gro$|^napi_gro"),
    ("congestion control (kernel)", r"^dctcp|^cubictcp|^bictcp|^tcp_reno|^bbr_|^tcp_cong|^tcp_slow_start"),
    ("TCP in the hosts",
     r"^tcp_|^__tcp_|^tcp4_|^inet_csk|^inet_recvmsg|^inet_sendmsg|^inet_send_prepare|^sk_stream_|^sk_wait_data"
     r"|^lock_sock|^release_sock|^__release_sock|^sk_reset_timer|^sock_def_readable|^sock_rfree|^sock_wfree|^__sk_mem"
     r"|^sk_mem|^sk_forced_mem|^skb_entail|^inet_ehash|^__inet_lookup|^inet_lookup|^sock_sendmsg|^sock_recvmsg"
     r"|^__sys_sendto|^__sys_recvfrom|^____sys_recvmsg|^____sys_sendmsg|^__sys_recvmsg|^__sys_sendmsg"
     r"|^__x64_sys_sendto|^__x64_sys_recvfrom|^__x64_sys_sendmsg|^__x64_sys_recvmsg|^__x64_sys_sendfile"
     r"|^do_sendfile|^do_splice|^splice_|^sock_sendpage|^tcp_splice|^sk_page_frag|^skb_splice|^tcp_sendfile"),
    ("IP: routing, forwarding, output",
     r"^ip_|^__ip_|^fib_|^ipv4_|^rt_|^dst_|^neigh_|^__neigh|^raw_v4|^icmp_|^nf_hook|^inet_gro|^__dev_forward"),
    ("netdev receive (backlog, softirq rx)",
     r"^__netif_receive_skb|^netif_receive_skb|^process_backlog|^__napi_poll|^net_rx_action|^enqueue_to_backlog"
     r"|^netif_rx|^__netif_rx|^napi_|^eth_type_trans|^rps_|^skb_defer"),
    ("netdev transmit (tx path, softirq tx)",
     r"^net_tx_action|^dev_hard_start_xmit|^__dev_queue_xmit|^dev_queue_xmit|^validate_xmit|^netif_skb_features"
     r"|^__netif_schedule|^netdev_core_pick_tx|^netdev_pick_tx|^skb_csum_hwoffload"),
    ("BPF syscalls (map reads: samplers)",
     r"^__sys_bpf|^map_lookup|^bpf_map_|^htab_|^percpu_|^array_map|^generic_map|^bpf_obj_|^__x64_sys_bpf"),
    ("futex (locks, GIL hand-offs)", r"futex"),
    ("scheduler (wake-ups, context switches)",
     r"^schedule|^__schedule|^pick_next|^enqueue_task|^dequeue_task|^try_to_wake_up|^finish_task_switch|^update_curr"
     r"|^psi_|^select_task_rq|^__wake_up|^autoremove_wake|^wake_up|^sched_|^ttwu|^switch_mm|^__switch_to"
     r"|^set_next_entity|^put_prev|^update_load|^reweight|^enqueue_entity|^dequeue_entity|^check_preempt|^resched"
     r"|^newidle_balance|^load_balance|^pick_task|^__pick|^update_rq|^do_nanosleep|^hrtimer_nanosleep"
     r"|^__x64_sys_clock_nanosleep"),
    ("files, pipes, polling",
     r"^ep_|^do_epoll|^do_select|^core_sys_select|^do_sys_poll|^__pollwait|^pipe_|^vfs_|^ksys_|^new_sync|^__fget"
     r"|^fput|^__fput|^proc_|^seq_|^ext4_|^filemap_read|^__x64_sys_(read|write|pread|openat|close)"),
    ("page faults, memory maps",
     r"page_fault|^handle_mm_fault|^do_anonymous|^filemap_map|^do_fault|^do_mmap|^__do_munmap|^do_vmi|^mmap_region"
     r"|^unmap_|^zap_|^tlb_"),
    ("process start and exit",
     r"^do_exit|^do_group_exit|^exit_mmap|^begin_new_exec|^load_elf|^copy_process|^kernel_clone|^do_execve|^bprm_"),
    ("timers and clocks",
     r"hrtimer|^tick_|^timerqueue|^__run_timers|^run_timer|^clockevents|^lapic_next|^timekeeping|^ktime_get"
     r"|^read_tsc|^kvm_clock|^pvclock|^__sysvec_apic_timer"),
    ("idle", r"^do_idle|^cpuidle|^default_idle|safe_halt|^cpu_startup_entry|^acpi_idle|^poll_idle|^mwait"),
)
_RULES = [(name, re.compile(pattern)) for name, pattern in KERNEL_RULES]
IDLE = "idle"
KERNEL_OTHER = "kernel, other"
SOFTIRQ_FRAMES = re.compile(r"^(handle_softirqs|__do_softirq|do_softirq|net_rx_action|net_tx_action|run_ksoftirqd)$")
KERNEL_DSOS = ("[kernel.kallsyms]", "[bpf_prog]", "[bpf_trampoline]")

# the workers' thread names (mn_harness/worker/threads.py) -> their role
WORKER_THREADS = {"mnh-send": "worker send threads", "mnh-recv": "worker receive threads",
                  "mnh-bins": "worker throughput samplers", "mnh-stream": "worker communication streams"}
# the harness's threads (their Python names) -> their role; a queue sampler is known by its
# type (QueueCollector), whatever its data plane names it
QUEUE_SAMPLER = "harness: queue sampler"
HARNESS_THREADS = {"cpu-load": "harness: CPU sampler", QUEUE_SAMPLER: QUEUE_SAMPLER,
                   "MainThread": "harness: main thread (progress, link monitor reads)"}


@dataclass
class Frame:
    sym: str
    dso: str

    @property
    def kernel(self) -> bool:
        return self.dso in KERNEL_DSOS or self.sym.startswith("bpf_prog_")


@dataclass
class Sample:
    comm: str
    pid: int
    tid: int
    time: float  # CLOCK_MONOTONIC seconds
    frames: list[Frame]  # leaf first


@dataclass
class Roles:
    """Who is who on the machine during the run: the workers' pids (torch or synthetic), the
    harness's pid and its threads' native ids and names, the harness's other descendants (node
    shells, tc, ip)."""

    harness_pid: int = field(default_factory=os.getpid)
    workers: dict[int, str] = field(default_factory=dict)  # pid -> "synthetic" | "torch"
    harness_threads: dict[int, str] = field(default_factory=dict)  # tid -> Python thread name
    helpers: set[int] = field(default_factory=set)

    def note_harness_threads(self) -> None:
        for t in threading.enumerate():
            if t.native_id is not None:
                self.harness_threads[t.native_id] = QUEUE_SAMPLER if isinstance(t, QueueCollector) else t.name

    def note_descendants(self) -> None:
        """Every process whose parent chain reaches the harness (node shells, their children)."""
        parent: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        for pid in parent:
            p, hops = pid, 0
            while p in parent and p != self.harness_pid and hops < 64:
                p, hops = parent[p], hops + 1
            if p == self.harness_pid and pid != self.harness_pid:
                self.helpers.add(pid)

    def thread_role(self, s: Sample) -> str:
        if s.pid == 0:
            return "idle (interrupted)"
        if s.comm.startswith("ksoftirqd"):
            return "ksoftirqd"
        kind = self.workers.get(s.pid)
        if kind == "torch":
            return "torch workers"
        if kind is not None:
            return WORKER_THREADS.get(s.comm, "worker main threads")
        if s.pid == self.harness_pid:
            name = self.harness_threads.get(s.tid, "")
            return HARNESS_THREADS.get(name, "harness: other threads" if name else "harness: unnamed threads")
        if s.pid in self.helpers:
            return "harness: node shells and tools"
        if s.comm == "perf":
            return "perf (the profiler)"
        if s.comm.startswith(("kworker", "rcu", "migration", "kcompactd", "khugepaged", "kswapd", "jbd2", "kdamond")):
            return "kernel threads"
        return "other processes (not this run)"


def kernel_component(frames: Iterable[Frame]) -> str | None:
    for f in frames:
        if not f.kernel:
            continue
        for name, pattern in _RULES:
            if pattern.search(f.sym):
                return name
    return None


def in_softirq(frames: Iterable[Frame]) -> bool:
    return any(f.kernel and SOFTIRQ_FRAMES.search(f.sym) for f in frames)


def classify(s: Sample, roles: Roles) -> tuple[str, str]:
    """(component, context) of one sample. Context: the thread's role, prefixed "softirq in"
    when the sample is packet processing run as a softirq on that thread."""
    role = roles.thread_role(s)
    softirq = in_softirq(s.frames)
    context = f"softirq in {role}" if softirq else role
    if s.frames and not s.frames[0].kernel:
        return f"user space: {role}", context
    component = kernel_component(s.frames)
    if component == IDLE and softirq:
        component = None
    if component is None:
        component = f"{KERNEL_OTHER} ({'softirq' if softirq else role})"
    return component, context


_HEADER = re.compile(r"^\s*(\S.*?)\s+(\d+)/(\d+)\s+\[\d+\]\s+([\d.]+):")
_FRAME = re.compile(r"^\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")


def parse_script(lines: Iterable[str]) -> Iterator[Sample]:
    """Samples from `perf script -F comm,pid,tid,cpu,time,ip,sym,dso` output."""
    current: Sample | None = None
    for line in lines:
        if not line.strip():
            if current is not None:
                yield current
                current = None
            continue
        if current is None:
            m = _HEADER.match(line)
            if m:
                current = Sample(m[1], int(m[2]), int(m[3]), float(m[4]), [])
            continue
        m = _FRAME.match(line)
        if m:
            sym = m[1]
            current.frames.append(Frame(sym.split("+0x")[0], m[2]))
    if current is not None:
        yield current


class PerfRecorder:
    """`perf record -a -g` on cpu-clock every PERIOD_NS of each core, sample times on
    CLOCK_MONOTONIC (the clock of the run's t0), from start() to stop()."""

    def __init__(self, path: Path, period_ns: int = PERIOD_NS):
        self.path, self.period_ns = Path(path), period_ns
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["perf", "record", "-q", "-a", "-g", "-e", "cpu-clock", "-c", str(self.period_ns), "-k", "CLOCK_MONOTONIC",
             "-o", str(self.path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise RuntimeError("perf record did not stop") from None
        if not self.path.exists():
            raise RuntimeError(f"perf record wrote nothing: {err.decode(errors='replace').strip()[-300:]}")

    def samples(self) -> Iterator[Sample]:
        proc = subprocess.Popen(["perf", "script", "-i", str(self.path), "-F", "comm,pid,tid,cpu,time,ip,sym,dso"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, errors="replace")
        assert proc.stdout is not None
        yield from parse_script(proc.stdout)
        proc.wait()


@dataclass
class Profile:
    """Sample counts per component and per context within a window of `seconds`, on `cores`
    cores, each sample `period_ns` of one core's time."""

    seconds: float
    cores: int
    period_ns: int
    components: Counter = field(default_factory=Counter)
    contexts: Counter = field(default_factory=Counter)
    softirq: Counter = field(default_factory=Counter)  # per component: samples run as a softirq

    def cores_of(self, count: int) -> float:
        """Samples -> cores busy on average over the window."""
        return count * self.period_ns / 1e9 / self.seconds

    @property
    def busy(self) -> int:
        return sum(n for c, n in self.components.items() if c != IDLE)


def profile(samples: Iterable[Sample], roles: Roles, start: float, end: float,
            period_ns: int = PERIOD_NS) -> Profile:
    out = Profile(end - start, os.cpu_count() or 1, period_ns)
    for s in samples:
        if start <= s.time < end:
            component, context = classify(s, roles)
            out.components[component] += 1
            out.contexts[context] += 1
            if context.startswith("softirq"):
                out.softirq[component] += 1
    return out

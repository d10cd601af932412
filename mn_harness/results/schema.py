"""The schema of every file in a results folder: the columns of every CSV and the typed rows
they hold, and summary.json's records.

One home for each schema: the runner's writers (results.collect, results.summary, the queue
collectors of the data planes, the CC telemetry) and the readers (results.loaders, hence the
report, results.load() and the benches) import them from here, so a column or a key cannot be
renamed on one side only. Times are seconds since the experiment-wide start T0 (the workers'
shared CLOCK_MONOTONIC origin). docs/results.md describes every column; its summary.json table
is made from the records' own texts (`python -m mn_harness.results FILE` rewrites it)."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mn_harness.results import records
from mn_harness.results.records import entry, extra
from mn_harness.results.schema_fidelity import Fidelity

ITERATIONS_CSV = "iterations.csv"
THROUGHPUT_CSV = "throughput.csv"
QUEUE_CSV = "queue.csv"
CC_TELEMETRY_CSV = "cc_telemetry.csv"
SUMMARY_JSON = "summary.json"
CPU_CSV = "cpu.csv"
PHASES_CSV = "phases.csv"

# iterations.csv: one row per job, rank and iteration
ITERATION_COLUMNS = ("job", "rank", "iteration", "t_start", "t_comm_start", "t_comm_end",
                     "iter_time", "comm_time", "bytes_sent", "cpu_s", "send_lag_mean_s", "send_lag_max_s",
                     "hold_s")
# phases.csv: one row per job, rank, iteration and phase the rank took part in
PHASE_COLUMNS = ("job", "rank", "iteration", "phase", "name", "kind", "collective", "bytes",
                 "t_start", "t_end", "duration", "bytes_sent", "planned_s", "delay_s")
# throughput.csv: bytes acknowledged on one worker's sending sockets per bin [t, t + bin_s); then
# what limited the sender (worker/tcpinfo.py, empty where not sampled: in-network aggregation):
# cwnd (segments, summed over the rank's connections) and srtt_us (the largest smoothed RTT) at
# the bin's end, and the microseconds of the bin the sockets had data to send (busy_us, in the
# kernel's jiffy steps) and were limited by the receiver's window or the send buffer
THROUGHPUT_SENDER_COLUMNS = ("cwnd", "srtt_us", "busy_us", "rwnd_limited_us", "sndbuf_limited_us")
THROUGHPUT_COLUMNS = ("job", "rank", "t", "bin_s", "bytes", *THROUGHPUT_SENDER_COLUMNS)
# queue.csv: one row per sampled egress port and sample; then one bytes_<job> column per job.
# `drops` is empty where the data plane cannot see its queue's drops (BMv2)
QUEUE_BASE_COLUMNS = ("t", "switch", "port", "link", "depth", "depth_max", "packets", "marks", "drops")
QUEUE_JOB_PREFIX = "bytes_"
# cpu.csv: the machine's CPU (all cores) per sampling interval ending at t (mn_harness.fidelity.cpu_load)
CPU_COLUMNS = ("t", "interval_s", "busy", "steal")
# cc_telemetry.csv: one row per socket and iteration seen by an MLTCP/BPF congestion control
CC_TELEMETRY_COLUMNS = ("believed_bytes_per_iteration", "bytes", "cc", "count", "dst", "end_s", "f_last",
                        "final", "iteration", "kernel_name", "learned_bytes_per_iteration",
                        "losses", "params", "rto", "slope", "src", "start_s")


def queue_columns(job_names: Iterable[str]) -> list[str]:
    return [*QUEUE_BASE_COLUMNS, *(f"{QUEUE_JOB_PREFIX}{j}" for j in job_names)]


@dataclass(frozen=True)
class IterationRow:
    """One worker's (job, rank) record of one training iteration; times in s relative to T0."""

    job: str
    rank: int
    iteration: int
    t_start: float
    t_comm_start: float
    t_comm_end: float
    iter_time: float
    comm_time: float
    bytes_sent: int
    # CPU time (user + system, every thread of the worker process) the iteration took; None
    # in lines from before it was recorded. With several workers per core, a job whose
    # workers need the CPU while others do is slowed by the machine, not only by the network.
    cpu_s: float | None = None
    # how long the rank's sends waited to be written once they could be (mean, max over the
    # iteration's sends); None where not measured (torch workers, older runs)
    send_lag_mean_s: float | None = None
    send_lag_max_s: float | None = None
    # how long the harness's shift scheduler held the iteration at its start (run.shifts,
    # jobs/shifts.py; counted in iter_time); None without it
    hold_s: float | None = None

    @classmethod
    def from_worker(cls, record: Mapping[str, Any]) -> IterationRow:
        """From a worker's JSON line (which has no iter_time / comm_time: derived here).
        iter_time runs to the iteration's end (`t_end`, after a trailing compute phase; lines
        without it end with their communication)."""
        t_start, t_comm_start, t_comm_end = (float(record[k]) for k in
                                             ("t_start", "t_comm_start", "t_comm_end"))
        t_end = float(record.get("t_end", t_comm_end))
        return cls(str(record["job"]), int(record["rank"]), int(record["iteration"]), t_start,
                   t_comm_start, t_comm_end, round(t_end - t_start, 6),
                   round(t_comm_end - t_comm_start, 6), int(record["bytes_sent"]),
                   *(None if record.get(k) is None else float(record[k])
                     for k in ("cpu_s", "send_lag_mean_s", "send_lag_max_s", "hold_s")))


@dataclass(frozen=True)
class PhaseRow:
    """One phase of one rank's iteration: a compute phase (its planned mean and the delay
    applied: jitter and stragglers) or a collective (its size S and the bytes this rank sent).
    Slices of one compute phase between DDP bucket issues are one row."""

    job: str
    rank: int
    iteration: int
    phase: int  # index in the job's phase list
    name: str  # e.g. compute, compute.backward, ring_allreduce, ring_allreduce.bucket2
    kind: str  # compute | comm
    collective: str
    bytes: int | None
    t_start: float
    t_end: float
    duration: float
    bytes_sent: int
    planned_s: float | None
    delay_s: float | None

    @classmethod
    def from_worker(cls, record: Mapping[str, Any], phase: Mapping[str, Any]) -> PhaseRow:
        t_start, t_end = float(phase["t_start"]), float(phase["t_end"])
        nbytes, planned, delay = phase.get("bytes"), phase.get("planned_s"), phase.get("delay_s")
        return cls(str(record["job"]), int(record["rank"]), int(record["iteration"]), int(phase["phase"]),
                   str(phase["name"]), str(phase["kind"]), str(phase.get("collective") or ""),
                   None if nbytes is None else int(nbytes), t_start, t_end, round(t_end - t_start, 6),
                   int(phase.get("bytes_sent", 0)), None if planned is None else float(planned),
                   None if delay is None else float(delay))


@dataclass(frozen=True)
class ThroughputRow:
    """Bytes acked on one worker's sending sockets in the bin [t, t + bin_s), and the sender's
    state (THROUGHPUT_SENDER_COLUMNS; None where not sampled)."""

    job: str
    rank: int
    t: float
    bin_s: float
    bytes: int
    cwnd: int | None = None
    srtt_us: int | None = None
    busy_us: int | None = None
    rwnd_limited_us: int | None = None
    sndbuf_limited_us: int | None = None


@dataclass(frozen=True)
class QueueRow:
    """One queue sample of an egress port; depth in packets."""

    t: float
    switch: str
    port: str
    depth: float
    marks: float
    job_bytes: dict[str, float] = field(default_factory=dict)
    drops: float | None = None  # None: not measured (BMv2)



@dataclass(frozen=True)
class CCTelemetryRow:
    """One socket's iteration as a BPF congestion control saw it (cc_telemetry.csv): the columns
    the report reads. `slope` is the search's F slope while the socket searches (0 once an
    adaptive variant's search ended; F's slope is then the spec's `hold`,
    docs/cc.md#the-adaptive-step); `final` marks the row written when the socket closed,
    mid-iteration. `learned_bytes_per_iteration` is what the program has learned a whole
    iteration sends (None before it has learned), `bytes` what this iteration sent."""

    src: str
    cc: str
    iteration: int
    slope: float
    losses: int
    rto: bool
    final: bool
    bytes: int
    learned_bytes_per_iteration: int | None

def write_csv(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, Any] | Any]) -> None:
    """Rows (mappings or the dataclasses above) under `columns`; extra fields are ignored."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow(row if isinstance(row, Mapping) else row.__dict__)


# -- summary.json ------------------------------------------------------------------------------
# Version 1: files without a `version` key (jobs.<job>.hosts was `workers`).
SUMMARY_VERSION = 2


@dataclass(frozen=True)
class WorkerCpu:
    """A job's workers' CPU use over its measured iterations (results.iterations.worker_cpu)."""

    per_iteration_s: float | None = entry("a worker's mean CPU time (user + system, every thread) "
                                          "per iteration, from iterations.csv cpu_s")
    share: float | None = entry("that CPU time over the iterations' wall time (1.0 = one core busy "
                                "the whole iteration)")


@dataclass(frozen=True)
class JobSummary:
    """One job: the configuration that matters for reading its numbers, and its statistics
    (results.iterations: the definitions the report uses)."""

    hosts: list[str] = entry("every host of the job in rank order: its workers, then its parameter servers",
                             factory=list, old="workers")
    servers: list[str] = entry("its parameter servers", factory=list)
    cc: str | None = entry("its congestion control's kernel name")
    iterations: int | None = entry("complete iterations (every rank has a row), warm-up included")
    iterations_planned: int | None = entry("the configured iterations (what missing rows count against)")
    missing_rows: int | None = entry("(rank, iteration) pairs of the planned ones without a row (a worker that "
                                     "was killed, a line cut off)")
    bytes_per_iteration: int | None = entry("the sizes of all its collectives, after scaling")
    bytes_sent_per_worker: int | None = entry("the busiest rank's bytes per iteration")
    bytes_sent_per_rank: list[int] = entry("each rank's bytes per iteration", factory=list)
    bytes_acked_per_rank: dict[str, int] = entry("rank → bytes its peers acknowledged over the run "
                                                 "(throughput.csv)", factory=dict, keys="rank")
    compute_s: float | None = entry("mean compute per iteration")
    phases: list[dict[str, Any]] = entry(
        "the resolved phase list (jobs.ideal.phase_summary): per phase `phase`, `name`, `kind`; for "
        "compute `compute_mean_s`, `jitter`, `distribution`; for a collective `collective`, `bytes`, "
        "`participants`, `bytes_sent_per_rank`, `ideal_s`, `bottleneck`, `bottleneck_bps`, `buckets`, "
        "`busbw_factor`", factory=list)
    phase_stats: list[dict[str, Any]] = entry(
        "measured per phase name (results.phases): `phase`, `name`, `kind`, `collective`, `ranks`, "
        "`iterations`, `mean_s`, `p50_s`; compute `mean_delay_s`; collectives `bytes`, `algbw_Bps`, "
        "`busbw_Bps` (metric definitions below)", factory=list)
    model: dict[str, Any] | None = entry("the model preset: `name`, `parameters`, `compute_s`, "
                                         "`measured_on`, `source`; null without one")
    scaled: dict[str, Any] | None = entry(
        "what the `scale` rule did: `real_link_bps`, `emulated_link_bps`, `real_bytes_per_iteration`, "
        "`bytes_per_iteration`, `comm_fraction`; null without `scale`")
    trace: str | None = entry("the Chakra trace file the phases came from")
    stragglers: list[dict[str, Any]] = entry("its stragglers: `ranks`, `delay_s`, `probability`, `slowdown`",
                                             factory=list)
    bottleneck_bps: float | None = entry("the rate of the link bounding its longest collective")
    ideal_iter_s: float | None = entry("ideal iteration time (metric definitions below)")
    mean_iter_s: float | None = entry("mean iteration time after the warm-up")
    p50_iter_s: float | None = entry("median iteration time after the warm-up")
    p99_iter_s: float | None = entry("99th percentile iteration time after the warm-up")
    slowdown_mean: float | None = entry("mean_iter_s / ideal_iter_s (the report's is over `isolated_iter_s` "
                                        "where the run has it)")
    slowdown_p99: float | None = entry("p99_iter_s / ideal_iter_s (the same)")
    warmup: int = entry("iterations left out of the statistics as warm-up", 0)
    warmup_mean_iter_s: float | None = entry("mean iteration time of the warm-up iterations")
    worker_cpu: WorkerCpu | None = entry("its workers' CPU use; null for runs from before it was recorded")
    isolated_iter_s: float | None = entry("with `run.isolated`: its mean iteration time alone, the "
                                          "report's slowdown baseline", optional=True)
    extra: dict[str, Any] = extra()

    @property
    def baseline_iter_s(self) -> float | None:
        """Measured isolated iteration time when the run has one, else the computed ideal."""
        return self.isolated_iter_s if self.isolated_iter_s else self.ideal_iter_s


@dataclass(frozen=True)
class FlowPath:
    """One flow: one direction of a connection between two of a job's ranks."""

    rank: int | None = entry("the sending rank")
    src: str | None = entry("its source host")
    dst: str | None = entry("its destination host")
    sport: int | None = entry("its source port")
    dport: int | None = entry("its destination port")
    path: list[str] = entry("the nodes its data took (with ECMP, the data plane's choice)", factory=list)
    resolved: bool | None = entry("false if the run ended before an ECMP choice was known")


@dataclass(frozen=True)
class LinkChange:
    """A link rate changed while the jobs ran (Session.set_link_rate)."""

    t: float | None = entry("when, in s since T0 (null before the jobs started)")
    link: str | None = entry("the link, e.g. `s1-s2` (both directions)")
    bw_bps: float | None = entry("its new rate")


@dataclass(frozen=True)
class RunFacts:
    """What the session observed of a run (mn_harness.session): its outcome, its data plane and
    what was measured beside the workers' rows."""

    status: str | None = entry("`completed`, `interrupted`, `failed: …`, `stopped` (a script ended "
                               "the session early) or `network only` (no job started)")
    label: str | None = entry("the name the run was given (`--label`, `mn_harness.run(..., label=)`), "
                              "what results.load() groups it by", optional=True)
    dataplane: str | None = entry("`linux` or `bmv2`")
    slow_start_after_idle: bool | None = entry("the hosts' `net.ipv4.tcp_slow_start_after_idle`")
    emulation: dict[str, Any] | None = entry(
        "every emulator choice of the run: `run.emulation`'s keys (`switches`, `access_links`, `host_queue`, "
        "`queue_limit`, `htb_burst`, `htb_cburst`, `htb_quantum`, `cpu_placement`, `worker_main_thread`) and "
        "`gso_max_segs`, `queue_telemetry`, `throughput_bin_s` (docs/fidelity.md: the emulator's choices)",
        optional=True)
    ecmp_hash_seed: int | None = entry("with ECMP: the flows' hash seed (absent where the kernel has no "
                                       "hash-seed sysctl: `routing_note`)", optional=True)
    routing_note: str | None = entry("why ECMP paths may not repeat", optional=True)
    setup_s: float | None = entry("seconds from the start to the network being up", optional=True)
    socket_cc: dict[str, list[str]] | None = entry(
        "per job with a `torch_*` collective: the congestion controls the kernel reported on its workers' "
        "connections (docs/fidelity.md: the jobs' congestion control on sockets the worker does not own)",
        optional=True, keys="job")
    tcp_counters: dict[str, Any] | None = entry(
        "what the kernel's TCP did in each host's namespace from just before the workers started to just "
        "after they ended: `hosts` → host → counter, and `jobs` → job → the sum over its hosts; the "
        "counters, named as `nstat` prints them, are listed with their meaning in "
        "`mn_harness/network/tcp_counters.py`: `TcpOutSegs`, `TcpRetransSegs`, `TcpExtTCPTimeouts` "
        "(retransmission timeouts), `TcpExtTCPLossProbes`, `TcpExtTCPLostRetransmit`, ... — a phase that "
        "waited for a timeout, 200 ms at least, sets a run's p99", optional=True)
    cpu_load: dict[str, Any] | None = entry(
        "the machine's CPUs from the workers' start to their end: `cores`, `interval_s`, `samples`, "
        "`busy_mean`, `saturated_share` (the share of intervals at least 95% busy), `steal_mean` (the "
        "share of the cores' time a VM's host took); the run prints one line when either share is 5% or "
        "more (docs/troubleshooting.md: the CPUs were saturated)", optional=True)
    link_stats: dict[str, Any] | None = entry(
        "per shaped directed link of the Linux data plane, the hosts' own egresses (`h1->s1`) included: bytes, "
        "packets and drops of its egress queue as the qdisc counts them (drops of GSO packets, where "
        "`queue.csv` counts frames; a drop at a host's end is the sender's own queue overflowing)", optional=True)
    cc_telemetry_rows: int | None = entry("rows written to cc_telemetry.csv")
    queue: dict[str, Any] | None = entry(
        "per `switch:port`: `link`, `max_depth`, packet-weighted `mean_depth`, `packets`, `marks`, "
        "`drops` (null on BMv2), from the queue telemetry", optional=True)
    ecn_marks: dict[str, Any] | None = entry("CE marks per job", optional=True)
    telemetry: dict[str, Any] | None = entry(
        "the queue sampler: `samples`, `samples_per_s`, `busy_s` (its own time), `error` when sampling "
        "stopped or could not start", optional=True)
    ecn: dict[str, Any] | None = entry(
        "`method` (how ports marked: `bmv2`, `bpf-backlog`, `bpf-vq`, `red (…why not BPF)`, `none (…)` "
        "or `off`) and `thresholds` per switch port (`20 packets`, `30000 bytes`, `off`)", optional=True)
    pcap: dict[str, Any] | None = entry("with `--pcap`: link → `file`, `interface`, `tcpdump` (its counts)",
                                        optional=True)
    link_changes: list[LinkChange] | None = entry("rates changed while the jobs ran", optional=True)
    teardown: str | None = entry("only when the teardown was cut short: `incomplete: <steps>` "
                                 "(`mn-harness clean` finishes it)", optional=True)
    isolated_runs: str | None = entry("with `run.isolated`: the folder of the solo runs", optional=True)
    fidelity: Fidelity | None = entry("whether the emulation kept its invariants while the jobs ran: the "
                                      "verdict and what was measured (below; docs/fidelity.md)", optional=True)
    provenance: dict[str, Any] | None = entry("what produced the run (below)")


@dataclass(frozen=True)
class RunSummary(RunFacts):
    """summary.json: the run's facts, and per job its configuration and statistics, which jobs
    share which link, and the report's metrics once reported."""

    version: int = entry("the schema's version: 2; files without the key are version 1",
                         SUMMARY_VERSION, absent=1)
    experiment: str = entry("the experiment's name", "")
    cc: dict[str, str] = entry("job → its congestion control's kernel name", factory=dict, keys="job")
    jobs: dict[str, JobSummary] = entry("per job, below", factory=dict, keys="job")
    link_jobs: dict[str, list[str]] = entry("directed link `a->b` → jobs whose traffic crosses it",
                                            factory=dict, keys="link")
    link_ranks: dict[str, dict[str, list[int]]] = entry(
        "link → job → ranks whose sending sockets carry data across it", factory=dict, keys="link")
    link_bps: dict[str, float] = entry("link → capacity", factory=dict, keys="link")
    routing: str | None = entry("`shortest` or `ecmp`")
    time_scale: float | None = entry(
        "`run.emulation.time_scale`, K: the emulation ran K times slower than the experiment (every link "
        "rate / K, every time of the model x K); every time and rate in the folder is the experiment's "
        "(nominal: the machine's times / K), so slowdowns are the same whichever K (docs/fidelity.md: time "
        "dilation); absent in folders from before it (real time)", optional=True)
    flow_paths: dict[str, list[FlowPath]] = entry("job → its flows", factory=dict, keys="job")
    cassini: dict[str, Any] | None = entry(
        "CASSINI's prediction (metric definitions below): `links`, `jobs` (per job `slowdown`, "
        "`aligned_slowdown`, its shared `links`), `loops`, `quantum_s`; null if the run ended before the "
        "ECMP paths were known, `{error}` if the model failed")
    metrics: dict[str, Any] | None = entry("the report's metrics (below)", optional=True)
    extra: dict[str, Any] = extra()

    def ranks_on(self, link: str) -> dict[str, set[int]] | None:
        """Ranks per job crossing `link`, or None when unknown (then all ranks count)."""
        if link not in self.link_ranks:
            return None
        return {job: set(ranks) for job, ranks in self.link_ranks[link].items()}

    def busiest_link(self) -> str | None:
        """The link shared by the most jobs (ties: lowest capacity, then name): the one whose
        timeline shows interleaving."""
        if not self.link_jobs:
            return None
        return min(self.link_jobs, key=lambda link: (-len(set(self.link_jobs[link])),
                                                     self.link_bps.get(link, float("inf")), link))

    def predicted(self, job: str) -> tuple[float | None, float | None]:
        """CASSINI's predicted slowdown of `job` at the best shifts and with the phases aligned."""
        jobs = self.cassini.get("jobs") if isinstance(self.cassini, dict) else None
        guess = jobs.get(job) if isinstance(jobs, dict) else None
        if not isinstance(guess, dict):
            return None, None
        return _number(guess.get("slowdown")), _number(guess.get("aligned_slowdown"))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


DOCS_BEGIN = "<!-- summary.json keys, generated: python -m mn_harness.results FILE -->"
DOCS_END = "<!-- end of the generated summary.json keys -->"


def summary_docs(text: str) -> str:
    """`text` (a docs page) with the table between DOCS_BEGIN and DOCS_END made anew from the
    records (tests/results/test_schema.py checks that docs/ holds the current one)."""
    head, begin, rest = text.partition(DOCS_BEGIN)
    _, end, tail = rest.partition(DOCS_END)
    if not begin or not end:
        raise ValueError("no generated summary.json table (its begin and end markers) in the file")
    return f"{head}{DOCS_BEGIN}\n{records.markdown(RunSummary)}\n{DOCS_END}{tail}"


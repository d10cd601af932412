"""Bring one BMv2 switch up: the one sequence shared by the harness's data plane
(mn_harness.dataplane.bmv2) and the P4 test bed (mn_harness.testing), so what the tests check is
what the experiments run.

    setup = SwitchSetup(spec, program, queues={2: QueueConfig.for_link(50, 100)},
                        ecn_threshold=20, job_rules=plan_job_rules(plan))
    conn = bring_up(BMv2Switch(...), setup)    # started, queues set, pipeline and entries in

The order matters: the queues are set over Thrift before any traffic can be forwarded, the
pipeline is pushed before entries are written, and the aggregation jobs' multicast groups need
the aggregation.p4 pipeline. The two callers differ only in how the switch process runs (its
own namespace and a unix gRPC socket in the data plane, the root namespace and TCP ports in the
test bed), which is the BMv2Switch they pass in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from . import contract
from .aggregation import AggJob, job_entries, replicas
from .bmv2 import BMv2Switch, QueueConfig
from .compile import CompiledProgram
from .entries import Entry, JobRule, SwitchSpec, switch_entries
from .errors import P4Error
from .runtime import P4Info, SwitchConnection, table_entry


@dataclass(frozen=True)
class SwitchSetup:
    """Everything one switch is programmed with. The queue depths also size the depth
    histogram's buckets (entries.qbucket_shift), so they are given once, in `queues`.
    `telemetry`: its counters are read (queue.csv), so the program needs the queue telemetry
    feature and gets the job rules and the histogram's bucket widths."""
    spec: SwitchSpec
    program: CompiledProgram
    queues: Mapping[int, QueueConfig] = field(default_factory=dict)  # egress port -> queues
    ecn_threshold: int | None = None       # packets; None: no marking
    port_thresholds: Mapping[int, int | None] = field(default_factory=dict)  # per port, overrides it
    job_rules: Sequence[JobRule] = ()      # job_classify entries (telemetry per job)
    agg_jobs: Sequence[AggJob] = ()        # aggregation.p4 jobs (slots already allocated)
    telemetry: bool = True

    def queue_depths(self) -> dict[int, int]:
        return {port: q.depth for port, q in self.queues.items() if q.depth is not None}

    def marks(self) -> bool:
        thresholds = [self.port_thresholds.get(p, self.ecn_threshold) for p in self.spec.port_numbers()]
        return any(t is not None for t in thresholds)

    def features(self) -> list[str]:
        """The program features (mn_harness.p4.contract) this switch is asked for."""
        wanted = {"forwarding": True,
                  "ecmp": any(len(r.next_hops) > 1 for r in self.spec.routes),
                  "ecn_marking": self.marks(),
                  "queue_telemetry": self.telemetry,
                  "aggregation": bool(self.agg_jobs)}
        return [name for name, asked in wanted.items() if asked]

    def entries(self) -> list[Entry]:
        """The entries of the features asked for: a switch that neither marks nor is sampled
        gets no egress_port_cfg entries (the program's default: no marking), one that is not
        sampled no job rules, so a program without those tables runs where they are not needed."""
        features = self.features()
        port_cfg = "ecn_marking" in features or "queue_telemetry" in features
        return switch_entries(self.spec, ecn_threshold=self.ecn_threshold,
                              port_thresholds=self.port_thresholds,
                              queue_depths=self.queue_depths(),
                              job_rules=self.job_rules if self.telemetry else (),
                              port_cfg=port_cfg)

    def check(self, p4info: P4Info, reasons: Mapping[str, str] | None = None) -> None:
        """ContractError naming what the program lacks for this switch's features."""
        contract.check(p4info, self.features(), self.program.source.name, dict(reasons or {}))


def bring_up(switch: BMv2Switch, setup: SwitchSetup, p4info: P4Info | None = None
             ) -> SwitchConnection:
    """Start `switch`, set its queues, connect P4Runtime, push `setup.program`, install the
    entries and the aggregation jobs; the connection is returned open (the caller closes it
    and stops the switch). On any failure both are closed before the error propagates, so a
    half-programmed switch never keeps running. `p4info`: the program's, when already parsed."""
    if switch.device_id != setup.spec.device_id:
        raise P4Error(f"BMv2 {switch.name}: device id {switch.device_id} is not the plan's "
                      f"{setup.spec.device_id}")
    p4info = p4info or P4Info.from_file(setup.program.p4info_path)
    setup.check(p4info)
    conn: SwitchConnection | None = None
    try:
        switch.start()
        if setup.queues:
            switch.configure_queues(setup.queues)
        conn = SwitchConnection(switch.grpc_address, switch.device_id, name=switch.name).connect()
        conn.set_pipeline(p4info, setup.program.read_json())
        install_entries(conn, setup.entries())
        install_agg_jobs(conn, setup.agg_jobs)
    except BaseException:
        if conn is not None:
            conn.close()
        switch.stop()
        raise
    return conn


def install_entries(conn: SwitchConnection, entries: Iterable[Entry], batch: int = 100) -> int:
    """Write entries over a connection whose P4Info is set; returns how many. Default actions
    are modified one by one, the rest inserted in Write requests of `batch` updates."""
    info = conn.require_p4info()
    pending = []
    count = 0
    for e in entries:
        if e.default:
            conn.set_default_action(e.table, e.action, e.params)
            count += 1
            continue
        pending.append(table_entry(info, e.table, e.match, e.action, e.params, e.priority))
        if len(pending) >= batch:
            conn.write(pending)
            count += len(pending)
            pending = []
    if pending:
        conn.write(pending)
        count += len(pending)
    return count


def install_agg_jobs(conn: SwitchConnection, jobs: Iterable[AggJob]) -> None:
    """Every job's multicast group and table entries, over a connection whose pipeline is
    aggregation.p4 (the jobs' slot bases already allocated: aggregation.allocate_slots)."""
    for job in jobs:
        conn.write_multicast_group(job.mcast_group, replicas(job))
        install_entries(conn, job_entries(job))

"""What this machine can do for ECN marking and queue telemetry on the Linux data plane.

In order of preference (docs/ecn.md, "How the Linux routers mark, on each kernel", has the
measurements behind it):

1. `bpf` with the `backlog` tracker: the egress program reads the qdisc's own backlog
   (bpf_cast_to_kern_ctx, Linux >= 6.2 with BTF). Marks exactly at the threshold and gives
   queue.csv. This kernel (6.18) and Ubuntu 24.04's (6.8) have it.
2. `bpf` with the `vq` tracker: the same program with a virtual queue drained at the link rate,
   where the kfunc is missing (e.g. Ubuntu 22.04's 5.15).
3. `red`: no usable tc BPF (no clang/bpftool/BTF, tc without libbpf, no clsact or cls_bpf) but
   sch_red is there: RED as the port's leaf marks ECT packets at the threshold (`ecn nodrop`);
   no queue.csv (the run says why).
4. neither: one line saying what is missing. A run stops with it only when something needs the
   marks (a job's CC needs ECN, `run.tcp_ecn: true`, or an `ecn_threshold` set in the file);
   otherwise it runs unmarked and says so.

The static part (tools, tc's libbpf, the kfunc) is checked here without touching the network;
whether the kernel accepts clsact/cls_bpf and RED is learnt by trying on the first port, inside
the node's namespace (LinuxDataplane)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from mn_harness.bpf.errors import BpfUnavailable
from mn_harness.bpf.toolchain import BTF_PATH, check_toolchain
from mn_harness.config import Experiment

TRACKER_ENV = "MN_HARNESS_ECN_TRACKER"  # backlog | vq: force one (benchmarks, tests)
BACKLOG_KFUNC = b"bpf_cast_to_kern_ctx"


def tc_has_libbpf() -> bool:
    """iproute2's tc loads BTF-defined maps and kfunc calls only when built with libbpf
    (`tc -V` then says "libbpf <version>")."""
    try:
        out = subprocess.run(["tc", "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return "libbpf" in (out.stdout + out.stderr)


def kernel_has_kfunc(name: bytes = BACKLOG_KFUNC) -> bool:
    """The kernel's BTF names the kfunc (its string table holds every function name)."""
    try:
        return name in BTF_PATH.read_bytes()
    except OSError:
        return False


def bpf_unavailable_reason() -> str | None:
    """None when the egress program can be built and loaded by tc here, else one line."""
    if os.geteuid() != 0:
        return "not root (tc BPF needs CAP_BPF and CAP_NET_ADMIN): run with sudo"
    try:
        check_toolchain()
    except BpfUnavailable as exc:
        return str(exc)
    if not tc_has_libbpf():
        return ("tc (iproute2) was built without libbpf and cannot load the program "
                "(`tc -V` names no libbpf): install a distribution iproute2 >= 5.18")
    return None


def choose_tracker() -> str:
    """`backlog` where the kernel has bpf_cast_to_kern_ctx, else `vq`; MN_HARNESS_ECN_TRACKER
    overrides (a forced `backlog` on a kernel without the kfunc fails when loading)."""
    forced = os.environ.get(TRACKER_ENV, "").strip().lower()
    if forced in ("backlog", "vq"):
        return forced
    return "backlog" if kernel_has_kfunc() else "vq"


def ecn_demand(experiment: Experiment) -> str | None:
    """Why this experiment needs CE marks (None: nothing does), for the one-line error."""
    for job in experiment.jobs:
        if job.cc.needs_ecn:
            return f"job {job.name} uses {job.cc.canonical}"
    if experiment.run.tcp_ecn is True:
        return "run.tcp_ecn is true"
    for i, switch in enumerate(experiment.switches):
        if switch.ecn_threshold is not None and not switch.ecn_threshold.off:
            return f"switches[{i}].ecn_threshold is set"
    for i, link in enumerate(experiment.links):
        if link.ecn_threshold is not None and not link.ecn_threshold.off:
            return f"links[{i}].ecn_threshold is set"
    return None


@dataclass(frozen=True)
class Support:
    """The outcome for one run: `method` is bpf, red, none or off (no port marks or is
    sampled); `tracker` for bpf; `reason` says why BPF (and, for none, RED) could not be used."""

    method: str
    tracker: str | None = None
    reason: str | None = None

    def describe(self) -> str:
        if self.method == "bpf":
            return f"bpf-{self.tracker}"
        return self.method if self.reason is None else f"{self.method} ({self.reason})"

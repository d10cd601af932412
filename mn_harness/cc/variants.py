"""The congestion controls mn-harness knows, and the defaults of the MLTCP variants.

Why a table: the spec parser, the builder and the docs all need the same facts (which
names are BPF programs, which source file, which kernel-name prefix, which defaults).
To add a variant: write mn_harness/cc/bpf/<file>.bpf.c using mltcp_common.h and add a
row here (see docs/cc.md, "Adding your own variant").

Default MLTCP parameters, chosen by measurement (bench/interleave.py on the demo,
topologies/dumbbell-2jobs.yaml, 40 iterations, job2 offset 20 ms; the tables in
docs/notebook/2026-11-30-mltcp-defaults.md, why in docs/cc.md, "Parameters and defaults"):
  slope = 4, intercept = 1 -> F runs from 1 at the start of an iteration's communication to
      5 at its end. Of the 12-point slope x intercept grid this was the best (1.06x of the
      isolated ideal, interleaved after iteration 6 in the sweep run; 1.07-1.14x in
      repeats); larger slope/intercept ratios converged faster, intercept 1 kept the start
      of each phase as aggressive as the base CC. Larger slopes were measured later
      (bench/reproduce.py, docs/notebook/2026-12-01-mltcp-slope-beyond-4.md): slope 32 interleaved three compatible
      jobs within 10 iterations in 5 of 5 runs (slope 4: 0 of 5) but made the p99 worse than
      slope 4 wherever the jobs could not interleave (partial, circular, stragglers, 4 jobs),
      so 4 stays the default and `mltcp-reno:slope=32` is the choice for compatible jobs.
  idle_gap = 50 ms -> at 10 ms, 15-30% of the demo's iterations were split in two: under
      contention the pause between the two ring steps reached 60 ms, which resets
      bytes_ratio mid-iteration; at 50 ms no iteration was split (compute is 300 ms).
      It must stay below the compute phase, or no iteration boundary is ever seen and F stays 1
      (a job computing 50 ms behaved exactly like its base CC at 50 ms), and above the pauses
      inside an iteration, which grow with contention (three jobs on one link: 10-40% of the
      iterations split at 50 ms). Hence the default is derived from the job
      (`idle_gap_for_compute`): half its compute time, within [1 ms, 1 s].
"""

from __future__ import annotations

from dataclasses import dataclass

# A pause longer than idle_gap ends an iteration only once this fraction of the learned bytes
# per iteration was sent. Why: with three jobs on one link, sockets stalled for more than the
# derived 200 ms gap between the two ring steps of a 2-worker all-reduce (the neighbour's flow
# in a retransmission timeout), and 13-24% more iteration boundaries than iterations were seen
# (bench/reproduce.py telemetry: 12.5 MB halves of 25 MB iterations), each one restarting F at
# its intercept mid-phase. Below 1/2 the halves would pass; 3/4 leaves room for iterations
# whose bytes vary. A rejected pause keeps counting bytes, and the estimate self-corrects
# upward, since only splits are rejected. Compiled in (mltcp_common.h MLTCP_MIN_ITER_FRAC_FP).
MIN_ITERATION_FRACTION = 0.75
DEFAULT_SLOPE = 4.0
DEFAULT_INTERCEPT = 1.0
DEFAULT_IDLE_GAP_S = 0.050   # a spec no job has filled in (the demo's measured value)
MIN_IDLE_GAP_S = 0.001       # below ~1 ms the pauses between ring steps would split iterations
MAX_DERIVED_IDLE_GAP_S = 1.0  # a derived gap needs no more: pauses within an iteration are shorter


def idle_gap_for_compute(compute_s: float) -> float:
    """The idle gap a job gets when its `cc` sets none: half its (shortest) compute phase, so
    every compute phase is seen as an iteration boundary while the pauses inside an iteration
    (a rank waiting for its left neighbour between ring steps: up to ~150 ms measured with three
    jobs on one link) stay below it, within [MIN_IDLE_GAP_S, MAX_DERIVED_IDLE_GAP_S]. A fixed
    50 ms split 10-40% of the iterations of three jobs computing 400 ms, and saw no iteration at
    all of a job computing 50 ms."""
    return min(MAX_DERIVED_IDLE_GAP_S, max(MIN_IDLE_GAP_S, compute_s / 2))


@dataclass(frozen=True)
class Variant:
    name: str  # user-facing name, e.g. "mltcp-reno"
    source: str  # file in mn_harness/cc/bpf/
    prefix: str  # kernel CC name prefix; + 6 hex chars of the parameter hash (<= 15 chars)
    mltcp: bool  # True: F(bytes_ratio) scales growth; False: F == 1 (telemetry only)
    needs_ecn: bool = False  # TCP_CONG_NEEDS_ECN: negotiates ECN itself, needs a marking bottleneck
    default_slope: float = DEFAULT_SLOPE
    default_intercept: float = DEFAULT_INTERCEPT
    default_idle_gap_s: float = DEFAULT_IDLE_GAP_S


BPF_VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("mltcp-reno", "mltcp_reno.bpf.c", "mlreno_", mltcp=True),
        Variant("mltcp-cubic", "mltcp_cubic.bpf.c", "mlcubic_", mltcp=True),
        Variant("mltcp-dctcp", "mltcp_dctcp.bpf.c", "mldctcp_", mltcp=True, needs_ecn=True),
        Variant("dctcp", "mltcp_dctcp.bpf.c", "bdctcp_", mltcp=False, needs_ecn=True,
                default_slope=0.0, default_intercept=1.0),
    )
}

# Congestion controls Linux ships (built in or as tcp_<name> modules); used as-is.
KERNEL_BUILTINS = frozenset({
    "reno", "cubic", "bbr", "bic", "cdg", "highspeed", "htcp", "hybla", "illinois", "lp",
    "nv", "scalable", "vegas", "veno", "westwood", "yeah",
})


def canonical_name(name: str) -> str:
    """Lower-case, '_' accepted for '-' in the mltcp names: 'MLTCP_reno' -> 'mltcp-reno'."""
    low = str(name).strip().lower()
    if low.startswith("mltcp_"):
        low = "mltcp-" + low[len("mltcp_"):]
    return low

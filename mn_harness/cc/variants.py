"""The congestion controls mn-harness knows, and the defaults of the MLTCP variants.

Why a table: the spec parser, the builder and the docs all need the same facts (which
names are BPF programs, which source file, which kernel-name prefix, which defaults).
To add a variant: write mn_harness/cc/bpf/<file>.bpf.c including mltcp_common.h and add a
row here (see docs/cc.md, "Adding your own variant").

The MLTCP variants' defaults (below; why, with the measurements: docs/cc.md, "Parameters and
defaults"): a steep search, slope 32 with intercept 1 and `restart`, that gives itself up where
it stops making the socket's iterations faster (`adapt`), and an idle gap derived from the job.
  idle_gap: half the job's compute time, within [1 ms, 1 s] (`idle_gap_for_compute`). A fixed
      10 ms split 15-30% of the two-job demo's iterations in two (under contention the pause
      between the two ring steps reached 60 ms, which resets bytes_ratio mid-iteration); a
      fixed 50 ms split 10-40% of the iterations of three jobs on one link, and saw no boundary
      at all of a job computing 50 ms (F stayed 1). The gap must stay below the compute phase
      and above the pauses inside an iteration, which grow with contention.
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
# The variants' defaults (docs/cc.md#parameters-and-defaults, measured with bench/reproduce.py:
# docs/notebook/2026-12-05-defaults-by-name-and-cassini.md): a steep search (slope 32, restart)
# while it makes the socket's iterations faster, the base CC once it does not (`adapt`,
# mltcp_adapt.h mltcp_adapt). Slope 32 with restart separated compatible jobs within ~10
# iterations where slope 4 took tens or never; held for a whole run it cost the tail where no
# schedule exists (partial: p99 0.81x of reno's, 0.90x of dctcp's). The end of the search bounds
# that cost in time (by name, partial's sockets ran as reno from iterations 11-20 on), not the
# cost of the first search: over a 50-iteration run the p99 is still slope 32's.
DEFAULT_SLOPE = 32.0
DEFAULT_INTERCEPT = 1.0
DEFAULT_RESTART = True
DEFAULT_ADAPT = True
# The loss-damped search (mltcp_common.h MLTCP_DAMP): while searching, each loss episode of an
# iteration halves F - 1 `damp` times. Off by name: damp 2 brought overload's p99 gain over reno
# from 0.76x to 0.96x but took 3jobs-slack-sync's mean gain (1.05x against 1.11-1.23x, 1 of 7
# runs apart by 10 against 4 of 7): the first search of jobs that can part loses as often as a
# search where none can (docs/notebook/2026-12-05-loss-damped-search.md).
DEFAULT_DAMP = 0
# The damping waits for the first search to stall (mltcp_common.h MLTCP_DAMP_AFTER): a loss damps
# F only in an iteration of the first search that has gone this many iterations without progress,
# and in every iteration of a search a relapse started. 0: every search from its first iteration
# on. Only matters with damp > 0: with damp 2 and 2 here, overload's p99 gain over reno was 0.933x
# (target 0.95x) and 3jobs-slack-sync's mean gain 1.117x, the rule's 1.204x: the first search makes
# progress in its iterations 2-5 wherever it runs (docs/notebook/2026-12-05-relapse-damped-search.md).
DEFAULT_DAMP_AFTER = 0
# The loss signal (mltcp_common.h MLTCP_CALM_BY): a first search whose worst iteration had at
# least 8 loss episodes and whose episodes per iteration did not stay at an eighth of that or
# fewer for two iterations in a row by this iteration ends (no schedule is being found), and a
# new search then needs ADAPT_BACKOFF_MAX slow iterations in a row. 8: in faithful runs every
# socket of 3jobs-slack-sync had its two calm iterations by iteration 8 and none of overload's or
# partial's by iteration 11 (docs/notebook/2026-12-06-faithful-no-schedule-tails.md); by name it
# brought overload's p99 gain over reno from 0.81x to 0.91x and partial's from 0.89x to 0.98x and
# kept 3jobs-slack-sync's gain (docs/notebook/2026-12-06-loss-signal-by-name.md).
DEFAULT_CALM_BY = 8
# The held slope (mltcp_common.h MLTCP_HOLD_SLOPE_FP): once a search ends, F = intercept + hold x
# the iteration's bytes share instead of 1. 0 by name: the socket runs as its base CC.
DEFAULT_HOLD = 0.0
# The adaptive step (compiled in: mltcp_common.h MLTCP_ADAPT_*, mltcp_adapt.h). An iteration's rate is its
# bytes over the time from its first send to its last ACK. Progress: a rate 1/8 over the best
# so far (a phase moving out of an overlap gains more; a separated job's rates stay within
# it). The search ends after 8 iterations without progress: separating four DCTCP jobs started
# together took up to 6 between two steps of progress. A new search starts after 2 iterations
# in a row 1/4 under the usual rate (the base CC's own; relapses drop further; fair sharing
# varies less), with the usual rate as the best so far. A retransmission timeout in an iteration
# of a relapse's search ends that search (not the first search: jobs started together time out
# in their first iterations wherever they run). Each relapse, and each search a timeout ended,
# doubles the number of such iterations the next one needs, up to ADAPT_BACKOFF_MAX. Where no
# schedule exists (`overload`: four reno jobs needing 1.6x the link) reno's swings tripped the
# relapse rule every 2-5 iterations and the sockets searched 70-76% of the time, the searches
# setting every job's p99 (docs/notebook/2026-12-05-no-schedule-tails-and-the-suite.md).
ADAPT_GAIN = 0.125
ADAPT_PATIENCE = 8
ADAPT_DROP = 0.25
ADAPT_BACKOFF_MAX = 64
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
    default_restart: bool = DEFAULT_RESTART
    default_adapt: bool = DEFAULT_ADAPT
    default_damp: int = DEFAULT_DAMP
    default_damp_after: int = DEFAULT_DAMP_AFTER
    default_calm_by: int = DEFAULT_CALM_BY
    default_hold: float = DEFAULT_HOLD


BPF_VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("mltcp-reno", "mltcp_reno.bpf.c", "mlreno_", mltcp=True),
        Variant("mltcp-cubic", "mltcp_cubic.bpf.c", "mlcubic_", mltcp=True),
        Variant("mltcp-dctcp", "mltcp_dctcp.bpf.c", "mldctcp_", mltcp=True, needs_ecn=True),
        Variant("dctcp", "mltcp_dctcp.bpf.c", "bdctcp_", mltcp=False, needs_ecn=True,
                default_slope=0.0, default_intercept=1.0, default_restart=False, default_adapt=False,
                default_calm_by=0),
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

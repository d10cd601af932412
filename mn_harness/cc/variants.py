"""The congestion controls mn-harness knows, and the defaults of the MLTCP variants.

Why a table: the spec parser, the builder and the docs all need the same facts (which
names are BPF programs, which source file, which kernel-name prefix, which defaults).
To add a variant: write mn_harness/cc/bpf/<file>.bpf.c using mltcp_common.h and add a
row here (see docs/cc.md).

Default MLTCP parameters are PROVISIONAL (the paper does not publish its values; the
`bench/interleave` sweep is to confirm or replace them):
  slope = 1.5, intercept = 0.5  -> F grows from 0.5 at the start of an iteration's
      communication to 2.0 at its end: a 4:1 spread of additive increase, i.e. roughly a
      4:1 bandwidth split between a job that just started communicating and one that is
      nearly done, while F averages 1.25 (about as aggressive as the base CC over an
      iteration);
  idle_gap = 10 ms -> longer than gaps between ring all-reduce steps on an emulated
      sub-ms-RTT network, shorter than the compute phases (tens of ms and up) that
      separate iterations.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SLOPE = 1.5
DEFAULT_INTERCEPT = 0.5
DEFAULT_IDLE_GAP_S = 0.010


@dataclass(frozen=True)
class Variant:
    name: str  # user-facing name, e.g. "mltcp-reno"
    source: str  # file in mn_harness/cc/bpf/
    prefix: str  # kernel CC name prefix; + 6 hex chars of the parameter hash (<= 15 chars)
    mltcp: bool  # True: F(bytes_ratio) scales growth; False: F == 1 (telemetry only)
    default_slope: float = DEFAULT_SLOPE
    default_intercept: float = DEFAULT_INTERCEPT
    default_idle_gap_s: float = DEFAULT_IDLE_GAP_S


BPF_VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("mltcp-reno", "mltcp_reno.bpf.c", "mlreno_", mltcp=True),
        Variant("mltcp-cubic", "mltcp_cubic.bpf.c", "mlcubic_", mltcp=True),
        Variant("mltcp-dctcp", "mltcp_dctcp.bpf.c", "mldctcp_", mltcp=True),
        Variant("dctcp", "mltcp_dctcp.bpf.c", "bdctcp_", mltcp=False,
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

"""Compile the BPF congestion controls for this machine's kernel, with a content-hash cache.

Why compile per parameter set (-D constants) instead of patching .rodata before load:
registration goes through `bpftool struct_ops register obj.o`, which loads an object as it
is and offers no way to rewrite its read-only data; compile-time constants also let clang
fold F's arithmetic and keep the verifier's job trivial. Every parameter set therefore
gets its own object and its own kernel CC name (`<prefix><tag>`, tag = 6 hex chars of a
hash of variant + fixed-point parameters), so jobs with different parameters in one
experiment each run their own instance. Compiling takes about a second; the cache (keyed
by sources, flags, clang version and the kernel's BTF) makes repeated runs instant.

vmlinux.h, the tool-chain check and the cache itself are shared with the Linux data plane's
egress program: mn_harness/bpf/toolchain.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from mn_harness.bpf import toolchain
from mn_harness.bpf.errors import BpfError, BpfUnavailable
from mn_harness.bpf.toolchain import ObjectBuilder
from mn_harness.cc.errors import CCError, CCUnavailable
from mn_harness.cc.spec import CCSpec
from mn_harness.cc.variants import (
    ADAPT_BACKOFF_MAX,
    ADAPT_DROP,
    ADAPT_GAIN,
    ADAPT_PATIENCE,
    BPF_VARIANTS,
    MIN_ITERATION_FRACTION,
)

BPF_DIR = Path(__file__).resolve().parent / "bpf"
FP_ONE = 1024  # fixed point used in mltcp_common.h (MLTCP_FP_SHIFT = 10)


def default_cache_dir() -> Path:
    """$MN_HARNESS_CC_CACHE, else /var/cache/mn-harness/cc as root, else ~/.cache/..."""
    return toolchain.default_cache_dir("cc", "MN_HARNESS_CC_CACHE")


class FixedParams(NamedTuple):
    """A BPF variant's parameters as compiled into the program (-DMLTCP_*)."""

    slope_fp: int  # x1024
    intercept_fp: int  # x1024
    gap_ns: int
    restart: int  # 0/1
    adapt: int  # 0/1
    damp: int
    damp_after: int
    calm_by: int
    hold_fp: int  # x1024


def fixed_params(spec: CCSpec) -> FixedParams:
    p = spec.resolved()
    return FixedParams(round(p.slope * FP_ONE), round(p.intercept * FP_ONE), round(p.idle_gap_s * 1e9),
                       int(p.restart), int(p.adapt), p.damp, p.damp_after, p.calm_by,
                       round(p.hold * FP_ONE))


def instance_tag(spec: CCSpec, salt: str = "") -> str:
    slope_fp, intercept_fp, gap_ns, restart, adapt, damp, damp_after, calm_by, hold_fp = fixed_params(spec)
    # damp, damp_after, calm_by and hold 0 add nothing: the instances built before they existed keep their names
    flags = ("|restart" if restart else "") + ("|adapt" if adapt else "") + (f"|damp={damp}" if damp else "") \
        + (f"|damp_after={damp_after}" if damp_after else "") + (f"|calm_by={calm_by}" if calm_by else "") \
        + (f"|hold={hold_fp}" if hold_fp else "")
    text = f"{spec.canonical}|{slope_fp}|{intercept_fp}|{gap_ns}{flags}|{salt}"
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def kernel_name_for(spec: CCSpec, tag: str) -> str:
    name = BPF_VARIANTS[spec.canonical].prefix + tag
    assert len(name) <= 15, name
    return name


def telemetry_map_name(tag: str) -> str:
    return f"mlt_{tag}"


@contextmanager
def _as_cc_errors() -> Iterator[None]:
    """The shared tool chain's errors as this package's (callers catch CCUnavailable/CCError)."""
    try:
        yield
    except BpfUnavailable as exc:
        raise CCUnavailable(str(exc)) from None
    except BpfError as exc:
        raise CCError(str(exc)) from None


def check_toolchain() -> dict[str, str]:
    """Absolute paths of clang and bpftool; CCUnavailable (one line: what is missing and how
    to get it) unless this machine can build and register BPF congestion control."""
    with _as_cc_errors():
        return toolchain.check_toolchain()


class Builder(ObjectBuilder):
    """Builds congestion-control objects into `cache_dir`; safe to share between concurrent runs."""

    def vmlinux_h(self) -> Path:
        with _as_cc_errors():
            return super().vmlinux_h()

    def build(self, spec: CCSpec, tag: str) -> Path:
        """Compile `spec` under kernel name prefix+tag; return the cached object path."""
        variant = BPF_VARIANTS[spec.canonical]
        slope_fp, intercept_fp, gap_ns, restart, adapt, damp, damp_after, calm_by, hold_fp = fixed_params(spec)
        defines = [
            f"-DMLTCP_NAME={kernel_name_for(spec, tag)}",
            f"-DMLTCP_TELEM={telemetry_map_name(tag)}",
            f"-DMLTCP_SCALE={1 if variant.mltcp else 0}",
            f"-DMLTCP_SLOPE_FP={slope_fp}",
            f"-DMLTCP_INTERCEPT_FP={intercept_fp}",
            f"-DMLTCP_IDLE_GAP_NS={gap_ns}ULL",
            f"-DMLTCP_RESTART={restart}",
            f"-DMLTCP_ADAPT={adapt}",
            f"-DMLTCP_DAMP={damp}",
            f"-DMLTCP_DAMP_AFTER={damp_after}",
            f"-DMLTCP_CALM_BY={calm_by}",
            f"-DMLTCP_HOLD_SLOPE_FP={hold_fp}",
            f"-DMLTCP_ADAPT_GAIN_FP={round(ADAPT_GAIN * FP_ONE)}",
            f"-DMLTCP_ADAPT_PATIENCE={ADAPT_PATIENCE}",
            f"-DMLTCP_ADAPT_DROP_FP={round(ADAPT_DROP * FP_ONE)}",
            f"-DMLTCP_ADAPT_BACKOFF_MAX={ADAPT_BACKOFF_MAX}",
            f"-DMLTCP_MIN_ITER_FRAC_FP={round(MIN_ITERATION_FRACTION * FP_ONE)}",
        ]
        with _as_cc_errors():
            obj, compiled = self.compile(BPF_DIR / variant.source, defines,
                                         f"{variant.source.split('.')[0]}-{tag}",
                                         headers=BPF_DIR.glob("*.h"))
        if compiled:
            self.log(f"cc: compiled {variant.source} as {kernel_name_for(spec, tag)} -> {obj}")
        return obj

"""What a job asks for as congestion control: `CCSpec`, parsed from the YAML `cc:` value.

Why here and not in the config package: the set of valid names and parameters belongs to
the CC implementation (mn_harness.cc.variants); the config loader only passes the value
and its YAML path, and gets back a validated, hashable spec or a one-line error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from mn_harness.cc.errors import CCConfigError
from mn_harness.cc.variants import (
    ADAPT_PATIENCE,
    BPF_VARIANTS,
    KERNEL_BUILTINS,
    canonical_name,
    idle_gap_for_compute,
)
from mn_harness.errors import shown
from mn_harness.units import parse_duration

_KEYS = ("name", "slope", "intercept", "idle_gap", "restart", "adapt", "damp", "damp_after", "calm_by", "hold")
_SWITCHES = ("restart", "adapt")  # the mltcp-* variants' on/off parameters
MAX_IDLE_GAP_S = 10.0  # an idle gap is milliseconds; 10 s would be a typo
MAX_DAMP = 8  # F - 1 halved 8 times per loss: below 1/8 of a segment per RTT after one loss
# A search ends when its count of iterations without progress reaches the patience, so
# damp_after = ADAPT_PATIENCE never damps the first search (a relapse's is damped whatever it says)
MAX_DAMP_AFTER = ADAPT_PATIENCE
MAX_CALM_BY = 64  # an iteration of the first search; it rarely lasts past 20
_WHOLE = {"damp": MAX_DAMP, "damp_after": MAX_DAMP_AFTER, "calm_by": MAX_CALM_BY}  # whole numbers, at most


def parse_idle_gap(value, path: str) -> float:
    """Seconds from "5ms", "200us", "1s" or a plain number of seconds; (0, 10 s]."""
    return parse_duration(value, path, allow_zero=False, max_s=MAX_IDLE_GAP_S)


def _flag(value, path: str) -> bool:
    """A YAML boolean, or in the one-string form true/false, on/off, yes/no, 1/0."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, str | int) else None
    if text in ("true", "on", "yes", "1"):
        return True
    if text in ("false", "off", "no", "0"):
        return False
    raise CCConfigError(f"{path}", f"expected true or false, got {value!r}")


def _whole(value, path: str, most: int) -> int:
    """A whole number 0..most (YAML integer, or its digits in the one-string form)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise CCConfigError(f"{path}", f"expected a whole number 0..{most}, got {value!r}")
    text = str(value).strip()
    if not text.isdigit() or not 0 <= int(text) <= most:
        raise CCConfigError(f"{path}", f"expected a whole number 0..{most}, got {value!r}")
    return int(text)


def _number(value, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise CCConfigError(f"{path}", f"expected a number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise CCConfigError(f"{path}", f"expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise CCConfigError(f"{path}", f"expected a finite number, got {value!r}")
    return number


class Resolved(NamedTuple):
    """A BPF variant's parameters with its defaults filled in: what is compiled into the program."""

    slope: float
    intercept: float
    idle_gap_s: float
    restart: bool
    adapt: bool
    damp: int
    damp_after: int
    calm_by: int
    hold: float


@dataclass(frozen=True)
class CCSpec:
    """One job's congestion control. None parameters mean "the variant's default"; a job fills
    in its idle gap with `for_compute` (the default is derived from the job's compute time)."""

    name: str  # "reno", "cubic", "bbr", "mltcp-reno", "mltcp-cubic", "dctcp", "mltcp-dctcp"
    slope: float | None = None
    intercept: float | None = None
    idle_gap_s: float | None = None
    # An MLTCP variant beyond the paper: at each new iteration the window restarts from the
    # initial window (as Linux's slow start after idle does, but only at the iteration
    # boundaries MLTCP sees), so a phase that starts while another ends does not begin with
    # the whole window its last phase ended with (docs/cc.md#restart). None: the variant's default
    restart: bool | None = None
    # The step that adapts: the socket searches (slope, restart) while that makes its iterations
    # faster, and runs as its base CC otherwise (docs/cc.md#the-adaptive-step). None: default
    adapt: bool | None = None
    # The loss-damped search: while searching, each loss episode (fast recovery, a timeout) of an
    # iteration divides F's part above 1 by 2**damp for the rest of it (docs/cc.md#the-adaptive-step).
    # None: the variant's default
    damp: int | None = None
    # The damping waits for the first search to stall: there it applies only in iterations once it
    # has gone damp_after iterations without progress; a relapse's search is damped from its first
    # (docs/cc.md#the-adaptive-step). None: default
    damp_after: int | None = None
    # The loss signal: a first search that has lost and whose losses did not stay at an eighth of
    # its worst iteration's for two iterations in a row by its iteration calm_by ends, and a new
    # search then needs the most slow iterations in a row; 0: off (docs/cc.md#the-adaptive-step).
    # None: the variant's default
    calm_by: int | None = None
    # The held slope: once a search ends, F follows intercept + hold x the iteration's bytes share
    # instead of 1, so jobs that parted keep a gentle pull apart; 0: the base CC
    # (docs/cc.md#the-adaptive-step). None: the variant's default
    hold: float | None = None
    # True when idle_gap_s was derived from the job rather than given: not part of the identity
    # (two jobs with the same resolved parameters share one kernel instance)
    idle_gap_derived: bool = field(default=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "name", canonical_name(self.name))
        self.validate("cc")

    @classmethod
    def from_dict(cls, value, path: str) -> CCSpec:
        """Parse a YAML `cc:` value: a name, a mapping {name, slope, intercept, idle_gap, restart,
        adapt, damp, damp_after, calm_by, hold}, or the same in one string, `name:key=value:...` (e.g.
        `mltcp-reno:slope=8:idle_gap=100ms`), so a command line's comma-separated --cc list and a
        sweep's CC labels can carry parameters."""
        if isinstance(value, str) and ":" in value:
            return cls.from_dict(_inline_mapping(value, path), path)
        if isinstance(value, str):
            return cls(name=_name(value, f"{path}"))
        if not isinstance(value, Mapping):
            raise CCConfigError(f"{path}", f"expected a CC name or a mapping with 'name', got "
                                f"{type(value).__name__}")
        unknown = [k for k in value if k not in _KEYS]
        if unknown:
            raise CCConfigError(f"{path}.{shown(unknown[0])}", f"unknown key (allowed: {', '.join(_KEYS)})")
        if "name" not in value:
            raise CCConfigError(f"{path}.name", "missing (e.g. name: mltcp-reno)")
        if not isinstance(value["name"], str):
            raise CCConfigError(f"{path}.name", f"expected a string, got {value['name']!r}")
        name = _name(value["name"], f"{path}.name")
        slope = _number(value["slope"], f"{path}.slope") if value.get("slope") is not None \
            else None
        intercept = _number(value["intercept"], f"{path}.intercept") \
            if value.get("intercept") is not None else None
        hold = _number(value["hold"], f"{path}.hold") if value.get("hold") is not None else None
        gap = parse_idle_gap(value["idle_gap"], f"{path}.idle_gap") \
            if value.get("idle_gap") is not None else None
        switches = {key: _flag(value[key], f"{path}.{key}") if value.get(key) is not None else None
                    for key in _SWITCHES}
        whole = {key: _whole(value[key], f"{path}.{key}", most) if value.get(key) is not None else None
                 for key, most in _WHOLE.items()}
        # Validate under the caller's YAML path before __post_init__ would, with path "cc".
        spec = cls.__new__(cls)
        for key, key_value in (("name", name), ("slope", slope), ("intercept", intercept),
                               ("idle_gap_s", gap), ("hold", hold), *switches.items(), *whole.items(),
                               ("idle_gap_derived", False)):
            object.__setattr__(spec, key, key_value)
        spec.validate(path)
        return cls(name=name, slope=slope, intercept=intercept, idle_gap_s=gap, restart=switches["restart"],
                   adapt=switches["adapt"], damp=whole["damp"], damp_after=whole["damp_after"],
                   calm_by=whole["calm_by"], hold=hold)

    def validate(self, path: str) -> None:
        """Raise CCConfigError naming `path` if the combination of values is not allowed."""
        name = canonical_name(self.name)
        if name not in BPF_VARIANTS and name not in KERNEL_BUILTINS:
            raise CCConfigError(f"{path}.name", f"unknown congestion control {self.name!r} "
                                f"(known: {', '.join(sorted({*BPF_VARIANTS, *KERNEL_BUILTINS}))})")
        variant = BPF_VARIANTS.get(name)
        if variant is None or not variant.mltcp:
            for key in _SWITCHES:
                if getattr(self, key) is not None:
                    raise CCConfigError(f"{path}.{key}", f"only the mltcp-* variants take {key}, not {name}")
            for key in ("slope", "intercept", "hold", *_WHOLE):
                if getattr(self, key) is not None:
                    raise CCConfigError(f"{path}.{key}", f"only the mltcp-* variants take "
                                        f"{key}, not {name}")
        if variant is None and self.idle_gap_s is not None:
            raise CCConfigError(f"{path}.idle_gap", f"only the BPF variants track iterations, "
                                f"not kernel {name}")
        if variant is None:
            return
        resolved = self.resolved()
        slope, intercept, adapt, hold = resolved.slope, resolved.intercept, resolved.adapt, resolved.hold
        if not -64 <= slope <= 64:
            raise CCConfigError(f"{path}.slope", f"{slope} outside [-64, 64]")
        if not 0 < intercept <= 64:
            raise CCConfigError(f"{path}.intercept", f"{intercept} must be in (0, 64]")
        if slope + intercept <= 0:
            raise CCConfigError(f"{path}.slope", f"slope + intercept must be > 0 so F stays "
                                f"positive over the iteration, got {slope + intercept}")
        if not 0 <= hold <= max(slope, 0):
            raise CCConfigError(f"{path}.hold", f"{hold:g} outside [0, {max(slope, 0):g}]: the held slope is at "
                                "most the search's (slope)")
        if hold and not adapt:
            raise CCConfigError(f"{path}.hold", "only an adaptive search ends (adapt: true); without it the "
                                f"slope ({slope:g}) holds for the whole run")
        for key, most in _WHOLE.items():
            number = getattr(self, key)
            if number is not None and (isinstance(number, bool) or not isinstance(number, int)
                                       or not 0 <= number <= most):
                raise CCConfigError(f"{path}.{key}", f"expected a whole number 0..{most}, got {number!r}")
        if self.idle_gap_s is not None and not 0 < self.idle_gap_s <= 10:
            raise CCConfigError(f"{path}.idle_gap", f"{self.idle_gap_s}s outside (0, 10s]")

    def for_compute(self, compute_s: float) -> CCSpec:
        """This spec for a job idle `compute_s` between iterations (its shortest compute phase,
        less what DDP overlap hides: JobConfig.shortest_idle_s): a BPF variant without an
        explicit idle gap gets idle_gap_for_compute(compute_s)."""
        if not self.is_bpf or self.idle_gap_s is not None:
            return self
        return replace(self, idle_gap_s=idle_gap_for_compute(compute_s), idle_gap_derived=True)

    def idle_gap_warning(self, idle_s: float, path: str) -> str | None:
        """One line when an explicit idle gap is not below the job's idle time between
        iterations (its compute; with DDP overlap only the part no bucket overlaps): then the
        socket is never idle longer than the gap, no iteration boundary is seen and F stays 1."""
        if not self.is_bpf or self.idle_gap_s is None or self.idle_gap_derived:
            return None
        if self.idle_gap_s < idle_s:
            return None
        return (f"{path}.idle_gap: {self.idle_gap_s * 1e3:g} ms is not below the job's idle time "
                f"between iterations ({idle_s * 1e3:g} ms): MLTCP sees no iteration boundary and behaves like "
                f"its base CC (leave idle_gap out to derive it from the job)")

    @property
    def canonical(self) -> str:
        return canonical_name(self.name)

    @property
    def is_bpf(self) -> bool:
        return self.canonical in BPF_VARIANTS

    @property
    def needs_ecn(self) -> bool:
        """True for the DCTCP family: it negotiates ECN by itself and needs CE marks."""
        variant = BPF_VARIANTS.get(self.canonical)
        return variant is not None and variant.needs_ecn

    def resolved(self) -> Resolved:
        """The parameters with the variant's defaults filled in (BPF variants only; the idle gap
        of a spec that no job has filled in is the upper bound DEFAULT_IDLE_GAP_S)."""
        variant = BPF_VARIANTS[self.canonical]
        return Resolved(
            variant.default_slope if self.slope is None else self.slope,
            variant.default_intercept if self.intercept is None else self.intercept,
            variant.default_idle_gap_s if self.idle_gap_s is None else self.idle_gap_s,
            variant.default_restart if self.restart is None else self.restart,
            variant.default_adapt if self.adapt is None else self.adapt,
            variant.default_damp if self.damp is None else self.damp,
            variant.default_damp_after if self.damp_after is None else self.damp_after,
            variant.default_calm_by if self.calm_by is None else self.calm_by,
            variant.default_hold if self.hold is None else self.hold,
        )


def _inline_mapping(text: str, path: str) -> dict[str, str]:
    """`mltcp-reno:slope=8:intercept=1` -> {name: mltcp-reno, slope: "8", intercept: "1"}."""
    name, *pairs = text.split(":")
    mapping = {"name": name.strip()}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise CCConfigError(path, f"expected name:key=value:..., got {text!r} (e.g. "
                                f"mltcp-reno:slope=8:idle_gap=100ms)")
        if key in mapping:
            raise CCConfigError(f"{path}.{key}", f"given twice in {text!r}")
        mapping[key] = value.strip()
    return mapping


def _name(raw: str, path: str) -> str:
    name = canonical_name(raw)
    if name not in BPF_VARIANTS and name not in KERNEL_BUILTINS:
        raise CCConfigError(f"{path}", f"unknown congestion control {raw!r} "
                            f"(known: {', '.join(sorted({*BPF_VARIANTS, *KERNEL_BUILTINS}))})")
    return name

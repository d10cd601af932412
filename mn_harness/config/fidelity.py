"""`run.fidelity`: whether the run checks its own emulation, and the thresholds of its verdict
(mn_harness/fidelity). Why each default is what it is: docs/fidelity.md#thresholds.

    run:
      fidelity:                 # or `fidelity: false`: no monitors, verdict "unchecked"
        link_tolerance: 0.10    # a backlogged gap within 10% of its serialisation time is faithful
        link_within: 0.90       # ... and every link needs at least this share of such gaps
        link_min_gaps: 500      # links with fewer counted gaps are reported, not judged
        host_saturated: 0.05    # at most this share of 100 ms intervals with every core busy
        host_steal: 0.05        # at most this share of the cores' time taken by the VM's host
        compute_overshoot: 2ms  # p99 of how much longer a compute phase slept than asked
        send_lag: 5ms           # p99 over iterations of the longest wait of a send that could go
        clock_error: 0.01       # across servers: a clock known to worse than this share of the
                                #   shortest mean iteration time breaks the clock invariant
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from mn_harness.errors import ConfigError, shown
from mn_harness.units import parse_duration


@dataclass(frozen=True)
class FidelityThresholds:
    enabled: bool = True
    link_tolerance: float = 0.10
    link_within: float = 0.90
    link_min_gaps: int = 500
    host_saturated: float = 0.05
    host_steal: float = 0.05
    compute_overshoot_s: float = 0.002
    send_lag_s: float = 0.005
    clock_error: float = 0.01

    @classmethod
    def from_dict(cls, raw: Any, path: str) -> FidelityThresholds:
        if isinstance(raw, bool):
            return cls(enabled=raw)
        if not isinstance(raw, Mapping):
            raise ConfigError(path, f"expected true, false or a mapping of thresholds, got {raw!r}")
        shares = ("link_tolerance", "link_within", "host_saturated", "host_steal", "clock_error")
        durations = {"compute_overshoot": "compute_overshoot_s", "send_lag": "send_lag_s"}
        allowed = {*shares, "link_min_gaps", *durations}
        for key in raw:
            if key not in allowed:
                raise ConfigError(f"{path}.{shown(key)}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
        values: dict[str, Any] = {}
        for key in shares:
            if key in raw:
                value = raw[key]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                    raise ConfigError(f"{path}.{key}", f"expected a share between 0 and 1, got {value!r}")
                values[key] = float(value)
        if "link_min_gaps" in raw:
            value = raw["link_min_gaps"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{path}.link_min_gaps", f"expected a whole number >= 1, got {value!r}")
            values["link_min_gaps"] = value
        for key, field_name in durations.items():
            if key in raw:
                values[field_name] = parse_duration(raw[key], f"{path}.{key}", max_s=60.0)
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        """As summary.json records them (and config.yaml writes them back)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_yaml(self) -> bool | dict[str, Any]:
        if not self.enabled:
            return False
        default = FidelityThresholds()
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "enabled" or value == getattr(default, f.name):
                continue
            seconds = f.name.endswith("_s")
            out[f.name[:-2] if seconds else f.name] = f"{value * 1000:g}ms" if seconds else value
        return out or True

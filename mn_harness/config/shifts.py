"""`run.shifts`: CASSINI's time shifts as a runnable baseline (mn_harness/jobs/shifts.py).

    run:
      shifts: cassini           # default off; the same as:
      shifts:
        schedule: cassini       # each job of a shared link starts at CASSINI's predicted shift
        drift: 0.1              # re-applied when a job's phase is off by more than this share of its period

CASSINI (NSDI 2024) reaches interleaving by a central scheduler: it computes a time shift for
every job sharing a link, delays the jobs' iterations by those shifts, and re-applies them when a
job drifts. With `schedule: cassini` the harness does the same with the base CC: each job starts
at its start offset plus the shift of CASSINI's prediction (jobs/cassini.py, the joint rotation
of its affinity component), and while the jobs run a scheduler delays the next iteration of every
job whose communication phase drifted from its shift by more than `drift` of its period.
Why 10%: the convergence threshold of the metrics (an overlap of at most 10% counts as apart);
CASSINI's own threshold is not published in what we could read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mn_harness.errors import ConfigError, shown

SCHEDULES = ("off", "cassini")
DEFAULT_DRIFT = 0.10
MIN_DRIFT = 0.01  # below 1% of a period the scheduler would chase the compute jitter of every iteration


@dataclass(frozen=True)
class ShiftSchedule:
    schedule: str = "off"
    drift: float = DEFAULT_DRIFT  # share of a job's period

    @property
    def enabled(self) -> bool:
        return self.schedule != "off"

    @classmethod
    def from_dict(cls, raw: Any, path: str) -> ShiftSchedule:
        if raw is None or raw is False:
            return cls()
        if isinstance(raw, str):
            return cls(schedule=_schedule(raw, path))
        if not isinstance(raw, Mapping):
            raise ConfigError(path, f"expected {' or '.join(SCHEDULES)} or a mapping {{schedule, drift}}, got {raw!r}")
        for key in raw:
            if key not in ("schedule", "drift"):
                raise ConfigError(f"{path}.{shown(key)}", "unknown key (allowed: drift, schedule)")
        if "schedule" not in raw:
            raise ConfigError(f"{path}.schedule", f"missing (one of: {', '.join(SCHEDULES)})")
        drift = raw.get("drift", DEFAULT_DRIFT)
        if isinstance(drift, bool) or not isinstance(drift, int | float) or not MIN_DRIFT <= drift <= 0.5:
            raise ConfigError(f"{path}.drift", f"expected a share of the period between {MIN_DRIFT} and 0.5, "
                              f"got {drift!r}")
        return cls(schedule=_schedule(raw["schedule"], f"{path}.schedule"), drift=float(drift))

    def to_yaml(self) -> str | dict[str, Any]:
        """As config.yaml writes it back (the short form where the drift is the default)."""
        if self.drift == DEFAULT_DRIFT:
            return self.schedule
        return {"schedule": self.schedule, "drift": self.drift}


def _schedule(raw: Any, path: str) -> str:
    if not isinstance(raw, str) or raw.strip().lower() not in SCHEDULES:
        raise ConfigError(path, f"unknown shift schedule {raw!r} (known: {', '.join(SCHEDULES)})")
    return raw.strip().lower()

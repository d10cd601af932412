"""What the benches share, in one place: the checkout's paths (and the package importable from a
checkout without the editable install), the shipped experiment files, the shared machine's
measurement lock and mean ± 95% CI text. The benches read their runs' results through
mn_harness.results.loaders, the report's reader, so a bench counts what the report counts and
reads folders of every summary.json version.

A bench imports it before the package: `import common` finds it because Python puts the
script's own folder, bench/, first on sys.path.

    lock = ChunkedLock(DEFAULT_LOCK, chunk_s=20 * 60)
    with lock.run():           # takes the lock if not held; after the run, releases it when
        run_experiment(...)    # the chunk is over
    lock.release()

The lock is held for chunks of runs of at most `chunk_s` (the machine's rule: at most ~30
minutes at a time), then released for `gap_s` so that a waiting colleague gets it. A bench that
takes it itself must not be wrapped in `flock` on the same file (flock locks per open file: the
inner request would wait for the outer one forever)."""

from __future__ import annotations

import contextlib
import fcntl
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from mn_harness.config.dump import complete_raw  # noqa: E402
from mn_harness.config.overrides import apply_path, parse_value  # noqa: E402
from mn_harness.results.stats import mean_ci95  # noqa: E402

TOPOLOGIES = ROOT / "topologies"
DEFAULT_LOCK = "/tmp/mn-harness-measure.lock"


def with_overrides(raw: dict, overrides: Sequence[str]) -> dict:
    """`raw` with each PATH=VALUE of `overrides` (a bench's --set) applied as `mn-harness compare
    --set` applies them: a path may name an option `raw` leaves at its default."""
    if not overrides:
        return raw
    known = complete_raw(raw)
    for spec in overrides:
        path, _, value = spec.partition("=")
        raw = apply_path(raw, path, parse_value(value), create=True, known=known)
    return raw


def topology(name: str = "dumbbell-2jobs") -> dict:
    """A shipped experiment file (topologies/<name>.yaml) as the raw dict a bench changes."""
    return yaml.safe_load((TOPOLOGIES / f"{name}.yaml").read_text())


def demo_alone(rate: str | None = None, **job) -> dict:
    """The demo dumbbell with its first job alone, `job` its changed fields, every link at
    `rate` when given, on the Linux data plane."""
    raw = topology()
    raw["jobs"] = raw["jobs"][:1]
    raw["jobs"][0].update(job)
    if rate:
        raw["link_defaults"]["bw"] = rate
        raw["links"][2]["bw"] = rate  # the bottleneck s1-s2 gives its own
    raw["run"]["dataplane"] = "linux"
    return raw


class ChunkedLock:
    """The measurement lock, held across runs for chunks of at most `chunk_s`; `path` None or
    empty: no lock."""

    def __init__(self, path: str | None, chunk_s: float = 20 * 60, gap_s: float = 5.0):
        self.path, self.chunk_s, self.gap_s = path, chunk_s, gap_s
        self._fh: IO[str] | None = None
        self._since = 0.0

    @contextlib.contextmanager
    def run(self):
        """Around one run: hold the lock during it; give it up after it if the chunk is over."""
        if self.path and self._fh is None:
            self._fh = open(self.path, "a")  # noqa: SIM115 - held across runs, closed in release()
            fcntl.flock(self._fh, fcntl.LOCK_EX)
            self._since = time.monotonic()
        try:
            yield
        finally:
            if self._fh is not None and time.monotonic() - self._since > self.chunk_s:
                self.release()
                time.sleep(self.gap_s)

    @property
    def held(self) -> bool:
        return self._fh is not None

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def pm(value: float, half: float | None, digits: int = 3, *, scale: float = 1.0, alone: str = "",
       sign: str = " ± ") -> str:
    """"value ± half" (both times `scale`, `digits` decimals); "value" + `alone` without a
    half-width (one repetition)."""
    text = f"{value * scale:.{digits}f}"
    return text + (f"{sign}{half * scale:.{digits}f}" if half is not None else alone)


def mean_ci(values: Sequence[float], digits: int = 3, *, scale: float = 1.0, n: bool = False) -> str:
    """The mean of `values` ± the half-width of its 95% CI (results.stats.mean_ci95); "-" for
    none; with `n`, " (n=<count>)" after it."""
    if not values:
        return "-"
    m, _, half = mean_ci95(list(values))
    return pm(m, half, digits, scale=scale) + (f" (n={len(values)})" if n else "")


def ci_interval(value: float, half: float | None, digits: int = 3, *, scale: float = 1.0) -> str:
    """The 95% CI as "[low, high]" (times `scale`); "(n=1)" without one."""
    if half is None:
        return "(n=1)"
    return f"[{(value - half) * scale:.{digits}f}, {(value + half) * scale:.{digits}f}]"

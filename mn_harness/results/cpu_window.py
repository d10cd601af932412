"""How busy the machine was while the jobs iterated: cpu.csv over the measured iterations only.

summary.json `cpu_load` averages every interval the sampler saw, the network's start, the
connections' ramp-up and the warm-up iterations included; a short run then reads less busy than
its measured iterations were (one 500 Mbit/s job: 0.14 cores per Gbit/s over the whole run
against 0.29 in its iterations). Goodput per busy core needs the cores of the seconds the
goodput was measured in: from the start of the first iteration after the warm-up
(run.warmup) of any job to the end of the last iteration of any job, the cpu.csv intervals
weighted by how much of each lies inside."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mn_harness.results.loaders import load_iterations, load_table
from mn_harness.results.schema import CPU_CSV, ITERATIONS_CSV, IterationRow


@dataclass(frozen=True)
class CpuInterval:
    """One row of cpu.csv: the interval (t_end - length, t_end] in seconds since T0, the share
    of all cores' time not idle in it (steal included) and the share the hypervisor took."""

    t_end: float
    length: float
    busy: float
    steal: float


@dataclass(frozen=True)
class WindowLoad:
    """The time-weighted busy and steal shares of all cores over [start, end]; `covered` is the
    seconds of the window that cpu.csv's intervals cover."""

    start: float
    end: float
    busy: float
    steal: float
    covered: float

    def busy_cores(self, cores: int) -> float:
        """Cores kept busy by this machine's own work: the hypervisor's steal left out."""
        return (self.busy - self.steal) * cores


def _cpu_row(r: dict[str, str]) -> CpuInterval:
    return CpuInterval(float(r["t"]), float(r["interval_s"]), float(r["busy"]), float(r["steal"]))


def load_cpu(path: Path | str) -> list[CpuInterval]:
    """cpu.csv's intervals (malformed rows skipped, as every results reader does)."""
    return load_table(path, _cpu_row)[0]


def iteration_window(rows: Iterable[IterationRow], warmup: int) -> tuple[float, float] | None:
    """[first start, last end] of every job's iterations after the first `warmup`; None when
    there are none."""
    kept = [r for r in rows if r.iteration >= warmup]
    if not kept:
        return None
    return min(r.t_start for r in kept), max(r.t_start + r.iter_time for r in kept)


def window_load(intervals: Sequence[CpuInterval], start: float, end: float) -> WindowLoad | None:
    """The intervals' busy and steal shares over [start, end], each interval weighted by its
    overlap with the window; None when no interval overlaps it."""
    weight = busy = steal = 0.0
    for i in intervals:
        overlap = min(i.t_end, end) - max(i.t_end - i.length, start)
        if overlap > 0:
            weight += overlap
            busy += i.busy * overlap
            steal += i.steal * overlap
    if weight <= 0:
        return None
    return WindowLoad(start, end, busy / weight, steal / weight, weight)


def run_window_load(results_dir: Path | str, warmup: int) -> WindowLoad | None:
    """A results folder's CPU over its measured iterations (iterations.csv and cpu.csv); None
    without either."""
    root = Path(results_dir)
    if not (root / CPU_CSV).exists() or not (root / ITERATIONS_CSV).exists():
        return None
    window = iteration_window(load_iterations(root / ITERATIONS_CSV)[0], warmup)
    return None if window is None else window_load(load_cpu(root / CPU_CSV), *window)

"""`Results`: one run's folder, and its tables as pandas DataFrames (mn_harness.results.load)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from mn_harness.config import Experiment, load_experiment
from mn_harness.results.frames import RunFrames, load
from mn_harness.results.loaders import load_summary
from mn_harness.results.schema import RunSummary


def _frame(name: str, doc: str) -> property:
    """One of the run's DataFrames (results.load: RunFrames) as a property."""
    return property(lambda results: getattr(results.frames, name), doc=doc)


class Results:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Results({str(self.path)!r}, status={self.status!r})"

    @property
    def summary(self) -> RunSummary:
        """summary.json as it is now, typed (results.schema; the report adds `metrics`)."""
        return load_summary(self.path)

    @property
    def status(self) -> str:
        return self.summary.status or "unknown"

    @property
    def experiment(self) -> Experiment:
        """The run's resolved configuration (its config.yaml)."""
        return load_experiment(self.path / "config.yaml")

    @cached_property
    def frames(self) -> RunFrames:
        return load(self.path)

    iterations = _frame("iterations", "One row per job, rank and iteration (iterations.csv) with run, label, "
                                      "cc columns.")
    throughput = _frame("throughput", "Bytes per bin per worker (throughput.csv) with rate_bps.")
    queue = _frame("queue", "The sampled egress queues (queue.csv).")
    metrics = _frame("metrics", "One row per job: iteration statistics, slowdown, overlap, convergence.")

    def report(self, plots: bool = True, window: tuple[float, float] | None = None) -> Path:
        """Metrics into summary.json, plots (PNG + PDF), report.md; returns report.md's path."""
        from mn_harness.ownership import hand_over
        from mn_harness.report.markdown import write_report

        report = write_report(self.path, plots=plots, window=window)
        hand_over(self.path)
        return report

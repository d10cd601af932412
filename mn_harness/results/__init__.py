"""The run's data model: CSV schemas, the workers' rows, summary.json, loaders; `load()` gives
pandas DataFrames of one or many results folders (pandas optional, imported only by load)."""

from mn_harness.results.frames import RunFrames, load

__all__ = ["RunFrames", "load"]

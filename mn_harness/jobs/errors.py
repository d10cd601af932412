"""Job-layer errors, importable without Mininet."""

from mn_harness.errors import RunError


class JobError(RunError):
    """A worker failed or the run timed out; one readable line."""

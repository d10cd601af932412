"""Data-plane errors, importable without Mininet (the CLI catches them without building a
network)."""

from mn_harness.errors import RunError


class DataplaneError(RunError):
    """A data plane is unavailable or failed; the message is one readable line."""

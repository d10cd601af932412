"""Errors of the shared BPF tool chain; each layer may re-raise them as its own kind."""

from mn_harness.errors import RunError, one_line


class BpfError(RunError):
    """Building a BPF object or a bpf(2) call failed; str() is one line."""

    def __init__(self, message: str):
        super().__init__(one_line(message))


class BpfUnavailable(BpfError):
    """This machine cannot build or load BPF programs: the message says what is missing and how
    to get it."""

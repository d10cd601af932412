"""Errors of the congestion-control package.

Why separate classes: the runner reports config mistakes (CCConfigError, a YAML path and
what is wrong) differently from a machine that cannot run a CC (CCUnavailable: what is
missing and how to get it). Every message is ONE line so it reads well in a CLI error.
"""


class CCError(Exception):
    """Base class; str() is a single line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class CCConfigError(CCError, ValueError):
    """A `cc:` entry in the experiment YAML is invalid; the message starts with its path."""


class CCUnavailable(CCError):
    """This machine cannot provide the congestion control (missing tool, BTF, kernel support)."""

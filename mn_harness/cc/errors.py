"""Errors of the congestion-control package.

Why separate classes: a `cc:` entry that is wrong is a config mistake (CCConfigError: a
ConfigError carrying the YAML path, exit 2), while a machine that cannot run a CC is a run
failure (CCUnavailable: what is missing and how to get it, exit 1). Every message is ONE line
so it reads well in a CLI error.
"""

from mn_harness.errors import ConfigError, RunError, one_line


class CCError(RunError):
    """Building, registering or using a congestion control failed; str() is a single line."""

    def __init__(self, message: str):
        super().__init__(one_line(message))


class CCConfigError(ConfigError):
    """A `cc:` entry in the experiment YAML (or `--cc`) is invalid; `path` names it."""


class CCUnavailable(CCError):
    """This machine cannot provide the congestion control (missing tool, BTF, kernel support)."""

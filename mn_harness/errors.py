"""The one root of every error mn-harness raises on purpose.

Two branches, because a user needs to know which kind of problem they have:

* `UsageError` (exit 2): the experiment file or a command-line argument is wrong. The message
  names where (a YAML path, a file, an option) and nothing has been created yet.
* `RunError` (exit 1): the experiment was fine but running it failed — a missing kernel feature,
  a tool that is not installed, a worker that died. The message says what failed and, where it
  helps, what to install.

Every layer subclasses one of the two (config → `ConfigError`; network, data plane, congestion
control, jobs, P4 → their own `RunError` subclasses), so `cli.main` catches `HarnessError` once.
`str()` of every error is one line: the CLI prints it as it is. Anything else that escapes is a
bug and keeps its traceback.

This module imports nothing of the project, so any layer can import it without pulling in
Mininet, grpc or matplotlib."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def one_line(text: object) -> str:
    """`text` with every run of whitespace (newlines included) folded into one space and every
    other control character (an ANSI escape, a NUL) written as its escape sequence, so a message
    is one line and nothing in it can drive the terminal."""
    folded = " ".join(str(text).split())
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in folded)


def shown(value: object) -> str:
    """How a name taken from input (a YAML key, a file name) is echoed in a message: as it is
    when it is plain printable text without spaces, else as its repr(), so a key holding a
    newline cannot print a second line (one that could impersonate a message) and an ANSI
    escape never reaches the terminal."""
    text = str(value)
    if isinstance(value, str) and text and all(c.isprintable() and not c.isspace() for c in text):
        return text
    return repr(value)


class HarnessError(Exception):
    """Base of every error the project raises for a user to read."""

    exit_code = EXIT_FAILED


class UsageError(HarnessError):
    """A bad experiment file or argument (exit 2)."""

    exit_code = EXIT_USAGE


class RunError(HarnessError):
    """A failure while running an experiment that was valid (exit 1)."""

    exit_code = EXIT_FAILED


class ConfigError(UsageError, ValueError):
    """A bad experiment file; `path` is the YAML path of the offending value (or the file name,
    or an option such as `--set`), `detail` what is wrong with it."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.detail = message
        super().__init__(f"{path}: {message}" if path else message)


__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "ConfigError",
           "HarnessError", "RunError", "UsageError", "one_line", "shown"]

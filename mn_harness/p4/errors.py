"""Exceptions of the P4 layer. Every one renders as a single readable line (plus, for compile
and switch-start failures, the tool's own output below it), so the harness can print it as is."""

from __future__ import annotations

from mn_harness.errors import RunError


class P4Error(RunError):
    """Base class of everything raised by mn_harness.p4."""


class ToolchainMissing(P4Error):
    """BMv2 / p4c binaries were not found; the message says what to install."""


class CompileError(P4Error):
    """p4c rejected a program. `output` is p4c's own message, `source` the file compiled."""

    def __init__(self, source: str, output: str, returncode: int | None = None):
        self.source = str(source)
        self.output = output.strip()
        self.returncode = returncode
        first = next((ln for ln in self.output.splitlines() if ln.strip()), "no output")
        head = f"p4c failed on {self.source} (exit {returncode}): {first}"
        super().__init__(head if self.output.count("\n") == 0 else f"{head}\n{self.output}")


class P4InfoLookupError(P4Error, KeyError):
    """A table, action, counter, field or parameter name is not in the P4Info."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class EncodingError(P4Error, ValueError):
    """A value does not fit the bit width P4Info declares, or cannot be parsed."""


class P4RuntimeError(P4Error):
    """A P4Runtime RPC failed. `code` is the gRPC status name, `details` the server's message,
    `update_errors` the per-update errors of a Write as (index, code, message)."""

    def __init__(self, message: str, code: str | None = None, details: str = "",
                 update_errors: list[tuple[int, str, str]] | None = None):
        super().__init__(message)
        self.code = code
        self.details = details
        self.update_errors = update_errors or []


class NotPrimaryError(P4RuntimeError):
    """Arbitration did not make this client the primary (master) controller of the device."""


class SwitchStartError(P4Error):
    """simple_switch_grpc did not come up; the message carries the tail of its log."""


class SwitchCLIError(P4Error):
    """A Thrift runtime command (simple_switch_CLI) failed."""

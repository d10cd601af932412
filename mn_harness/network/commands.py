"""Run commands inside an emulated node's network namespace.

Always argv lists through `mnexec -a <pid>` (never a shell), so no name or value from YAML can
be interpreted by a shell, and failures carry the command's stderr in one line."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from mn_harness.network.errors import NetworkError


def run_in(pid: int | None, argv: Sequence[str], check: bool = True, timeout: float = 20) -> str:
    """Run argv in the namespace of process `pid` (None: the root namespace)."""
    full = list(argv) if pid is None else ["mnexec", "-a", str(pid), *argv]
    try:
        proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NetworkError(f"command timed out after {timeout}s: {' '.join(argv)}") from None
    except FileNotFoundError as exc:
        raise NetworkError(f"command not found: {exc.filename} (install it, see README)") from None
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().replace("\n", " | ")
        raise NetworkError(f"`{' '.join(argv)}` failed: {detail}")
    return proc.stdout

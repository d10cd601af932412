"""Run BMv2's Thrift runtime CLI (`simple_switch_CLI`), the only way to set queue depth/rate.

P4Runtime has no queue configuration, so the harness pipes commands into simple_switch_CLI, one
invocation per batch. The CLI is a Python script needing the `thrift` module and BMv2's own
Python modules (installed under the toolchain's prefix), and it reports errors on stdout with
exit code 0, so its output is scanned for them; every failure is one line (SwitchCLIError, or
ToolchainMissing saying what to install)."""

from __future__ import annotations

import errno
import glob
import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from mn_harness.p4.errors import SwitchCLIError, ToolchainMissing
from mn_harness.p4.toolchain import Toolchain

_CLI_ERROR_MARKERS = ("Error", "Invalid", "Traceback", "Could not connect", "exception",
                      "Exception", "unknown command", "*** Unknown syntax")


def _cli_env(tc: Toolchain) -> dict[str, str]:
    """simple_switch_CLI imports bmv2's Python modules (runtime_CLI, sswitch_runtime, bm_runtime),
    installed under the toolchain's prefix; make them importable."""
    env = dict(os.environ)
    prefix = Path(tc.bin("simple_switch_CLI")).resolve().parent.parent
    extra = [d for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages",
                               "lib/python3/dist-packages")
             for d in glob.glob(str(prefix / pattern))]
    if extra:
        env["PYTHONPATH"] = os.pathsep.join(extra + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _is_python_script(cli: str) -> bool:
    try:
        with open(cli, "rb") as fh:
            return b"python" in fh.readline()
    except OSError:
        return False


def _cli_argv(cli: str) -> list[str]:
    """Run simple_switch_CLI with this interpreter when that has thrift (the venv sees the
    distribution's python3-thrift through --system-site-packages), else as its shebang says."""
    if _is_python_script(cli) and importlib.util.find_spec("thrift") is not None:
        return [sys.executable, cli]
    return [cli]


def cli_has_thrift(cli: str) -> bool:
    """Whether simple_switch_CLI can import thrift as `_cli_argv` would run it: with this
    interpreter, else with its shebang's."""
    if importlib.util.find_spec("thrift") is not None:
        return True
    try:
        with open(cli, "rb") as fh:
            shebang = fh.readline().decode(errors="replace")
    except OSError:
        return False
    argv = shebang[2:].split() if shebang.startswith("#!") else []
    if not argv:
        return False
    try:
        proc = subprocess.run([*argv, "-c", "import thrift"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def run_cli(tc: Toolchain, thrift_port: int, commands: Sequence[str], *, timeout: float = 30.0,
            switch: str = "", exec_prefix: Sequence[str] = ()) -> str:
    """Run `commands` in one simple_switch_CLI invocation against `thrift_port` (inside the
    namespace `exec_prefix` enters, if any); the CLI's output."""
    if "simple_switch_CLI" not in tc.paths:
        raise ToolchainMissing("simple_switch_CLI not found next to simple_switch_grpc: it is "
                               "part of BMv2 (p4lang-bmv2)")
    script = "\n".join(commands) + "\n"
    try:
        proc = subprocess.run([*exec_prefix, *_cli_argv(tc.bin("simple_switch_CLI")), "--thrift-port",
                               str(thrift_port)],
                              input=script, capture_output=True, text=True, timeout=timeout,
                              env=_cli_env(tc))
    except subprocess.TimeoutExpired as exc:
        raise SwitchCLIError(f"simple_switch_CLI on {switch or thrift_port} timed out after "
                             f"{timeout:.0f}s running: {'; '.join(commands)}") from exc
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EACCES):
            raise ToolchainMissing(f"cannot run simple_switch_CLI: {exc}") from exc
        raise
    output = proc.stdout + proc.stderr
    if "No module named 'thrift'" in output:
        raise ToolchainMissing("simple_switch_CLI needs the Python thrift module: apt-get install "
                               "python3-thrift (and a venv made with --system-site-packages)")
    bad = [ln.strip() for ln in output.splitlines()
           if any(m in ln for m in _CLI_ERROR_MARKERS)]
    if proc.returncode != 0 or bad:
        reason = bad[-1] if bad else f"exit {proc.returncode}"
        raise SwitchCLIError(f"simple_switch_CLI on {switch or thrift_port} failed "
                             f"({'; '.join(commands)}): {reason}")
    return output

"""Where a number came from: the software and machine a run used, for summary.json.

A result is only comparable with another when both say what produced them, so every run records
the project version (and the git commit, when the package runs from a checkout), the kernel, the
distribution, the CPU model and count, Python, Mininet, the tools a run used (clang for BPF
congestion controls, BMv2 and p4c for the bmv2 data plane), the command line, and its start and
end as wall-clock times. Every probe is best effort: a missing tool is `null`, never an error,
because a run must not fail for the sake of its label."""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from mn_harness import __version__

PACKAGE_DIR = Path(__file__).resolve().parent


def now() -> str:
    """Local wall-clock time with its UTC offset, to the second (ISO 8601)."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


def _first_line(argv: Sequence[str], timeout: float = 10.0) -> str | None:
    if shutil.which(argv[0]) is None and not Path(argv[0]).is_file():
        return None
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    return lines[0] if lines else None


def git_commit(where: Path = PACKAGE_DIR) -> dict | None:
    """{commit, dirty} of the checkout the package runs from; None for an installed wheel.
    `safe.directory=*`: under sudo the checkout belongs to another user, which git refuses."""
    if shutil.which("git") is None:
        return None
    base = ["git", "-c", "safe.directory=*", "-C", str(where)]
    try:
        top = subprocess.run([*base, "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                             timeout=10)
        if top.returncode != 0 or not (Path(top.stdout.strip()) / "pyproject.toml").is_file():
            return None
        commit = subprocess.run([*base, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        status = subprocess.run([*base, "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if commit.returncode != 0:
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def os_release() -> str | None:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return None


def mininet_version() -> str | None:
    try:
        from mininet.net import VERSION
    except ImportError:
        return None
    return str(VERSION)


def clang_version() -> str | None:
    return _first_line(["clang", "--version"])


def p4_versions() -> dict[str, str | None]:
    from mn_harness.p4.toolchain import find_toolchain

    tc = find_toolchain()
    out: dict[str, str | None] = {}
    for key, tool in (("bmv2", "simple_switch_grpc"), ("p4c", "p4c-bm2-ss")):
        out[key] = _first_line([tc.bin(tool), "--version"]) if tool in tc.paths else None
    return out


def collect(*, bpf_cc: bool, dataplane: str, argv: Sequence[str] | None = None) -> dict:
    """The provenance of a run that started now; `ended_at` is filled in by `finish`."""
    software: dict[str, object] = {
        "mn_harness": __version__,
        "git": git_commit(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "mininet": mininet_version(),
    }
    if bpf_cc:
        software["clang"] = clang_version()
    if dataplane == "bmv2":
        software.update(p4_versions())
    uname = os.uname()
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    return {
        "software": software,
        "machine": {"kernel": uname.release, "kernel_build": uname.version, "arch": uname.machine,
                    "os": os_release(), "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
                    "cpus_usable": usable, "hostname": uname.nodename},
        "command": shlex.join(sys.argv if argv is None else argv),
        "user": os.environ.get("SUDO_USER") or os.environ.get("USER"),
        "started_at": now(),
        "ended_at": None,
    }


def finish(provenance: dict) -> dict:
    provenance["ended_at"] = now()
    return provenance

"""Where a results folder may go: checked before anything is built, so `--out` or
`run.output_dir` pointing at a file, into /proc or onto a read-only file system is one line
naming the option (exit 2), not a traceback after the network is up.

The check needs no root (it runs before the root check, so a user learns about a bad path
without sudo); whether root may create the folder is found out by creating it, still before
the network (make_results_dir, which turns a refusal into the same kind of one line)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from mn_harness.errors import ConfigError, RunError, shown
from mn_harness.ownership import make_dirs, new_stamped_dir

# Kernel file systems that hold no user files (writing there fails or means something else).
PSEUDO_FILESYSTEMS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "bpf",
    "securityfs", "configfs", "pstore", "efivarfs", "mqueue", "hugetlbfs", "fusectl",
    "binfmt_misc", "autofs", "nsfs", "rpc_pipefs",
})


def mount_of(path: str) -> tuple[str, str]:
    """(mount point, file system type) of the mount holding `path` (an existing, resolved path)."""
    best = ("/", "")
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return best
    for line in lines:
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])  # \040: a space
        fstype = line.split(" - ", 1)[1].split()[0]
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, fstype)
    return best


def check_results_root(root: str | Path, where: str) -> None:
    """ConfigError naming `where` (the option or YAML path that gave `root`) unless a folder can
    be made under `root`: it is a directory or can become one, not under a pseudo file system,
    not on a read-only one."""
    text = str(root)
    if not text:
        raise ConfigError(where, "an empty path is not a directory")
    path = Path(os.path.abspath(text))
    existing = path
    while not os.path.lexists(existing):
        existing = existing.parent
    resolved = os.path.realpath(existing)
    fstype = mount_of(resolved)[1]
    if fstype in PSEUDO_FILESYSTEMS:
        raise ConfigError(where, f"{shown(text)} is on the kernel's {fstype} file system, not a "
                                 "place for results")
    if not os.path.isdir(resolved):
        what = "is" if existing == path else f"is under {shown(str(existing))}, which is"
        raise ConfigError(where, f"{shown(text)} {what} not a directory")
    try:
        read_only = bool(os.statvfs(resolved).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        raise ConfigError(where, f"{shown(text)} is on a read-only file system")


class ResultsWriteError(RunError):
    """The results folder could not be written while running (a full or failing disk)."""


def make_results_dir(name: str, root: str | Path) -> Path:
    """A new folder `<root>/<name>-<timestamp>[-N]` with its raw/, absolute (workers run with
    raw/ as their cwd and are handed paths under it); a second run started in the same second
    gets a suffix, never the first one's folder. ConfigError naming the root when it cannot be
    made. Folders it creates belong to the user behind sudo (mn_harness.ownership)."""
    try:
        path = new_stamped_dir(make_dirs(Path(root)).absolute(), name)
        if path is not None:
            (path / "raw").mkdir()
            return path
    except OSError as exc:
        raise ConfigError(shown(str(root)), f"cannot create a results folder there: "
                                            f"{exc.strerror or exc}") from None
    raise ConfigError(shown(str(root)), "cannot create a new results folder there")

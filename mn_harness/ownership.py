"""Results belong to the person who ran `sudo mn-harness ...`, not to root.

Runs need root (namespaces, tc, BPF), so everything they write is root's; under sudo,
`SUDO_UID`/`SUDO_GID` say who asked. Every folder a run or a comparison creates — and the parent
folders it had to create for it, e.g. `results/` itself — is handed to that user, so the folder
can be read, edited, moved or deleted without sudo. Without sudo (or as a plain root login)
nothing changes. Best effort: a file system that refuses chown (NFS root squash) keeps root's
ownership, which the run must survive."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path


def invoking_user() -> tuple[int, int] | None:
    """(uid, gid) of the user behind sudo; None when not running under sudo as root."""
    uid, gid = os.environ.get("SUDO_UID"), os.environ.get("SUDO_GID")
    if os.geteuid() != 0 or not uid or not uid.isdigit():
        return None
    if gid is None or not gid.isdigit():
        gid = str(os.getgid())
    return int(uid), int(gid)


def _chown(path: Path, owner: tuple[int, int]) -> None:
    try:
        os.chown(path, *owner, follow_symlinks=False)
    except OSError:
        pass


def make_dirs(path: Path) -> Path:
    """mkdir -p, handing every folder it creates to the invoking user."""
    path = Path(path)
    missing = []
    for parent in [path, *path.parents]:
        if parent.exists():
            break
        missing.append(parent)
    path.mkdir(parents=True, exist_ok=True)
    owner = invoking_user()
    if owner is not None:
        for created in missing:
            _chown(created, owner)
    return path


def new_stamped_dir(parent: Path, prefix: str) -> Path | None:
    """A new folder `<parent>/<prefix>-<YYYYmmdd-HHMMSS>[-N]`, never an existing one (a second
    one made in the same second gets a suffix); None when 999 of them exist. OSError passes
    through (the callers name what they were making)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for suffix in range(1, 1000):
        path = parent / (f"{prefix}-{stamp}" + (f"-{suffix}" if suffix > 1 else ""))
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    return None


def hand_over(path: Path) -> None:
    """Give `path` and everything under it to the invoking user (nothing without sudo)."""
    owner = invoking_user()
    path = Path(path)
    if owner is None or not path.exists():
        return
    _chown(path, owner)
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                _chown(Path(root) / name, owner)

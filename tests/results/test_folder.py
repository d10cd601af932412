"""Where a results folder may go, checked without root before anything is built."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mn_harness.errors import ConfigError
from mn_harness.results.folder import check_results_root, mount_of


def test_good_places(tmp_path):
    check_results_root(tmp_path, "--out")
    check_results_root(tmp_path / "new" / "deeper", "--out")  # created later


def writable_tmpfs_under_dev() -> str | None:
    """A writable tmpfs mounted below /dev (/dev/shm on most machines), or None: in a container
    or chroot /dev/shm may be a plain folder of /dev's devtmpfs."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point, fstype = fields[4], line.split(" - ", 1)[1].split()[0]
        if point.startswith("/dev/") and fstype == "tmpfs" and os.access(point, os.W_OK):
            return point
    return None


def test_a_tmpfs_under_dev_is_a_good_place():
    """Only the kernel's own file systems are refused, not everything under /dev."""
    point = writable_tmpfs_under_dev()
    if point is None:
        pytest.skip("no writable tmpfs is mounted under /dev here")
    check_results_root(f"{point}/mn-harness-results", "--out")


def a_file(d):
    (d / "f").write_text("x")
    return d / "f"


@pytest.mark.parametrize("make,words", [
    (a_file, "is not a directory"),
    (lambda d: a_file(d) / "sub", "which is not a directory"),
    (lambda d: "/proc/x", "proc file system"),
    (lambda d: "/sys/x", "sysfs file system"),
    (lambda d: "/dev/null", "devtmpfs file system"),
    (lambda d: "", "empty path"),
])
def test_bad_places(tmp_path, make, words):
    with pytest.raises(ConfigError) as info:
        check_results_root(make(tmp_path), "--out")
    assert str(info.value).startswith("--out: ") and words in str(info.value)


def test_mount_of_the_root_and_proc():
    assert mount_of("/proc/self")[1] == "proc" and mount_of("/")[0] == "/"


@pytest.mark.root
def test_a_read_only_file_system_is_refused(tmp_path):
    import subprocess

    mount = tmp_path / "ro"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mount)], check=True)
    try:
        with pytest.raises(ConfigError, match="read-only file system"):
            check_results_root(mount / "results", "run.output_dir")
    finally:
        subprocess.run(["umount", str(mount)], check=True)

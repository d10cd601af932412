"""Where a results folder may go, checked without root before anything is built."""

from __future__ import annotations

import pytest

from mn_harness.errors import ConfigError
from mn_harness.results.folder import check_results_root, mount_of


def test_good_places(tmp_path):
    check_results_root(tmp_path, "--out")
    check_results_root(tmp_path / "new" / "deeper", "--out")  # created later
    check_results_root("/dev/shm/mn-harness-results", "--out")  # a tmpfs under /dev is fine


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

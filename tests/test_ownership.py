import os

import pytest

from mn_harness.ownership import hand_over, invoking_user, make_dirs

pytestmark = pytest.mark.root  # chown


def test_without_sudo_nothing_changes(tmp_path, monkeypatch):
    monkeypatch.delenv("SUDO_UID", raising=False)
    assert invoking_user() is None
    make_dirs(tmp_path / "a" / "b")
    hand_over(tmp_path / "a")
    assert (tmp_path / "a" / "b").stat().st_uid == os.geteuid()


def test_created_parents_and_everything_inside_go_to_the_sudo_user(tmp_path, monkeypatch):
    monkeypatch.setenv("SUDO_UID", "65534")
    monkeypatch.setenv("SUDO_GID", "65533")
    root = make_dirs(tmp_path / "results" / "x")
    (root / "raw").mkdir()
    (root / "raw" / "f.json").write_text("{}")
    os.symlink("/etc/passwd", root / "link")
    hand_over(root)
    for path in (tmp_path / "results", root, root / "raw", root / "raw" / "f.json"):
        assert (path.stat().st_uid, path.stat().st_gid) == (65534, 65533), path
    assert tmp_path.stat().st_uid == os.geteuid()  # existed before: not ours to give away
    assert os.stat("/etc/passwd").st_uid == 0  # a symlink is changed, never its target

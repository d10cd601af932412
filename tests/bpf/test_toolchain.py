"""Where BPF objects are cached (the compiler runs in the CC and egress-program tests)."""

import os
from pathlib import Path

from mn_harness.bpf.toolchain import default_cache_dir, first_error, last_line


def test_cache_dir_from_the_environment_or_by_user(monkeypatch, tmp_path):
    monkeypatch.setenv("MN_X_CACHE", str(tmp_path))
    assert default_cache_dir("egress", "MN_X_CACHE") == tmp_path
    monkeypatch.delenv("MN_X_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    expected = Path("/var/cache") if os.geteuid() == 0 else tmp_path / "xdg"
    assert default_cache_dir("egress", "MN_X_CACHE") == expected / "mn-harness" / "egress"


def test_compiler_messages_in_one_line():
    log = "In file included from x.c:1:\nx.c:5:3: error: use of undeclared identifier 'y'\n1 error generated.\n"
    assert first_error(log) == "x.c:5:3: error: use of undeclared identifier 'y'"
    assert last_line(b"a\n\n  b  \n") == "b"
    assert last_line("") == "(no output)"

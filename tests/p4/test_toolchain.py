"""find_toolchain: P4_TOOLCHAIN prefix first, a one-line reason naming what is missing."""

import stat

from mn_harness.p4 import toolchain as tcmod


def fake_bin(prefix, name):
    path = prefix / "bin" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_prefix_from_env_wins(tmp_path, monkeypatch):
    monkeypatch.setattr(tcmod, "DEFAULT_PREFIXES", ())
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("P4_TOOLCHAIN", str(tmp_path))
    paths = {n: fake_bin(tmp_path, n) for n in tcmod.REQUIRED}
    tc = tcmod.find_toolchain()
    assert tc.complete and tc.paths == paths and tc.bin("p4c-bm2-ss") == paths["p4c-bm2-ss"]


def test_missing_reason_names_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(tcmod, "DEFAULT_PREFIXES", ())
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("P4_TOOLCHAIN", str(tmp_path))
    fake_bin(tmp_path, "simple_switch_grpc")
    tc = tcmod.find_toolchain()
    assert not tc.complete
    assert tc.missing() == ["p4c-bm2-ss", "simple_switch_CLI"]
    reason = tc.missing_reason()
    assert "\n" not in reason
    assert "p4c-bm2-ss, simple_switch_CLI missing" in reason
    assert "p4lang-bmv2 p4lang-p4c p4lang-pi" in reason and "P4_TOOLCHAIN" in reason

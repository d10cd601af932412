"""mn_harness.p4.compile: caching by content and error reporting, with a stand-in shell script
for p4c (the real one runs in the *_bmv2.py tests)."""

from pathlib import Path

import pytest

from mn_harness.p4.compile import compile_p4, content_digest
from mn_harness.p4.errors import CompileError, ToolchainMissing
from mn_harness.p4.toolchain import Toolchain
from tests.p4.fake_tools import script


@pytest.fixture
def fake_p4c(tmp_path):
    calls = tmp_path / "calls"
    p4c = script(tmp_path / "p4c-bm2-ss", f"""
        echo "$@" >> {calls}
        src=""; out=""; info=""
        while [ $# -gt 0 ]; do
          case "$1" in
            -o) out="$2"; shift 2;;
            --p4runtime-files) info="$2"; shift 2;;
            -I|--std|--arch) shift 2;;
            *) src="$1"; shift;;
          esac
        done
        if grep -q SYNTAX_ERROR "$src"; then
          echo "$src(3): [--Werror=legacy] error: SYNTAX_ERROR: syntax error, unexpected" >&2
          exit 1
        fi
        echo '{{"program": "x"}}' > "$out"
        echo 'pkg_info {{ arch: "v1model" }}' > "$info"
        """)
    return Toolchain({"p4c-bm2-ss": p4c}), calls


def ncalls(calls: Path) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_compile_caches_by_content(tmp_path, fake_p4c):
    tc, calls = fake_p4c
    src = tmp_path / "prog.p4"
    src.write_text('#include <core.p4>\n#include "lib.p4"\ncontrol c() { apply {} }\n')
    (tmp_path / "lib.p4").write_text("const bit<8> X = 1;\n")
    cache = tmp_path / "cache"
    first = compile_p4(src, cache, toolchain=tc)
    assert not first.cached and first.json_path.is_file() and first.p4info_path.is_file()
    assert first.p4info_path.name == "prog.p4info.txt"
    again = compile_p4(src, cache, toolchain=tc)
    assert again.cached and again.json_path == first.json_path and ncalls(calls) == 1
    (tmp_path / "lib.p4").write_text("const bit<8> X = 2;\n")   # an include changed
    changed = compile_p4(src, cache, toolchain=tc)
    assert not changed.cached and changed.digest != first.digest and ncalls(calls) == 2
    forced = compile_p4(src, cache, toolchain=tc, force=True)
    assert not forced.cached and ncalls(calls) == 3
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_compile_error_shows_p4c_message_and_file(tmp_path, fake_p4c):
    tc, _ = fake_p4c
    src = tmp_path / "bad.p4"
    src.write_text("SYNTAX_ERROR\n")
    with pytest.raises(CompileError) as exc:
        compile_p4(src, tmp_path / "cache", toolchain=tc)
    err = exc.value
    assert err.source == str(src.resolve())
    assert "syntax error, unexpected" in err.output
    assert str(err).startswith(f"p4c failed on {src.resolve()} (exit 1): ")
    assert not list((tmp_path / "cache").iterdir())


def test_compile_without_p4c_says_what_to_install(tmp_path):
    src = tmp_path / "p.p4"
    src.write_text("")
    with pytest.raises(ToolchainMissing, match="p4lang-p4c"):
        compile_p4(src, tmp_path, toolchain=Toolchain({}))
    with pytest.raises(FileNotFoundError):
        compile_p4(tmp_path / "missing.p4", tmp_path, toolchain=Toolchain({}))


def test_digest_depends_on_args_and_compiler(tmp_path):
    src = tmp_path / "p.p4"
    src.write_text("x")
    a = content_digest(src, "/nonexistent/p4c")
    assert a == content_digest(src, "/nonexistent/p4c")
    assert a != content_digest(src, "/nonexistent/p4c", ["-DFOO"])
    assert a != content_digest(src, "/other/p4c")

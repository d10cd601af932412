"""Compile P4_16 v1model programs for BMv2 with p4c-bm2-ss, cached by content hash.

    prog = compile_p4(find_program("ecn_telemetry"))   # mn_harness.p4.find_program
    prog.json_path, prog.p4info_path     # BMv2 JSON, P4Info in protobuf text format

The cache key covers the program text, every file it includes with `#include "..."` (recursively,
relative to the including file or the -I directories), the extra p4c arguments and the compiler
binary (path, size, mtime), so an unchanged program is never recompiled and a changed include or a
new p4c is. Outputs are written to a temporary directory and renamed into place, so concurrent
compiles of the same program (two experiments at once) never see half-written files.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import CompileError, ToolchainMissing
from .toolchain import Toolchain, find_toolchain

CACHE_ENV = "MN_HARNESS_P4_CACHE"
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_KEY_VERSION = "1"  # bump when the layout of the cache or the p4c invocation changes


@dataclass(frozen=True)
class CompiledProgram:
    source: Path
    json_path: Path
    p4info_path: Path
    digest: str
    cached: bool  # True when the outputs came from the cache

    def read_json(self) -> bytes:
        return self.json_path.read_bytes()

    def read_p4info_text(self) -> str:
        return self.p4info_path.read_text()


def default_cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mn-harness" / "p4"


def _local_includes(source: Path, include_dirs: Sequence[Path]) -> list[Path]:
    """Files pulled in with #include "..." (not <...>: those belong to the compiler), in a
    stable order, each once."""
    seen: dict[Path, None] = {}
    stack = [source]
    while stack:
        current = stack.pop()
        try:
            text = current.read_text(errors="replace")
        except OSError:
            continue
        for name in _INCLUDE_RE.findall(text):
            for base in (current.parent, *include_dirs):
                candidate = (base / name).resolve()
                if candidate.is_file():
                    if candidate not in seen and candidate != source:
                        seen[candidate] = None
                        stack.append(candidate)
                    break
    return sorted(seen)


def content_digest(source: Path, compiler: str, extra_args: Sequence[str] = (),
                   include_dirs: Sequence[Path] = ()) -> str:
    h = hashlib.sha256()
    h.update(f"mn-harness-p4c/{_KEY_VERSION}\0".encode())
    h.update(source.read_bytes())
    for inc in _local_includes(source, include_dirs):
        h.update(b"\0include\0" + inc.name.encode() + b"\0" + inc.read_bytes())
    h.update(b"\0args\0" + "\0".join(extra_args).encode())
    try:
        st = os.stat(compiler)
        h.update(f"\0p4c\0{os.path.realpath(compiler)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    except OSError:
        h.update(f"\0p4c\0{compiler}".encode())
    return h.hexdigest()


def compile_p4(source: str | os.PathLike, cache_dir: str | os.PathLike | None = None, *,
               toolchain: Toolchain | None = None, include_dirs: Sequence[str] = (),
               extra_args: Sequence[str] = (), timeout: float = 600.0,
               force: bool = False) -> CompiledProgram:
    """Compile `source` (or take it from the cache). Raises CompileError with p4c's message and
    the file name, ToolchainMissing when p4c-bm2-ss is not installed, FileNotFoundError when the
    source does not exist."""
    src = Path(source).resolve()
    if not src.is_file():
        raise FileNotFoundError(f"P4 program not found: {src}")
    tc = toolchain or find_toolchain()
    if "p4c-bm2-ss" not in tc.paths:
        raise ToolchainMissing(tc.missing_reason())
    p4c = tc.bin("p4c-bm2-ss")
    incs = [Path(d).resolve() for d in include_dirs]
    args = [a for d in incs for a in ("-I", str(d))] + list(extra_args)
    digest = content_digest(src, p4c, args, incs)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    out_dir = cache / f"{src.stem}-{digest[:16]}"
    json_path = out_dir / f"{src.stem}.json"
    p4info_path = out_dir / f"{src.stem}.p4info.txt"
    if not force and json_path.is_file() and p4info_path.is_file():
        return CompiledProgram(src, json_path, p4info_path, digest, cached=True)

    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{src.stem}-", dir=cache))
    try:
        cmd = [p4c, "--std", "p4-16", "--arch", "v1model", *args,
               "-o", str(tmp / json_path.name),
               "--p4runtime-files", str(tmp / p4info_path.name), str(src)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  cwd=str(src.parent))
        except subprocess.TimeoutExpired as exc:
            raise CompileError(str(src), f"p4c timed out after {timeout:.0f}s", None) from exc
        output = (proc.stderr + ("\n" + proc.stdout if proc.stdout.strip() else "")).strip()
        if proc.returncode != 0:
            raise CompileError(str(src), output or "no output", proc.returncode)
        for produced in (json_path.name, p4info_path.name):
            if not (tmp / produced).is_file():
                raise CompileError(str(src), f"p4c exited 0 but wrote no {produced}\n{output}",
                                   proc.returncode)
        if out_dir.exists() and force:
            shutil.rmtree(out_dir, ignore_errors=True)
        try:
            os.rename(tmp, out_dir)
        except OSError:
            # Another process finished the same compile first: its outputs are identical.
            if not (json_path.is_file() and p4info_path.is_file()):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return CompiledProgram(src, json_path, p4info_path, digest, cached=False)

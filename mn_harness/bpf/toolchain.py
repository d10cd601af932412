"""Compile BPF programs for this machine's kernel, with a content-hash cache.

Shared by the BPF congestion controls (mn_harness/cc/build.py) and the Linux data plane's egress
program (mn_harness/dataplane/egress/build.py). Parameters are compiled in as -D constants
(see cc/build.py for why); every distinct source + parameter set is one cached object, keyed by
the sources, the headers next to them, the flags, the clang version and the kernel's BTF, so a
repeated run compiles nothing.

vmlinux.h is generated here from /sys/kernel/btf/vmlinux, never shipped: struct layouts
(tcp_sock, sk_buff, Qdisc ...) must be the running kernel's."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from mn_harness.bpf.errors import BpfError, BpfUnavailable

BTF_PATH = Path("/sys/kernel/btf/vmlinux")
_ARCH = {"x86_64": "x86", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "powerpc",
         "s390x": "s390", "riscv64": "riscv"}
_LIBBPF_HEADER_DIRS = (Path("/usr/include"), Path("/usr/local/include"))


def default_cache_dir(kind: str, env: str) -> Path:
    """$env, else /var/cache/mn-harness/<kind> as root, else ~/.cache/mn-harness/<kind>."""
    if value := os.environ.get(env):
        return Path(value)
    if os.geteuid() == 0:
        return Path("/var/cache/mn-harness") / kind
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mn-harness" / kind


def check_toolchain() -> dict[str, str]:
    """Absolute paths of clang and bpftool; BpfUnavailable (one line: what is missing and how to
    get it) unless this machine can build BPF programs against its kernel."""
    if not BTF_PATH.exists():
        raise BpfUnavailable(f"kernel BTF missing ({BTF_PATH}): the BPF programs need a kernel "
                             "built with CONFIG_DEBUG_INFO_BTF=y (Ubuntu >= 20.10 and Debian >= 11 "
                             "kernels have it)")
    if shutil.which("clang") is None:
        raise BpfUnavailable("clang not found: apt-get install clang llvm")
    if shutil.which("bpftool") is None:
        raise BpfUnavailable("bpftool not found: apt-get install bpftool (Debian) or "
                             "linux-tools-$(uname -r) (Ubuntu)")
    if not any((d / "bpf" / "bpf_helpers.h").exists() for d in _LIBBPF_HEADER_DIRS):
        raise BpfUnavailable("libbpf headers (bpf/bpf_helpers.h) not found: "
                             "apt-get install libbpf-dev")
    return {"clang": shutil.which("clang") or "clang", "bpftool": shutil.which("bpftool") or "bpftool"}


def arch_define() -> str:
    return f"-D__TARGET_ARCH_{_ARCH.get(platform.machine(), 'x86')}"


def file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class ObjectBuilder:
    """Builds BPF objects into `cache_dir`; safe to share between concurrent runs."""

    def __init__(self, cache_dir: Path, log=print):
        self.cache_dir = Path(cache_dir)
        self.log = log
        self._btf_hash: str | None = None
        self.tools = {"clang": "clang", "bpftool": "bpftool"}  # set from check_toolchain()

    def btf_hash(self) -> str:
        if self._btf_hash is None:
            self._btf_hash = file_hash(BTF_PATH)[:16]
        return self._btf_hash

    def vmlinux_h(self) -> Path:
        out = self.cache_dir / f"btf-{self.btf_hash()}" / "vmlinux.h"
        if not out.exists():
            proc = subprocess.run([self.tools["bpftool"], "btf", "dump", "file", str(BTF_PATH), "format",
                                   "c"], capture_output=True, timeout=120)
            if proc.returncode != 0:
                raise BpfUnavailable("bpftool could not dump kernel BTF to vmlinux.h: "
                                     + last_line(proc.stderr))
            atomic_write(out, proc.stdout)
        return out

    def compile(self, source: Path, defines: Sequence[str], stem: str,
                headers: Iterable[Path] = ()) -> tuple[Path, bool]:
        """Compile `source` with `defines` (-D... strings); returns (object path, True when it was
        compiled now rather than found in the cache). `headers` are the local headers it
        includes (part of the cache key)."""
        vmlinux = self.vmlinux_h()
        flags = [*defines, arch_define()]
        key = hashlib.sha256()
        for src in sorted(set(headers)) + [source]:
            key.update(src.name.encode() + b"\0" + src.read_bytes())
        key.update("\0".join(flags).encode())
        key.update(self.btf_hash().encode())
        key.update(clang_version(self.tools["clang"]).encode())
        obj = self.cache_dir / "obj" / f"{stem}-{key.hexdigest()[:16]}.o"
        if obj.exists():
            return obj, False
        obj.parent.mkdir(parents=True, exist_ok=True)
        tmp = obj.with_name(f".tmp-{os.getpid()}-{obj.name}")
        cmd = [self.tools["clang"], "-O2", "-g", "-target", "bpf", "-Wall", "-Wno-unused-function",
               f"-I{vmlinux.parent}", f"-I{source.parent}", *flags, "-c", str(source), "-o", str(tmp)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            log_path = obj.with_suffix(".log")
            log_path.write_text(" ".join(cmd) + "\n" + proc.stderr)
            tmp.unlink(missing_ok=True)
            raise BpfError(f"compiling {source.name} failed: {first_error(proc.stderr)} "
                           f"(full log: {log_path})")
        os.replace(tmp, obj)
        return obj, True


_CLANG_VERSION: str | None = None


def clang_version(clang: str) -> str:
    global _CLANG_VERSION
    if _CLANG_VERSION is None:
        proc = subprocess.run([clang, "--version"], capture_output=True, text=True, timeout=30)
        _CLANG_VERSION = proc.stdout.splitlines()[0] if proc.stdout else "unknown"
    return _CLANG_VERSION


def last_line(text: bytes | str) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def first_error(text: str) -> str:
    for line in text.splitlines():
        if "error:" in line:
            return line.strip()
    return last_line(text)

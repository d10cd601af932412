"""Compile the BPF congestion controls for this machine's kernel, with a content-hash cache.

Why compile per parameter set (-D constants) instead of patching .rodata before load:
registration goes through `bpftool struct_ops register obj.o`, which loads an object as it
is and offers no way to rewrite its read-only data; compile-time constants also let clang
fold F's arithmetic and keep the verifier's job trivial. Every parameter set therefore
gets its own object and its own kernel CC name (`<prefix><tag>`, tag = 6 hex chars of a
hash of variant + fixed-point parameters), so jobs with different parameters in one
experiment each run their own instance. Compiling takes about a second; the cache (keyed
by sources, flags, clang version and the kernel's BTF) makes repeated runs instant.

vmlinux.h is generated here from /sys/kernel/btf/vmlinux, never shipped: struct layouts
(tcp_sock, icsk_ca_priv, tcp_congestion_ops) must be the running kernel's.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from mn_harness.cc.errors import CCError, CCUnavailable
from mn_harness.cc.spec import CCSpec
from mn_harness.cc.variants import BPF_VARIANTS

BPF_DIR = Path(__file__).resolve().parent / "bpf"
BTF_PATH = Path("/sys/kernel/btf/vmlinux")
FP_ONE = 1024  # fixed point used in mltcp_common.h (MLTCP_FP_SHIFT = 10)
_ARCH = {"x86_64": "x86", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "powerpc",
         "s390x": "s390", "riscv64": "riscv"}
_LIBBPF_HEADER_DIRS = (Path("/usr/include"), Path("/usr/local/include"))


def default_cache_dir() -> Path:
    """$MN_HARNESS_CC_CACHE, else /var/cache/mn-harness/cc as root, else ~/.cache/..."""
    if env := os.environ.get("MN_HARNESS_CC_CACHE"):
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/cache/mn-harness/cc")
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mn-harness" / "cc"


def fixed_params(spec: CCSpec) -> tuple[int, int, int]:
    """(slope x1024, intercept x1024, idle gap in ns) as compiled into the program."""
    slope, intercept, gap = spec.resolved()
    return round(slope * FP_ONE), round(intercept * FP_ONE), round(gap * 1e9)


def instance_tag(spec: CCSpec, salt: str = "") -> str:
    slope_fp, intercept_fp, gap_ns = fixed_params(spec)
    text = f"{spec.canonical}|{slope_fp}|{intercept_fp}|{gap_ns}|{salt}"
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def kernel_name_for(spec: CCSpec, tag: str) -> str:
    name = BPF_VARIANTS[spec.canonical].prefix + tag
    assert len(name) <= 15, name
    return name


def telemetry_map_name(tag: str) -> str:
    return f"mlt_{tag}"


def check_toolchain() -> dict[str, str]:
    """Absolute paths of clang and bpftool; CCUnavailable (one line: what is missing and how
    to get it) unless this machine can build and register BPF congestion control."""
    if not BTF_PATH.exists():
        raise CCUnavailable(f"kernel BTF missing ({BTF_PATH}): BPF congestion control needs a "
                            "kernel built with CONFIG_DEBUG_INFO_BTF=y (Ubuntu >= 20.10 and "
                            "Debian >= 11 kernels have it)")
    if shutil.which("clang") is None:
        raise CCUnavailable("clang not found: apt-get install clang llvm")
    if shutil.which("bpftool") is None:
        raise CCUnavailable("bpftool not found: apt-get install bpftool (Debian) or "
                            "linux-tools-$(uname -r) (Ubuntu)")
    if not any((d / "bpf" / "bpf_helpers.h").exists() for d in _LIBBPF_HEADER_DIRS):
        raise CCUnavailable("libbpf headers (bpf/bpf_helpers.h) not found: "
                            "apt-get install libbpf-dev")
    return {"clang": shutil.which("clang") or "clang", "bpftool": shutil.which("bpftool") or "bpftool"}


def _file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class Builder:
    """Builds objects into `cache_dir`; safe to share between concurrent runs."""

    def __init__(self, cache_dir: Path, log=print):
        self.cache_dir = Path(cache_dir)
        self.log = log
        self._btf_hash: str | None = None
        self.tools = {"clang": "clang", "bpftool": "bpftool"}  # set from check_toolchain()

    def btf_hash(self) -> str:
        if self._btf_hash is None:
            self._btf_hash = _file_hash(BTF_PATH)[:16]
        return self._btf_hash

    def vmlinux_h(self) -> Path:
        out = self.cache_dir / f"btf-{self.btf_hash()}" / "vmlinux.h"
        if not out.exists():
            proc = subprocess.run([self.tools["bpftool"], "btf", "dump", "file", str(BTF_PATH), "format",
                                   "c"], capture_output=True, timeout=120)
            if proc.returncode != 0:
                raise CCUnavailable("bpftool could not dump kernel BTF to vmlinux.h: "
                                    + _last_line(proc.stderr))
            _atomic_write(out, proc.stdout)
        return out

    def build(self, spec: CCSpec, tag: str) -> Path:
        """Compile `spec` under kernel name prefix+tag; return the cached object path."""
        variant = BPF_VARIANTS[spec.canonical]
        slope_fp, intercept_fp, gap_ns = fixed_params(spec)
        vmlinux = self.vmlinux_h()
        defines = [
            f"-DMLTCP_NAME={kernel_name_for(spec, tag)}",
            f"-DMLTCP_TELEM={telemetry_map_name(tag)}",
            f"-DMLTCP_SCALE={1 if variant.mltcp else 0}",
            f"-DMLTCP_SLOPE_FP={slope_fp}",
            f"-DMLTCP_INTERCEPT_FP={intercept_fp}",
            f"-DMLTCP_IDLE_GAP_NS={gap_ns}ULL",
            f"-D__TARGET_ARCH_{_ARCH.get(platform.machine(), 'x86')}",
        ]
        key = hashlib.sha256()
        for src in sorted(BPF_DIR.glob("*.h")) + [BPF_DIR / variant.source]:
            key.update(src.name.encode() + b"\0" + src.read_bytes())
        key.update("\0".join(defines).encode())
        key.update(self.btf_hash().encode())
        key.update(_clang_version(self.tools["clang"]).encode())
        obj = self.cache_dir / "obj" / f"{variant.source.split('.')[0]}-{tag}-" \
            f"{key.hexdigest()[:16]}.o"
        if obj.exists():
            return obj
        obj.parent.mkdir(parents=True, exist_ok=True)
        tmp = obj.with_name(f".tmp-{os.getpid()}-{obj.name}")
        cmd = [self.tools["clang"], "-O2", "-g", "-target", "bpf", "-Wall", "-Wno-unused-function",
               f"-I{vmlinux.parent}", f"-I{BPF_DIR}", *defines, "-c",
               str(BPF_DIR / variant.source), "-o", str(tmp)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            log_path = obj.with_suffix(".log")
            log_path.write_text(" ".join(cmd) + "\n" + proc.stderr)
            tmp.unlink(missing_ok=True)
            raise CCError(f"compiling {variant.source} failed: "
                          f"{_first_error(proc.stderr)} (full log: {log_path})")
        os.replace(tmp, obj)
        self.log(f"cc: compiled {variant.source} as {kernel_name_for(spec, tag)} -> {obj}")
        return obj


_CLANG_VERSION: str | None = None


def _clang_version(clang: str) -> str:
    global _CLANG_VERSION
    if _CLANG_VERSION is None:
        proc = subprocess.run([clang, "--version"], capture_output=True, text=True, timeout=30)
        _CLANG_VERSION = proc.stdout.splitlines()[0] if proc.stdout else "unknown"
    return _CLANG_VERSION


def _last_line(text: bytes | str) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def _first_error(text: str) -> str:
    for line in text.splitlines():
        if "error:" in line:
            return line.strip()
    return _last_line(text)

"""The few bpf(2) commands the harness uses at run time, through ctypes (no libbpf binding).

Why not bpftool: the queue sampler reads every monitored port ~100 times a second; a bpftool
process per read would cost milliseconds and a fork each, a map lookup through the syscall costs
microseconds. Why not pinning: a program attached by `tc filter ... obj` lives as long as its
interface (i.e. its namespace), and its maps as long as the program or an open fd; reaching them
by id needs no BPF file system, so nothing is left in the root namespace to clean up.

Only stable UAPI layouts are used (union bpf_attr, the first fields of bpf_prog_info and
bpf_map_info)."""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from dataclasses import dataclass
from pathlib import Path

from mn_harness.bpf.errors import BpfError

_SYSCALL_NR = {"x86_64": 321, "aarch64": 280, "armv7l": 386, "ppc64le": 361, "s390x": 351,
               "riscv64": 280}
BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_UPDATE_ELEM = 2
BPF_PROG_GET_FD_BY_ID = 13
BPF_MAP_GET_FD_BY_ID = 14
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_MAP_TYPE_PERCPU_ARRAY = 6
BPF_MAP_TYPE_PERCPU_HASH = 5
_PERCPU_TYPES = {BPF_MAP_TYPE_PERCPU_HASH, BPF_MAP_TYPE_PERCPU_ARRAY, 10, 15}  # + LRU_PERCPU, CGROUP
_ATTR_SIZE = 128

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


_NR = _SYSCALL_NR.get(platform.machine())
_NR_ARG = ctypes.c_long(_NR or -1)
_SIZE_ARG = ctypes.c_uint(_ATTR_SIZE)


def bpf(cmd: int, attr: ctypes.Array) -> int:
    """bpf(cmd, attr, sizeof attr); BpfError with errno's text on failure."""
    if _NR is None:
        raise BpfError(f"bpf(2) syscall number unknown for {platform.machine()}")
    ret = _libc.syscall(_NR_ARG, ctypes.c_int(cmd), attr, _SIZE_ARG)
    if ret < 0:
        err = ctypes.get_errno()
        raise BpfError(f"bpf command {cmd} failed: {os.strerror(err)}")
    return int(ret)


def _attr(fmt: str, *values) -> ctypes.Array:
    buf = ctypes.create_string_buffer(_ATTR_SIZE)
    struct.pack_into(fmt, buf, 0, *values)
    return buf


def possible_cpus(path: Path = Path("/sys/devices/system/cpu/possible")) -> int:
    """How many values a per-CPU map holds: the kernel's possible CPUs (e.g. "0-1" -> 2)."""
    return cpu_count(path.read_text())


def cpu_count(ranges: str) -> int:
    highest = -1
    for part in ranges.strip().split(","):
        if part:
            highest = max(highest, int(part.split("-")[-1]))
    return highest + 1


@dataclass(frozen=True)
class MapInfo:
    id: int
    type: int
    key_size: int
    value_size: int
    max_entries: int
    name: str


def _info(fd: int, size: int, extra: tuple[int, int] | None = None) -> bytes:
    """bpf_obj_get_info_by_fd into a zeroed buffer; `extra` = (count, address) for a program:
    how many map ids to return and where (bpf_prog_info.nr_map_ids / map_ids)."""
    info = ctypes.create_string_buffer(size)
    if extra is not None:
        count, pointer = extra
        struct.pack_into("<IQ", info, 52, count, pointer)  # nr_map_ids, map_ids
    bpf(BPF_OBJ_GET_INFO_BY_FD, _attr("<IIQ", fd, size, ctypes.addressof(info)))
    return info.raw


def _name(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode(errors="replace")


def prog_map_ids(prog_id: int) -> tuple[str, list[int]]:
    """(program name, ids of the maps it uses) of a loaded program."""
    fd = bpf(BPF_PROG_GET_FD_BY_ID, _attr("<I", prog_id))
    try:
        first = _info(fd, 96)
        name = _name(first[64:80])
        (count,) = struct.unpack_from("<I", first, 52)
        ids = (ctypes.c_uint32 * max(count, 1))()
        second = _info(fd, 96, (count, ctypes.addressof(ids)))
        (count,) = struct.unpack_from("<I", second, 52)
        return name, list(ids[:count])
    finally:
        os.close(fd)


class BpfMap:
    """An open map (by id); lookups and updates of fixed-size keys and values."""

    def __init__(self, map_id: int):
        self._open(bpf(BPF_MAP_GET_FD_BY_ID, _attr("<I", map_id)))

    @classmethod
    def from_fd(cls, fd: int) -> BpfMap:
        """The map behind an fd this process holds (closed by close())."""
        self = cls.__new__(cls)
        self._open(fd)
        return self

    def _open(self, fd: int) -> None:
        self.fd = fd
        raw = _info(self.fd, 64)
        typ, mid, key_size, value_size, max_entries = struct.unpack_from("<IIIII", raw, 0)
        self.info = MapInfo(mid, typ, key_size, value_size, max_entries, _name(raw[24:40]))
        percpu = typ in _PERCPU_TYPES
        self.ncpus = possible_cpus() if percpu else 1
        # the kernel hands out per-CPU values 8-byte aligned, one after the other
        self.stride = (value_size + 7) // 8 * 8 if percpu else value_size
        self._value = ctypes.create_string_buffer(self.stride * self.ncpus)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> BpfMap:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def lookup(self, key: bytes) -> bytes | None:
        """The value (per-CPU maps: every CPU's value, each `stride` bytes); None if absent."""
        kbuf = ctypes.create_string_buffer(key, len(key))
        try:
            bpf(BPF_MAP_LOOKUP_ELEM, _attr("<I4xQQQ", self.fd, ctypes.addressof(kbuf),
                                           ctypes.addressof(self._value), 0))
        except BpfError as exc:
            if "No such file" in str(exc):
                return None
            raise
        return self._value.raw

    def update(self, key: bytes, value: bytes) -> None:
        kbuf = ctypes.create_string_buffer(key, len(key))
        vbuf = ctypes.create_string_buffer(value, len(value))
        bpf(BPF_MAP_UPDATE_ELEM, _attr("<I4xQQQ", self.fd, ctypes.addressof(kbuf),
                                       ctypes.addressof(vbuf), 0))

    def reader(self, key: bytes):
        """A function returning the value at `key` (raw, as `lookup`), its buffers and syscall
        arguments prepared once: for reads ~100 times a second."""
        kbuf = ctypes.create_string_buffer(key, len(key))
        attr = _attr("<I4xQQQ", self.fd, ctypes.addressof(kbuf), ctypes.addressof(self._value), 0)

        def read() -> bytes:
            bpf(BPF_MAP_LOOKUP_ELEM, attr)
            _ = kbuf  # kept alive with the closure
            return self._value.raw
        return read

    def writer(self, key: bytes, value_size: int):
        """A function writing a `value_size`-byte value at `key`, buffers prepared once."""
        kbuf = ctypes.create_string_buffer(key, len(key))
        vbuf = ctypes.create_string_buffer(value_size)
        attr = _attr("<I4xQQQ", self.fd, ctypes.addressof(kbuf), ctypes.addressof(vbuf), 0)

        def write(value: bytes) -> None:
            ctypes.memmove(vbuf, value, value_size)
            bpf(BPF_MAP_UPDATE_ELEM, attr)
            _ = kbuf
        return write


BPF_OBJ_GET = 7
BPF_PROG_TEST_RUN = 10
BPF_RAW_TRACEPOINT_OPEN = 17


def obj_get(path: str) -> int:
    """An fd of the program or map pinned at `path` (a BPF file system, possibly another mount
    namespace's, reached through /proc/<pid>/root)."""
    name = ctypes.create_string_buffer(path.encode())
    fd = bpf(BPF_OBJ_GET, _attr("<QII", ctypes.addressof(name), 0, 0))
    return fd


def prog_id(fd: int) -> int:
    """The kernel's id of the program behind `fd` (bpf_prog_info.id)."""
    return int(struct.unpack_from("<I", _info(fd, 96), 4)[0])


def raw_tracepoint_open(prog_fd: int) -> int:
    """Attach a BTF-typed tracing program (tp_btf) to the tracepoint it was loaded for; the
    attachment lasts as long as the returned fd (closing it, or this process ending, detaches)."""
    return bpf(BPF_RAW_TRACEPOINT_OPEN, _attr("<QI", 0, prog_fd))


def prog_test_run(prog_fd: int, ctx: bytes) -> int:
    """Run a program once on `ctx` (BPF_PROG_TEST_RUN, e.g. a syscall program); its return value."""
    buf = ctypes.create_string_buffer(ctx, len(ctx))
    attr = _attr("<IIIIQQIIIIQQ", prog_fd, 0, 0, 0, 0, 0, 0, 0, len(ctx), 0, ctypes.addressof(buf), 0)
    bpf(BPF_PROG_TEST_RUN, attr)
    return int(struct.unpack_from("<I", attr, 4)[0])


def prog_run_stats(fd: int) -> tuple[int, int]:
    """(run_time_ns, run_cnt) of the program behind `fd`: the kernel's own account of the time
    it ran, kept only while kernel.bpf_stats_enabled is 1 (else both stay 0)."""
    raw = _info(fd, 216)
    run_time_ns, run_cnt = struct.unpack_from("<QQ", raw, 192)
    return int(run_time_ns), int(run_cnt)

"""Registers the congestion controls an experiment needs and removes them afterwards.

Why a context manager owning every registration: a BPF struct_ops congestion control stays
registered in the kernel after the process that loaded it exits, so a crashed or failed
experiment would leave `mlreno_...` entries behind. The manager unregisters everything it
registered in close() (idempotent, also called by __exit__ on errors and by prepare() when
any step fails), and registered() lets the session record each name with its struct_ops map id
so `mn-harness clean` can call release_struct_ops() after a hard crash.

Unregistered is not yet gone: the kernel frees a struct_ops map only when the last socket that
uses the congestion control has been destroyed, and sockets orphaned by a killed worker keep
retransmitting when the path they used has gone (the map stayed 1-2 minutes after a SIGKILLed
run in one measurement on the 2-core Debian 12 VM, kernel 6.18). So
release_struct_ops() unregisters and then waits until the map itself is freed, and fails in
one line when it is not (the session then keeps the state file; `clean` tries again). The map id
is the exact identity: a name may be registered again by another run once ours is unregistered.

Kernel built-ins (reno, cubic, bbr, ...) are only checked (modprobe tcp_<name> if needed).
"""

from __future__ import annotations

import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mn_harness.cc.build import (
    Builder,
    check_toolchain,
    default_cache_dir,
    fixed_params,
    instance_tag,
    kernel_name_for,
    telemetry_map_name,
)
from mn_harness.cc.errors import CCError, CCUnavailable
from mn_harness.cc.spec import CCSpec

AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
STRUCT_OPS_IN_USE = "BPF_STRUCT_OPS_STATE_INUSE"  # registered (TOBEFREE: unregistered, still held)
FREE_WAIT_S = 15.0  # how long release_struct_ops waits for the kernel to free an unregistered map
_NAME_RE = re.compile(r"^[A-Za-z0-9_]{1,15}$")
_KEY = struct.Struct("<IIHHI")  # struct mltcp_key
_ROW = struct.Struct("<QQQQQIIIIII")  # struct mltcp_row


def available_congestion_controls() -> list[str]:
    try:
        return AVAILABLE.read_text().split()
    except OSError:
        return []


def _bpftool(*args: str, exe: str | None = None,
             timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([exe or "bpftool", *args], capture_output=True, text=True,
                              timeout=timeout)
    except FileNotFoundError:
        raise CCUnavailable("bpftool not found: apt-get install bpftool (Debian) or "
                            "linux-tools-$(uname -r) (Ubuntu)") from None


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "rror" in ln or "failed" in ln.lower()]
    return (errors or lines or ["(no output)"])[-1]


def unregister_by_name(name: str, *, bpftool: str | None = None) -> None:
    """Unregister the BPF congestion control `name` if registered (for `mn-harness clean`).
    `bpftool`: path of the bpftool that registered it (default: the one on PATH)."""
    if not _NAME_RE.match(name):
        raise CCError(f"not a congestion control name: {name!r}")
    if name not in available_congestion_controls():
        return
    proc = _bpftool("struct_ops", "unregister", "name", name, exe=bpftool)
    if name in available_congestion_controls():
        raise CCError(f"could not unregister {name}: {_one_line(proc.stderr + proc.stdout)}")


def struct_ops_maps(*, bpftool: str | None = None) -> dict[int, str]:
    """Every struct_ops map the kernel holds, registered or waiting to be freed: id -> name."""
    proc = _bpftool("-j", "struct_ops", "list", exe=bpftool, timeout=30)
    if proc.returncode != 0:
        raise CCError(f"bpftool struct_ops list failed: {_one_line(proc.stderr + proc.stdout)}")
    try:
        return {int(e["id"]): str(e.get("name", "")) for e in json.loads(proc.stdout or "[]")}
    except (ValueError, KeyError, TypeError) as exc:
        raise CCError(f"bpftool struct_ops list: unexpected output ({exc})") from None


def struct_ops_state(map_id: int, *, bpftool: str | None = None) -> str | None:
    """The kernel's state of struct_ops map `map_id` (STRUCT_OPS_IN_USE while registered), None
    when there is no such map any more."""
    proc = _bpftool("-j", "struct_ops", "dump", "id", str(map_id), exe=bpftool, timeout=30)
    if proc.returncode != 0:
        return None
    text = (proc.stdout or "").strip() or "[]"
    try:  # bpftool prints the map's objects one after the other, comma-separated
        for entry in json.loads(text if text.startswith("[") else f"[{text}]"):
            for key, value in entry.items():
                if key.startswith("bpf_struct_ops_") and isinstance(value, dict):
                    return str(value.get("common", {}).get("state", "unknown"))
    except (ValueError, AttributeError):
        pass
    return "unknown"


def release_struct_ops(name: str, *, bpftool: str | None = None, map_id: int = 0,
                       wait_s: float = FREE_WAIT_S) -> None:
    """Unregister BPF congestion control `name` (struct_ops map `map_id` when known: only that
    one) and wait until the kernel has freed the map; CCError when it is still held."""
    if not _NAME_RE.match(name):
        raise CCError(f"not a congestion control name: {name!r}")
    if not map_id:
        unregister_by_name(name, bpftool=bpftool)
        return
    if struct_ops_state(map_id, bpftool=bpftool) == STRUCT_OPS_IN_USE:
        proc = _bpftool("struct_ops", "unregister", "id", str(map_id), exe=bpftool)
        if struct_ops_state(map_id, bpftool=bpftool) == STRUCT_OPS_IN_USE:
            raise CCError(f"could not unregister {name}: {_one_line(proc.stderr + proc.stdout)}")
    deadline = time.monotonic() + wait_s
    while struct_ops_maps(bpftool=bpftool).get(map_id) == name:
        if time.monotonic() > deadline:
            raise CCError(f"{name} is unregistered but the kernel still holds its struct_ops map "
                          f"(id {map_id}: sockets of a closing namespace use it); run "
                          "`mn-harness clean` again in a few minutes")
        time.sleep(0.1)


@dataclass
class _Instance:
    spec: CCSpec
    kernel_name: str
    telemetry_map: str | None  # None for kernel built-ins
    params: dict = field(default_factory=dict)


def _spec_key(spec: CCSpec) -> tuple:
    if spec.is_bpf:
        return (spec.canonical, *fixed_params(spec))
    return (spec.canonical,)


class CongestionControlManager:
    """Builds, registers and cleans up the congestion controls of one experiment."""

    def __init__(self, log=print, *, cache_dir: Path | None = None):
        self.log = log
        self.builder = Builder(cache_dir or default_cache_dir(), log=log)
        self._instances: dict[tuple, _Instance] = {}
        self._registered: list[str] = []  # BPF names we registered and still own
        self._map_ids: dict[str, int] = {}  # their struct_ops map ids
        self._snapshot: list[dict] = []
        self._closed = False
        self._bpftool_exe: str | None = None  # the bpftool that registered our instances

    def __enter__(self) -> CongestionControlManager:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- setup ------------------------------------------------------------------------------
    def prepare(self, specs: Iterable[CCSpec]) -> None:
        """Make every spec usable; on any failure unregister what this call did, re-raise."""
        if self._closed:
            raise CCError("CongestionControlManager already closed")
        try:
            for spec in specs:
                if not isinstance(spec, CCSpec):
                    raise CCError(f"prepare() expects CCSpec objects, got {spec!r}")
                key = _spec_key(spec)
                if key in self._instances:
                    continue
                if spec.is_bpf:
                    self._instances[key] = self._prepare_bpf(spec)
                else:
                    self._instances[key] = self._prepare_kernel(spec)
        except BaseException:
            self.close()
            raise

    def _prepare_kernel(self, spec: CCSpec) -> _Instance:
        name = spec.canonical
        if name not in available_congestion_controls():
            try:
                proc = subprocess.run(["modprobe", f"tcp_{name}"], capture_output=True,
                                      text=True, timeout=30)
                why = _one_line(proc.stderr) if proc.returncode else "loaded but not listed"
            except FileNotFoundError:
                why = "modprobe not found"
            if name not in available_congestion_controls():
                raise CCUnavailable(f"kernel congestion control {name!r} is not available "
                                    f"(modprobe tcp_{name}: {why}); install the kernel's extra "
                                    f"modules (Ubuntu: linux-modules-extra-$(uname -r)) or "
                                    f"choose another")
        return _Instance(spec, name, None)

    def _prepare_bpf(self, spec: CCSpec) -> _Instance:
        if os.geteuid() != 0:
            raise CCUnavailable("registering BPF congestion control needs root "
                                "(CAP_BPF and CAP_NET_ADMIN): run with sudo")
        # Remember absolute tool paths: close() must work even if PATH changes later.
        self.builder.tools = check_toolchain()
        if self._bpftool_exe is None:
            self._bpftool_exe = self.builder.tools["bpftool"]
        params = spec.resolved()._asdict()
        for attempt in range(4):
            salt = "" if attempt == 0 else f"{os.getpid()}.{id(self)}.{attempt}"
            tag = instance_tag(spec, salt)
            name = kernel_name_for(spec, tag)
            if name in available_congestion_controls():
                continue  # owned by another run (or a crashed one): never touch it
            obj = self.builder.build(spec, tag)
            proc = _bpftool("struct_ops", "register", str(obj), exe=self._bpftool_exe)
            if name in available_congestion_controls() and proc.returncode == 0:
                self._registered.append(name)
                self._map_ids[name] = next((i for i, n in struct_ops_maps(bpftool=self._bpftool_exe).items()
                                            if n == name and struct_ops_state(i, bpftool=self._bpftool_exe)
                                            == STRUCT_OPS_IN_USE), 0)
                self.log(f"cc: registered {name} for {spec.canonical} {params}")
                return _Instance(spec, name, telemetry_map_name(tag), params)
            if name in available_congestion_controls():
                continue  # lost a race for the name to a concurrent run
            raise CCUnavailable(f"kernel refused BPF congestion control {name} "
                                f"({spec.canonical}): {_one_line(proc.stderr + proc.stdout)}; "
                                "needs a kernel with BPF struct_ops for tcp_congestion_ops "
                                "(Linux >= 5.6, Ubuntu >= 22.04)")
        raise CCError(f"no free kernel name for {spec.canonical}: names taken by other runs "
                      "(see `bpftool struct_ops list`)")

    # -- queries ----------------------------------------------------------------------------
    def kernel_name(self, spec: CCSpec) -> str:
        """Name to pass to setsockopt(TCP_CONGESTION) for `spec` (prepare() it first)."""
        inst = self._instances.get(_spec_key(spec))
        if inst is None:
            raise CCError(f"congestion control {spec} was not prepared")
        return inst.kernel_name

    def registered_names(self) -> list[str]:
        return list(self._registered)

    def registered(self) -> list[tuple[str, int, str]]:
        """(kernel name, struct_ops map id, bpftool path) of every CC this manager registered
        and has not released: what `mn-harness clean` needs to release them after a crash."""
        return [(name, self._map_ids.get(name, 0), self._bpftool_exe or "") for name in self._registered]

    def read_telemetry(self) -> list[dict]:
        """Rows per socket and iteration from the BPF telemetry maps (last snapshot after
        close()). Iterations end at a TX_START after more than idle_gap without data in
        flight; a row with final=True was written when the socket closed."""
        if self._closed:
            return list(self._snapshot)
        rows: list[dict] = []
        ids = _map_ids_by_name(self._bpftool_exe)
        for inst in self._instances.values():
            if inst.telemetry_map is None:
                continue
            for map_id in ids.get(inst.telemetry_map, []):
                rows.extend(_dump_rows(map_id, inst, self._bpftool_exe))
        rows.sort(key=lambda r: (r["kernel_name"], r["src"], r["dst"], r["iteration"]))
        return rows

    # -- teardown ---------------------------------------------------------------------------
    def close(self) -> None:
        """Unregister everything this manager registered. Idempotent; keeps going on errors."""
        if self._closed:
            return
        try:
            self._snapshot = self.read_telemetry() if self._registered else []
        except (CCError, OSError, ValueError, subprocess.SubprocessError) as exc:
            self.log(f"cc: could not read telemetry before unregistering: {exc}")
        self._closed = True
        failures = []
        for name in reversed(self._registered):
            try:
                release_struct_ops(name, bpftool=self._bpftool_exe, map_id=self._map_ids.get(name, 0))
                self.log(f"cc: unregistered {name}")
            except (CCError, OSError, subprocess.SubprocessError) as exc:
                failures.append(str(exc))
        self._registered.clear()
        if failures:
            raise CCError("; ".join(failures))


def _map_ids_by_name(exe: str | None) -> dict[str, list[int]]:
    proc = _bpftool("-j", "map", "show", exe=exe)
    if proc.returncode != 0:
        raise CCError(f"bpftool map show failed: {_one_line(proc.stderr)}")
    out: dict[str, list[int]] = {}
    for entry in json.loads(proc.stdout or "[]"):
        out.setdefault(entry.get("name", ""), []).append(int(entry["id"]))
    return out


def _bytes(field_value) -> bytes:
    return bytes(int(b, 16) for b in field_value)


def _ip(raw: int) -> str:
    return socket.inet_ntoa(raw.to_bytes(4, sys.byteorder))


def _dump_rows(map_id: int, inst: _Instance, exe: str | None) -> list[dict]:
    proc = _bpftool("-j", "map", "dump", "id", str(map_id), exe=exe)
    if proc.returncode != 0:
        raise CCError(f"bpftool map dump id {map_id} failed: {_one_line(proc.stderr)}")
    rows = []
    for elem in json.loads(proc.stdout or "[]"):
        saddr, daddr, sport, dport, iteration = _KEY.unpack(_bytes(elem["key"]))
        nbytes, believed, learned, start_ns, end_ns, f_fp, final, slope_fp, rto, losses, count = _ROW.unpack(
            _bytes(elem["value"]))
        rows.append({
            "cc": inst.spec.canonical,
            "kernel_name": inst.kernel_name,
            "params": dict(inst.params),
            "src": f"{_ip(saddr)}:{sport}",
            "dst": f"{_ip(daddr)}:{dport}",
            "iteration": iteration,
            "bytes": nbytes,
            "believed_bytes_per_iteration": believed or None,
            "learned_bytes_per_iteration": learned or None,
            "start_s": start_ns / 1e9,
            "end_s": end_ns / 1e9 if end_ns else None,
            "f_last": f_fp / 1024,
            "slope": slope_fp / 1024,
            "final": bool(final),
            "rto": bool(rto),
            "losses": losses,
            "count": count,
        })
    return rows

"""The kinds of things a run must undo: typed, frozen records (mn_harness.state explains how a
kind is added), their exact identities, and their JSON form (type-checked when read back)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import tempfile
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from mn_harness.errors import ConfigError, RunError, one_line, shown

KILL_WAIT_S = 5.0
Log = Callable[[str], None]


class StateFileError(ConfigError):
    """A state file (or the state directory) that is not what this version writes."""


class Undo:
    """One thing a run created and must undo. Subclasses: frozen dataclasses, @undo_kind."""

    kind: ClassVar[str] = ""
    order: ClassVar[int] = 100

    def undo(self, log: Log) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        return self.kind


KINDS: dict[str, type[Undo]] = {}


def undo_kind(cls: type[Undo]) -> type[Undo]:
    """Register a record class under its `kind` (the JSON tag)."""
    if not cls.kind or cls.kind in KINDS:
        raise TypeError(f"undo kind {cls.kind!r} is empty or taken")
    KINDS[cls.kind] = cls
    return cls


def proc_start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (after the command name, which may hold spaces and
    parentheses); None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[19]) if len(fields) > 19 else None


def proc_cmdline(pid: int) -> tuple[str, ...]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ()
    return tuple(part.decode(errors="surrogateescape") for part in raw.split(b"\0")[:-1])


@undo_kind
@dataclass(frozen=True)
class KillProcess(Undo):
    """A process the run started (a node shell, a worker, a switch), by exact identity."""

    kind: ClassVar[str] = "process"
    order: ClassVar[int] = 10
    pid: int
    start_time: int
    cmdline: tuple[str, ...]
    label: str = ""
    group: bool = False  # the run made it a group leader (setsid): its group is the run's too
    netns: bool = False  # it lives in a network namespace the run made: abort that namespace's
    #                      TCP sockets first (orphans retransmitting into a dead path would keep
    #                      the namespace, and a BPF congestion control using them, for minutes)

    @classmethod
    def of(cls, pid: int | None, label: str = "", group: bool = False,
           netns: bool = False) -> KillProcess | None:
        """The identity of a live process right now; None when it is gone (take it while the
        process is still an unreaped child of the caller, so the pid cannot have been reused)."""
        if not pid or pid <= 0:
            return None
        start = proc_start_time(pid)
        cmdline = proc_cmdline(pid)
        if start is None or not cmdline:
            return None
        return cls(pid, start, cmdline, label, group, netns)

    def alive(self) -> bool:
        """Still exactly this process (pid, start time, command line)?"""
        if proc_start_time(self.pid) != self.start_time:
            return False
        now = proc_cmdline(self.pid)
        return bool(now) and len(now) <= len(self.cmdline) and self.cmdline[len(self.cmdline) - len(now):] == now

    def describe(self) -> str:
        return f"pid {self.pid} ({self.label or ' '.join(self.cmdline)[:60]})"

    def undo(self, log: Log) -> bool:
        if not self.alive():
            return True
        if self.netns:
            abort_tcp_sockets(self.pid)
        try:
            if self.group and os.getpgid(self.pid) == self.pid:
                os.killpg(self.pid, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            return True
        except PermissionError as exc:
            log(f"could not kill {self.describe()}: {exc.strerror}")
            return False
        deadline = time.monotonic() + KILL_WAIT_S
        while self.alive() and not _zombie(self.pid):
            if time.monotonic() > deadline:
                log(f"{self.describe()} survived SIGKILL")
                return False
            time.sleep(0.05)
        log(f"killed {self.describe()}")
        return True


def abort_tcp_sockets(pid: int) -> None:
    """Destroy every TCP socket in the network namespace of `pid` (`ss -K`), never in ours."""
    try:
        if os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino:
            return
        subprocess.run(["nsenter", f"--target={pid}", "--net", "ss", "-K", "-t", "-a"],
                       capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        pass  # best effort: the process is killed next either way


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2:].startswith(("Z", "X"))


@undo_kind
@dataclass(frozen=True)
class RemoveDirectory(Undo):
    """A directory the run made for itself under the temporary directory (BMv2's sockets)."""

    kind: ClassVar[str] = "directory"
    order: ClassVar[int] = 30
    path: str
    PREFIX: ClassVar[str] = "mn-harness-"

    def ours(self) -> bool:
        path = Path(self.path)
        return path.name.startswith(self.PREFIX) and path.parent == Path(tempfile.gettempdir())

    def undo(self, log: Log) -> bool:
        path = Path(self.path)
        if not self.ours():  # never remove anything else, whatever the file says
            log(f"not removing {shown(self.path)}: not a directory mn-harness makes")
            return True
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            log(f"removed {path}")
        return not path.exists()


@undo_kind
@dataclass(frozen=True)
class EgressProgramGone(Undo):
    """The Linux data plane's tc egress BPF program on one interface: loaded by tc, reached by
    id, nothing pinned, so it goes with its namespace once the run's processes are killed. The
    record only checks that it went (an id is reused only after 2^31 loads; its name is checked
    too), waiting a little: the kernel frees a namespace asynchronously."""

    kind: ClassVar[str] = "egress_program"
    order: ClassVar[int] = 35
    prog_id: int
    intf: str = ""
    WAIT_S: ClassVar[float] = 5.0

    def describe(self) -> str:
        return f"egress program {self.prog_id} on {self.intf or '?'}"

    def loaded(self) -> bool:
        from mn_harness.bpf.errors import BpfError  # BPF tooling only when needed
        from mn_harness.bpf.syscall import prog_map_ids
        from mn_harness.dataplane.egress.build import PROGRAM_NAME

        try:
            return prog_map_ids(self.prog_id)[0] == PROGRAM_NAME
        except BpfError:
            return False

    def undo(self, log: Log) -> bool:
        deadline = time.monotonic() + self.WAIT_S
        while self.loaded():
            if time.monotonic() > deadline:
                log(f"{self.describe()} is still loaded: its namespace is alive (a process of the "
                    "run survived?)")
                return False
            time.sleep(0.1)
        return True


@undo_kind
@dataclass(frozen=True)
class RestoreAllowedCongestionControl(Undo):
    """Names the run added to net.ipv4.tcp_allowed_congestion_control (so its hosts' namespaces
    could default to the job's CC): taken out again before the CCs are unregistered, since the
    list may only name registered CCs."""

    kind: ClassVar[str] = "allowed_cc"
    order: ClassVar[int] = 38
    added: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{' '.join(self.added)} in tcp_allowed_congestion_control"

    def undo(self, log: Log) -> bool:
        from mn_harness.cc.namespace import remove_allowed

        try:
            remove_allowed(self.added)
        except (OSError, RunError) as exc:
            log(f"could not restore tcp_allowed_congestion_control: {one_line(exc)}")
            return False
        log(f"removed {' '.join(self.added)} from tcp_allowed_congestion_control")
        return True


@undo_kind
@dataclass(frozen=True)
class UnregisterCongestionControl(Undo):
    """A BPF struct_ops congestion control the run registered (it outlives the process)."""

    kind: ClassVar[str] = "bpf_cc"
    order: ClassVar[int] = 40
    name: str
    map_id: int = 0    # its struct_ops map: the exact identity (the name may be reused later)
    bpftool: str = ""  # the bpftool that registered it; PATH's when that one is gone

    def describe(self) -> str:
        return f"congestion control {self.name}"

    def undo(self, log: Log) -> bool:
        from mn_harness.cc.manager import release_struct_ops  # BPF tooling only when needed

        exe = self.bpftool if self.bpftool and os.path.exists(self.bpftool) else None
        try:
            release_struct_ops(self.name, bpftool=exe, map_id=self.map_id)
        except RunError as exc:
            log(f"could not unregister {self.name}: {one_line(exc)}")
            return False
        log(f"unregistered {self.describe()}")
        return True


@undo_kind
@dataclass(frozen=True)
class RemoveTunnel(Undo):
    """A tunnel device a server of a cluster run made in its own namespace and had not yet moved
    into its node (mn_harness.cluster.tunnel): removed by its name, kind and VNI/key, never a
    device of someone else. Once moved it goes with its node's namespace."""

    kind: ClassVar[str] = "tunnel"
    order: ClassVar[int] = 32
    tunnel: str  # vxlan or gretap
    ident: int  # its VNI or GRE key

    def describe(self) -> str:
        return f"{self.tunnel} tunnel {self.ident}"

    def undo(self, log: Log) -> bool:
        from mn_harness.cluster.tunnel import delete

        if delete(self.tunnel, self.ident):
            return True
        log(f"could not remove the {self.describe()}")
        return False


@undo_kind
@dataclass(frozen=True)
class CleanRemotePart(Undo):
    """A server's part of a cluster run (mn_harness.cluster): that server keeps its own state
    file of it, so `clean` here runs `clean` of that run there, over ssh, and nothing else."""

    kind: ClassVar[str] = "remote_part"
    order: ClassVar[int] = 5
    server: str
    address: str
    user: str
    port: int
    python: str
    run_id: str  # the part's state file there

    def describe(self) -> str:
        return f"the part of server {self.server} ({self.address})"

    def undo(self, log: Log) -> bool:
        from mn_harness.cluster.remote import clean_part

        return clean_part(self, log)


# -- (de)serialisation -----------------------------------------------------------------------

def to_json(record: Undo) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": record.kind}
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def _value(value: Any, hint: Any) -> Any:
    """`value` as type `hint`, or raise ValueError."""
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif typing.get_origin(hint) is tuple:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    raise ValueError(f"expected {names.get(hint, 'a list of strings')}, got {value!r}")


def from_json(raw: Any, where: str, path: str) -> Undo:
    if not isinstance(raw, dict) or raw.get("kind") not in KINDS:
        kind = raw.get("kind") if isinstance(raw, dict) else raw
        raise StateFileError(where, f"{path}: unknown kind of record {kind!r} (known: {', '.join(KINDS)})")
    cls = KINDS[raw["kind"]]
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(raw) - set(fields) - {"kind"}
    if unknown:
        raise StateFileError(where, f"{path}: unknown field {sorted(unknown)[0]!r} for {cls.kind}")
    values = {}
    for name, f in fields.items():
        if name not in raw:
            if f.default is dataclasses.MISSING:
                raise StateFileError(where, f"{path}.{name}: missing")
            continue
        try:
            values[name] = _value(raw[name], hints[name])
        except ValueError as exc:
            raise StateFileError(where, f"{path}.{name}: {exc}") from None
    return cls(**values)



"""Run-state files: what a run created, so its own teardown or, after a crash, `mn-harness clean`
can undo exactly that and nothing else.

While a run lives it keeps `<state dir>/<run_id>.json` (state dir: $MN_HARNESS_STATE_DIR, default
/run/mn-harness) up to date, written atomically on every change:

    {"version": 2, "run_id": ..., "results_dir": ...,
     "harness": {"pid": ..., "start_time": ..., "cmdline": [...]},
     "undo": {"network": [{"kind": "process", "pid": ..., ...}, ...], "cc": [...], ...}}

Sections. Each teardown step owns a section ("network": node shells, "jobs": workers,
"dataplane": switch processes and their socket directory, "cc": registered BPF congestion
controls). The runner replaces a section's records whenever what it created changes
(`RunState.record`) and empties it only once that step really finished (`RunState.done`); the
file is removed only when every section is empty (`RunState.finish`). So an unregister that
failed, or a second Ctrl-C that cut the network teardown short, leaves the file, and `clean`
finishes the job: it undoes every record (in `order`), drops the ones it undid and removes the
file once nothing is left — a record it could not undo stays for the next `clean`.

Exact identity. A process record holds the pid, its start time (field 22 of /proc/PID/stat,
clock ticks since boot, which never changes for a pid's life) and its command line. A pid is
signalled only when all three still match, so a reused pid whose command line happens to
contain `mininet:h1` or `simple_switch_grpc` is never touched. The command line may be a suffix
of the recorded one: the record is taken right after the start, possibly before a wrapper
(`mnexec`, `env`) exec'd the program it launched. A process group is killed only when the
record says the run made that process a group leader (`group`, from mnexec's setsid) and it
still leads its group; otherwise only the process itself.

Adding a kind of thing to undo is a small, typed change in one place: a frozen dataclass
deriving from `Undo`, decorated with `@undo_kind`, with a JSON `kind`, an `order` (clean undoes
lower orders first: processes before what they hold) and `undo(log) -> bool` (True: undone or
already gone; False: failed, keep the record). Fields may be int, float, str, bool or
tuple[str, ...]; they are type-checked when a file is read, so a malformed or foreign file is
one line naming it (StateFileError, exit 2), never a traceback and never a guess. E.g.

    @undo_kind
    @dataclass(frozen=True)
    class RestoreSysctl(Undo):
        kind: ClassVar[str] = "sysctl"
        order: ClassVar[int] = 50
        key: str
        value: str

        def undo(self, log) -> bool: ...

and in the runner `state.record("sysctls", [RestoreSysctl(key, old)])` after changing it,
`state.done("sysctls")` once it has been restored."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from mn_harness.errors import ConfigError, RunError, one_line, shown

STATE_VERSION = 2
DEFAULT_STATE_DIR = "/run/mn-harness"
STATE_DIR_ENV = "MN_HARNESS_STATE_DIR"
KILL_WAIT_S = 5.0
Log = Callable[[str], None]


def state_dir() -> Path:
    """Where state files live ($MN_HARNESS_STATE_DIR, default /run/mn-harness)."""
    return Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)


class StateFileError(ConfigError):
    """A state file (or the state directory) that is not what this version writes."""


class StateWriteError(RunError):
    """The state file could not be written (a full or read-only /run)."""


def check_state_dir(directory: Path | None = None) -> Path:
    """The state directory, refused in one line naming MN_HARNESS_STATE_DIR when it exists
    but is not a directory (a file, /proc/...)."""
    path = directory or state_dir()
    if path.exists() and not path.is_dir():
        raise StateFileError(STATE_DIR_ENV, f"{shown(str(path))} is not a directory")
    if str(path.resolve()).startswith(("/proc/", "/sys/")):
        raise StateFileError(STATE_DIR_ENV, f"{shown(str(path))} is on a kernel file system")
    return path


# -- the kinds of records --------------------------------------------------------------------

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


# -- (de)serialisation -----------------------------------------------------------------------

def _to_json(record: Undo) -> dict[str, Any]:
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


def _from_json(raw: Any, where: str, path: str) -> Undo:
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


# -- the run's side --------------------------------------------------------------------------

class RunState:
    """The state file of one live run (see the module docstring)."""

    def __init__(self, run_id: str, results_dir: Path, directory: Path | None = None):
        self.directory = check_state_dir(directory)
        self.path = self.directory / f"{run_id}.json"
        self.run_id = run_id
        self.results_dir = str(results_dir)
        me = KillProcess.of(os.getpid(), "harness")
        self.harness = {"pid": os.getpid(), "start_time": me.start_time if me else 0,
                        "cmdline": list(me.cmdline) if me else []}
        self.sections: dict[str, list[Undo]] = {}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateWriteError(f"cannot create the state directory {self.directory}: "
                                  f"{exc.strerror}") from None
        self.save()

    def record(self, section: str, records: Iterable[Undo | None]) -> None:
        """What `section`'s teardown step must undo, replacing what it said before."""
        self.sections[section] = [r for r in records if r is not None]
        self.save()

    def done(self, section: str) -> None:
        """`section`'s teardown step really finished: nothing of it is left to undo."""
        if self.sections.pop(section, None) is not None:
            self.save()

    def pending(self) -> list[str]:
        return [name for name, records in self.sections.items() if records]

    def finish(self) -> bool:
        """Remove the file when nothing is left to undo (True); otherwise keep it for
        `mn-harness clean` (False)."""
        if self.pending():
            self.save()
            return False
        self.path.unlink(missing_ok=True)
        return True

    def to_json(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "run_id": self.run_id, "results_dir": self.results_dir,
                "harness": self.harness,
                "undo": {name: [_to_json(r) for r in records] for name, records in self.sections.items()}}

    def save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(self.to_json(), indent=1))
            os.replace(tmp, self.path)
        except OSError as exc:
            raise StateWriteError(f"cannot write the state file {self.path}: {exc.strerror}") from None


# -- clean's side ----------------------------------------------------------------------------

@dataclass
class StateFile:
    """A state file as read back: its run, its harness's identity and what is left to undo."""

    path: Path
    run_id: str
    results_dir: str
    harness: KillProcess | None
    sections: dict[str, list[Undo]]

    def harness_alive(self) -> bool:
        return self.harness is not None and self.harness.alive()

    def processes(self) -> list[KillProcess]:
        return [r for records in self.sections.values() for r in records if isinstance(r, KillProcess)]

    def records(self) -> list[tuple[str, Undo]]:
        items = [(name, r) for name, records in self.sections.items() for r in records]
        return sorted(items, key=lambda item: item[1].order)

    def save(self) -> None:
        data = {"version": STATE_VERSION, "run_id": self.run_id, "results_dir": self.results_dir,
                "harness": ({"pid": self.harness.pid, "start_time": self.harness.start_time,
                             "cmdline": list(self.harness.cmdline)} if self.harness else None),
                "undo": {name: [_to_json(r) for r in records] for name, records in self.sections.items()}}
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self.path)


def load_state_file(path: Path) -> StateFile:
    """Read one state file; StateFileError naming it unless this version wrote it."""
    from mn_harness.config.loader import read_json_file  # the one reader of user-side files

    where = shown(str(path))
    raw = read_json_file(path, "a state file")
    if not isinstance(raw, dict):
        raise StateFileError(where, f"not a state file (a JSON {type(raw).__name__})")
    if raw.get("version") != STATE_VERSION:
        found = "no version" if "version" not in raw else f"version {raw['version']!r}"
        raise StateFileError(where, f"{found}, not a state file of this mn-harness (version "
                             f"{STATE_VERSION}): undo what it lists by hand, then delete it")
    for key, kind, what in (("run_id", str, "a string"), ("results_dir", str, "a string"),
                            ("undo", dict, "an object")):
        if not isinstance(raw.get(key), kind):
            raise StateFileError(where, f"{key}: expected {what}")
    harness = raw.get("harness")
    identity = None
    if harness is not None:
        if not isinstance(harness, dict):
            raise StateFileError(where, "harness: expected an object")
        identity = _from_json({**harness, "kind": KillProcess.kind, "label": "harness"}, where, "harness")
    sections: dict[str, list[Undo]] = {}
    for name, records in raw["undo"].items():
        if not isinstance(records, list):
            raise StateFileError(where, f"undo.{shown(name)}: expected a list of records")
        sections[name] = [_from_json(r, where, f"undo.{shown(name)}[{i}]") for i, r in enumerate(records)]
    return StateFile(path, raw["run_id"], raw["results_dir"], identity, sections)  # type: ignore[arg-type]


def read_state_files(directory: Path | None = None) -> tuple[list[StateFile], list[ConfigError]]:
    """Every state file of the directory, and the errors of those that are not ones."""
    folder = check_state_dir(directory)
    files: list[StateFile] = []
    errors: list[ConfigError] = []
    if not folder.is_dir():
        return files, errors
    for path in sorted(folder.glob("*.json")):
        try:
            files.append(load_state_file(path))
        except ConfigError as exc:
            errors.append(exc)
    return files, errors


class CleanIncomplete(RunError):
    """clean could not undo everything: what is left stays in the state file."""


def clean(log: Log = print, include_live: bool = False, directory: Path | None = None) -> int:
    """Undo every run whose harness is gone (all runs with include_live), record by record.
    Returns how many things were undone. Afterwards raises StateFileError (exit 2) when a file
    was not a state file, CleanIncomplete (exit 1) when something could not be undone (its
    record stays: run clean again)."""
    files, errors = read_state_files(directory)
    undone = 0
    incomplete = []
    for state in files:
        if state.harness_alive() and not include_live:
            assert state.harness is not None
            log(f"skipping run {state.run_id}: its harness (pid {state.harness.pid}) is still running")
            continue
        left: dict[str, list[Undo]] = {}
        for section, record in state.records():
            if record.undo(log):
                undone += 1
            else:
                left.setdefault(section, []).append(record)
        if left:
            state.sections = left
            state.save()
            incomplete.append(f"run {state.run_id}: " + ", ".join(r.describe() for rs in left.values() for r in rs))
            continue
        state.path.unlink(missing_ok=True)
        log(f"cleaned run {state.run_id}")
    if errors:
        raise errors[0] if len(errors) == 1 else StateFileError(
            errors[0].path, f"{errors[0].detail} (and {len(errors) - 1} more state files like it)")
    if incomplete:
        raise CleanIncomplete(f"could not undo {'; '.join(incomplete)}; kept in the state file: "
                              "run `mn-harness clean` again")
    return undone

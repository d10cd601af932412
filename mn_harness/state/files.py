"""State files on disk: the live run's (`RunState`), the ones read back (`StateFile`), and
`clean`, which undoes what crashed runs left. The design: mn_harness.state."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mn_harness.errors import EXIT_INTERRUPTED, ConfigError, RunError, shown
from mn_harness.state.records import (
    KillProcess,
    Log,
    StateFileError,
    Undo,
    from_json,
    to_json,
)

STATE_VERSION = 2
DEFAULT_STATE_DIR = "/run/mn-harness"
STATE_DIR_ENV = "MN_HARNESS_STATE_DIR"


def state_dir() -> Path:
    """Where state files live ($MN_HARNESS_STATE_DIR, default /run/mn-harness)."""
    return Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)


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
        self._identities: dict[tuple[int, str], KillProcess | None] = {}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateWriteError(f"cannot create the state directory {self.directory}: "
                                  f"{exc.strerror}") from None
        self.save()

    def process(self, pid: int, label: str, group: bool = True, netns: bool = True) -> KillProcess | None:
        """A live child's exact identity, taken once and then reused (so a later record of the
        same child cannot pick up a new owner of its pid). Call it while the process is an
        unreaped child of this one. Defaults: what mnexec -d gives a node shell or a worker (a
        group leader in a namespace of the run). None while it is not readable yet (mid-exec):
        the next call tries again."""
        if self._identities.get((pid, label)) is None:
            self._identities[pid, label] = KillProcess.of(pid, label, group=group, netns=netns)
        return self._identities[pid, label]

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
                "undo": {name: [to_json(r) for r in records] for name, records in self.sections.items()}}

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
                "undo": {name: [to_json(r) for r in records] for name, records in self.sections.items()}}
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
        identity = from_json({**harness, "kind": KillProcess.kind, "label": "harness"}, where, "harness")
    sections: dict[str, list[Undo]] = {}
    for name, records in raw["undo"].items():
        if not isinstance(records, list):
            raise StateFileError(where, f"undo.{shown(name)}: expected a list of records")
        sections[name] = [from_json(r, where, f"undo.{shown(name)}[{i}]") for i, r in enumerate(records)]
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


class TeardownIncomplete(RunError):
    """A run's teardown was cut short (a second Ctrl-C, an unregister that failed): what is left
    stays in its state file for `mn-harness clean`. Exit 130 when the run was interrupted, else 1."""

    def __init__(self, message: str, interrupted: bool):
        super().__init__(message)
        if interrupted:
            self.exit_code = EXIT_INTERRUPTED


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

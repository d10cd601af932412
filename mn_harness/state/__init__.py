"""Run-state files: what a run created, so its own teardown or, after a crash, `mn-harness clean`
can undo exactly that and nothing else.

While a run lives it keeps `<state dir>/<run_id>.json` (state dir: $MN_HARNESS_STATE_DIR, default
/run/mn-harness) up to date, written atomically on every change:

    {"version": 2, "run_id": ..., "results_dir": ...,
     "harness": {"pid": ..., "start_time": ..., "cmdline": [...]},
     "undo": {"network": [{"kind": "process", "pid": ..., ...}, ...], "cc": [...], ...}}

Sections. Each teardown step owns a section ("network": node shells, "jobs": workers,
"captures": tcpdump, "dataplane": switch processes and their socket directory, "cc": registered
BPF congestion controls). The session (mn_harness/session.py) replaces a section's records
whenever what it created changes (`RunState.record`, process identities from
`RunState.process`) and empties it only once that step really finished (`RunState.done`); the
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

and in the session (mn_harness/session.py) `state.record("sysctls", [RestoreSysctl(key, old)])` after changing it,
`state.done("sysctls")` once it has been restored."""

from mn_harness.state.files import (
    DEFAULT_STATE_DIR,
    STATE_DIR_ENV,
    STATE_VERSION,
    CleanIncomplete,
    RunState,
    StateFile,
    StateWriteError,
    TeardownIncomplete,
    check_state_dir,
    clean,
    load_state_file,
    read_state_files,
    state_dir,
)
from mn_harness.state.records import (
    KINDS,
    CleanRemotePart,
    EgressProgramGone,
    KillProcess,
    RemoveDirectory,
    RemoveTunnel,
    RestoreAllowedCongestionControl,
    StateFileError,
    Undo,
    UnregisterCongestionControl,
    abort_tcp_sockets,
    proc_cmdline,
    proc_start_time,
    undo_kind,
)

__all__ = ["DEFAULT_STATE_DIR", "KINDS", "STATE_DIR_ENV", "STATE_VERSION", "CleanIncomplete", "CleanRemotePart",
           "EgressProgramGone", "KillProcess", "RestoreAllowedCongestionControl", "RemoveDirectory", "RemoveTunnel",
           "RunState", "StateFile", "StateFileError", "StateWriteError", "TeardownIncomplete",
           "Undo", "UnregisterCongestionControl", "abort_tcp_sockets", "check_state_dir", "clean", "load_state_file",
           "proc_cmdline", "proc_start_time", "read_state_files", "state_dir", "undo_kind"]

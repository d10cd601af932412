"""The congestion control of sockets a worker does not own: the hosts' namespace default.

A framework's collective (torch/gloo) opens its own sockets, so the job's CC cannot be set with
setsockopt(TCP_CONGESTION); it has to be the default of the host's network namespace
(`net.ipv4.tcp_congestion_control`, per namespace). The kernel lets a namespace other than the
initial one default only to a CC flagged non-restricted, i.e. listed in the global
`net.ipv4.tcp_allowed_congestion_control`; otherwise the write fails with EPERM and the
namespace keeps the default it inherited (bbr on the CI machine) — silently, for a tool that
ignores the error. So:

* `AllowedList` adds the names a run needs to the global list and takes them out again on
  close() (teardown, Ctrl-C) or, after a crash, through `remove_allowed()` from
  `mn-harness clean` (the run's state file records what was added). Only the names this run
  added are removed, so a list changed meanwhile by someone else keeps their changes; with no
  such change this restores the previous list exactly.
* `set_namespace_default()` writes the namespace default inside a host and reads it back.
* `reset_namespace_default()` puts a host back on a built-in CC: a namespace's default holds a
  reference on its CC until the namespace is destroyed, so the run drops the reference before
  it unregisters a BPF CC.

Writing the allowed list needs every listed name registered (the kernel rejects unknown names
with ENOENT), so a name is added after its BPF CC is registered and a list is always rewritten
from what the kernel lists now."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from mn_harness.cc.errors import CCUnavailable

ALLOWED = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
DEFAULT_KEY = "net.ipv4.tcp_congestion_control"
RESET_CC = "reno"  # always built in and always allowed

RunIn = Callable[[int, list[str]], str]  # (namespace pid, argv) -> stdout; raises on failure


def read_allowed(path: Path = ALLOWED) -> list[str]:
    return path.read_text().split()


def _write_allowed(names: list[str], path: Path) -> None:
    try:
        path.write_text(" ".join(names) + "\n")
    except OSError as exc:
        raise CCUnavailable(f"cannot write {path} ({' '.join(names)}): {exc.strerror}; "
                            "needs root in the initial network namespace") from None


def remove_allowed(names: Iterable[str], path: Path = ALLOWED) -> list[str]:
    """Take `names` out of the global allowed list (names the kernel no longer has are gone
    already). Returns the list written."""
    drop = set(names)
    current = read_allowed(path)
    kept = [n for n in current if n not in drop]
    if kept != current:
        _write_allowed(kept, path)
    return kept


class AllowedList:
    """Names added to tcp_allowed_congestion_control by one run; close() takes them out."""

    def __init__(self, path: Path = ALLOWED, on_change: Callable[[dict], None] = lambda _s: None):
        self.path = path
        self.before: list[str] | None = None
        self.added: list[str] = []
        self._on_change = on_change  # the runner records state() for `mn-harness clean`

    def state(self) -> dict:
        return {"before": self.before, "added": list(self.added)}

    def allow(self, names: Iterable[str]) -> None:
        current = read_allowed(self.path)
        if self.before is None:
            self.before = list(current)
        missing = [n for n in dict.fromkeys(names) if n not in current]
        if not missing:
            return
        # recorded first: a crash between the write and the record must still be cleanable
        self.added.extend(missing)
        self._on_change(self.state())
        _write_allowed(current + missing, self.path)

    def close(self) -> None:
        """Idempotent."""
        if self.added:
            remove_allowed(self.added, self.path)
            self.added.clear()
            self._on_change(self.state())


def namespace_default(run_in: RunIn, pid: int) -> str:
    return run_in(pid, ["sysctl", "-n", DEFAULT_KEY]).strip()


def set_namespace_default(run_in: RunIn, pid: int, host: str, name: str) -> None:
    """Make `name` the default CC of the namespace of `pid`, and check that it took."""
    try:
        run_in(pid, ["sysctl", "-q", "-w", f"{DEFAULT_KEY}={name}"])
    except Exception as exc:  # the runner's run_in raises its layer's error; say it our way
        raise CCUnavailable(f"{host}: cannot make {name} the namespace's default congestion "
                            f"control ({exc}); it must be listed in {ALLOWED}") from None
    got = namespace_default(run_in, pid)
    if got != name:
        raise CCUnavailable(f"{host}: namespace default congestion control is {got}, not {name} "
                            f"(is {name} in {ALLOWED}?)")


def reset_namespace_default(run_in: RunIn, pid: int) -> None:
    run_in(pid, ["sysctl", "-q", "-w", f"{DEFAULT_KEY}={RESET_CC}"])

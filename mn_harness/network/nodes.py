"""Mininet nodes whose shell cannot hang the set-up.

Mininet starts each node's shell (`mnexec ... bash`) on a pseudo-terminal and then reads until
the prompt appears, with no time limit: when the shell fails to start (mnexec refused, no bash,
a broken namespace) the read blocks forever, because Mininet itself keeps the terminal's other
end open. `TimedShell` watches that start from a second thread: if the shell exits, or gives no
prompt within SHELL_START_TIMEOUT_S, it kills the shell and replaces Mininet's end of the
terminal with /dev/null, so the blocked read returns, and the start fails in one line
(ShellStartError) instead. Every node class of the harness (hosts here, the data planes'
routers and switches) mixes it in."""

from __future__ import annotations

import os
import signal
import threading
import time

from mininet.node import Host

from mn_harness.network.errors import NetworkError

SHELL_TIMEOUT_ENV = "MN_HARNESS_SHELL_TIMEOUT"
SHELL_START_TIMEOUT_S = 20.0


class ShellStartError(NetworkError):
    """A node's shell did not start (it exited, or gave no prompt in time)."""


def shell_timeout_s() -> float:
    try:
        value = float(os.environ.get(SHELL_TIMEOUT_ENV) or SHELL_START_TIMEOUT_S)
    except ValueError:
        return SHELL_START_TIMEOUT_S
    return value if value > 0 else SHELL_START_TIMEOUT_S


class TimedShell:
    """Mixin for mininet.node.Node subclasses: the shell start has a deadline (module doc)."""

    name: str

    def startShell(self, mnopts=None):  # noqa: N802 - Mininet's name
        timeout = shell_timeout_s()
        finished = threading.Event()
        failure: list[str] = []

        def watch() -> None:
            deadline = time.monotonic() + timeout
            while not finished.wait(0.05):
                shell = getattr(self, "shell", None)
                code = shell.poll() if shell is not None else None
                if code is not None:
                    failure.append(f"its shell exited with code {code} before its prompt")
                elif time.monotonic() > deadline:
                    failure.append(f"its shell gave no prompt within {timeout:g}s")
                else:
                    continue
                self._abort_shell()
                return

        watcher = threading.Thread(target=watch, name=f"shell-start-{self.name}", daemon=True)
        watcher.start()
        try:
            super().startShell(mnopts)  # type: ignore[misc]
        except Exception:
            if not failure:
                raise
        finally:
            finished.set()
            watcher.join()
        if failure:
            self._close_terminal()
            raise ShellStartError(f"node {self.name}: {failure[0]} (mnexec and bash must run in a new "
                                  f"network namespace; {SHELL_TIMEOUT_ENV} sets the limit)")

    def _abort_shell(self) -> None:
        shell = getattr(self, "shell", None)
        if shell is not None and shell.poll() is None:
            try:
                if os.getpgid(shell.pid) == shell.pid:  # mnexec -d made it a group leader
                    os.killpg(shell.pid, signal.SIGKILL)
                else:
                    shell.kill()
            except ProcessLookupError:
                pass
            shell.wait()
        slave = getattr(self, "slave", None)
        if slave is not None:  # our end gone too: the blocked read on the master returns
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, slave)
            os.close(devnull)

    def _close_terminal(self) -> None:
        """Both ends of the node's terminal (Node.cleanup would wait for the dead shell)."""
        stdin, slave = getattr(self, "stdin", None), getattr(self, "slave", None)
        try:
            if stdin is not None:
                stdin.close()
            if slave is not None:
                os.close(slave)
        except OSError:
            pass
        self.shell = None


class HarnessHost(TimedShell, Host):
    """A Mininet host whose shell start has a deadline."""

"""The head's line to one server: `ssh` running the project's agent there, JSON lines both ways.

One ssh connection per server for the whole run (no per-command logins, no ControlMaster
sockets to leave behind): the agent (mn_harness.cluster.agent) reads requests on its stdin and
answers each on its stdout. The server is reached as `user@address -p port`; a user other
than root runs the agent with `sudo -n` (passwordless sudo), root needs a key. ssh is told to
fail instead of asking (BatchMode), to give up on a dead connection within a few seconds
(ServerAlive*), and reads $MN_HARNESS_SSH_CONFIG as its configuration file when it is set
(keys, known hosts, jump hosts: whatever ssh_config(5) says; the cluster tests point it at
their own key).

Every failure is one line naming the server: it could not be reached, it answered with an
error, it did not answer in time, or the connection ended (with the tail of ssh's stderr)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

from mn_harness.config.servers import ServerConfig
from mn_harness.errors import RunError, one_line

SSH_CONFIG_ENV = "MN_HARNESS_SSH_CONFIG"
AGENT_MODULE = "mn_harness.cluster.agent"  # also what `clean` on a server looks for
CONNECT_TIMEOUT_S = 10
KEEPALIVE_S = 2.0  # a ping this often keeps the agent's lease (mn_harness.cluster.agent) while it waits
ALIVE_INTERVAL_S = 1
ALIVE_COUNT = 4


class ServerError(RunError):
    """A server failed, refused, or could not be reached."""


class ServerLost(ServerError):
    """The connection to a server ended or it stopped answering: it is unreachable now."""


def python_for(server: ServerConfig) -> str:
    """The interpreter that runs the project on `server`: its `python`, else the one running here
    (the same checkout path on every server)."""
    return server.python or sys.executable


def ssh_argv(server: ServerConfig, remote: list[str]) -> list[str]:
    """ssh to `server` running `remote` (argv, quoted for the remote shell)."""
    argv = ["ssh"]
    config = os.environ.get(SSH_CONFIG_ENV)
    if config:
        argv += ["-F", config]
    argv += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
             "-o", f"ServerAliveInterval={ALIVE_INTERVAL_S}", "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
             "-o", "ControlMaster=no", "-o", "ControlPath=none", "-T",
             "-p", str(server.port), "-l", server.user, "--", server.address]
    command = remote if server.user == "root" else ["sudo", "-n", *remote]
    return [*argv, shlex.join(command)]


def agent_argv(server: ServerConfig, *args: str) -> list[str]:
    return ssh_argv(server, [python_for(server), "-m", AGENT_MODULE, *args])


class Channel:
    """A running agent on one server: `request(op, **fields)` -> its answer (a dict)."""

    def __init__(self, server: ServerConfig, log: Callable[[str], None] = print, env: dict[str, str] | None = None):
        self.server = server
        self.log = log
        self._answers: dict[int, dict] = {}  # request id -> its answer, until its waiter takes it
        self._arrived = threading.Condition()
        self._ended = False  # the agent's output ended (the connection is gone)
        self._stderr: list[str] = []
        self._next = 0
        self._write = threading.Lock()
        self.closed = False
        self.lost: str | None = None  # why the connection is gone
        self.proc = subprocess.Popen(agent_argv(server), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, start_new_session=True)
        threading.Thread(target=self._read, name=f"agent-{server.name}", daemon=True).start()
        threading.Thread(target=self._read_stderr, name=f"agent-{server.name}-stderr", daemon=True).start()
        threading.Thread(target=self._keepalive, name=f"agent-{server.name}-ping", daemon=True).start()

    def _keepalive(self) -> None:
        """While the head does something else (another server's long request), the agent still
        hears from it: it tears down only when the head or the network between them is gone."""
        while not self.closed and self.lost is None:
            time.sleep(KEEPALIVE_S)
            try:
                self._put({"op": "ping"})
            except OSError:
                return

    def _put(self, message: dict) -> None:
        with self._write:
            if self.closed:
                return
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                self._stderr.append(raw.decode(errors="replace").strip())
                continue
            if isinstance(message, dict) and "log" in message:
                self.log(f"[{self.server.name}] {message['log']}")
                continue
            if isinstance(message, dict) and isinstance(message.get("id"), int):
                with self._arrived:
                    self._answers[message["id"]] = message
                    self._arrived.notify_all()
        with self._arrived:
            self._ended = True
            self._arrived.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").strip()
            if line:
                self._stderr.append(line)
                del self._stderr[:-5]

    def stderr_tail(self) -> str:
        return " | ".join(self._stderr[-3:])

    def send(self, op: str, **fields: Any) -> int:
        """Send a request; its id."""
        if self.lost is not None:
            raise ServerLost(f"{self.server.where}: {self.lost}")
        with self._write:
            self._next += 1
            ident = self._next
        try:
            self._put({"id": ident, "op": op, **fields})
        except (BrokenPipeError, OSError):
            self._lose("the connection ended")
        return ident

    def wait(self, ident: int, op: str, timeout_s: float) -> dict:
        """The answer to request `ident`; ServerError with the server's one line when it failed,
        ServerLost when the connection ended or nothing came within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._arrived:
            while ident not in self._answers and not self._ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._lose(f"no answer to {op} within {timeout_s:g}s (unreachable?)")
                self._arrived.wait(min(left, 1.0))
            message = self._answers.pop(ident, None)
        if message is None:
            try:
                code = self.proc.wait(2)
            except subprocess.TimeoutExpired:
                code = None
            time.sleep(0.1)  # ssh's last words
            tail = self.stderr_tail()
            self._lose("the connection ended" + (f" (ssh exit {code})" if code not in (None, 0) else "")
                       + (f": {tail}" if tail else ""))
        if "error" in message:
            raise ServerError(f"{self.server.where}: {message['error']}")
        return message

    def request(self, op: str, timeout_s: float = 60.0, **fields: Any) -> dict:
        return self.wait(self.send(op, **fields), op, timeout_s)

    def _lose(self, why: str) -> NoReturn:
        if self.lost is None:
            self.lost = why
        raise ServerLost(f"{self.server.where}: {self.lost}")

    def close(self, grace_s: float = 5.0) -> None:
        """Close our end (the agent tears down on EOF), then end ssh. Idempotent."""
        if self.closed:
            return
        with self._write:
            self.closed = True
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_remote(server: ServerConfig, args: list[str], timeout_s: float = 120.0) -> str:
    """Run the agent once with `args` (e.g. `clean RUN_ID`) and return its stdout; one line on failure."""
    try:
        proc = subprocess.run(agent_argv(server, *args), capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ServerLost(f"{server.where}: no answer within {timeout_s:g}s (unreachable?)") from None
    except FileNotFoundError:
        raise ServerError("ssh not found: apt-get install openssh-client") from None
    if proc.returncode != 0:
        raise ServerError(f"{server.where}: {one_line(proc.stderr.strip() or proc.stdout.strip() or 'failed')}")
    return proc.stdout

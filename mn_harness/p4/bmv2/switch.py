"""Start and stop one BMv2 `simple_switch_grpc` process.

    sw = BMv2Switch("s1", device_id=1, ports={1: "s1-eth1", 2: "s1-eth2"},
                    grpc_port=pick_free_port(), thrift_port=pick_free_port())
    with sw:                                  # start() ... stop(), even on errors
        sw.configure_queues({2: QueueConfig(depth=100, rate_pps=800)})

The switch starts without a program (`--no-p4`) unless `json_path` is given; the pipeline is
normally pushed over P4Runtime (mn_harness.p4.bringup does the whole sequence). It is ready when
its gRPC server accepts connections (the Thrift port, needed by the queue commands, is waited
for before the first one); otherwise start() raises SwitchStartError with the tail of the
switch's output. BMv2's own logging and pcap capture are off unless asked for (`log=True`,
`pcap=True`): both slow the data path.

Every started switch is stopped by stop(), by the context manager, at interpreter exit, and - if
the harness process dies - by the kernel (PR_SET_PDEATHSIG), so none outlives the experiment.

Inside a network namespace (the harness's data plane): `exec_prefix=["mnexec", "-a", str(pid)]`
runs the switch and its runtime CLI in the namespace of node `pid`, and `grpc_socket=path` makes
its P4Runtime server listen on a unix socket (`--grpc-server-addr unix:<path>`, accepted by PI's
gRPC server) that the harness reaches from the root namespace through the shared file system.
The Thrift port then lives on the namespace's own loopback, so every switch may use the same
number.

Per-run paths: a BMv2 built with nanomsg publishes notifications on an IPC socket whose default,
ipc:///tmp/bmv2-<device-id>-notifications.ipc, is the same for every run (all runs number their
switches 1, 2, ...), so two runs at once would fight over it. `notifications_socket=path` moves
it into the run's own directory (`--notifications-addr ipc://<path>`); a simple_switch_grpc
without that option (built without nanomsg, like /opt/p4local's) opens no such socket at all,
so the option is passed only when the binary's --help lists it.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from mn_harness.p4.errors import SwitchCLIError, SwitchStartError, ToolchainMissing
from mn_harness.p4.limits import PRIORITY_QUEUES
from mn_harness.p4.toolchain import Toolchain, find_toolchain

from .cli import run_cli
from .net import netns_tcp_listening, port_accepts, unix_socket_accepts
from .queues import QueueConfig, queue_suffix

NOTIFICATIONS_OPTION = "--notifications-addr"

_running: set[BMv2Switch] = set()
_running_lock = threading.Lock()


def _stop_all_at_exit() -> None:
    with _running_lock:
        switches = list(_running)
    for sw in switches:
        try:
            sw.stop()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


atexit.register(_stop_all_at_exit)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@functools.lru_cache(maxsize=8)
def switch_help(binary: str) -> str:
    """`simple_switch_grpc --help` (both parsers' options), "" when it cannot be run."""
    try:
        proc = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout + proc.stderr


@dataclass(eq=False)
class BMv2Switch:
    name: str
    device_id: int
    ports: Mapping[int, str]
    grpc_port: int
    thrift_port: int
    json_path: str | Path | None = None
    cpu_port: int | None = None
    log_dir: str | Path | None = None
    log: bool = False
    pcap: bool = False
    extra_args: Sequence[str] = ()
    toolchain: Toolchain | None = None
    exec_prefix: Sequence[str] = ()   # e.g. ["mnexec", "-a", "<node pid>"]: run in a netns
    grpc_socket: str | Path | None = None  # P4Runtime on this unix socket instead of TCP
    notifications_socket: str | Path | None = None  # nanomsg notifications (see module doc)
    priority_queues: int = PRIORITY_QUEUES  # egress queues per port (the P4 programs use 2)
    _proc: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _out_path: Path | None = field(default=None, init=False, repr=False)
    _own_log_dir: bool = field(default=False, init=False, repr=False)
    _out_file: IO[bytes] | None = field(default=None, init=False, repr=False)

    def __hash__(self) -> int:
        return id(self)

    @property
    def grpc_address(self) -> str:
        if self.grpc_socket is not None:
            return f"unix:{self.grpc_socket}"
        return f"127.0.0.1:{self.grpc_port}"

    def _grpc_ready(self) -> bool:
        if self.grpc_socket is not None:
            return unix_socket_accepts(self.grpc_socket)
        return port_accepts(self.grpc_port)

    def _thrift_ready(self) -> bool:
        if self.exec_prefix:
            return self.pid is not None and netns_tcp_listening(self.pid, self.thrift_port)
        return port_accepts(self.thrift_port)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def _tc(self) -> Toolchain:
        tc = self.toolchain or find_toolchain()
        if "simple_switch_grpc" not in tc.paths:
            raise ToolchainMissing(tc.missing_reason())
        return tc

    def command(self) -> list[str]:
        tc = self._tc()
        binary = tc.bin("simple_switch_grpc")
        cmd = [*self.exec_prefix, binary, "--device-id", str(self.device_id),
               "--thrift-port", str(self.thrift_port)]
        for port, intf in sorted(self.ports.items()):
            cmd += ["-i", f"{port}@{intf}"]
        if self.log:
            cmd += ["--log-file", str(Path(self.log_dir or ".") / f"{self.name}-bmv2"),
                    "--log-level", "info", "--log-flush"]
        if self.pcap:
            cmd += ["--pcap", str(self.log_dir or ".")]
        if self.notifications_socket is not None and NOTIFICATIONS_OPTION in switch_help(binary):
            cmd += [NOTIFICATIONS_OPTION, f"ipc://{self.notifications_socket}"]
        cmd += list(self.extra_args)
        cmd += [str(self.json_path)] if self.json_path else ["--no-p4"]
        cmd += ["--", "--grpc-server-addr", self.grpc_address]
        if self.priority_queues != 1:
            cmd += ["--priority-queues", str(self.priority_queues)]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        return cmd

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout: float = 15.0) -> BMv2Switch:
        if self.running:
            return self
        cmd = self.command()
        checks = [] if self.exec_prefix else [(self.thrift_port, "Thrift")]
        if self.grpc_socket is None:
            checks.append((self.grpc_port, "gRPC"))
        elif unix_socket_accepts(self.grpc_socket):
            raise SwitchStartError(f"BMv2 {self.name}: gRPC socket {self.grpc_socket} is already "
                                   "in use by another process")
        else:
            Path(self.grpc_socket).unlink(missing_ok=True)  # stale socket of a dead switch
        for port, what in checks:
            if port_accepts(port):
                raise SwitchStartError(f"BMv2 {self.name}: {what} port {port} is already in use "
                                       "by another process")
        if self.log_dir is None:
            self.log_dir = tempfile.mkdtemp(prefix=f"bmv2-{self.name}-")
            self._own_log_dir = True
        Path(self.log_dir).mkdir(parents=True, exist_ok=True)
        self._out_path = Path(self.log_dir) / f"{self.name}.out"
        self._out_file = open(self._out_path, "wb")  # noqa: SIM115 - closed in stop()
        try:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._out_file,
                                          stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        except OSError as exc:
            self._close_out()
            raise SwitchStartError(f"BMv2 {self.name}: cannot run {cmd[0]}: {exc}") from exc
        with _running_lock:
            _running.add(self)
        deadline = time.monotonic() + timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                tail = self.log_tail()
                self.stop()
                raise SwitchStartError(f"BMv2 {self.name} exited with code {code} while "
                                       f"starting: {' '.join(cmd)}\n--- log tail ---\n{tail}")
            if self._grpc_ready():
                return self
            if self._bind_failed():
                tail = self.log_tail()
                self.stop()
                raise SwitchStartError(f"BMv2 {self.name}: a port it listens on was taken by "
                                       f"another process while it started: {' '.join(cmd)}\n"
                                       f"--- log tail ---\n{tail}")
            if time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop()
                raise SwitchStartError(f"BMv2 {self.name}: gRPC {self.grpc_address} not "
                                       f"accepting after {timeout:.0f}s: {' '.join(cmd)}\n"
                                       f"--- log tail ---\n{tail}")
            time.sleep(0.05)

    def stop(self, timeout: float = 5.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=timeout)
        with _running_lock:
            _running.discard(self)
        self._close_out()
        if self._own_log_dir and not (self.log or self.pcap) and self.log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)
            self.log_dir = None
            self._own_log_dir = False

    def _close_out(self) -> None:
        if self._out_file is not None:
            self._out_file.close()
            self._out_file = None

    def __enter__(self) -> BMv2Switch:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _bind_failed(self) -> bool:
        """BMv2 keeps running, never ready, when its Thrift server cannot bind: fail at once."""
        path = self._out_path
        return bool(path and path.is_file() and b"Could not bind" in path.read_bytes()[-20000:])

    def log_tail(self, lines: int = 30) -> str:
        texts = []
        for path in [self._out_path, Path(self.log_dir or ".") / f"{self.name}-bmv2.txt"]:
            if path and path.is_file():
                data = path.read_bytes()[-20000:].decode(errors="replace")
                texts.append("\n".join(data.splitlines()[-lines:]))
        return "\n".join(t for t in texts if t) or "(no output)"

    # -- Thrift runtime ----------------------------------------------------------------------
    def cli(self, commands: Sequence[str], timeout: float = 30.0) -> str:
        """Run runtime CLI commands (one invocation for all of them); raise SwitchCLIError
        when the CLI reports an error."""
        self._wait_thrift()
        return run_cli(self._tc(), self.thrift_port, commands, timeout=timeout,
                       switch=self.name, exec_prefix=self.exec_prefix)

    def _wait_thrift(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not self._thrift_ready():
            if not self.running:
                raise SwitchCLIError(f"BMv2 {self.name} is not running")
            if time.monotonic() > deadline:
                raise SwitchCLIError(
                    f"BMv2 {self.name}: Thrift port {self.thrift_port} not accepting, so queue "
                    "depth/rate cannot be set; was simple_switch_grpc built without Thrift? "
                    "(BMv2: configure targets/simple_switch_grpc --with-thrift)")
            time.sleep(0.05)

    def set_queue_depth(self, depth: int, port: int | None = None,
                        priority: int | None = None) -> None:
        """Depth of one priority queue of `port`, of all its queues (priority None), or of every
        queue of every port (port None)."""
        self.cli([f"set_queue_depth {int(depth)}" + queue_suffix(port, priority)])

    def set_queue_rate(self, pps: int, port: int | None = None,
                       priority: int | None = None) -> None:
        self.cli([f"set_queue_rate {int(pps)}" + queue_suffix(port, priority)])

    def configure_queues(self, queues: Mapping[int, QueueConfig] | Mapping[int | None, QueueConfig]
                         ) -> None:
        """{port (None = all ports of this switch): QueueConfig} in a single CLI call."""
        cmds = []
        for port, cfg in queues.items():
            for p in (sorted(self.ports) if port is None else [port]):
                cmds += cfg.commands(p, self.priority_queues)
        if cmds:
            self.cli(cmds)

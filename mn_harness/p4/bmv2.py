"""Start and stop BMv2 `simple_switch_grpc` processes, and configure their egress queues.

    sw = BMv2Switch("s1", device_id=1, ports={1: "s1-eth1", 2: "s1-eth2"},
                    grpc_port=pick_free_port(), thrift_port=pick_free_port())
    with sw:                                  # start() ... stop(), even on errors
        sw.configure_queues({2: QueueConfig(depth=100, rate_pps=800)})
        ... connect a SwitchConnection to sw.grpc_address and push the pipeline ...

The switch starts without a program (`--no-p4`) unless `json_path` is given; the pipeline is
normally pushed over P4Runtime. It is ready when its gRPC port accepts connections (the Thrift
port, needed by the queue commands, is waited for before the first one); otherwise start() raises
SwitchStartError with the tail of the switch's output. BMv2's own logging and pcap capture are off
unless asked for (`log=True`, `pcap=True`): both slow the data path.

The egress queues of every port are BMv2's (REFERENCE.md: a qdisc outside BMv2 would keep
enq_qdepth near 0): `configure_queues` sets their depth (packets) and drain rate (packets/s) through
the Thrift runtime (`simple_switch_CLI`); `pps_for_rate` converts a link rate in Mbit/s.

Two priority queues per port (`--priority-queues 2`, PRIORITY_QUEUES): BMv2 paces each queue in
packets/s, so with a single queue at the link rate in 1514-byte frames the reverse direction's
pure ACKs took full-frame slots and data got ~2/3 of the link. mn_harness/p4/programs/ecn_telemetry.p4 puts small
packets (IPv4 total length <= SMALL_PACKET_MAX_IP_BYTES) into SMALL_PRIORITY, served first, and
data into DATA_PRIORITY. `QueueConfig.for_link(mbit, depth)` gives the data queue the link's depth
and rate in 1514-byte frames and the small queue the link's byte rate in SMALL_FRAME_BYTES frames
(the largest small packet), with the same depth. `set_queue_depth N port prio` /
`set_queue_rate N port prio` are the CLI's per-priority forms (BMv2 >= 1.15); without a priority
they set every queue of the port.

Every started switch is stopped by stop(), by the context manager, at interpreter exit, and - if
the harness process dies - by the kernel (PR_SET_PDEATHSIG), so none outlives the experiment.

Inside a network namespace (the harness's data plane): `exec_prefix=["mnexec", "-a", str(pid)]`
runs the switch and its runtime CLI in the namespace of node `pid`, and `grpc_socket=path` makes
its P4Runtime server listen on a unix socket (`--grpc-server-addr unix:<path>`, accepted by PI's
gRPC server) that the harness reaches from the root namespace through the shared file system.
The Thrift port then lives on the namespace's own loopback, so every switch may use the same
number; its readiness is read from /proc/<pid>/net/tcp (that namespace's sockets).
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import glob
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SwitchCLIError, SwitchStartError, ToolchainMissing
from .limits import FRAME_BYTES, PRIORITY_QUEUES, QUEUE_DATA, QUEUE_SMALL, SMALL_FRAME_BYTES
from .toolchain import Toolchain, find_toolchain

# Queue numbers and frame sizes are the programs' (mn_harness.p4.limits): the data queue is
# QUEUE_DATA (ECN, depth histogram), the small-packet queue QUEUE_SMALL, served first (BMv2 serves
# the highest priority first).
DEFAULT_PACKET_BYTES = FRAME_BYTES
DATA_PRIORITY = QUEUE_DATA
SMALL_PRIORITY = QUEUE_SMALL

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


def pick_free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unix_socket_accepts(path: str | Path, timeout: float = 0.2) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(str(path))
            return True
        except OSError:
            return False


def netns_tcp_listening(pid: int, port: int) -> bool:
    """True when a TCP socket in the network namespace of `pid` listens on `port`."""
    lines = []
    for table in ("tcp", "tcp6"):  # Thrift may listen on :: (v6 and v4)
        try:
            lines += Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            pass
    for line in lines:
        fields = line.split()
        if len(fields) > 3 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
            return True
    return False


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def pps_for_rate(mbit_per_s: float, packet_bytes: int = DEFAULT_PACKET_BYTES) -> int:
    """Packets per second that carry `mbit_per_s` with packets of `packet_bytes` (BMv2 queues
    drain in packets, not bytes). At least 1."""
    if mbit_per_s <= 0:
        raise ValueError("link rate must be > 0 Mbit/s")
    return max(1, round(mbit_per_s * 1e6 / (8 * packet_bytes)))


def disable_offloads(interface: str, netns: str | None = None,
                     exec_prefix: Sequence[str] = ()) -> None:
    """Turn off checksum/segmentation offloads on a veth end. BMv2 sees frames through
    libpcap: with TSO/GSO/GRO on it would get 64 KB super-frames, and with tx checksum offload
    the TCP checksums it forwards would be left unfilled."""
    if shutil.which("ethtool") is None:
        raise ToolchainMissing("ethtool not found: install it (apt-get install ethtool)")
    cmd = ["ethtool", "-K", interface, "rx", "off", "tx", "off", "sg", "off", "tso", "off",
           "gso", "off", "gro", "off"]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    cmd = [*exec_prefix, *cmd]
    subprocess.run(cmd, capture_output=True, text=True, check=False)


@dataclass(frozen=True)
class QueueConfig:
    """Egress queues of one port. `depth`/`rate_pps` are the data queue's (DATA_PRIORITY),
    `small_depth`/`small_rate_pps` the small-packet queue's (SMALL_PRIORITY); None leaves that
    setting alone. On a switch with one queue per port only the data settings apply."""
    depth: int | None = None          # packets; BMv2's default is 64
    rate_pps: int | None = None       # packets/s; None leaves the queue draining at CPU speed
    small_depth: int | None = None
    small_rate_pps: int | None = None

    @classmethod
    def for_link(cls, mbit_per_s: float | None, depth: int | None = None,
                 packet_bytes: int = DEFAULT_PACKET_BYTES) -> QueueConfig:
        """A link of `mbit_per_s` (None: unlimited) with a queue of `depth` packets: data at
        the link rate in `packet_bytes` frames, small packets at the link's byte rate in
        SMALL_FRAME_BYTES frames, both queues `depth` deep."""
        return cls(depth=depth,
                   rate_pps=pps_for_rate(mbit_per_s, packet_bytes) if mbit_per_s else None,
                   small_depth=depth,
                   small_rate_pps=pps_for_rate(mbit_per_s, SMALL_FRAME_BYTES) if mbit_per_s else None)

    def commands(self, port: int, priority_queues: int = PRIORITY_QUEUES) -> list[str]:
        """simple_switch_CLI commands for this port."""
        settings = [(DATA_PRIORITY, "depth", self.depth), (DATA_PRIORITY, "rate", self.rate_pps)]
        if priority_queues > SMALL_PRIORITY:
            settings += [(SMALL_PRIORITY, "depth", self.small_depth),
                         (SMALL_PRIORITY, "rate", self.small_rate_pps)]
        cmds = []
        for prio, what, value in settings:
            if value is None:
                continue
            if value < 1:
                unit = "packet" if what == "depth" else "packet/s"
                raise ValueError(f"queue {what} must be >= 1 {unit}, got {value}")
            suffix = f" {port} {prio}" if priority_queues > 1 else f" {port}"
            cmds.append(f"set_queue_{what} {int(value)}{suffix}")
        return cmds


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
    priority_queues: int = PRIORITY_QUEUES  # egress queues per port (the P4 programs use 2)
    _proc: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _out_path: Path | None = field(default=None, init=False, repr=False)
    _own_log_dir: bool = field(default=False, init=False, repr=False)
    _out_file: object = field(default=None, init=False, repr=False)

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
        cmd = [*self.exec_prefix, tc.bin("simple_switch_grpc"), "--device-id", str(self.device_id),
               "--thrift-port", str(self.thrift_port)]
        for port, intf in sorted(self.ports.items()):
            cmd += ["-i", f"{port}@{intf}"]
        if self.log:
            cmd += ["--log-file", str(Path(self.log_dir or ".") / f"{self.name}-bmv2"),
                    "--log-level", "info", "--log-flush"]
        if self.pcap:
            cmd += ["--pcap", str(self.log_dir or ".")]
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

    @staticmethod
    def _suffix(port: int | None, priority: int | None) -> str:
        if port is None:
            if priority is not None:
                raise ValueError("a queue priority needs a port")
            return ""
        return f" {port}" + (f" {priority}" if priority is not None else "")

    def set_queue_depth(self, depth: int, port: int | None = None,
                        priority: int | None = None) -> None:
        """Depth of one priority queue of `port`, of all its queues (priority None), or of every
        queue of every port (port None)."""
        self.cli([f"set_queue_depth {int(depth)}" + self._suffix(port, priority)])

    def set_queue_rate(self, pps: int, port: int | None = None,
                       priority: int | None = None) -> None:
        self.cli([f"set_queue_rate {int(pps)}" + self._suffix(port, priority)])

    def configure_queues(self, queues: Mapping[int | None, QueueConfig]) -> None:
        """{port (None = all ports of this switch): QueueConfig} in a single CLI call."""
        cmds = []
        for port, cfg in queues.items():
            for p in (sorted(self.ports) if port is None else [port]):
                cmds += cfg.commands(p, self.priority_queues)
        if cmds:
            self.cli(cmds)


def _cli_env(tc: Toolchain) -> dict[str, str]:
    """simple_switch_CLI imports bmv2's Python modules (runtime_CLI, sswitch_runtime, bm_runtime),
    installed under the toolchain's prefix; make them importable."""
    env = dict(os.environ)
    prefix = Path(tc.bin("simple_switch_CLI")).resolve().parent.parent
    extra = [d for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages",
                               "lib/python3/dist-packages")
             for d in glob.glob(str(prefix / pattern))]
    if extra:
        env["PYTHONPATH"] = os.pathsep.join(extra + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _cli_argv(cli: str) -> list[str]:
    """simple_switch_CLI is a Python script needing the `thrift` module: run it with this
    interpreter when that has thrift (the venv sees the distribution's python3-thrift through
    --system-site-packages), else as its shebang says."""
    try:
        with open(cli, "rb") as fh:
            is_python = b"python" in fh.readline()
    except OSError:
        is_python = False
    if is_python and importlib.util.find_spec("thrift") is not None:
        return [sys.executable, cli]
    return [cli]


_CLI_ERROR_MARKERS = ("Error", "Invalid", "Traceback", "Could not connect", "exception",
                      "Exception", "unknown command", "*** Unknown syntax")


def run_cli(tc: Toolchain, thrift_port: int, commands: Sequence[str], *, timeout: float = 30.0,
            switch: str = "", exec_prefix: Sequence[str] = ()) -> str:
    if "simple_switch_CLI" not in tc.paths:
        raise ToolchainMissing("simple_switch_CLI not found next to simple_switch_grpc: it is "
                               "part of BMv2 (p4lang-bmv2)")
    script = "\n".join(commands) + "\n"
    try:
        proc = subprocess.run([*exec_prefix, *_cli_argv(tc.bin("simple_switch_CLI")), "--thrift-port",
                               str(thrift_port)],
                              input=script, capture_output=True, text=True, timeout=timeout,
                              env=_cli_env(tc))
    except subprocess.TimeoutExpired as exc:
        raise SwitchCLIError(f"simple_switch_CLI on {switch or thrift_port} timed out after "
                             f"{timeout:.0f}s running: {'; '.join(commands)}") from exc
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EACCES):
            raise ToolchainMissing(f"cannot run simple_switch_CLI: {exc}") from exc
        raise
    output = proc.stdout + proc.stderr
    if "No module named 'thrift'" in output:
        raise ToolchainMissing("simple_switch_CLI needs the Python thrift module: apt-get install "
                               "python3-thrift (and a venv made with --system-site-packages)")
    bad = [ln.strip() for ln in output.splitlines()
           if any(m in ln for m in _CLI_ERROR_MARKERS)]
    if proc.returncode != 0 or bad:
        reason = bad[-1] if bad else f"exit {proc.returncode}"
        raise SwitchCLIError(f"simple_switch_CLI on {switch or thrift_port} failed "
                             f"({'; '.join(commands)}): {reason}")
    return output

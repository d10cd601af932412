"""Servers on one machine: the cluster tests' and the bench's stand-in for real ones.

Each "server" is a process in its own network, mount, PID and UTS namespaces, with its own
/run, /tmp and /sys (so its state directory, temporary files and interfaces are its own), a
hostname, and an `sshd` listening on its address; a second namespace holds the "head", where
`mn-harness run` is started. They reach each other only over a private underlay: a bridge in
a namespace of its own, one veth per server and one for the head, addresses of UNDERLAY_NET.
Nothing is added to the machine's own network namespace, nothing routes outside.

The servers share this machine's kernel, as the tests need them to: the run must find that out
and register each congestion control once (mn_harness.cluster.kernels). What is not shared is
what a real machine would not share with another: processes, mounts, interfaces, files in /run
and /tmp. Every process of the bed is tied to the process that made it (a pipe it reads until
EOF, `unshare --kill-child`), so a crashed test leaves nothing: the namespaces die with it.

    with ClusterBed(2) as bed:
        bed.head(["mn-harness", "run", "x.yaml"], env=bed.env())   # ssh to bed.addresses
        bed.server("a", ["ip", "link"])                             # inside server a
        bed.cut("b"); bed.restore("b")                              # b unreachable, and back"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

SSHD = "/usr/sbin/sshd"
UNDERLAY_NET = "10.213.0"  # /24: the head .100, server i .(i + 1)
HEAD_ADDRESS = f"{UNDERLAY_NET}.100"
DEFAULT_UNDERLAY_MTU = 1600  # VXLAN needs 1550 to carry 1500-byte frames
SSH_CONFIG_ENV = "MN_HARNESS_SSH_CONFIG"  # read by mn_harness.cluster.ssh

# pid 1 of a server: its own /run, /tmp and /sys, its hostname; waits until the underlay is
# wired, then runs sshd and reaps whatever is orphaned to it until sshd ends
_INIT = r"""
import os, subprocess, sys
name, conf = sys.argv[1], sys.argv[2]
for fs, where in (("tmpfs", "/run"), ("tmpfs", "/tmp"), ("sysfs", "/sys")):
    subprocess.run(["mount", "-t", fs, fs, where], check=True)
os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
subprocess.run(["hostname", name], check=True)
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
sys.stdin.readline()
sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", conf], stdin=subprocess.DEVNULL)
while True:
    try:
        pid, _ = os.wait()
    except ChildProcessError:
        break
    if pid == sshd.pid:
        break
"""

_SSHD_CONFIG = """Port 22
ListenAddress {address}
HostKey {host_key}
PidFile none
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AuthorizedKeysFile {authorized}
StrictModes no
UseDNS no
MaxStartups 100
MaxSessions 100
LogLevel ERROR
"""

_SSH_CONFIG = """Host {net}.*
  User root
  IdentityFile {key}
  IdentitiesOnly yes
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  LogLevel ERROR
"""


class BedError(RuntimeError):
    """The bed could not be built here (a tool is missing, the kernel refuses)."""


def unavailable_reason() -> str | None:
    """Why the bed cannot be built here; None when it can."""
    if os.geteuid() != 0:
        return "needs root (namespaces)"
    if not os.path.exists(SSHD):
        return f"no {SSHD}: apt-get install openssh-server (or `sudo make setup CLUSTER=1`)"
    for tool in ("ssh", "ssh-keygen", "unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} not found (openssh-client, util-linux, iproute2)"
    return None


def _run(argv: Sequence[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, **kw)
    if check and proc.returncode != 0:
        raise BedError(f"`{' '.join(argv)}` failed: {(proc.stderr or proc.stdout).strip()}")
    return proc


def _child_of(pid: int, timeout: float = 10.0) -> int:
    """The one child of `pid` (unshare --fork's), once it exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = []
        if children:
            return int(children[0])
        time.sleep(0.02)
    raise BedError(f"unshare (pid {pid}) started no child")


def _holder(*namespaces: str) -> subprocess.Popen:
    """A process in new namespaces that lives until our end of its stdin closes. Returned once
    it is in them: until unshare has unshared, /proc/PID/ns/* are still this machine's own, and
    a device made there would land in this machine's network."""
    proc = subprocess.Popen(["unshare", *namespaces, "--", "sh", "-c", "ip link set lo up; echo in; read _"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"in":
        proc.kill()
        proc.wait()
        raise BedError(f"unshare {' '.join(namespaces)} failed (exit {proc.returncode})")
    proc.stdout.close()
    own = os.stat("/proc/self/ns/net").st_ino
    if "--net" in namespaces and os.stat(f"/proc/{proc.pid}/ns/net").st_ino == own:
        proc.kill()
        proc.wait()
        raise BedError("unshare --net left the holder in this machine's network namespace")
    return proc


class ClusterBed:
    def __init__(self, n: int = 2, names: Sequence[str] | None = None, mtu: int = DEFAULT_UNDERLAY_MTU):
        self.names = list(names or [chr(ord("a") + i) for i in range(n)])
        self.mtu = mtu
        self.addresses = {name: f"{UNDERLAY_NET}.{i + 1}" for i, name in enumerate(self.names)}
        self.workdir: Path | None = None
        self._fabric: subprocess.Popen | None = None
        self._head: subprocess.Popen | None = None
        self._servers: dict[str, subprocess.Popen] = {}
        self.pids: dict[str, int] = {}  # server -> its pid 1, as this machine sees it

    # -- building ----------------------------------------------------------------------------
    def __enter__(self) -> ClusterBed:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> None:
        reason = unavailable_reason()
        if reason:
            raise BedError(reason)
        # not under /tmp: every server mounts a /tmp of its own over it
        self.workdir = Path(tempfile.mkdtemp(prefix="mn-harness-bed-", dir="/var/tmp"))
        key = self.workdir / "id"
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)])
        (self.workdir / "authorized_keys").write_text((self.workdir / "id.pub").read_text())
        (self.workdir / "ssh_config").write_text(_SSH_CONFIG.format(net=UNDERLAY_NET, key=key))
        self._fabric = _holder("--net")
        fabric = self._fabric.pid  # unshare execs the shell: same pid
        self._in_net(fabric, ["ip", "link", "add", "br0", "mtu", str(self.mtu), "type", "bridge"])
        self._in_net(fabric, ["ip", "link", "set", "br0", "up"])
        self._head = _holder("--net")
        self._wire(fabric, self._head.pid, "vhead", HEAD_ADDRESS)
        for name in self.names:
            host_key = self.workdir / f"host_{name}"
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)])
            conf = self.workdir / f"sshd_{name}.conf"
            conf.write_text(_SSHD_CONFIG.format(address=self.addresses[name], host_key=host_key,
                                                authorized=self.workdir / "authorized_keys"))
            proc = subprocess.Popen(
                ["unshare", "--net", "--mount", "--uts", "--pid", "--fork", "--mount-proc", "--propagation",
                 "private", "--kill-child", "--", sys.executable, "-c", _INIT, f"srv-{name}", str(conf)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self._servers[name] = proc
            self.pids[name] = _child_of(proc.pid)
            self._wire(fabric, self.pids[name], f"v{name}", self.addresses[name])
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        for name in self.names:
            self._wait_ssh(name)

    def _wire(self, fabric: int, pid: int, port: str, address: str) -> None:
        """A veth from the bridge to the namespace of `pid`, `eth0` there with `address`."""
        self._in_net(fabric, ["ip", "link", "add", port, "mtu", str(self.mtu), "type", "veth", "peer", "name",
                              "eth0", "mtu", str(self.mtu), "netns", str(pid)])
        self._in_net(fabric, ["ip", "link", "set", port, "master", "br0", "up"])
        self._in_net(pid, ["ip", "addr", "add", f"{address}/24", "dev", "eth0"])
        self._in_net(pid, ["ip", "link", "set", "eth0", "up"])

    @staticmethod
    def _in_net(pid: int, argv: Sequence[str]) -> subprocess.CompletedProcess:
        """`argv` in the network namespace of `pid`, never in this machine's own."""
        if os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino:
            raise BedError(f"pid {pid} is in this machine's network namespace: `{' '.join(argv)}` not run")
        return _run(["nsenter", f"--net=/proc/{pid}/ns/net", *argv])

    def _wait_ssh(self, name: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            proc = self.head(["ssh", "-F", str(self.ssh_config), "-o", "BatchMode=yes", "-o", "ConnectTimeout=2",
                              self.addresses[name], "true"], check=False, timeout=10)
            if proc.returncode == 0:
                return
            last = (proc.stderr or "").strip()
            server = self._servers[name]
            if server.poll() is not None:
                err = server.stderr.read().decode(errors="replace") if server.stderr else ""
                raise BedError(f"server {name}: exited ({err.strip() or 'no output'})")
            time.sleep(0.2)
        raise BedError(f"server {name}: no ssh after {timeout:g}s ({last})")

    # -- using -------------------------------------------------------------------------------
    @property
    def ssh_config(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "ssh_config"

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for a head command: ssh reads the bed's key and options."""
        return {**os.environ, SSH_CONFIG_ENV: str(self.ssh_config), **(extra or {})}

    def head_argv(self, argv: Sequence[str]) -> list[str]:
        """`argv` run in the head's network namespace (this machine's mounts and processes)."""
        assert self._head is not None
        return ["nsenter", f"--net=/proc/{self._head.pid}/ns/net", "--", *argv]

    def head(self, argv: Sequence[str], check: bool = True, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.head_argv(argv), capture_output=True, text=True, timeout=timeout, **kw)
        if check and proc.returncode != 0:
            raise BedError(f"head: `{' '.join(argv)}` failed: {(proc.stderr or proc.stdout).strip()}")
        return proc

    def server_argv(self, name: str, argv: Sequence[str]) -> list[str]:
        """`argv` inside server `name`: all its namespaces (its processes, mounts, interfaces)."""
        return ["nsenter", "-t", str(self.pids[name]), "--net", "--mount", "--pid", "--uts", "--", *argv]

    def server(self, name: str, argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.server_argv(name, argv), capture_output=True, text=True, timeout=60)
        if check and proc.returncode != 0:
            raise BedError(f"server {name}: `{' '.join(argv)}` failed: {(proc.stderr or proc.stdout).strip()}")
        return proc

    def cut(self, name: str) -> None:
        """Server `name` unreachable: its underlay port goes down (it keeps running)."""
        assert self._fabric is not None
        self._in_net(self._fabric.pid, ["ip", "link", "set", f"v{name}", "down"])

    def restore(self, name: str) -> None:
        assert self._fabric is not None
        self._in_net(self._fabric.pid, ["ip", "link", "set", f"v{name}", "up"])

    # -- taking down -------------------------------------------------------------------------
    def down(self) -> None:
        """Idempotent: every server's pid 1 killed (its namespaces, and everything in them, go),
        the head and the underlay released, the work directory removed."""
        for name, proc in list(self._servers.items()):
            pid = self.pids.get(name)
            for target in (pid, proc.pid):
                if target:
                    try:
                        os.kill(target, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            proc.wait(timeout=10)
            for stream in (proc.stdin, proc.stderr):
                if stream is not None:
                    stream.close()
        self._servers.clear()
        for holder in (self._head, self._fabric):
            if holder is not None:
                try:
                    assert holder.stdin is not None
                    holder.stdin.close()
                except OSError:
                    pass
                try:
                    holder.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    holder.kill()
                    holder.wait()
        self._head = self._fabric = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

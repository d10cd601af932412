"""Sockets and interfaces around a BMv2 switch: free listening ports, readiness probes, veth offloads.

A switch is ready when its gRPC server accepts connections (TCP or unix socket); its Thrift
server, inside a network namespace, listens on that namespace's own loopback, which the root
namespace cannot connect to, so its readiness is read from /proc/<pid>/net/tcp instead."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

from mn_harness.p4.errors import ToolchainMissing

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTEN_PORTS_FLOOR = 10000   # below it sit well-known services' ports
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def pick_free_port() -> int:
    """A TCP port free on every local address right now, below the kernel's ephemeral range.

    A port the kernel picks for a bind is an ephemeral one, which any outgoing connection
    (a gRPC client, a probe of another switch) may take as its source port before the switch
    binds it; a port below that range is never given to a connection. Ports handed out by this
    process are not handed out again, so two switches started together do not collide."""
    low = _ephemeral_low()
    with _handed_out_lock:
        if low - LISTEN_PORTS_FLOOR >= 1000:
            rng = random.SystemRandom()
            for _ in range(200):
                port = rng.randrange(LISTEN_PORTS_FLOOR, low)
                if port not in _handed_out and _bindable(port):
                    _handed_out.add(port)
                    return port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # no room below the range
            s.bind(("0.0.0.0", 0))
            port = s.getsockname()[1]
        _handed_out.add(port)
        return port


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


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

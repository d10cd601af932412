"""Sockets and interfaces around a BMv2 switch: free ports, readiness probes, veth offloads.

A switch is ready when its gRPC server accepts connections (TCP or unix socket); its Thrift
server, inside a network namespace, listens on that namespace's own loopback, which the root
namespace cannot connect to, so its readiness is read from /proc/<pid>/net/tcp instead."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

from mn_harness.p4.errors import ToolchainMissing


def pick_free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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

"""mn_harness.testing.ports: packet sockets opened inside namespaces from this process. Two
namespaces of our own joined by a veth pair; no switch needed."""

import os
import secrets
import subprocess
import threading

import pytest

from mn_harness.testing.ports import PortIO, PortIOError

pytestmark = pytest.mark.root

FRAME = bytes.fromhex("020000000002" "020000000001" "88b5") + b"mn-harness port test".ljust(46, b".")


@pytest.fixture
def pair():
    """Namespaces <tag>a and <tag>b, veth a0 <-> b0, both up, no addresses."""
    tag = f"pio{secrets.token_hex(2)}"
    names = [f"{tag}a", f"{tag}b"]
    try:
        for ns in names:
            subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(["ip", "link", "add", f"{tag}x", "netns", names[0], "type", "veth", "peer", "name",
                        f"{tag}y", "netns", names[1]], check=True)
        for ns, intf in zip(names, (f"{tag}x", f"{tag}y"), strict=True):
            subprocess.run(["ip", "-n", ns, "link", "set", intf, "name", "p0"], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", "p0", "up"], check=True)
        yield names
    finally:
        for ns in names:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def own_netns() -> str:
    return os.readlink(f"/proc/self/task/{threading.get_native_id()}/ns/net")


def test_frames_cross_and_our_own_are_not_received(pair):
    a, b = pair
    before = own_netns()
    with PortIO({"a": (a, "p0"), "b": (b, "p0")}) as io:
        assert io.send("a", [FRAME, FRAME[:-1] + b"!"]) == 2
        first = io.take("b", timeout=2)
        assert first is not None and first.data == FRAME
        marked = io.take("b", lambda d: d.endswith(b"!"), timeout=2)
        assert marked is not None
        assert io.pending() == {}  # a's own frames were not queued on a
        # frames that do not match stay for later
        io.send("b", FRAME)
        assert io.take("a", lambda d: False, timeout=0.3) is None
        assert [f.data for f in io.pending(["a"])["a"]] == [FRAME]
        io.drain()
        assert io.pending() == {}
    assert own_netns() == before  # only the short-lived opener threads moved


def test_bad_ports_are_named(pair):
    a, _ = pair
    with pytest.raises(PortIOError, match="cannot open a packet socket on nope in namespace"):
        PortIO({"x": (a, "nope")}).start()
    with PortIO({"a": (a, "p0")}) as io, pytest.raises(PortIOError, match="no port 'b'; ports: a"):
        io.send("b", FRAME)

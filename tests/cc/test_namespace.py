"""The namespace-default CC on the real kernel: a network namespace may only default to a CC in
the global allowed list (else EPERM, and it keeps the inherited default); AllowedList adds and
takes out exactly its own names; a BPF CC a namespace defaulted to still unregisters and is
freed once the namespace's default is reset."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mn_harness.cc.errors import CCUnavailable
from mn_harness.cc.manager import CongestionControlManager, available_congestion_controls
from mn_harness.cc.namespace import (
    AllowedList,
    namespace_default,
    read_allowed,
    reset_namespace_default,
    set_namespace_default,
)
from mn_harness.cc.spec import CCSpec
from mn_harness.network.commands import run_in

pytestmark = pytest.mark.root

SOCKET_CC = ("import socket; s = socket.socket(); "
             "print(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b'\\0')[0].decode())")


@pytest.fixture
def netns():
    """A process alone in a new network namespace; its pid names the namespace."""
    proc = subprocess.Popen(["unshare", "--net", "sleep", "120"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def socket_cc(pid: int) -> str:
    return run_in(pid, [sys.executable, "-c", SOCKET_CC]).strip()


def test_namespace_default_needs_the_allowed_list_and_is_restored(netns):
    subprocess.run(["modprobe", "tcp_cubic"], capture_output=True)
    before = read_allowed()
    if "cubic" in before or "cubic" not in available_congestion_controls():
        pytest.skip(f"needs cubic available and not allowed (allowed: {' '.join(before)})")
    inherited = namespace_default(run_in, netns)
    with pytest.raises(CCUnavailable) as err:
        set_namespace_default(run_in, netns, "h1", "cubic")
    assert "tcp_allowed_congestion_control" in str(err.value) and "\n" not in str(err.value)
    assert namespace_default(run_in, netns) == inherited  # the kernel kept the old default
    recorded = []
    allowed = AllowedList(on_change=recorded.append)
    allowed.allow(["cubic", "reno"])  # reno is allowed already: not added, not removed later
    try:
        assert read_allowed() == [*before, "cubic"]
        assert recorded[-1] == {"before": before, "added": ["cubic"]}
        set_namespace_default(run_in, netns, "h1", "cubic")
        assert socket_cc(netns) == "cubic"  # new sockets of the namespace get it
    finally:
        allowed.close()
    assert read_allowed() == before
    assert recorded[-1]["added"] == []
    allowed.close()  # idempotent
    assert read_allowed() == before


def test_bpf_cc_as_namespace_default_unregisters_and_is_freed(tmp_path, netns):
    before = read_allowed()
    with CongestionControlManager(log=lambda *_: None) as ccm:
        spec = CCSpec.from_dict("mltcp-reno", "cc")
        ccm.prepare([spec])
        name = ccm.kernel_name(spec)
        allowed = AllowedList()
        allowed.allow([name])
        try:
            set_namespace_default(run_in, netns, "h1", name)
            assert socket_cc(netns) == name
            reset_namespace_default(run_in, netns)  # what the run does before unregistering
        finally:
            allowed.close()
        assert read_allowed() == before
    assert name not in available_congestion_controls()
    listed = subprocess.run(["bpftool", "struct_ops", "list"], capture_output=True, text=True).stdout
    assert name not in listed

"""Root tests of the BPF congestion controls on the real kernel, with real TCP transfers
between two network namespaces joined by a veth pair shaped to 200 Mbit/s by HTB.

Why these checks: they are the claims issue 3 makes about the variants — each one
registers, carries traffic and shows in `ss -ti`; nothing stays registered after the
experiment (also after a failure); with F == 1 the MLTCP variants move the same bytes as
the kernel's own reno / cubic through a shared bottleneck; the in-kernel iteration
detection learns the application's bytes per iteration.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mn_harness.cc.errors import CCError, CCUnavailable
from mn_harness.cc.manager import (
    CongestionControlManager,
    available_congestion_controls,
    unregister_by_name,
)
from mn_harness.cc.spec import CCSpec
from tests.cc.adapt_rule import CALM_SHIFT, adapt_states, adapt_trace, factor_fp, row_rate

pytestmark = pytest.mark.root

PID = os.getpid()
NS_A, NS_R, NS_B = f"mlcc{PID}a", f"mlcc{PID}r", f"mlcc{PID}b"
IP_A, IP_B = "10.77.1.1", "10.77.2.1"
BOTTLENECK_DEV = f"mlcc{PID}r1"  # R's interface towards B
RATE = "200mbit"
FIFO_LIMIT = 200  # the bottleneck FIFO's packets (the module's network)
ITERATION_FIFO_LIMIT = 2000  # ... in the loss-signal patterns: a whole 2 MB iteration, so F and S lose nothing
M_FIFO_LIMIT = 8  # ... during an M iteration of the loss-signal patterns: overflows after every recovery
SET_FIFO_LIMIT = f"tc qdisc change dev {BOTTLENECK_DEV} parent 1:10 handle 10: pfifo limit"  # + packets, in R

# One small traffic tool, run inside a namespace with `ip netns exec ... python -c`.
TRAFFIC = r'''
import json, socket, struct, sys, threading, time
mode = sys.argv[1]

def sink(port, seconds):
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port)); srv.listen(16); srv.settimeout(seconds)
    def serve(c):
        hdr = b""
        while len(hdr) < 8:
            d = c.recv(8 - len(hdr))
            if not d: return
            hdr += d
        step = struct.unpack("!Q", hdr)[0]; got = 0
        while True:
            d = c.recv(1 << 20)
            if not d: return
            got += len(d)
            if step and got >= step:
                got -= step; c.sendall(b"k")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try: c, _ = srv.accept()
        except OSError: break
        threading.Thread(target=serve, args=(c,), daemon=True).start()

def connect(host, port, cc, step, first=b""):
    # the 8-byte header goes out with the first payload: one iteration, not two
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    s.connect((host, port)); s.sendall(struct.pack("!Q", step) + first)
    return s

def acked(s):
    return struct.unpack_from("Q", s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232), 120)[0]

def blast(host, port, start, warm, seconds, n, ccs):
    # n sockets per CC in `ccs` (comma-separated), connected round-robin (a, b, a, b, ...)
    # and pumped from one select loop: no threads, no second process, so every socket gets
    # the same service whatever its CC. Bytes acked counted over
    # [start + warm, start + warm + seconds] on the shared clock.
    import selectors
    ccs = ccs.split(",")
    names = [ccs[i % len(ccs)] for i in range(n * len(ccs))]
    socks = [connect(host, port, cc, 0) for cc in names]
    for s in socks: s.setblocking(False)
    sel = selectors.DefaultSelector()
    for s in socks: sel.register(s, selectors.EVENT_WRITE)
    buf = b"x" * 65536
    marks = [start + warm, start + warm + seconds]; snaps = []
    while time.monotonic() < start: time.sleep(0.005)
    while len(snaps) < 2:
        if time.monotonic() >= marks[len(snaps)]:
            snaps.append([acked(s) for s in socks]); continue
        for key, _ in sel.select(timeout=0.01):
            try: key.fileobj.send(buf)
            except BlockingIOError: pass
    print(json.dumps([{"cc": cc, "sport": s.getsockname()[1], "bytes": b - a,
                       "retrans": struct.unpack_from("I", s.getsockopt(
                           socket.IPPROTO_TCP, socket.TCP_INFO, 232), 100)[0]}
                      for cc, s, a, b in zip(names, socks, *snaps)]), flush=True)
    for s in socks: s.close()

def iterate(host, port, cc, iters, pause, sizes):
    out = []
    def run(size):
        buf = b"x" * size; s = connect(host, port, cc, size, buf)
        out.append({"size": size, "sport": s.getsockname()[1]})
        for i in range(iters):
            if i: s.sendall(buf)
            if s.recv(1) != b"k": raise SystemExit("sink went away")
            time.sleep(pause)
        s.close()
    ts = [threading.Thread(target=run, args=(z,)) for z in sizes]
    for t in ts: t.start()
    for t in ts: t.join()
    print(json.dumps(out), flush=True)

def split(host, port, cc, iters, pause, stall, size):
    # every iteration but the first sends its bytes in two halves `stall` seconds apart (a
    # ring step waiting for its neighbour), then waits `pause` (the compute phase)
    half = b"x" * (size // 2); s = connect(host, port, cc, 2 * len(half), half + half)
    if s.recv(1) != b"k": raise SystemExit("sink went away")
    for i in range(1, iters):
        time.sleep(pause); s.sendall(half); time.sleep(stall); s.sendall(half)
        if s.recv(1) != b"k": raise SystemExit("sink went away")
    print(json.dumps([{"size": 2 * len(half), "sport": s.getsockname()[1]}]), flush=True)
    time.sleep(pause); s.close()

def merge(host, port, cc, iters, pause, short_at, size):
    # iterations of `size` bytes `pause` seconds apart, except a 5 ms pause before iteration
    # `short_at` (0-based): a boundary the kernel cannot see, two iterations in one
    buf = b"x" * size; s = connect(host, port, cc, size, buf)
    if s.recv(1) != b"k": raise SystemExit("sink went away")
    for i in range(1, iters):
        time.sleep(0.005 if i == short_at else pause); s.sendall(buf)
        if s.recv(1) != b"k": raise SystemExit("sink went away")
    print(json.dumps([{"size": size, "sport": s.getsockname()[1]}]), flush=True)
    time.sleep(pause); s.close()

def pattern(host, port, cc, pause, stall, size, kinds, router="", narrow="", widen=""):
    # one iteration per letter of `kinds`, `pause` seconds apart: F sends its bytes at once, S
    # in two halves, the second `stall` seconds after the first was acknowledged (shorter than
    # the idle gap: the same iteration, at a lower rate); T (not the first) at once, into a
    # blackhole route in namespace `router` that goes away after 0.5 s: the kernel's minimum
    # RTO is 200 ms, so the sender times out (once or twice) inside the iteration; L (not the
    # first) at once, the route a blackhole for 2 ms from about 10 ms into the iteration (which
    # takes 80 ms): the packets sent then are lost and the later ones' SACKs (or the tail loss
    # probe's) repair them in fast recovery, inside the iteration; M (not the first) at once
    # through a bottleneck FIFO of a few packets (the `narrow` command in `router` before it,
    # `widen` after): the window overflows it again after each recovery, many loss episodes
    import fcntl, subprocess, termios
    def unacked(s):  # bytes written and not yet acknowledged, sent or not (SIOCOUTQ)
        return struct.unpack("I", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
    def blackhole(op):
        subprocess.run(["ip", "netns", "exec", router, "ip", "route", op, "blackhole",
                        host + "/32"], check=True)
    half = b"x" * (size // 2); s = connect(host, port, cc, 2 * len(half), half)
    for i, kind in enumerate(kinds):
        if i:
            time.sleep(pause)
            if kind == "T":
                blackhole("add"); threading.Timer(0.5, blackhole, args=("del",)).start()
            if kind == "L":
                cuts = f"sleep 0.01; ip route add blackhole {host}/32; sleep 0.002; ip route del blackhole {host}/32"
                cut = threading.Thread(target=subprocess.run, args=(
                    ["ip", "netns", "exec", router, "sh", "-c", cuts],), kwargs={"check": True})
                cut.start()
            if kind == "M":
                subprocess.run(["ip", "netns", "exec", router, "sh", "-c", narrow], check=True)
            s.sendall(half)
        if kind == "S":
            while unacked(s): time.sleep(0.001)
            time.sleep(stall)
        s.sendall(half)
        if s.recv(1) != b"k": raise SystemExit("sink went away")
        if kind == "L": cut.join()
        if kind == "M": subprocess.run(["ip", "netns", "exec", router, "sh", "-c", widen], check=True)
    print(json.dumps([{"size": 2 * len(half), "sport": s.getsockname()[1]}]), flush=True)
    time.sleep(pause); s.close()

def restart(host, port, cc, size, pause):
    # one iteration of `size` bytes, `pause` seconds of idle, then one byte (a new iteration's
    # first send): the window after the first iteration and right after that byte
    def cwnd(s):
        return struct.unpack_from("I", s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232), 80)[0]
    s = connect(host, port, cc, size, b"x" * size)
    if s.recv(1) != b"k": raise SystemExit("sink went away")
    before = cwnd(s); time.sleep(pause); s.sendall(b"y"); time.sleep(0.02)
    print(json.dumps({"sport": s.getsockname()[1], "before": before, "after": cwnd(s)}), flush=True)
    s.close()

if mode == "sink": sink(int(sys.argv[2]), float(sys.argv[3]))
elif mode == "restart":
    restart(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6]))
elif mode == "pattern":
    pattern(sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]), float(sys.argv[6]),
            int(sys.argv[7]), sys.argv[8], *sys.argv[9:])
elif mode == "merge":
    merge(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6]),
          int(sys.argv[7]), int(sys.argv[8]))
elif mode == "split":
    split(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6]),
          float(sys.argv[7]), int(sys.argv[8]))
elif mode == "blast":
    blast(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]),
          float(sys.argv[6]), int(sys.argv[7]), sys.argv[8])
elif mode == "iter":
    iterate(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6]),
            [int(x) for x in sys.argv[7:]])
'''


def sh(*cmd: str, ns: str | None = None, check: bool = True, timeout: float = 30):
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(full)}: {proc.stderr.strip()}")
    return proc.stdout


def traffic(ns: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", TRAFFIC,
                             *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(proc: subprocess.Popen, timeout: float = 30):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"traffic tool timed out: {err.strip()}") from None
    assert proc.returncode == 0, err.strip()
    return json.loads(out) if out.strip() else None


@contextlib.contextmanager
def veth_pair(limit: int = 100):
    """A --veth-- R --veth-- B. R routes and shapes its egress towards B to RATE with HTB and
    a `limit`-packet FIFO. The bottleneck sits in a different namespace from the senders on
    purpose: a qdisc on the sender's own interface is throttled by TCP small queues per
    socket, which would split bandwidth equally whatever the congestion control. GSO/TSO
    are off so the FIFO holds real packets. Deleting the namespaces removes the veths."""
    created = []
    links = ((NS_A, f"mlcc{PID}a0", "10.77.1.1", NS_R, f"mlcc{PID}r0", "10.77.1.2"),
             (NS_B, f"mlcc{PID}b0", "10.77.2.1", NS_R, BOTTLENECK_DEV, "10.77.2.2"))
    try:
        for ns in (NS_A, NS_R, NS_B):
            sh("ip", "netns", "add", ns)
            created.append(ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
        for end_ns, end_dev, end_ip, r_ns, r_dev, r_ip in links:
            sh("ip", "link", "add", end_dev, "netns", end_ns, "type", "veth", "peer", "name",
               r_dev, "netns", r_ns)
            for ns, dev, ip in ((end_ns, end_dev, end_ip), (r_ns, r_dev, r_ip)):
                sh("ip", "addr", "add", f"{ip}/24", "dev", dev, ns=ns)
                sh("ip", "link", "set", dev, "up", ns=ns)
                sh("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns,
                   check=False)
            sh("ip", "route", "add", "default", "via", r_ip, ns=end_ns)
        sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=NS_R)
        sh("tc", "qdisc", "add", "dev", BOTTLENECK_DEV, "root", "handle", "1:", "htb",
           "default", "10", ns=NS_R)
        sh("tc", "class", "add", "dev", BOTTLENECK_DEV, "parent", "1:", "classid", "1:10",
           "htb", "rate", RATE, "ceil", RATE, ns=NS_R)
        sh("tc", "qdisc", "add", "dev", BOTTLENECK_DEV, "parent", "1:10", "handle", "10:",
           "pfifo", "limit", str(limit), ns=NS_R)
        yield
    finally:
        for ns in created:
            sh("ip", "netns", "del", ns, check=False)


@pytest.fixture(scope="module")
def net():
    with veth_pair(limit=FIFO_LIMIT):
        yield


def struct_ops_names() -> str:
    return sh("bpftool", "struct_ops", "list")


@pytest.fixture
def manager(tmp_path):
    with CongestionControlManager(log=lambda m: None) as m:
        yield m
    for name in m.registered_names():
        assert name not in available_congestion_controls()


@pytest.mark.parametrize("variant", ["mltcp-reno", "mltcp-cubic", "dctcp", "mltcp-dctcp"])
def test_variant_registers_carries_traffic_and_unregisters(net, tmp_path, variant):
    spec = CCSpec(variant)
    with CongestionControlManager(log=lambda m: None) as mgr:
        mgr.prepare([spec])
        name = mgr.kernel_name(spec)
        assert len(name) <= 15 and name in mgr.registered_names()
        assert name in Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text()
        sink = traffic(NS_B, "sink", 5201, 6)
        time.sleep(0.3)
        client = traffic(NS_A, "blast", IP_B, 5201, time.monotonic() + 0.2, 0.3, 1.2, 1, name)
        time.sleep(0.8)
        ss = sh("ss", "-tin", "dst", IP_B, ns=NS_A)
        result = finish(client)
        sink.kill()
        sink.wait()
        assert name in ss, f"{name} not shown by ss -ti:\n{ss}"
        # 1.2 s at 200 Mbit/s is 30 MB; demand a real transfer, not a trickle.
        assert result[0]["bytes"] > 10_000_000, result
    assert name not in available_congestion_controls()
    assert name not in struct_ops_names()


def test_unregistered_after_failure_inside_with(tmp_path):
    specs = [CCSpec("mltcp-reno", slope=0.25, intercept=0.75), CCSpec("cubic")]
    with pytest.raises(RuntimeError, match="boom"):
        with CongestionControlManager(log=lambda m: None) as mgr:
            mgr.prepare(specs)
            names = mgr.registered_names()
            assert len(names) == 1 and names[0] in available_congestion_controls()
            assert mgr.kernel_name(specs[1]) == "cubic"
            raise RuntimeError("boom")
    assert names[0] not in available_congestion_controls()
    assert names[0] not in struct_ops_names()
    mgr.close()  # idempotent


def test_distinct_parameters_get_distinct_instances(manager):
    a = CCSpec("mltcp-reno", slope=1.0, intercept=1.0)
    b = CCSpec("mltcp-reno", slope=2.0, intercept=0.5, idle_gap_s=0.005)
    same_as_a = CCSpec.from_dict({"name": "mltcp_reno", "slope": 1, "intercept": 1.0},
                                 "jobs[2].cc")
    manager.prepare([a, b, same_as_a])
    assert manager.kernel_name(a) != manager.kernel_name(b)
    assert manager.kernel_name(a) == manager.kernel_name(same_as_a)
    assert len(manager.registered_names()) == 2


def test_failed_prepare_leaves_nothing_registered(tmp_path, monkeypatch):
    mgr = CongestionControlManager(log=lambda m: None)
    mgr.prepare([CCSpec("mltcp-cubic", slope=0.5)])
    name = mgr.registered_names()[0]
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without clang/bpftool/modprobe
    with pytest.raises(CCUnavailable) as exc:
        mgr.prepare([CCSpec("mltcp-cubic", slope=0.75)])
    monkeypatch.undo()
    assert "apt-get install" in str(exc.value) and "\n" not in str(exc.value)
    assert name not in available_congestion_controls()
    assert mgr.registered_names() == []


def test_unknown_kernel_cc_is_one_clear_line(tmp_path):
    # 'lp' is a real Linux CC that this test machine may or may not have as a module.
    with CongestionControlManager(log=lambda m: None) as mgr:
        try:
            mgr.prepare([CCSpec("lp")])
        except CCUnavailable as exc:
            assert "modprobe tcp_lp" in str(exc) and "\n" not in str(exc)
        else:
            assert mgr.kernel_name(CCSpec("lp")) == "lp"
        with pytest.raises(CCError):
            mgr.kernel_name(CCSpec("bbr"))  # not prepared


def test_unregister_by_name(tmp_path):
    mgr = CongestionControlManager(log=lambda m: None)
    mgr.prepare([CCSpec("mltcp-reno", slope=3.0)])
    name = mgr.registered_names()[0]
    unregister_by_name(name)  # what `mn-harness clean` does after a crash
    assert name not in available_congestion_controls()
    unregister_by_name(name)  # idempotent
    mgr.close()  # nothing left to do, no error
    with pytest.raises(CCError):
        unregister_by_name("not a name; rm -rf")


ROUNDS, FLOWS, WARM_S, MEASURE_S = 10, 4, 1.0, 4.0


def compete(a: str, b: str, rounds: int = ROUNDS, flows: int = FLOWS) -> list[tuple[int, int]]:
    """Per round, bytes acked by `flows` connections of CC `a` and as many of CC `b`, all
    in one sender process and sharing the bottleneck, over MEASURE_S after WARM_S warm-up;
    which CC connects first alternates between rounds. a == b is allowed (the control)."""
    out = []
    for i in range(rounds):
        sink = traffic(NS_B, "sink", 5202, 12)
        time.sleep(0.3)
        try:
            first, second = (a, b) if i % 2 == 0 else (b, a)
            flows_out = finish(traffic(NS_A, "blast", IP_B, 5202, time.monotonic() + 0.5,
                                       WARM_S, MEASURE_S, flows, f"{first},{second}"))
        finally:
            sink.kill()
            sink.wait()
        # sockets alternate first, second, first, ...: sides by position (works for a == b)
        got = [0, 0]
        for k, f in enumerate(flows_out):
            got[k % 2 if i % 2 == 0 else 1 - k % 2] += f["bytes"]
        out.append((got[0], got[1]))
    return out


# Controls on the 2-core CI VM (kernel 6.18), 4 + 4 flows in one process, 200 Mbit/s,
# 200-packet FIFO, 6 rounds x 4 s: per round b/a swings 0.77-1.31, per 6-round test
# reno/reno 0.940-1.009, mlreno/mlreno 0.954-1.022, cubic/cubic 0.945-1.063,
# mlcubic/mlcubic 0.948-1.067. With 10 rounds, 5 runs in a row: mltcp-reno/reno
# 1.002-1.092, mltcp-cubic/cubic 0.971-1.029. The 10% tolerance stays.
TOLERANCE = 0.10


def _ratio(rounds: list[tuple[int, int]]) -> float:
    return sum(r[1] for r in rounds) / sum(r[0] for r in rounds)


@pytest.mark.slow
@pytest.mark.parametrize("base,variant", [("reno", "mltcp-reno"), ("cubic", "mltcp-cubic")])
def test_f_equal_one_moves_same_bytes_as_kernel(net, manager, base, variant, capsys):
    """With slope 0 / intercept 1 the variant is its base algorithm: over a shared
    bottleneck it must get the same bytes as the kernel's own CC within TOLERANCE.
    Before mltcp_common.h's lost-callback guard, BPF Reno won by 1.1-1.5x in about one
    run of three here (kernel returned garbage ssthresh, see mltcp_common.h)."""
    spec = CCSpec(variant, slope=0.0, intercept=1.0, restart=False, adapt=False)
    manager.prepare([spec, CCSpec(base)])
    rounds = compete(base, manager.kernel_name(spec))
    ratio = _ratio(rounds)
    if not 1 - TOLERANCE <= ratio <= 1 + TOLERANCE:
        # One round swings 0.77-1.31, so 10 rounds carry a ~3-4% standard error: a sample
        # near the bound is extended (same bound, twice the data) rather than judged alone.
        # A real bias of 10% or more, like the 1.1-1.5x before the lost-callback guard,
        # still fails on the pooled 20 rounds.
        rounds += compete(base, manager.kernel_name(spec))
        ratio = _ratio(rounds)
    per_round = " ".join(f"{m / k:.3f}" for k, m in rounds)
    used = sum(k + m for k, m in rounds) / (len(rounds) * MEASURE_S * 200e6 / 8)
    with capsys.disabled():
        print(f"\n{variant}(F=1)/{base} bytes ratio {ratio:.3f}, bottleneck {used:.0%} used "
              f"(rounds: {per_round})")
    # The flows must have shared a full link, or the ratio says nothing about the CCs. One CI
    # run on the 2-core VM used 79% (63-87 MB per 100 MB round: the one sender process, 8
    # flows, competes with pytest for 2 cores); the same VM idle used 89-90% (2 runs, 3 Dec
    # 2026). The bound only catches a sender that stalled or a link that was not the limit.
    assert used > 0.6, f"bottleneck only {used:.0%} used: the CCs did not compete"
    assert 1 - TOLERANCE <= ratio <= 1 + TOLERANCE, per_round


def test_learned_bytes_per_iteration(net, manager, capsys):
    # default slope/intercept; the pauses here are 60 ms, so a gap below the 50 ms default
    spec = CCSpec("mltcp-reno", idle_gap_s=0.02)
    manager.prepare([spec])
    sizes = [400_000, 1_500_000]
    sink = traffic(NS_B, "sink", 5203, 15)
    time.sleep(0.3)
    try:
        conns = finish(traffic(NS_A, "iter", IP_B, 5203, manager.kernel_name(spec), 8, 0.06,
                               *sizes))
    finally:
        sink.kill()
        sink.wait()
    time.sleep(0.2)  # let the closed sockets be destroyed (release() writes the last row)
    rows = manager.read_telemetry()
    for conn in conns:
        mine = [r for r in rows if r["src"].endswith(f":{conn['sport']}")]
        iterations = {r["iteration"] for r in mine}
        assert iterations >= set(range(1, 9)), (conn, sorted(iterations))
        assert len(iterations) == 8, f"iteration boundaries mis-detected: {sorted(iterations)}"
        for r in mine:
            if r["iteration"] >= 2 and not r["final"]:
                err = abs(r["learned_bytes_per_iteration"] / conn["size"] - 1)
                with capsys.disabled():
                    print(f"\nsize {conn['size']} iter {r['iteration']}: learned "
                          f"{r['learned_bytes_per_iteration']} ({err:.2%})", end="")
                assert err <= 0.05, r
        assert all(r["kernel_name"] == manager.kernel_name(spec) for r in mine)


def one_connection_rows(manager, mode: str, port: int, *args, spec: CCSpec | None = None) -> list[dict]:
    """Run the traffic tool's `mode` (one connection, mltcp-reno with a 50 ms idle gap unless
    `spec` says otherwise) into a sink and return that connection's telemetry rows in iteration
    order."""
    spec = spec or CCSpec("mltcp-reno", idle_gap_s=0.05)
    manager.prepare([spec])
    sink = traffic(NS_B, "sink", port, 20)
    time.sleep(0.3)
    try:
        (conn,) = finish(traffic(NS_A, mode, IP_B, port, manager.kernel_name(spec), *args))
    finally:
        sink.kill()
        sink.wait()
    time.sleep(0.5)  # the socket closes after its last pause; release() writes the last row
    return sorted((r for r in manager.read_telemetry() if r["src"].endswith(f":{conn['sport']}")),
                  key=lambda r: r["iteration"])


def test_stall_inside_an_iteration_does_not_end_it(net, manager):
    """A pause longer than idle_gap after half of an iteration's bytes (a ring step stalled on
    its neighbour) is not an iteration boundary: one telemetry row per iteration, each with
    the whole iteration's bytes (variants.MIN_ITERATION_FRACTION). Before that rule every
    such iteration showed as two rows of half the bytes, F restarting mid-phase."""
    size, iters = 2_000_000, 6
    mine = one_connection_rows(manager, "split", 5204, iters, 0.3, 0.15, size)
    assert [r["iteration"] for r in mine] == list(range(1, iters + 1)), \
        [(r["iteration"], r["bytes"]) for r in mine]
    for r in mine:
        assert abs(r["bytes"] / size - 1) <= 0.01, r
        if r["iteration"] >= 2:
            assert r["f_last"] > 4.5, r  # F reached ~slope + intercept by the iteration's end


def test_missed_boundary_does_not_merge_the_iterations_after_it(net, manager):
    """One compute pause shorter than idle_gap makes two iterations one row of twice the
    bytes; the iterations after it must again be one row each. Before the estimate ignored a
    single iteration over 1.5x, the doubled bytes raised it until every later boundary fell
    under MIN_ITERATION_FRACTION of it, and all later iterations were merged in pairs."""
    size, iters = 2_000_000, 9
    mine = one_connection_rows(manager, "merge", 5205, iters, 0.3, 3, size)
    got = [round(r["bytes"] / size) for r in mine]
    assert got == [1, 1, 2] + [1] * (iters - 3 - 1), got
    assert all(abs(r["learned_bytes_per_iteration"] / size - 1) <= 0.01 for r in mine), \
        [r["learned_bytes_per_iteration"] for r in mine]


@pytest.mark.parametrize("variant", ["mltcp-reno", "mltcp-dctcp"])
def test_restart_starts_each_iteration_from_the_initial_window(net, manager, variant):
    """`restart: true` (the default) sets the window to the initial 10 segments at the iteration
    boundary MLTCP sees (a send after more than idle_gap of idle); without it the window the first
    iteration ended with is kept. The idle here (150 ms) is below the RTO, so the kernel's own
    slow start after idle, off in this namespace anyway, would not restart it."""
    on, off = (CCSpec(variant, idle_gap_s=0.05, restart=True), CCSpec(variant, idle_gap_s=0.05, restart=False))
    manager.prepare([on, off])
    sh("sysctl", "-qw", "net.ipv4.tcp_slow_start_after_idle=0", ns=NS_A)
    got = {}
    try:
        for spec in (on, off):
            sink = traffic(NS_B, "sink", 5206, 10)
            time.sleep(0.3)
            try:
                got[spec.restart] = finish(traffic(NS_A, "restart", IP_B, 5206, manager.kernel_name(spec),
                                                   3_000_000, 0.15))
            finally:
                sink.kill()
                sink.wait()
    finally:
        sh("sysctl", "-qw", "net.ipv4.tcp_slow_start_after_idle=1", ns=NS_A)
    assert got[False]["before"] >= 20 and got[True]["before"] >= 20, got  # a grown window first
    assert got[False]["after"] >= 20, got
    assert got[True]["after"] <= 12, got  # 10, plus what the one byte's ACK added


@pytest.mark.parametrize("kinds,shape", [
    # steady (a job alone, or apart from its rivals): nothing to gain, the search ends
    ("FFFFFFFFFFFF", "S{9,10}b+"),
    # alternately fast and slow (jobs that keep taking the link from each other): the search
    # ends, and single slow iterations start no new one
    ("FSFSFSFSFSFSFS", "S{9,10}b+"),
    # slow, then fast (pushed, then apart): progress at the 7th, 8 more iterations searching
    ("SSSSSSFFFFFFFFFFFF", "S{15,16}b+"),
    # apart, then colliding twice in a row (a relapse, a new rival): a new search
    ("FFFFFFFFFFFFSSFFFF", "S{9,10}b{4,5}S+"),
    # the backoff: after one relapse the next search needs 4 slow iterations in a row: 2 start
    # none, 4 do
    ("F" * 12 + "SS" + "F" * 10 + "SS" + "FF" + "SSSS" + "FF", "S{9,10}b{4,5}S{8}b{10}S+"),
    # a retransmission timeout (T) in a search a relapse started ends it, and doubles the next
    # relapse's count once more (8): 4 slow iterations in a row start no search
    ("F" * 12 + "SS" + "FFT" + "F" * 4 + "SSSS" + "F", "S{9,10}b{4,5}SSSb+"),
    # a timeout in the first search changes nothing
    ("FFFT" + "F" * 10, "S{9,10}b+"),
    # a timeout as the base CC (one slow iteration) starts nothing
    ("F" * 12 + "T" + "F" * 4, "S{9,10}b+"),
])
def test_adaptive_step_searches_while_it_pays(net, manager, kinds, shape):
    """The adaptive step (mltcp_common.h mltcp_adapt) on one connection whose iterations are
    fast (F: 2 MB at once, 200 Mbit/s) or slow (S: the second MB 60 ms after the first was
    acknowledged, ~0.6 of F's rate) or time out (T: the path a blackhole for 0.5 s). The kernel's
    state per row (telemetry `slope`: 32 while it searches, 0 as its base CC) must be what the
    rule computes in Python from the rows' own rates and timeouts (adapt_rule.adapt_states), and
    have the shape each pattern is for; rows as the base CC have F = 1, searching rows reach
    F > 20 (slope 32)."""
    import re
    spec = CCSpec("mltcp-reno", idle_gap_s=0.1, calm_by=0)  # the loss signal off: the rule alone
    assert spec.resolved().adapt and spec.resolved().slope == 32
    mine = one_connection_rows(manager, "pattern", 5207, 0.2, 0.06, 2_000_000, kinds, NS_R, spec=spec)
    assert [r["iteration"] for r in mine] == list(range(1, len(kinds) + 1)), \
        [(r["iteration"], r["bytes"]) for r in mine]
    got = "".join("S" if r["slope"] == 32 else "b" if r["slope"] == 0 else "?" for r in mine)
    rates = [round(r["bytes"] / (r["end_s"] - r["start_s"]) / 1e6) for r in mine if r["end_s"]]
    complete = [r for r in mine if not r["final"]]
    rtos = [r["rto"] for r in complete]
    assert got == adapt_states([row_rate(r) for r in complete], rtos), (got, rates, rtos)  # last: at close
    # the telemetry's count is the rule's during each iteration (searching: since the last progress)
    assert [r["count"] for r in complete] == [s.count for s in adapt_trace([row_rate(r) for r in complete], rtos)][:-1]
    # the telemetry says which iterations timed out: every T's (others may, on a loss that
    # fast retransmit did not repair)
    assert all(rtos[i] for i, k in enumerate(kinds[:len(complete)]) if k == "T"), (rtos, kinds)
    assert re.fullmatch(shape, got), (got, rates)
    assert all(r["f_last"] == 1.0 for r in complete if got[r["iteration"] - 1] == "b"), \
        [r["f_last"] for r in complete]
    assert all(r["f_last"] > 20 for r in complete[1:] if got[r["iteration"] - 1] == "S"), \
        [r["f_last"] for r in complete]  # searching: F up to 33 by the end of each iteration


# DCTCP's response to ECN marks needs a marking bottleneck, which this kernel lacks (no RED):
# it is tested on BMv2's marking queue in tests/p4/test_harness_bmv2.py (dctcp keeps the
# bottleneck near the threshold where cubic fills it).


@pytest.mark.parametrize("damp,damp_after", [(0, 0), (1, 0), (1, 2)])
def test_losses_damp_a_searching_iterations_f(net, manager, damp, damp_after):
    """The loss-damped search (`damp`, `damp_after`, mltcp_common.h mltcp_factor) on one
    connection whose iterations are fast (F), slow (S), lose packets that fast recovery repairs
    (L: the path a blackhole for 2 ms) or time out (T): the first search, the base CC, then a
    search the two slow iterations start (a relapse). The telemetry's `count` must be the rule's
    (adapt_rule.adapt_trace, from the rows' own rates), and each row's F at its last ACK the one
    the mirror computes from the row's bytes, estimate, state, loss episodes, count and backoff
    (adapt_rule.factor_fp): with damp 1 a searching row that lost packets has F - 1 halved per
    loss episode, with damp 0 it reaches F > 20 as without losses; with damp_after 2 the first
    search's rows are damped only 2 or more iterations past its last progress (its third
    iteration, an L, is at most 1 past it), a relapse's from its first iteration (count 0). The
    telemetry counts the loss episodes of every L and T row, searching or not."""
    import re
    # the loss signal off: the L rows of the first search would end it at calm_by
    spec = CCSpec("mltcp-reno", idle_gap_s=0.1, damp=damp, damp_after=damp_after, calm_by=0)
    assert (spec.resolved().damp, spec.resolved().damp_after) == (damp, damp_after) and spec.resolved().slope == 32
    kinds = "FFLFLFTFL" + "F" * 5 + "L" + "FF" + "SS" + "LFLFF"
    mine = one_connection_rows(manager, "pattern", 5208 + damp + damp_after, 0.2, 0.06, 2_000_000, kinds, NS_R,
                               spec=spec)
    assert [r["iteration"] for r in mine] == list(range(1, len(kinds) + 1)), \
        [(r["iteration"], r["bytes"]) for r in mine]
    complete = [r for r in mine if not r["final"]]
    got = "".join("S" if r["slope"] == 32 else "b" if r["slope"] == 0 else "?" for r in complete)
    relapse = len(kinds) - 5  # the first L after the two slow iterations
    assert re.fullmatch("S{9,10}b+", got[:relapse]) and got[relapse] == "S", got
    losses = [r["losses"] for r in complete]
    count = [r["count"] for r in complete]
    trace = adapt_trace([row_rate(r) for r in complete], [r["rto"] for r in complete])[:-1]
    assert count == [s.count for s in trace], (count, trace)
    f_last = [round(r["f_last"] * 1024) for r in complete]
    assert f_last == [factor_fp(r["bytes"], r["believed_bytes_per_iteration"] or 0, g == "S", 32, 1,
                                r["losses"], damp, r["count"], damp_after, s.backoff)
                      for r, g, s in zip(complete, got, trace, strict=True)], (f_last, losses, count)
    # every L and T iteration lost packets, searching or not
    assert all(n >= 1 for n, k in zip(losses, kinds, strict=False) if k in "LT"), (losses, kinds)
    lossy = [(f, s) for f, r, g, s in zip(f_last, complete, got, trace, strict=True)
             if g == "S" and r["losses"] and r["believed_bytes_per_iteration"]]  # F = 1 before an estimate
    def damps(step) -> bool:  # the first search once stalled, a relapse's from its first iteration
        return bool(damp) and (step.count >= damp_after or step.backoff > 0)
    damped = [f for f, s in lossy if damps(s)]
    undamped = [f for f, s in lossy if not damps(s)]
    assert damped or not damp, (f_last, losses, count)
    assert undamped or (damp and not damp_after), (f_last, losses, count)
    # the relapse's first iteration (count 0, an L) is damped whatever damp_after says
    assert trace[relapse].backoff == 1 and trace[relapse].count == 0 and losses[relapse], (trace, losses)
    assert (f_last[relapse] <= 17 * 1024) == bool(damp), (f_last, trace)
    assert all(f <= 17 * 1024 for f in damped), (f_last, losses, count)  # halved at least once: F <= 17
    assert all(f > 20 * 1024 for f in undamped), (f_last, losses, count)  # as before damp: up to 33
    assert all(f == 1024 for f, g in zip(f_last, got, strict=True) if g == "b"), (f_last, got)


@contextlib.contextmanager
def bottleneck_fifo(limit: int):
    """The bottleneck's FIFO holds `limit` packets for the block (FIFO_LIMIT again after)."""
    def set_limit(n: int) -> None:
        sh(*SET_FIFO_LIMIT.split(), str(n), ns=NS_R)
    set_limit(limit)
    try:
        yield
    finally:
        set_limit(FIFO_LIMIT)


@pytest.mark.parametrize("kinds,calm_by,shape", [
    # losses that do not fall (M: loss episodes in every iteration): the first search ends at
    # iteration calm_by, not at the patience, and two slow iterations later start no new search
    # (the backoff at its most)
    ("F" + "MMMMM" + "F" * 8 + "SS" + "FF", 4, r"S{4}b+"),
    # the same with the signal off: the patience ends the search, the two slow ones start a relapse
    ("F" + "MMMMM" + "F" * 8 + "SS" + "FF", 0, r"S{9,}b+S+"),
    # the losses fall to none and stay there for two iterations by calm_by: the search goes on
    # until the patience ends it, and the two slow iterations start a relapse
    ("F" + "MM" + "F" * 13 + "SS" + "FF", 5, r"S{9,}b+S+"),
    # one iteration without losses by calm_by is no fall
    ("F" + "MM" + "F" + "MMM" + "F" * 7 + "SS" + "FF", 6, r"S{6}b+"),
    # losses that do not fall but are few (L: one episode; ECN's sockets): no signal, the rule
    ("F" + "LLLLL" + "F" * 8 + "SS" + "FF", 4, r"S{9,}b+S+"),
])
def test_a_first_search_whose_losses_do_not_fall_ends_at_calm_by(net, manager, kinds, calm_by, shape):
    """The loss signal (`calm_by`, mltcp_common.h mltcp_calmless) on one connection whose
    iterations are fast (F), slow (S), lose packets once (L: a 2 ms blackhole) or many times (M:
    through a FIFO of M_FIFO_LIMIT packets, at least 1 << CALM_SHIFT loss episodes). The
    bottleneck's FIFO holds a whole iteration otherwise (ITERATION_FIFO_LIMIT), so F and S lose nothing.
    The kernel's state per row must be what the mirror computes from the rows' own rates,
    timeouts and loss episodes (adapt_rule.adapt_trace with `calm_by`), count and backoff
    included, and have the shape each pattern is for."""
    import re
    spec = CCSpec("mltcp-reno", idle_gap_s=0.1, calm_by=calm_by)
    assert spec.resolved().calm_by == calm_by and spec.resolved().adapt
    with bottleneck_fifo(ITERATION_FIFO_LIMIT):
        # a port of its own per pattern (the L one's 10 above the M ones')
        mine = one_connection_rows(manager, "pattern", 5212 + calm_by + kinds.count("M") + 10 * kinds.count("L"),
                                   0.2, 0.06, 2_000_000, kinds, NS_R, f"{SET_FIFO_LIMIT} {M_FIFO_LIMIT}",
                                   f"{SET_FIFO_LIMIT} {ITERATION_FIFO_LIMIT}", spec=spec)
    assert [r["iteration"] for r in mine] == list(range(1, len(kinds) + 1)), \
        [(r["iteration"], r["bytes"]) for r in mine]
    complete = [r for r in mine if not r["final"]]
    got = "".join("S" if r["slope"] == 32 else "b" if r["slope"] == 0 else "?" for r in complete)
    losses = [r["losses"] for r in complete]
    rates, rtos = [row_rate(r) for r in complete], [r["rto"] for r in complete]
    trace = adapt_trace(rates, rtos, losses, calm_by)
    assert got == adapt_states(rates, rtos, losses, calm_by)[:-1], (got, losses, rtos)
    assert [r["count"] for r in complete] == [s.count for s in trace][:-1], (losses, trace)
    # what the patterns are for: every M iteration loses packets at least 1 << CALM_SHIFT times,
    # every L one fewer, the others of the first search not at all
    assert all((n >= 1 << CALM_SHIFT if k == "M" else 0 < n < 1 << CALM_SHIFT if k == "L" else n == 0)
               for n, k in zip(losses[:8], kinds, strict=False)), (losses, kinds)
    assert re.fullmatch(shape, got), (got, losses)

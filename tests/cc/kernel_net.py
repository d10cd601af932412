"""The real kernel's side of the BPF congestion-control tests: two network namespaces, A and B,
joined through a router namespace R whose egress towards B is shaped to 200 Mbit/s by HTB with a
FIFO, and one small traffic tool run inside a namespace (`traffic`). The tests that use it
(test_manager.py, test_adaptive_step_kernel.py) get the network from the `net` fixture and a
CongestionControlManager from `manager` (tests/cc/conftest.py); names carry the test process's
pid, so two test runs on one machine do not meet."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

from mn_harness.cc.spec import CCSpec

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


def struct_ops_names() -> str:
    return sh("bpftool", "struct_ops", "list")


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


"""ecn_telemetry.p4 on a real BMv2: two hosts in namespaces of our own on one switch, pipeline
pushed over P4Runtime, packets sent and captured with scapy.

    h1 (10.0.0.1) --port 1-- s1 --port 2-- h2 (10.0.1.1)     (addresses from the NetworkPlan)

Congestion is made deterministic with BMv2's own egress queue: a low `set_queue_rate` on port 2
and a burst from h1 build the queue, so enq_qdepth crosses the threshold. Frames are sent and
received on the hosts' interfaces with the test bed's port sockets (mn_harness.testing.ports)."""

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mn_harness.p4.entries import JobRule, job_entries, job_port_index, qdepth_index
from mn_harness.p4.limits import NO_MARKING
from mn_harness.p4.runtime import P4Info, table_entry
from mn_harness.p4.telemetry import TelemetryReader
from mn_harness.testing import LinkQueue, P4Testbed, make_plan
from mn_harness.testing.ports import PortIO

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

UDP_PORT = 9999
ECT0, ECT1, CE = 2, 1, 3


def topology():
    return make_plan(["h1", "h2"], ["s1"], [("h1", "s1"), ("h2", "s1")])


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    tb = P4Testbed(topology(), cache_dir=tmp_path_factory.mktemp("p4cache"))
    with tb, PortIO({h: (tb.netns(h), f"{h}-eth0") for h in ("h1", "h2")}) as io:
        tb.ports = io
        yield tb


@pytest.fixture
def s1(bed):
    """Port 2 back to: fast queue of 64 packets, no marking, no job rules."""
    bm = bed.switches["s1"]
    bm.cli(["set_queue_depth 64 2", "set_queue_rate 1000000 2"])
    set_threshold(bed, NO_MARKING)
    conn = bed.conn("s1")
    for e in conn.read_table("job_classify"):
        conn.write([e], "delete")
    yield bm


def set_threshold(bed, threshold, shift=1):
    bed.conn("s1").modify_table_entry("egress_port_cfg", {"egress_port": 2}, "set_port_cfg",
                                      {"threshold": threshold, "bucket_shift": shift})


def frames(bed, packets):
    """h1 -> h2 UDP frames: per packet dict its seq (the payload starts with it), ttl, tos,
    size (UDP payload bytes) and sport."""
    return [Ether(src=bed.mac("h1"), dst=bed.gateway_mac("h1"))
            / IP(src=bed.ip("h1"), dst=bed.ip("h2"), ttl=p.get("ttl", 64), tos=p.get("tos", 0))
            / UDP(sport=p.get("sport", 40000), dport=UDP_PORT)
            / Raw(f"{p['seq']:08d}".encode().ljust(p.get("size", 100), b"x")) for p in packets]


def header_checksum_ok(ip_header: bytes) -> bool:
    total = sum((ip_header[i] << 8) + ip_header[i + 1] for i in range(0, len(ip_header), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total == 0xFFFF


def seen(data: bytes) -> dict:
    pkt = Ether(data)
    ip = pkt[IP]
    payload = bytes(pkt[UDP].payload)
    return {"src_mac": pkt[Ether].src, "dst_mac": pkt[Ether].dst, "ttl": ip.ttl, "tos": ip.tos,
            "ecn": ip.tos & 3, "dscp": ip.tos >> 2, "csum_ok": header_checksum_ok(bytes(ip)[: ip.ihl * 4]),
            "seq": int(payload[:8].decode()) if payload[:8].isdigit() else -1}


def ours(data: bytes) -> bool:
    pkt = Ether(data)
    return pkt.haslayer(UDP) and pkt[UDP].dport == UDP_PORT


def exchange(bed, packets, expected, timeout=8.0, in_order_of_seq=True):
    """Send `packets` (see frames) from h1 to h2 in one burst; return what h2 got (sorted by
    seq, or in arrival order)."""
    bed.ports.drain()
    bed.ports.send("h1", [bytes(f) for f in frames(bed, packets)])
    got = [seen(f.data) for f in bed.ports.collect("h2", expected, ours, timeout)]
    return sorted(got, key=lambda p: p["seq"]) if in_order_of_seq else got


def counters(bed, **wanted):
    return bed.conn("s1").read_counters(wanted)


def test_p4info_has_the_names_the_harness_uses(bed):
    info = P4Info.from_file(bed.program.p4info_path)
    for table in ("arp_responder", "ipv4_lpm", "job_classify", "egress_port_cfg"):
        info.table(table)
    for counter in ("port_enq", "port_tx", "port_marks", "qdepth_hist", "job_tx", "job_marks"):
        info.counter(counter)
    assert info.counter("qdepth_hist").size == 32 * 64
    assert info.counter("job_tx").size == 64 * 32
    # the job_classify keys the entries module writes
    job_entries([JobRule(job=1, src="10.0.0.1", dst="10.0.0.2", protocol=17, src_port=1,
                         dst_port=2, dscp=3)])
    table_entry(info, "job_classify", {"hdr.ipv4.srcAddr": (1, 1), "l4_src": (1, 0xFFFF),
                                       "l4_dst": (1, 0xFFFF), "hdr.ipv4.dscp": (1, 0x3F),
                                       "hdr.ipv4.protocol": (17, 0xFF)},
                "set_job", {"job": 1}, priority=1)


def test_compile_is_cached(bed):
    from mn_harness.p4.compile import compile_p4
    again = compile_p4(bed.program.source, bed.program.json_path.parent.parent)
    assert again.cached and again.json_path == bed.program.json_path


def test_arp_answered_by_switch_and_ping_forwarded(bed, s1):
    proc = bed.host_run("h1", ["ping", "-c", "3", "-i", "0.2", "-W", "2", bed.ip("h2")],
                        check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # hosts route via their switch port's address; the switch answered ARP for it
    gw1 = bed.plan.gateway("h1").peer_ip
    neigh = bed.host_run("h1", ["ip", "neigh", "show", gw1]).stdout
    assert bed.gateway_mac("h1") in neigh
    neigh2 = bed.host_run("h2", ["ip", "neigh", "show", bed.plan.gateway("h2").peer_ip]).stdout
    assert bed.gateway_mac("h2") in neigh2


def test_forwarding_rewrites_macs_decrements_ttl_fixes_checksum(bed, s1):
    got = exchange(bed, [{"seq": i, "ttl": 64 - i} for i in range(5)], expected=5)
    assert [p["seq"] for p in got] == list(range(5))
    for p in got:
        assert p["ttl"] == 64 - p["seq"] - 1
        assert p["csum_ok"]
        assert p["src_mac"] == bed.gateway_mac("h2") and p["dst_mac"] == bed.mac("h2")


def test_ttl_expired_is_dropped(bed, s1):
    got = exchange(bed, [{"seq": 0, "ttl": 1}, {"seq": 1, "ttl": 0}, {"seq": 2, "ttl": 2}],
                   expected=3, timeout=3)
    assert [(p["seq"], p["ttl"]) for p in got] == [(2, 1)]


def burst(n, tos_of):
    return [{"seq": i, "tos": tos_of(i), "size": 200} for i in range(n)]


def test_no_marking_below_threshold(bed, s1):
    """The queue builds (depth up to 16) but never reaches the threshold of 20."""
    s1.cli(["set_queue_depth 16 2", "set_queue_rate 100 2"])
    set_threshold(bed, 20, shift=0)
    before = counters(bed, port_marks=[2], qdepth_hist=[qdepth_index(2, b) for b in range(64)])
    got = exchange(bed, burst(40, lambda i: ECT0), expected=40, timeout=5)
    after = counters(bed, port_marks=[2], qdepth_hist=[qdepth_index(2, b) for b in range(64)])
    assert got, "nothing forwarded"
    assert all(p["ecn"] == ECT0 for p in got)
    assert after["port_marks"][2].packets == before["port_marks"][2].packets
    deepest = max(b for b in range(64)
                  if after["qdepth_hist"][qdepth_index(2, b)].packets
                  > before["qdepth_hist"][qdepth_index(2, b)].packets)
    assert 8 <= deepest < 20, "the queue did not build: rate limit not effective"


def test_ce_marking_above_threshold(bed, s1):
    s1.cli(["set_queue_depth 64 2", "set_queue_rate 100 2"])
    set_threshold(bed, 5, shift=0)
    before = counters(bed, port_marks=[2], job_marks=[job_port_index(3, 2)])
    # ECT(0) and ECT(1) alternating, DSCP 3 -> job 3
    got = exchange(bed, burst(40, lambda i: (3 << 2) | (ECT0 if i % 2 else ECT1)), expected=40)
    after = counters(bed, port_marks=[2], job_marks=[job_port_index(3, 2)])
    assert len(got) == 40
    marked = [p["seq"] for p in got if p["ecn"] == CE]
    assert all(p["dscp"] == 3 and p["csum_ok"] for p in got)
    assert len(marked) >= 25, f"only {marked} marked"
    assert 0 not in marked and 1 not in marked  # the queue was empty for the first packets
    assert after["port_marks"][2].packets - before["port_marks"][2].packets == len(marked)
    job_delta = (after["job_marks"][job_port_index(3, 2)].packets
                 - before["job_marks"][job_port_index(3, 2)].packets)
    assert job_delta == len(marked)


def test_non_ect_never_marked_under_congestion(bed, s1):
    s1.cli(["set_queue_depth 64 2", "set_queue_rate 100 2"])
    set_threshold(bed, 3, shift=0)
    tos = {0: 0, 1: ECT0, 2: 5 << 2, 3: CE}  # not-ECT, ECT(0), not-ECT with DSCP, CE
    got = exchange(bed, burst(48, lambda i: tos[i % 4]), expected=48)
    assert len(got) == 48
    for p in got:
        kind = p["seq"] % 4
        if kind in (0, 2):
            assert p["ecn"] == 0, p
        elif kind == 3:
            assert p["ecn"] == CE
    assert sum(1 for p in got if p["seq"] % 4 == 1 and p["ecn"] == CE) >= 8


def test_small_packets_bypass_the_data_queue_and_are_not_in_its_telemetry(bed, s1):
    """Two queues per port: a burst of 30 data packets (228-byte IPv4) into a data queue drained
    at 100 packets/s, then 6 small ECT packets (68-byte IPv4, like pure ACKs): the small ones
    go through the small-packet queue (its own rate, served first), so they overtake the queued
    data, see no data-queue depth (never marked) and are left out of qdepth_hist, which stays
    the data queue's. With one FIFO per port they would arrive last and be marked."""
    s1.cli(["set_queue_depth 64 2 0", "set_queue_rate 100 2 0",      # data queue
            "set_queue_depth 64 2 1", "set_queue_rate 100000 2 1"])  # small-packet queue
    set_threshold(bed, 5, shift=0)
    hist = [qdepth_index(2, b) for b in range(64)]
    before = counters(bed, port_marks=[2], port_tx=[2], qdepth_hist=hist)
    pkts = ([{"seq": i, "tos": ECT0, "size": 200} for i in range(30)]
            + [{"seq": 100 + i, "tos": ECT0, "size": 40} for i in range(6)])
    got = exchange(bed, pkts, expected=36, in_order_of_seq=False)
    after = counters(bed, port_marks=[2], port_tx=[2], qdepth_hist=hist)
    assert len(got) == 36
    arrival = [p["seq"] for p in got]
    small = [i for i, seq in enumerate(arrival) if seq >= 100]
    late_data = [arrival.index(seq) for seq in range(20, 30)]
    assert max(small) < min(late_data), f"small packets did not overtake the data: {arrival}"
    assert not [p for p in got if p["seq"] >= 100 and p["ecn"] == CE]
    marked = sum(1 for p in got if p["seq"] < 100 and p["ecn"] == CE)
    assert marked >= 15
    assert after["port_marks"][2].packets - before["port_marks"][2].packets == marked
    assert after["port_tx"][2].packets - before["port_tx"][2].packets == 36
    assert sum(after["qdepth_hist"][i].packets - before["qdepth_hist"][i].packets
               for i in hist) == 30


def test_counters_count_ports_and_jobs(bed, s1):
    idx = [job_port_index(6, 2), job_port_index(7, 2)]
    before = counters(bed, port_tx=[2], port_enq=[2], job_tx=idx)
    conn = bed.conn("s1")
    # a 5-tuple rule overrides the DSCP: packets to sport 41000 are job 7
    [rule] = job_entries([JobRule(job=7, protocol=17, src_port=41000)])
    conn.insert_table_entry(rule.table, rule.match, rule.action, rule.params, rule.priority)
    pkts = [{"seq": i, "tos": 6 << 2, "size": 300, "sport": 41000 if i >= 6 else 40000}
            for i in range(10)]
    got = exchange(bed, pkts, expected=10)
    assert len(got) == 10
    after = counters(bed, port_tx=[2], port_enq=[2], job_tx=idx)
    frame = 14 + 20 + 8 + 300
    assert after["port_tx"][2].packets - before["port_tx"][2].packets >= 10
    assert after["port_enq"][2].packets - before["port_enq"][2].packets >= 10
    j6 = after["job_tx"][idx[0]], before["job_tx"][idx[0]]
    j7 = after["job_tx"][idx[1]], before["job_tx"][idx[1]]
    assert (j6[0].packets - j6[1].packets, j6[0].bytes - j6[1].bytes) == (6, 6 * frame)
    assert (j7[0].packets - j7[1].packets, j7[0].bytes - j7[1].bytes) == (4, 4 * frame)


def test_telemetry_sampling_rate_and_queue_series(bed, s1):
    s1.cli(["set_queue_depth 64 2", "set_queue_rate 300 2"])
    set_threshold(bed, 10, shift=0)
    reader = TelemetryReader(bed.conn("s1"), "s1", ports=[1, 2], jobs=range(8),
                             bucket_shift={1: 0, 2: 0})
    reader.sample()
    n = 100
    start = time.monotonic()
    for _ in range(n):
        reader.sample()
    rate = n / (time.monotonic() - start)
    print(f"\ntelemetry: {rate:.0f} samples/s (2 ports, 8 jobs, one Read RPC each)")
    assert rate >= 50
    # a congested burst shows up in the next samples as depth and marks
    bed.ports.send("h1", [bytes(f) for f in frames(bed, burst(60, lambda i: (2 << 2) | ECT0))])
    samples = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        samples += [s for s in reader.sample() if s.port == 2]
        time.sleep(0.02)
    assert max(s.depth.max for s in samples) >= 20
    assert sum(s.marks for s in samples) >= 20
    assert sum(s.job_marks[2] for s in samples) == sum(s.marks for s in samples)
    assert sum(s.tx_packets for s in samples) >= 60
    assert sum(s.job_bytes[2] for s in samples) >= 60 * (14 + 20 + 8 + 200)


def test_no_leftovers_after_close():
    t = topology()
    tb = P4Testbed(t)
    tb.start()
    pid = tb.switches["s1"].pid
    names = [tb.netns("h1"), tb.netns("h2")]
    intf = tb.port_intf("s1", 1)
    run_dir = tb.run_dir
    assert run_dir is not None and run_dir.is_dir()
    tb.close()
    assert not run_dir.exists()  # the per-run directory (BMv2's notifications socket) is gone
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(n in ns for n in names)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert intf not in links
    assert not Path(f"/proc/{pid}").exists()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3 (apt-get install iperf3)")
def test_real_tcp_ecn_keeps_the_bmv2_queue_at_the_threshold():
    """iperf3 (CUBIC) through a 10 Mbit/s BMv2 queue of 100 packets, threshold 20: without ECN
    the queue fills; with ECN negotiated the switch's marks keep it at the threshold."""
    import statistics

    t = topology()
    result = {}
    for ecn in (0, 1):
        with P4Testbed(t, queues={("s1", 2): LinkQueue(rate_mbit=10, depth=100)},
                       ecn_threshold=20) as tb:
            for h in ("h1", "h2"):
                tb.host_run(h, ["sysctl", "-qw", f"net.ipv4.tcp_ecn={ecn}"])
            tb.host_run("h1", ["ping", "-c", "1", "-W", "2", tb.ip("h2")], check=False)
            server = tb.host_popen("h2", ["iperf3", "-s", "-1"])
            time.sleep(0.5)
            client = tb.host_popen("h1", ["iperf3", "-c", tb.ip("h2"), "-t", "5", "-C", "cubic"])
            reader = TelemetryReader(tb.conn("s1"), "s1", ports=[2], jobs=[0],
                                     bucket_shift=tb.bucket_shifts("s1"))
            time.sleep(1.0)
            reader.sample()
            samples = []
            for _ in range(150):  # 3 s at 50 samples/s
                time.sleep(0.02)
                samples += reader.sample()
            client.wait(timeout=30)
            server.wait(timeout=30)
            busy = [s for s in samples if s.depth.packets]
            result[ecn] = (statistics.mean(s.depth.mean for s in busy),
                           max(s.depth.max for s in busy), sum(s.marks for s in samples),
                           sum(s.tx_bytes for s in samples) * 8
                           / sum(s.interval for s in samples) / 1e6)
    print(f"\nno ECN: mean/max depth {result[0][0]:.1f}/{result[0][1]:.0f}, {result[0][3]:.1f} "
          f"Mbit/s; ECN: mean/max {result[1][0]:.1f}/{result[1][1]:.0f}, marks {result[1][2]}, "
          f"{result[1][3]:.1f} Mbit/s")
    assert result[0][1] >= 60 and result[0][2] == 0
    assert result[1][1] <= 30 and result[1][0] < 25 and result[1][2] > 0
    assert result[1][3] > 7  # marking does not starve the link


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3 (apt-get install iperf3)")
def test_reverse_acks_do_not_take_the_data_rate():
    """The ring's situation on one switch: TCP h1 -> h2 and h2 -> h1 at once, both switch ports
    at 10 Mbit/s (826 full-size frames/s). Port 2 carries h1's data and the ACKs of h2's data
    (~1 per 2 segments): with one queue per port paced in packets/s the ACKs took ~1/3 of the
    slots and each direction got ~0.6 of the rate (measured 0.61 and 0.65); with small packets
    in their own queue each direction gets the full data rate (measured ~0.95)."""
    rate = 10.0
    queues = {("s1", 1): LinkQueue(rate_mbit=rate, depth=100),
              ("s1", 2): LinkQueue(rate_mbit=rate, depth=100)}
    with P4Testbed(topology(), queues=queues) as tb:
        tb.host_run("h1", ["ping", "-c", "1", "-W", "2", tb.ip("h2")], check=False)
        servers = [tb.host_popen("h2", ["iperf3", "-s", "-1", "-p", "5201"]),
                   tb.host_popen("h1", ["iperf3", "-s", "-1", "-p", "5202"])]
        time.sleep(0.5)
        clients = [tb.host_popen("h1", ["iperf3", "-c", tb.ip("h2"), "-p", "5201", "-t", "5",
                                        "-O", "1", "-J"]),
                   tb.host_popen("h2", ["iperf3", "-c", tb.ip("h1"), "-p", "5202", "-t", "5",
                                        "-O", "1", "-J"])]
        fractions = []
        for client in clients:
            out, err = client.communicate(timeout=60)
            assert client.returncode == 0, err or out
            bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
            fractions.append(bps / (rate * 1e6))
        for server in servers:
            server.wait(timeout=30)
    print(f"\nh1->h2 {fractions[0]:.2f}, h2->h1 {fractions[1]:.2f} of {rate:g} Mbit/s "
          "(goodput; at most 1448/1514 = 0.956)")
    assert min(fractions) >= 0.8, fractions

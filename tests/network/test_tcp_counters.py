"""The kernel TCP counters a run records (mn_harness/network/tcp_counters.py): parsed from this
kernel's own /proc files, differences of the kept counters, summed per job."""

from pathlib import Path

from mn_harness.config import Experiment
from mn_harness.network import tcp_counters
from tests.helpers import small_demo


def test_parse_reads_this_kernels_tables():
    counters: dict[str, int] = {}
    for path in tcp_counters.FILES:
        counters.update(tcp_counters.parse(Path(path).read_text()))
    # the counters a run keeps exist under these names here (nstat's spelling)
    assert set(tcp_counters.COUNTERS) <= set(counters)
    assert counters["TcpOutSegs"] > 0 and counters["IpExtInOctets"] >= 0


def test_parse_pairs_each_header_with_its_values():
    text = "Tcp: RtoMin OutSegs\nTcp: 200 17\nUdp: InDatagrams\nUdp: 5\nTcpExt: TCPTimeouts\nTcpExt: 3\n"
    assert tcp_counters.parse(text) == {"TcpRtoMin": 200, "TcpOutSegs": 17, "UdpInDatagrams": 5,
                                        "TcpExtTCPTimeouts": 3}


def test_delta_keeps_the_listed_counters_the_kernel_has():
    before = {"TcpOutSegs": 10, "TcpExtTCPTimeouts": 1, "UdpInDatagrams": 4}
    after = {"TcpOutSegs": 110, "TcpExtTCPTimeouts": 3, "UdpInDatagrams": 9}
    assert tcp_counters.delta(before, after) == {"TcpOutSegs": 100, "TcpExtTCPTimeouts": 2}


def test_a_job_sums_its_workers_hosts():
    exp = Experiment.from_dict(small_demo(), "demo")
    before = {h: {"TcpOutSegs": 1, "UdpInDatagrams": 1} for h in exp.hosts}
    after = {h: {"TcpOutSegs": 10 * (k + 1) + 1, "UdpInDatagrams": 2} for k, h in enumerate(exp.hosts)}
    out = tcp_counters.summary(exp, before, after)
    assert out["hosts"] == {h: {"TcpOutSegs": 10 * (k + 1)} for k, h in enumerate(exp.hosts)}
    for job in exp.jobs:
        assert out["jobs"][job.name] == {"TcpOutSegs": sum(out["hosts"][h]["TcpOutSegs"] for h in job.workers)}


def test_timeouts_per_iteration_are_the_kernels_over_every_job_iteration():
    counters = {"jobs": {"a": {"TcpExtTCPTimeouts": 4}, "b": {"TcpExtTCPTimeouts": 6}}}
    assert tcp_counters.timeouts_per_iteration(counters, [20, 30]) == 10 / 50
    assert tcp_counters.timeouts_per_iteration(None, [20, 30]) is None  # a run from before
    unread = {"jobs": {"a": {"TcpExtTCPTimeouts": 4}, "b": {}}}
    assert tcp_counters.timeouts_per_iteration(unread, [20, 30]) is None  # b's hosts were not read: no count
    assert tcp_counters.timeouts_per_iteration(counters, [None, 0]) is None  # no complete iteration

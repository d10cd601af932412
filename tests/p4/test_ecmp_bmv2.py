"""ECMP on a real BMv2: each flow leaves by the next hop mn_harness/p4/ecmp.py predicts (the
harness's record of which path a flow took on BMv2 rests on this), and flows spread.

    h1 -- s1 ==(s2 | s3)== s4 -- h2      two equal-cost paths; s1 hashes every flow"""

import time

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mn_harness.network.flows import ecmp_hash_seed
from mn_harness.p4.ecmp import member_index
from mn_harness.testing import P4Testbed, make_plan
from mn_harness.testing.ports import PortIO

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

SEED = 3
PROTO_UDP = 17


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    plan = make_plan(["h1", "h2"], ["s1", "s2", "s3", "s4"],
                     [("h1", "s1"), ("s1", "s2"), ("s1", "s3"), ("s2", "s4"), ("s3", "s4"), ("s4", "h2")],
                     routing="ecmp", seed=SEED)
    with P4Testbed(plan, cache_dir=tmp_path_factory.mktemp("p4cache")) as tb, \
            PortIO({"h1": (tb.netns("h1"), "h1-eth0")}) as io:
        tb.ports = io
        yield tb


def port_tx(bed, ports):
    cells = bed.conn("s1").read_counters({"port_tx": ports})["port_tx"]
    return {p: cells[p].packets for p in ports}


def wait_for_port_tx(bed, ports, total, timeout=3.0):
    """port_tx once the packets sent have all left (the send returns before they are forwarded)."""
    deadline = time.monotonic() + timeout
    while True:
        now = port_tx(bed, ports)
        if sum(now.values()) >= total or time.monotonic() > deadline:
            return now
        time.sleep(0.02)


def test_each_flow_takes_the_predicted_next_hop(bed):
    ports = {peer: bed.switch_port("s1", peer) for peer in ("s2", "s3")}
    seed = ecmp_hash_seed(SEED)
    taken, predicted = {}, {}
    for sport in range(50000, 50016):
        frame = (Ether(src=bed.mac("h1"), dst=bed.gateway_mac("h1"))
                 / IP(src=bed.ip("h1"), dst=bed.ip("h2")) / UDP(sport=sport, dport=7000) / Raw(b"x" * 200))
        before = port_tx(bed, list(ports.values()))
        bed.ports.send("h1", [bytes(frame)] * 3)
        after = wait_for_port_tx(bed, list(ports.values()), sum(before.values()) + 3)
        moved = {peer: after[p] - before[p] for peer, p in ports.items()}
        taken[sport] = [peer for peer, n in moved.items() if n == 3]
        predicted[sport] = ("s2", "s3")[member_index(bed.ip("h1"), bed.ip("h2"), PROTO_UDP, sport, 7000, seed, 2)]
    assert all(len(v) == 1 for v in taken.values()), taken  # every packet of a flow on one path
    assert {s: v[0] for s, v in taken.items()} == predicted
    assert set(predicted.values()) == {"s2", "s3"}  # and flows spread over both

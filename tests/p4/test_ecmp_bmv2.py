"""ECMP on a real BMv2: each flow leaves by the next hop mn_harness/p4/ecmp.py predicts (the
harness's record of which path a flow took on BMv2 rests on this), and flows spread.

    h1 -- s1 ==(s2 | s3)== s4 -- h2      two equal-cost paths; s1 hashes every flow"""

import json
import sys
from pathlib import Path

import pytest

from mn_harness.network.flows import ecmp_hash_seed
from mn_harness.p4.ecmp import member_index
from mn_harness.testing import P4Testbed, make_plan

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

PKT_TOOL = str(Path(__file__).with_name("pkt_tool.py"))
SEED = 3
PROTO_UDP = 17


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    plan = make_plan(["h1", "h2"], ["s1", "s2", "s3", "s4"],
                     [("h1", "s1"), ("s1", "s2"), ("s1", "s3"), ("s2", "s4"), ("s3", "s4"), ("s4", "h2")],
                     routing="ecmp", seed=SEED)
    with P4Testbed(plan, cache_dir=tmp_path_factory.mktemp("p4cache")) as tb:
        yield tb


def port_tx(bed, ports):
    cells = bed.conn("s1").read_counters({"port_tx": ports})["port_tx"]
    return {p: cells[p].packets for p in ports}


def test_each_flow_takes_the_predicted_next_hop(bed):
    ports = {peer: bed.switch_port("s1", peer) for peer in ("s2", "s3")}
    seed = ecmp_hash_seed(SEED)
    taken, predicted = {}, {}
    for sport in range(50000, 50016):
        spec = {"src_mac": bed.mac("h1"), "dst_mac": bed.gateway_mac("h1"), "src_ip": bed.ip("h1"),
                "dst_ip": bed.ip("h2"), "dport": 7000,
                "packets": [{"seq": i, "sport": sport, "size": 200} for i in range(3)]}
        before = port_tx(bed, list(ports.values()))
        bed.host_run("h1", [sys.executable, PKT_TOOL, "send", "h1-eth0", json.dumps(spec)])
        after = port_tx(bed, list(ports.values()))
        moved = {peer: after[p] - before[p] for peer, p in ports.items()}
        taken[sport] = [peer for peer, n in moved.items() if n == 3]
        predicted[sport] = ("s2", "s3")[member_index(bed.ip("h1"), bed.ip("h2"), PROTO_UDP, sport, 7000, seed, 2)]
    assert all(len(v) == 1 for v in taken.values()), taken  # every packet of a flow on one path
    assert {s: v[0] for s, v in taken.items()} == predicted
    assert set(predicted.values()) == {"s2", "s3"}  # and flows spread over both

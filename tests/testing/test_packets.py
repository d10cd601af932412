"""mn_harness.testing.packets: expectations, the field-by-field account of a mismatch, and
packets written as YAML mappings. Needs scapy only."""

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mn_harness.testing.packets import Masked, differences, from_mapping, matches


def frame(**ip):
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.0.0.1", dst="10.0.1.1", **ip) \
        / UDP(sport=1, dport=9) / Raw(b"x" * 20)


def test_a_packet_matches_its_own_bytes_only():
    sent = bytes(frame(ttl=63))
    assert matches(frame(ttl=63), sent)
    assert not matches(frame(ttl=64), sent)
    assert matches(sent, sent) and not matches(sent[:-1], sent)
    assert matches(lambda p: p[IP].ttl == 63, sent)


def test_masked_takes_the_ignored_fields_from_the_frame_and_recomputes_the_rest():
    sent = bytes(frame(ttl=63, tos=3))
    assert matches(Masked(frame(ttl=63, tos=2), ["IP.tos"]), sent)  # checksum follows the tos
    assert not matches(Masked(frame(ttl=64, tos=2), ["IP.tos"]), sent)
    broken = bytearray(sent)
    broken[24] ^= 0xFF  # the IPv4 header checksum's first byte
    assert not matches(Masked(frame(ttl=63, tos=2), ["IP.tos"]), bytes(broken))
    assert matches(Masked(frame(ttl=63, tos=2), ["IP.tos", "IP.chksum"]), bytes(broken))
    with pytest.raises(ValueError, match="'IP.colour' is not a field"):
        Masked(frame(), ["IP.colour"])


def test_differences_name_the_fields():
    diff = differences(frame(ttl=63), bytes(frame(ttl=64)))
    assert diff[0] == "IP.ttl: 63 expected, 64 received"
    assert diff[1].startswith("IP.chksum: ")
    assert differences(Masked(frame(ttl=63), ["IP.ttl", "IP.chksum"]), bytes(frame(ttl=64))) == []
    assert differences(lambda p: False, bytes(frame())) == []


def test_packets_from_mappings_with_symbolic_addresses():
    names = {"h1.ip": "10.0.0.1", "h2.ip": "10.0.1.1"}
    pkt = from_mapping({"Ether": {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"},
                        "IP": {"src": "h1.ip", "dst": "h2.ip", "ttl": 64}, "UDP": {"dport": 9}, "payload": 20},
                       lambda v: names.get(v, v))
    assert bytes(pkt) == bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
                               / IP(src="10.0.0.1", dst="10.0.1.1", ttl=64) / UDP(dport=9) / Raw(b"x" * 20))


@pytest.mark.parametrize("spec, message", [
    ({}, "cases[0].send[0].packet: expected a mapping of layers"),
    ({"Ethernet": {}}, "cases[0].send[0].packet.Ethernet: no scapy layer 'Ethernet'"),
    ({"IP": {"tll": 3}}, "cases[0].send[0].packet.IP.tll: not a field of IP"),
    ({"IP": 3}, "cases[0].send[0].packet.IP: expected a mapping of fields"),
])
def test_bad_packet_mappings_name_the_yaml_path(spec, message):
    with pytest.raises(ValueError) as err:
        from_mapping(spec, where="cases[0].send[0].packet")
    assert str(err.value).startswith(message)

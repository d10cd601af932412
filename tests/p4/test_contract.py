"""mn_harness.p4.contract: what a program must provide, checked on P4Info. Without p4c on the
hand-written P4Info (shaped like ecn_telemetry.p4's) with parts taken out or changed; with p4c
on the shipped programs, which must meet the contract for every feature they are used for."""

import pytest

from mn_harness.p4 import PROGRAMS_DIR
from mn_harness.p4.compile import compile_p4
from mn_harness.p4.contract import FEATURES, ContractError, check, describe, missing, provided
from mn_harness.p4.runtime import P4Info
from tests.p4.fake_p4info import P4INFO_TEXT


def info(text: str = P4INFO_TEXT) -> P4Info:
    return P4Info.from_text(text)


def without(block_start: str) -> str:
    """P4INFO_TEXT without the top-level block whose first line contains `block_start`."""
    lines = P4INFO_TEXT.splitlines()
    start = next(i for i, ln in enumerate(lines) if block_start in ln)
    depth, end = 0, start
    for end in range(start, len(lines)):
        depth += lines[end].count("{") - lines[end].count("}")
        if depth == 0:
            break
    return "\n".join(lines[:start] + lines[end + 1:])


def test_the_hand_written_p4info_meets_forwarding_marking_and_telemetry_but_not_ecmp():
    assert provided(info()) == ["forwarding", "ecn_marking", "queue_telemetry"]
    assert missing(info(), ["ecn_marking", "queue_telemetry"]) == []
    gaps = missing(info(), ["ecmp"])
    assert [g.what for g in gaps] == ["action 'ecmp_group' of table 'ipv4_lpm'", "table 'ecmp_members'"]
    assert {g.feature for g in gaps} == {"ecmp"}


def test_a_missing_counter_is_named_with_its_feature():
    gaps = missing(info(without('name: "MyEgress.qdepth_hist"')), ["queue_telemetry"])
    assert describe(gaps) == "counter 'qdepth_hist' (queue telemetry)"
    # not asked for: nothing missing
    assert missing(info(without('name: "MyEgress.qdepth_hist"')), ["ecn_marking"]) == []


def test_a_missing_table_is_named_once_for_the_two_features_that_use_it():
    gaps = missing(info(without('name: "MyEgress.egress_port_cfg"')), ["ecn_marking", "queue_telemetry"])
    assert [(g.feature, g.what) for g in gaps] == [("ecn_marking", "table 'egress_port_cfg'")]


def test_forwarding_is_always_checked():
    gaps = missing(info(without('name: "MyIngress.arp_responder"')), [])
    assert [(g.feature, g.what) for g in gaps] == [("forwarding", "table 'arp_responder'")]
    with pytest.raises(ContractError, match=r"^mine.p4 lacks table 'arp_responder' \(forwarding\)$"):
        check(info(without('name: "MyIngress.arp_responder"')), [], "mine.p4")


@pytest.mark.parametrize("change, expected", [
    # a narrower parameter than the harness writes (NO_MARKING needs 19 bits)
    ('params { id: 1 name: "threshold" bitwidth: 19 }', ('params { id: 1 name: "threshold" bitwidth: 8 }',
     "parameter 'threshold' of action 'set_port_cfg' with >= 19 bits (has 8) (ECN marking)")),
    # a parameter the harness does not set
    ('params { id: 1 name: "port_mac" bitwidth: 48 }', ('params { id: 1 name: "port_mac" bitwidth: 48 }\n'
     '  params { id: 2 name: "vlan" bitwidth: 12 }',
     "no other parameter of action 'arp_reply' (it has 'vlan', which the harness does not set) (forwarding)")),
    # an LPM table keyed on something else
    ('name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: LPM',
     ('name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: EXACT',
      "match field 'hdr.ipv4.dstAddr' of table 'ipv4_lpm' must be lpm (forwarding)")),
    # bytes counted where the harness reads packets
    ('name: "MyEgress.port_marks" alias: "port_marks" }\n           spec { unit: PACKETS }',
     ('name: "MyEgress.port_marks" alias: "port_marks" }\n           spec { unit: BYTES }',
      "packet counts in counter 'port_marks' (CounterType.packets or packets_and_bytes) (queue telemetry)")),
    # a histogram too small for 32 ports x 64 buckets
    ('spec { unit: PACKETS } size: 2048 }\ncounters { preamble { id: 24',
     ('spec { unit: PACKETS } size: 64 }\ncounters { preamble { id: 24',
      "counter 'qdepth_hist' with >= 2048 cells (has 64) (queue telemetry)")),
])
def test_wrong_shapes_are_named(change, expected):
    new, message = expected
    assert change in P4INFO_TEXT
    gaps = missing(info(P4INFO_TEXT.replace(change, new)), ["ecn_marking", "queue_telemetry"])
    assert describe(gaps) == message


def test_an_extra_exact_key_is_a_gap_but_an_extra_ternary_key_of_a_ternary_table_is_not():
    extra_exact = P4INFO_TEXT.replace(
        'match_fields { id: 1 name: "standard_metadata.egress_port" bitwidth: 9 match_type: EXACT }',
        'match_fields { id: 1 name: "standard_metadata.egress_port" bitwidth: 9 match_type: EXACT }\n'
        '  match_fields { id: 2 name: "meta.class" bitwidth: 3 match_type: EXACT }')
    assert [g.what for g in missing(info(extra_exact), ["ecn_marking"])] == [
        "no other match field of table 'egress_port_cfg' (it has 'meta.class', which the harness does not set)"]
    # job_classify has ternary l4_src, l4_dst and dscp besides the three keys the harness sets
    assert missing(info(), ["queue_telemetry"]) == []


def test_describe_groups_the_gaps_by_feature_on_one_line():
    gaps = missing(info("pkg_info { arch: \"v1model\" }"), FEATURES)
    text = describe(gaps, {"queue_telemetry": "run.queue_telemetry samples s1->s2"})
    assert text == ("table 'arp_responder', table 'ipv4_lpm' (forwarding); table 'ecmp_members' (ECMP); "
                    "table 'egress_port_cfg' (ECN marking); table 'job_classify', counter 'port_enq', "
                    "counter 'port_tx' and 4 more (queue telemetry: run.queue_telemetry samples s1->s2); "
                    "table 'agg_job', table 'agg_result_dst', counter 'agg_stats' (in-network aggregation)")


def test_unknown_features_are_a_bug():
    with pytest.raises(ValueError, match="unknown program features: telepathy"):
        missing(info(), ["telepathy"])


@pytest.mark.bmv2
@pytest.mark.parametrize("program, features", [
    ("ecn_telemetry", ["forwarding", "ecmp", "ecn_marking", "queue_telemetry"]),
    ("aggregation", list(FEATURES)),
])
def test_the_shipped_programs_meet_the_contract(program, features, tmp_path):
    compiled = compile_p4(PROGRAMS_DIR / f"{program}.p4")
    assert provided(P4Info.from_file(compiled.p4info_path)) == features

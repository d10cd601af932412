"""mn_harness.p4.bringup without a switch: what a SwitchSetup programs, and how entries are
written (batches, default actions). The whole bring-up runs in the *_bmv2.py tests."""

from pathlib import Path

import pytest

from mn_harness.p4.bmv2 import QueueConfig
from mn_harness.p4.bringup import SwitchSetup, bring_up, install_entries
from mn_harness.p4.compile import CompiledProgram
from mn_harness.p4.contract import ContractError
from mn_harness.p4.entries import Entry, JobRule, switch_entries, switch_specs
from mn_harness.p4.errors import P4Error, SwitchCLIError
from mn_harness.p4.runtime import P4Info
from mn_harness.testing import make_plan
from tests.p4.fake_p4info import P4INFO_TEXT


def line3():
    """h1 - s1 - s2 - s3 - h2, plus h3 on s1 (ports in link order: s1: h1=1, h3=2, s2=3)."""
    return make_plan(["h1", "h2", "h3"], ["s1", "s2", "s3"],
                     [("h1", "s1"), ("h3", "s1"), ("s1", "s2"), ("s2", "s3"), ("s3", "h2")])


class RecordingConn:
    def __init__(self):
        self.p4info = P4Info.from_text(P4INFO_TEXT)
        self.writes = []
        self.defaults = []

    def require_p4info(self):
        return self.p4info

    def write(self, entries, op="insert"):
        self.writes.append(list(entries))

    def set_default_action(self, table, action, params):
        self.defaults.append((table, action, params))


def test_install_entries_batches_and_defaults():
    conn = RecordingConn()
    es = switch_entries(switch_specs(line3())["s1"], ecn_threshold=3)
    es.append(Entry("egress_port_cfg", None, "set_port_cfg",
                    {"threshold": 7, "bucket_shift": 0}, default=True))
    n = install_entries(conn, es, batch=4)
    assert n == len(es)
    assert [len(w) for w in conn.writes] == [4, 4, 1]
    assert conn.defaults == [("egress_port_cfg", "set_port_cfg",
                              {"threshold": 7, "bucket_shift": 0})]


PROGRAM = CompiledProgram(Path("x.p4"), Path("x.json"), Path("x.p4info.txt"), "0" * 64, cached=True)


def test_setup_entries_take_the_queue_depths_from_the_queues():
    spec = switch_specs(line3())["s1"]
    rules = [JobRule(job=1, src="10.0.0.1")]
    setup = SwitchSetup(spec, PROGRAM, queues={2: QueueConfig.for_link(10, 200),
                                               3: QueueConfig(rate_pps=5)},
                        ecn_threshold=7, job_rules=rules)
    assert setup.queue_depths() == {2: 200}
    assert setup.entries() == switch_entries(spec, ecn_threshold=7, queue_depths={2: 200},
                                             job_rules=rules)
    cfg = {e.match["standard_metadata.egress_port"]: e.params
           for e in setup.entries() if e.table == "egress_port_cfg"}
    assert cfg[2] == {"threshold": 7, "bucket_shift": 2}   # 200 packets: 64 buckets of 4
    assert cfg[3] == {"threshold": 7, "bucket_shift": 1}   # BMv2's default depth, 64


class FakeSwitch:
    name, device_id, grpc_address = "s1", 1, "unix:/nonexistent"

    def __init__(self):
        self.calls = []

    def start(self):
        self.calls.append("start")

    def configure_queues(self, queues):
        self.calls.append("queues")
        raise SwitchCLIError("BMv2 s1: Thrift port 9090 not accepting")

    def stop(self):
        self.calls.append("stop")


def test_bring_up_stops_a_switch_it_could_not_program():
    sw = FakeSwitch()
    setup = SwitchSetup(switch_specs(line3())["s1"], PROGRAM, queues={2: QueueConfig(depth=10)})
    with pytest.raises(SwitchCLIError, match="Thrift"):
        bring_up(sw, setup, P4Info.from_text(P4INFO_TEXT))
    assert sw.calls == ["start", "queues", "stop"]


def test_bring_up_refuses_a_program_without_what_the_switch_is_asked_for():
    """routing: ecmp with equal-cost paths asks for the ECMP feature, which the hand-written
    P4Info lacks: refused before the switch starts, naming it."""
    diamond = make_plan(["h1", "h2"], ["s1", "s2", "s3", "s4"],
                        [("h1", "s1"), ("s1", "s2"), ("s1", "s3"), ("s2", "s4"), ("s3", "s4"),
                         ("s4", "h2")], routing="ecmp")
    sw = FakeSwitch()
    setup = SwitchSetup(switch_specs(diamond)["s1"], PROGRAM)
    assert setup.features() == ["forwarding", "ecmp", "queue_telemetry"]
    with pytest.raises(ContractError) as err:
        bring_up(sw, setup, P4Info.from_text(P4INFO_TEXT))
    assert str(err.value) == "x.p4 lacks action 'ecmp_group' of table 'ipv4_lpm', table 'ecmp_members' (ECMP)"
    assert sw.calls == []


def test_a_switch_that_neither_marks_nor_is_sampled_gets_no_port_cfg_or_job_entries():
    spec = switch_specs(line3())["s1"]
    rules = [JobRule(job=1, src="10.0.0.1")]
    quiet = SwitchSetup(spec, PROGRAM, job_rules=rules, telemetry=False)
    assert quiet.features() == ["forwarding"]
    assert {e.table for e in quiet.entries()} == {"arp_responder", "ipv4_lpm"}
    marking = SwitchSetup(spec, PROGRAM, port_thresholds={3: 20}, job_rules=rules, telemetry=False)
    assert marking.features() == ["forwarding", "ecn_marking"]
    assert {e.table for e in marking.entries()} == {"arp_responder", "ipv4_lpm", "egress_port_cfg"}
    sampled = SwitchSetup(spec, PROGRAM, job_rules=rules)
    assert sampled.features() == ["forwarding", "queue_telemetry"]
    assert {e.table for e in sampled.entries()} == {"arp_responder", "ipv4_lpm", "egress_port_cfg",
                                                    "job_classify"}


def test_bring_up_refuses_a_switch_that_is_not_the_plans():
    sw = FakeSwitch()
    with pytest.raises(P4Error, match="device id 1 is not the plan's 2"):
        bring_up(sw, SwitchSetup(switch_specs(line3())["s2"], PROGRAM))
    assert sw.calls == []

"""mn_harness.testing.p4cases without a switch: a *.p4test.yaml file is parsed and checked,
and every mistake is one line naming the file and the YAML path."""

from pathlib import Path

import pytest

from mn_harness.errors import ConfigError
from mn_harness.testing.p4cases import load_case_file

GOOD = """
program: mine.p4
entries:
  - {table: job_classify, match: {hdr.ipv4.dscp: [5, 63]}, action: set_job, params: {job: 7}, priority: 20}
cases:
  - name: forwarded
    queues: [{port: h2, rate_pps: 100, depth: 64}]
    send:
      - {port: h1, count: 3, packet: {Ether: {src: h1.mac, dst: h1.switch_mac}, IP: {dst: h2.ip}}}
    expect:
      - {port: [s1, 2], count: 3, ignore: [IP.chksum], packet: {Ether: {}, IP: {dst: h2.ip}}}
    counters:
      - {name: port_tx, index: 2, packets: 3}
  - expect: []
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "mine.p4").write_text("// a program\n")
    path = tmp_path / "t.p4test.yaml"
    path.write_text(text)
    return path



def test_a_good_file_is_read(tmp_path):
    spec = load_case_file(write(tmp_path, GOOD))
    assert spec.program == (tmp_path / "mine.p4").resolve() and spec.experiment is None
    [entry] = spec.entries
    assert entry.match == {"hdr.ipv4.dscp": (5, 63)} and entry.op == "insert" and entry.priority == 20
    first, second = spec.cases
    assert first.name == "forwarded" and second.name == "case 1"
    assert first.send[0].count == 3 and first.expect[0].port == ("s1", 2)
    assert first.expect[0].ignore == ("IP.chksum",)
    assert second.expect == () and second.send == ()


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("program: mine.p4", "program: yours.p4"),
     "t.p4test.yaml: program: no such file 'yours.p4' (relative to t.p4test.yaml)"),
    (lambda t: t.replace("cases:", "casez:"), "t.p4test.yaml: casez: unknown key"),
    (lambda t: t.replace("count: 3, packet", "count: 0, packet"),
     "t.p4test.yaml: cases[0].send[0].count: expected a positive number of packets, got 0"),
    (lambda t: t.replace("{port: h1, count: 3, ", "{count: 3, "), "t.p4test.yaml: cases[0].send[0]: 'port' is missing"),
    (lambda t: t.replace("packets: 3}", "}"), "t.p4test.yaml: cases[0].counters[0]: give the change in packets"),
    (lambda t: t.replace("priority: 20}", "priority: 20, op: upsert}"),
     "t.p4test.yaml: entries[0].op: expected insert or modify, got 'upsert'"),
    (lambda t: t.replace("  - expect: []", "  - name: forwarded"), "t.p4test.yaml: cases[1].name: duplicate case name"),
    (lambda t: t.replace("ignore: [IP.chksum], ", "ignore: [IP.chksum], colour: red, "),
     "t.p4test.yaml: cases[0].expect[0].colour: unknown key"),
])
def test_mistakes_are_one_line_naming_the_yaml_path(tmp_path, edit, message):
    with pytest.raises(ConfigError) as err:
        load_case_file(write(tmp_path, edit(GOOD)))
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)

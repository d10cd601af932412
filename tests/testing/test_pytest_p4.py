"""The pytest plugin end to end on a real BMv2: a user's test folder outside the project (a
Python test module and a *.p4test.yaml file), run by pytest with nothing but the plugin; the
outcomes and failure messages are read back from its JUnit report."""

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

pytestmark = [pytest.mark.bmv2, pytest.mark.root, pytest.mark.slow]

MODULE = '''
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw


@pytest.fixture(scope="module")
def p4_experiment():
    return {"hosts": ["a", "b"], "switches": ["sw"], "link_defaults": {"bw": "100Mbit"},
            "links": [{"endpoints": ["a", "sw"]}, {"endpoints": ["b", "sw"]}],
            "jobs": [{"name": "j", "workers": ["a", "b"], "bytes_per_iteration": "1MB", "compute": "1ms",
                      "iterations": 1}]}


def test_forwarded(p4):
    a, b = p4.host("a"), p4.host("b")
    p4.send(a.port, Ether(src=a.mac, dst=a.switch_mac) / IP(src=a.ip, dst=b.ip) / UDP() / Raw(b"x" * 200))
    p4.expect(b.port, Ether(src=b.switch_mac, dst=b.mac) / IP(src=a.ip, dst=b.ip, ttl=63) / UDP() / Raw(b"x" * 200))
    p4.expect_nothing()


def test_counted_from_zero(p4):
    assert p4.counter("port_tx", p4.host("b").port.number).packets == 0


def test_wrong_ttl(p4):
    a, b = p4.host("a"), p4.host("b")
    p4.send("a", Ether(src=a.mac, dst=a.switch_mac) / IP(src=a.ip, dst=b.ip) / UDP() / Raw(b"x" * 200))
    p4.expect("b", Ether(src=b.switch_mac, dst=b.mac) / IP(src=a.ip, dst=b.ip, ttl=64) / UDP() / Raw(b"x" * 200),
              timeout=0.5)
'''

CASES = '''
cases:
  - name: forwarded
    send:
      - {port: h1, packet: {Ether: {src: h1.mac, dst: h1.switch_mac}, IP: {src: h1.ip, dst: h3.ip}, UDP: {}}}
    expect:
      - {port: h3, packet: {Ether: {src: h3.switch_mac, dst: h3.mac}, IP: {src: h1.ip, dst: h3.ip, ttl: 63}, UDP: {}}}
    counters:
      - {name: port_tx, index: 3, packets: 1}
  - name: TTL 1 dropped
    send:
      - {port: h1, packet: {Ether: {src: h1.mac, dst: h1.switch_mac}, IP: {dst: h2.ip, ttl: 1}, UDP: {}}}
    expect: []
  - name: a job rule of the file's
    send:
      - port: h2
        count: 2
        packet: {Ether: {src: h2.mac, dst: h2.switch_mac}, IP: {src: h2.ip, dst: h1.ip, tos: 20}, UDP: {}}
    expect:
      - port: h1
        count: 2
        ignore: [IP.ttl, IP.chksum]
        packet: {Ether: {src: h1.switch_mac, dst: h1.mac}, IP: {src: h2.ip, dst: h1.ip, tos: 20}, UDP: {}}
    counters:
      - {name: job_tx, index: 225, packets: 2}
  - name: expected on the wrong port
    send:
      - {port: h1, packet: {Ether: {src: h1.mac, dst: h1.switch_mac}, IP: {src: h1.ip, dst: h2.ip}, UDP: {}}}
    expect:
      - {port: h3, packet: {Ether: {src: h3.switch_mac, dst: h3.mac}, IP: {src: h1.ip, dst: h2.ip, ttl: 63}, UDP: {}}}
entries:
  - {table: job_classify, match: {hdr.ipv4.dscp: [5, 63]}, action: set_job, params: {job: 7}, priority: 99}
'''


def run_pytest(folder: Path) -> tuple[dict[str, tuple[str, str]], str]:
    env = {k: v for k, v in os.environ.items() if k != "MN_HARNESS_REQUIRE_BMV2"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--junitxml=r.xml",
                           "--rootdir", str(folder), str(folder)], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=600)
    out = {}
    for case in ElementTree.parse(folder / "r.xml").iter("testcase"):
        bad = [child for child in case if child.tag in ("failure", "error", "skipped")]
        out[case.get("name", "")] = (bad[0].tag if bad else "passed", bad[0].text or "" if bad else "")
    return out, proc.stdout + proc.stderr


def test_a_users_test_folder_runs_with_the_plugin(tmp_path):
    (tmp_path / "test_mine.py").write_text(MODULE)
    (tmp_path / "mine.p4test.yaml").write_text(CASES)
    out, text = run_pytest(tmp_path)
    assert {name: kind for name, (kind, _) in out.items()} == {
        "test_forwarded": "passed", "test_counted_from_zero": "passed", "test_wrong_ttl": "failure",
        "forwarded": "passed", "TTL 1 dropped": "passed", "a job rule of the file's": "passed",
        "expected on the wrong port": "failure"}, text
    assert "IP.ttl: 64 expected, 63 received" in out["test_wrong_ttl"][1]
    wrong_port = out["expected on the wrong port"][1]
    assert wrong_port.startswith("cases[3].expect[0]: nothing like Ether / IP / UDP"), wrong_port
    assert "out of s1:3 (h3) within 2 s" in wrong_port and "s1:2 (h2) sent Ether / IP / UDP" in wrong_port

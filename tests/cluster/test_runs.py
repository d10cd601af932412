"""A run spread over two servers, for real: two namespaces on this machine, each with its own
network, mounts, PIDs, hostname and sshd, reached by address over a private underlay
(mn_harness/cluster/bed.py). The ring of a 2-worker job crosses between them in a VXLAN tunnel.

Shown: every row; rank 1's worker ran in server b's PID namespace and rank 0's in a's; the tunnel
is shaped (goodput within 10% of the link rate); each congestion control registered once on the
kernel the servers share; the clock offsets agree with the truth (the same clock: 0) within their
bounds; both servers clean afterwards, also after Ctrl-C and after a server became unreachable
(one line; it tears its part down by itself, `clean` on the head then finds nothing); an underlay
MTU that cannot carry 1500-byte frames and a server with other files are refused in one line."""

from __future__ import annotations

import csv
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from mn_harness.cc.manager import available_congestion_controls
from mn_harness.cluster.bed import ClusterBed
from tests.cluster.bedtools import (
    RATE,
    cli,
    head_env,
    head_run,
    leftovers,
    line_experiment,
    results_folder,
    summary,
    wait_clean,
    wait_for_workers,
)
from tests.helpers import ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def bed():
    with ClusterBed(2) as b:
        yield b


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith("mn-harness")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_ring_across_the_tunnel_runs_on_both_servers_and_leaves_nothing(bed, tmp_path):
    ccs_before = set(available_congestion_controls())
    # 20 iterations (~5 s at 100 Mbit/s): long enough to see each worker in its server's PIDs
    proc = head_run(bed, tmp_path, line_experiment(bed, iterations=20, cc="mltcp-reno"), background=True)
    where = wait_for_workers(bed, proc)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert where == {"job1-r0": "a", "job1-r1": "b"}  # each worker in its own server's PID namespace

    folder = results_folder(tmp_path)
    with open(folder / "iterations.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted((r["rank"], r["iteration"]) for r in rows) == sorted(
        (str(rank), str(i)) for rank in (0, 1) for i in range(20))
    rates = [int(r["bytes_sent"]) * 8 / float(r["comm_time"]) for r in rows if int(r["iteration"]) >= 2]
    share = statistics.mean(rates) / 100e6
    assert 0.9 <= share <= 1.1, f"goodput {share:.3f} of {RATE} across the tunnel"

    s = summary(folder)
    assert s["status"] == "completed"
    servers = s["provenance"]["servers"]
    assert servers["a"]["registers_cc"] and not servers["b"]["registers_cc"]
    assert servers["a"]["cc_names"] == servers["b"]["cc_names"] == s["cc"]
    assert "cc: registered" in (folder / "servers/a/harness.log").read_text()
    assert "cc: registered" not in (folder / "servers/b/harness.log").read_text()
    assert s["provenance"]["tunnels"]["s1-s2"]["kind"] == "vxlan"
    for name in ("a", "b"):  # one kernel, one clock: the true offset is 0
        clock = servers[name]["clock"]
        for when in ("before", "after"):
            assert abs(clock[when]["offset_ms"]) <= clock[when]["error_ms"] + 1e-3, clock
    fidelity = s["fidelity"]
    assert set(fidelity["servers"]) == {"a", "b"}
    assert {"s1->s2", "s2->s1"} <= set(fidelity["links"])  # the tunnel's ends are watched too
    assert fidelity["servers"]["b"]["clock"]["limit_ms"] > 0
    with open(folder / "queue.csv") as fh:
        switches = {r["switch"] for r in csv.DictReader(fh)}
    assert switches == {"s1", "s2"}

    wait_clean(bed, bed.names, timeout=5)
    assert not list((tmp_path / "head-state").glob("*.json"))
    assert set(available_congestion_controls()) == ccs_before


def test_ctrl_c_leaves_both_servers_clean(bed, tmp_path):
    proc = head_run(bed, tmp_path, line_experiment(bed, iterations=200), background=True)
    wait_for_workers(bed, proc)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in one_line(err)
    wait_clean(bed, bed.names, timeout=5)
    assert not list((tmp_path / "head-state").glob("*.json"))
    assert summary(results_folder(tmp_path))["status"] == "interrupted"


def test_a_server_lost_mid_run_is_one_line_and_tears_itself_down(bed, tmp_path):
    proc = head_run(bed, tmp_path, line_experiment(bed, iterations=200), background=True)
    wait_for_workers(bed, proc)
    bed.cut("b")
    try:
        _, err = proc.communicate(timeout=180)
        line = one_line(err)
        assert proc.returncode == 1 and "server b (" in line, line
        assert "unreachable" in line or "connection ended" in line, line
        assert leftovers(bed, "a") == []  # the head tore a's part down
        time.sleep(12)  # b's lease (10 s) runs out while it is cut off
    finally:
        bed.restore("b")
    wait_clean(bed, ["b"], timeout=30)
    state = list((tmp_path / "head-state").glob("*.json"))
    assert len(state) == 1  # the head could not confirm b: its record stays for `clean`
    clean = subprocess.run(bed.head_argv(cli("clean")), env=head_env(bed, tmp_path), capture_output=True,
                           text=True, timeout=120, cwd=ROOT)
    assert clean.returncode == 0, clean.stderr
    assert not list((tmp_path / "head-state").glob("*.json"))
    wait_clean(bed, bed.names, timeout=5)


def test_an_underlay_too_small_for_1500_byte_frames_is_one_line(tmp_path):
    with ClusterBed(2, mtu=1500) as small:
        proc = head_run(small, tmp_path, line_experiment(small))
        line = one_line(proc.stderr)
        assert proc.returncode == 1 and "needs MTU 1550" in line and "server a (" in line, line
        wait_clean(small, small.names, timeout=5)


def test_a_server_with_other_files_is_refused(bed, tmp_path):
    copy = Path(tempfile.mkdtemp(prefix="mn-harness-other-", dir="/var/tmp"))
    try:
        shutil.copytree(ROOT / "mn_harness", copy / "mn_harness", ignore=shutil.ignore_patterns("__pycache__"))
        with open(copy / "mn_harness" / "units.py", "a") as fh:
            fh.write("\n# changed\n")
        wrapper = copy / "python"
        wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={copy} exec {sys.executable} \"$@\"\n")
        wrapper.chmod(0o755)
        raw = line_experiment(bed)
        raw["servers"][1]["python"] = str(wrapper)
        proc = head_run(bed, tmp_path, raw)
        line = one_line(proc.stderr)
        assert proc.returncode == 1 and "server b (" in line and "same version" in line, line
        wait_clean(bed, bed.names, timeout=5)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


_TWO_RUNS = r"""
import json, sys, yaml
from pathlib import Path
from mn_harness.cluster.head import ClusterRun
from mn_harness.cluster.tunnel import draw
from mn_harness.config import Experiment
from mn_harness.state import RunState

exp = Experiment.from_dict(yaml.safe_load(open(sys.argv[1])), "cluster")
runs = []
for run_id in ("run-x", "run-y"):
    run = ClusterRun(exp, log=lambda line: None)
    run.run_id = run_id
    run.state = RunState(run_id, Path(sys.argv[2]))
    runs.append(run)
x, y = runs
x.connect()
y.connect()
# x takes the VNI y draws first: y must find it taken on both servers and draw again
x.run_id = "forced"
first_y = draw("run-y", 1, 0, "vxlan")
import mn_harness.cluster.head as head
real = head.draw
head.draw = lambda seed, link, attempt, kind: first_y if seed == "forced" else real(seed, link, attempt, kind)
x.prepare()
y.prepare()
out = {"x": x.tunnels[1][1], "y": y.tunnels[1][1], "first_y": first_y}
for run in (x, y):
    run._teardown()
print(json.dumps(out))
"""


def test_two_runs_between_the_same_servers_never_share_a_vni(bed, tmp_path):
    from tests.cluster.bedtools import write

    script = tmp_path / "two_runs.py"
    script.write_text(_TWO_RUNS)
    spec = write(tmp_path, line_experiment(bed))
    proc = subprocess.run(bed.head_argv([sys.executable, str(script), str(spec), str(tmp_path)]),
                          env=head_env(bed, tmp_path), capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    import json

    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["x"] == out["first_y"] and out["y"] != out["x"]
    wait_clean(bed, bed.names, timeout=10)


def test_the_bed_is_what_the_tests_say(bed):
    """Each server: its own PID namespace (it sees only its processes), hostname and /run."""
    ps = bed.server("a", ["ps", "-e", "-o", "pid="]).stdout.split()
    assert "1" in ps and len(ps) < 20
    assert bed.server("a", ["hostname"]).stdout.strip() == "srv-a"
    assert bed.server("b", ["hostname"]).stdout.strip() == "srv-b"
    assert os.stat(f"/proc/{bed.pids['a']}/ns/net").st_ino != os.stat(f"/proc/{bed.pids['b']}/ns/net").st_ino

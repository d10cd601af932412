"""Real runs through the session and the Python API: Results and DataFrames, ownership,
provenance, harness.log, the config.yaml round trip, a mid-run rate change, --pcap, --cli and a
killed worker. Root, namespaces, kernel TCP."""

from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import mn_harness as mh
from mn_harness.config import Experiment, load_experiment
from mn_harness.runner import run_experiment
from tests.helpers import small_demo

pytestmark = [pytest.mark.root, pytest.mark.slow]
NOBODY = 65534


def test_api_run_returns_frames_matching_the_csv_and_every_file_belongs_to_the_sudo_user(tmp_path, monkeypatch):
    monkeypatch.setenv("SUDO_UID", str(NOBODY))
    monkeypatch.setenv("SUDO_GID", str(NOBODY))
    exp = mh.ExperimentBuilder.from_raw(small_demo())
    results = mh.run(exp, out=tmp_path / "deep" / "runs", label="small", plots=True, quiet=True)
    assert results.status == "completed"
    with open(results.path / "iterations.csv") as f:
        rows = list(csv.DictReader(f))
    frame = results.iterations
    assert len(frame) == len(rows) == 16
    for row, (_, got) in zip(rows, frame.iterrows(), strict=True):
        assert (got.job, got["rank"], got.iteration) == (row["job"], int(row["rank"]), int(row["iteration"]))
        assert got.t_comm_end == pytest.approx(float(row["t_comm_end"]))
        assert got.cc == "cubic" and got.label == "small" and got.run == results.path.name
    assert set(results.metrics.job) == {"job1", "job2"}
    # every file and folder the run made, up to the results root it created, is nobody's
    made = [tmp_path / "deep", tmp_path / "deep" / "runs", *results.path.rglob("*"), results.path]
    assert (results.path / "plots" / "throughput.pdf").is_file() and (results.path / "report.md").is_file()
    assert {p.stat().st_uid for p in made} == {NOBODY}, [p for p in made if p.stat().st_uid != NOBODY]
    summary = results.summary
    prov = summary.provenance
    assert prov["software"]["mn_harness"] == mh.__version__ and prov["software"]["mininet"]
    assert prov["machine"]["kernel"] == os.uname().release and prov["machine"]["cpu_count"] == os.cpu_count()
    assert prov["started_at"] <= prov["ended_at"] and prov["command"]
    assert prov["software"]["git"]["commit"]  # the tests run from a checkout
    log = (results.path / "harness.log").read_text()
    assert "jobs: job1" in log and "===== worker job2 rank 1 on h4: stderr =====" in log and "status: completed" in log


def test_config_yaml_runs_again_to_the_same_resolved_config(tmp_path):
    raw = small_demo(iterations=2)
    raw["run"]["dataplane"] = "auto"  # resolved in config.yaml to what the run used
    raw["jobs"][1]["cc"] = "reno"
    first = run_experiment(Experiment.from_dict(raw, "x"), out_root=tmp_path, log=None)
    again = mh.run(first / "config.yaml", out=tmp_path, quiet=True, report=False).path
    one, two = load_experiment(first / "config.yaml"), load_experiment(again / "config.yaml")
    assert one == two and one.run.dataplane in ("linux", "bmv2")
    assert one == Experiment.from_dict(raw, "x").with_run(dataplane=one.run.dataplane)
    assert json.loads((again / "summary.json").read_text())["status"] == "completed"


def _median_rate(results: Path, lo: float, hi: float) -> float:
    """Median per-bin send rate (bit/s) of non-empty 10 ms bins starting in [lo, hi)."""
    with open(results / "throughput.csv") as f:
        rates = [int(r["bytes"]) * 8 / float(r["bin_s"]) for r in csv.DictReader(f)
                 if lo <= float(r["t"]) < hi and int(r["bytes"]) > 0]
    assert len(rates) >= 10, rates
    return statistics.median(rates)


def test_a_callback_changes_the_link_rate_and_throughput_follows_it(tmp_path):
    raw = small_demo(iterations=8, bytes_per_iteration="4MB", compute="50ms")
    raw["jobs"] = raw["jobs"][:1]
    raw["link_defaults"]["bw"] = "200Mbit"
    raw["links"][2]["bw"] = "200Mbit"
    changed: list[float] = []

    def halve_at_iteration_3(session, job, iteration):
        if iteration == 2 and not changed:
            session.set_link_rate("s1-s2", "100Mbit")
            changed.append(1)

    results = run_experiment(Experiment.from_dict(raw, "rate"), out_root=tmp_path, log=None,
                             on_iteration=halve_at_iteration_3)
    change = json.loads((results / "summary.json").read_text())["link_changes"]
    assert [(c["link"], c["bw_bps"]) for c in change] == [("s1-s2", 100e6)]
    with open(results / "iterations.csv") as f:
        starts = sorted({float(r["t_start"]) for r in csv.DictReader(f)})
    after_start = min(t for t in starts if t > change[0]["t"])  # first iteration wholly after it
    before = _median_rate(results, 0.0, change[0]["t"])
    after = _median_rate(results, after_start, 1e9)
    # The bounds tell the two rates apart (a rate that did not follow would be 2x off). They are
    # not a fidelity target: bench/link_rate.py measured 0.927 +- 0.000 before and 0.919 +- 0.044
    # after (3 runs; TCP/IP headers alone take ~4.5%), and under load single runs fell to 0.89;
    # with the VM's host taking 10-26% of its CPU (3 December 2026) a CI run read 0.74 before.
    # So the rates are loose and their ratio (a link that did not change: ~1) decides.
    assert 0.6 * 200e6 <= before <= 1.1 * 200e6, before
    assert 0.6 * 100e6 <= after <= 1.1 * 100e6, after
    assert 0.3 <= after / before <= 0.75, (before, after)


def test_pcap_captures_the_jobs_flows_in_a_file_scapy_reads(tmp_path):
    from scapy.all import IP, TCP, rdpcap

    cfg = tmp_path / "x.yaml"
    cfg.write_text(yaml.safe_dump(small_demo(iterations=3)))
    proc = subprocess.run([sys.executable, "-m", "mn_harness.cli", "run", str(cfg), "--out", str(tmp_path),
                           "--no-plots", "--pcap", "s2-s1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    folder = next(p for p in tmp_path.iterdir() if p.is_dir())
    packets = rdpcap(str(folder / "pcap" / "s1-s2.pcap"))
    flows = {(p[IP].src, p[IP].dst, port) for p in packets if IP in p and TCP in p
             for port in (p[TCP].sport, p[TCP].dport)}
    specs = [json.loads(p.read_text()) for p in sorted((folder / "raw").glob("*.spec.json"))]
    for spec in specs:  # every ring hop crosses s1-s2: rank r -> r+1 on the job's connection
        # (one full-duplex connection per pair, on the job's port at whichever end listens)
        src, dst = spec["ips"][spec["rank"]], spec["ips"][(spec["rank"] + 1) % len(spec["ips"])]
        assert (src, dst, spec["port"]) in flows, (spec["job"], spec["rank"], sorted(flows)[:5])
    assert all(len(bytes(p)) <= 128 for p in packets)  # headers only
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["pcap"]["s1-s2"]["file"] == "pcap/s1-s2.pcap"


@pytest.mark.parametrize("mode", ["up", "after"])
def test_cli_opens_on_the_running_network(tmp_path, mode):
    """Typed as a person types: a command, its output, then `exit` (the CLI passes what is typed
    while a command runs on to that command, so the input cannot be sent in one go)."""
    import select

    cfg = tmp_path / "x.yaml"
    cfg.write_text(yaml.safe_dump(small_demo(iterations=2)))
    proc = subprocess.Popen([sys.executable, "-u", "-m", "mn_harness.cli", "run", str(cfg), "--out", str(tmp_path),
                             "--no-plots", f"--cli={mode}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    assert proc.stdin is not None and proc.stdout is not None
    fd, out, sent = proc.stdout.fileno(), "", 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            chunk = os.read(fd, 4096).decode(errors="replace")
            if not chunk:
                break
            out += chunk
        if sent == 0 and "mininet>" in out:
            proc.stdin.write(b"h1 ip -4 -o addr show h1-eth0\n")
            proc.stdin.flush()
            sent = 1
        elif sent == 1 and "10.0.0.1/24" in out and out.rstrip().endswith("mininet>"):
            proc.stdin.write(b"exit\n")
            proc.stdin.close()
            sent = 2
    assert proc.wait(60) == 0, out
    assert "10.0.0.1/24" in out  # h1's address, printed by the command run in h1
    cli_at, jobs_at, done_at = out.index("Mininet CLI"), out.index("jobs: job1"), out.index("job1 2/2")
    assert (cli_at < jobs_at) if mode == "up" else (cli_at > done_at)


def test_a_killed_worker_fails_the_run_saying_so(tmp_path):
    def kill_at_iteration_1(session, job, iteration):
        if job == "job2" and iteration == 1:
            session.kill_worker("job2", 1)

    exp = Experiment.from_dict(small_demo(iterations=50), "kill")
    with pytest.raises(mh.JobError, match=r"job2 rank \d on h\d died .*\(the script killed job2 rank 1\)$"):
        run_experiment(exp, out_root=tmp_path, log=None, on_iteration=kill_at_iteration_1)
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    assert summary["status"].startswith("failed: job2 rank") and "the script killed job2 rank 1" in summary["status"]

"""Real runs with torch.distributed (gloo) traffic: every row, the job's CC on gloo's sockets
read from the kernel (a kernel CC and a BPF variant), the bytes gloo's algorithms send, and the
global allowed-CC list back to its old value after a run, after SIGINT and after `clean`."""

from __future__ import annotations

import collections
import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mn_harness import collectives
from mn_harness.cc.manager import available_congestion_controls
from mn_harness.cc.namespace import read_allowed
from mn_harness.config import Experiment
from mn_harness.runner import run_experiment
from mn_harness.state import state_dir
from tests.helpers import small_demo

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.torch]


def torch_demo(cc="cubic", iterations=4, collective="torch_allreduce") -> dict:
    raw = small_demo(iterations=iterations)
    for job in raw["jobs"]:
        job.update(collective=collective, cc=cc)
    return raw


def read_csv(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def acked_per_rank(results: Path) -> dict[tuple[str, int], int]:
    total: collections.Counter = collections.Counter()
    for r in read_csv(results / "throughput.csv"):
        total[(r["job"], int(r["rank"]))] += int(r["bytes"])
    return total


def test_torch_demo_completes_with_every_row_on_the_jobs_cc(tmp_path):
    before = read_allowed()
    exp = Experiment.from_dict(torch_demo(), "torch-demo")
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    rows = read_csv(results / "iterations.csv")
    keys = {(r["job"], int(r["rank"]), int(r["iteration"])) for r in rows}
    assert keys == {(j.name, rank, it) for j in exp.jobs for rank in range(j.n_workers) for it in range(j.iterations)}
    assert len(rows) == len(keys)
    for r in rows:
        assert float(r["iter_time"]) >= 0.060 - 1e-3
        assert int(r["bytes_sent"]) == 2_000_000
        assert float(r["cpu_s"]) > 0  # gloo's threads included: the process's CPU time
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["socket_cc"] == {"job1": ["cubic"], "job2": ["cubic"]}  # from sock_diag
    first = {r["job"]: float(r["t_start"]) for r in rows if r["iteration"] == "0" and r["rank"] == "0"}
    assert first["job2"] - first["job1"] == pytest.approx(0.020, abs=0.005)
    # throughput bins: bytes the kernel saw acknowledged on gloo's connections (headers add ~0.1%)
    for key, acked in acked_per_rank(results).items():
        assert 4 * 2_000_000 <= acked <= 4 * 2_000_000 * 1.01, key
    assert read_allowed() == before


def test_bpf_variant_on_gloo_sockets_and_unregistered_after(tmp_path):
    before = read_allowed()
    exp = Experiment.from_dict(torch_demo(cc="mltcp-reno", iterations=6), "torch-mltcp")
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    summary = json.loads((results / "summary.json").read_text())
    name = summary["cc"]["job1"]
    assert name.startswith("mlreno_")
    assert summary["socket_cc"] == {"job1": [name], "job2": [name]}
    # the BPF program itself saw the job's bytes: its telemetry rows are gloo's connections
    rows = read_csv(results / "cc_telemetry.csv")
    big = [r for r in rows if int(r["bytes"]) >= 1_000_000]
    assert len(big) >= 4 * 4, f"{len(big)} telemetry rows with >= 1 MB"
    assert read_allowed() == before
    assert name not in available_congestion_controls()
    listed = subprocess.run(["bpftool", "struct_ops", "list"], capture_output=True, text=True).stdout
    assert name not in listed


def test_every_torch_collective_sends_what_its_arithmetic_says(tmp_path):
    """One run, one 3-worker job per collective on a star: the bytes each rank's gloo
    connections carried (acknowledged, from the kernel) against collectives/gloo.py."""
    names = list(collectives.names(engine=collectives.TORCH))
    hosts = [f"h{i}" for i in range(1, 3 * len(names) + 1)]
    raw = {"hosts": hosts, "switches": ["s1"], "link_defaults": {"bw": "1Gbit", "queue": 100},
           "links": [{"endpoints": [h, "s1"]} for h in hosts],
           "jobs": [{"name": f"j{k}", "workers": hosts[3 * k:3 * k + 3], "collective": c, "cc": "reno",
                     "bytes_per_iteration": "3MB", "compute": "50ms", "iterations": 3}
                    for k, c in enumerate(names)],
           "run": {"dataplane": "linux"}}
    results = run_experiment(Experiment.from_dict(raw, "collectives"), out_root=tmp_path, log=lambda *_: None)
    acked = acked_per_rank(results)
    rows = read_csv(results / "iterations.csv")
    assert len(rows) == 3 * 3 * len(names)
    for k, c in enumerate(names):
        for rank in range(3):
            want = 3 * collectives.schedule(c, 3_000_000, 3).sent_by(rank)
            got = acked.get((f"j{k}", rank), 0)
            assert want <= got <= want * 1.01 + 2000, (c, rank, got, want)


def _run_cli(config: Path, tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mn_harness.cli", "run", str(config), "--out", str(tmp_path),
                             "--no-plots"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for_rows(proc: subprocess.Popen, rows: int) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for p in state_dir().glob(f"{proc.pid}-*.json"):
            state = json.loads(p.read_text())
            stem = Path(state["results_dir"]) / "raw" / "job1-r0.iterations.jsonl"
            if stem.exists() and len(stem.read_text().splitlines()) >= rows:
                return state
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.2)
    raise AssertionError("the run never got going")


def test_allowed_list_restored_after_sigint_and_by_clean_after_sigkill(tmp_path):
    before = read_allowed()
    if "cubic" in before:
        pytest.skip("cubic is allowed already: a run adds nothing to the list")
    config = tmp_path / "torch.yaml"
    config.write_text(yaml.safe_dump(torch_demo(iterations=300)))
    proc = _run_cli(config, tmp_path)
    state = _wait_for_rows(proc, 3)
    assert state["undo"]["allowed_cc"] == [{"kind": "allowed_cc", "added": ["cubic"]}]
    assert read_allowed() == [*before, "cubic"]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert read_allowed() == before

    proc = _run_cli(config, tmp_path)
    state = _wait_for_rows(proc, 3)
    proc.kill()  # no teardown: the list keeps cubic until `clean`
    proc.wait()
    assert read_allowed() == [*before, "cubic"]
    out = subprocess.run([sys.executable, "-m", "mn_harness.cli", "clean"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "removed cubic from tcp_allowed_congestion_control" in out.stdout
    assert read_allowed() == before
    assert not state_dir().joinpath(f"{state['run_id']}.json").exists()

"""What the cluster tests share: the experiment spread over the bed's two servers, running the
head in its namespace, and what a server must not hold once a run is over."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

from mn_harness.cluster.bed import ClusterBed
from mn_harness.state import STATE_DIR_ENV
from tests.helpers import ROOT

RATE = "100Mbit"


def line_experiment(bed: ClusterBed, iterations: int = 6, cc: str = "cubic", **run) -> dict:
    """h1-s1-s2-h2, every link at RATE; server a runs h1 and s1, b runs s2 and h2: the ring of
    the one 2-worker job crosses s1-s2, a tunnel between them."""
    return {
        "experiment": "cluster", "hosts": ["h1", "h2"], "switches": ["s1", "s2"],
        "link_defaults": {"bw": RATE, "queue": 100},
        "links": [{"endpoints": ["h1", "s1"]}, {"endpoints": ["s1", "s2"]}, {"endpoints": ["s2", "h2"]}],
        "jobs": [{"name": "job1", "workers": ["h1", "h2"], "bytes_per_iteration": "2500KB", "compute": "20ms",
                  "iterations": iterations, "cc": cc}],
        "servers": [{"name": "a", "address": bed.addresses["a"], "python": sys.executable, "nodes": ["h1", "s1"]},
                    {"name": "b", "address": bed.addresses["b"], "python": sys.executable, "nodes": ["s2", "h2"]}],
        "run": {"dataplane": "linux", **run},
    }


def write(tmp_path: Path, raw: dict, name: str = "cluster.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return path


def head_env(bed: ClusterBed, tmp_path: Path) -> dict[str, str]:
    return bed.env({STATE_DIR_ENV: str(tmp_path / "head-state")})


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "mn_harness.cli", *args]


def head_run(bed: ClusterBed, tmp_path: Path, raw: dict, background: bool = False):
    argv = bed.head_argv(cli("run", str(write(tmp_path, raw)), "--out", str(tmp_path / "results"), "--no-plots"))
    if background:
        return subprocess.Popen(argv, env=head_env(bed, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=ROOT)
    return subprocess.run(argv, env=head_env(bed, tmp_path), capture_output=True, text=True, timeout=600, cwd=ROOT)


def results_folder(tmp_path: Path) -> Path:
    folders = sorted((tmp_path / "results").glob("cluster-*"))
    assert len(folders) == 1, folders
    return folders[0]


_SPEC = re.compile(r"(\w+-r\d+)\.spec\.json")


def workers_on(bed: ClusterBed, name: str) -> set[str]:
    """The workers running in server `name`'s PID namespace, as `job-rRANK` (ps -ww: without it
    ps cuts lines to 80 columns under pytest, and the spec path is past them)."""
    out = bed.server(name, ["ps", "-ww", "-e", "-o", "args="], check=False).stdout
    return {m[1] for line in out.splitlines() if "mn_harness.worker" in line and (m := _SPEC.search(line))}


def wait_for_workers(bed: ClusterBed, proc: subprocess.Popen, timeout: float = 120) -> dict[str, str]:
    """Worker -> server, once every server runs one."""
    deadline = time.monotonic() + timeout
    seen: dict[str, str] = {}
    while time.monotonic() < deadline:
        for name in bed.names:
            seen.update({w: name for w in workers_on(bed, name)})
        if set(seen.values()) == set(bed.names):
            return seen
        if proc.poll() is not None:
            raise AssertionError(f"the run ended first (exit {proc.returncode}): "
                                 f"{proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.2)
    raise AssertionError(f"workers seen: {seen}")


def leftovers(bed: ClusterBed, name: str) -> list[str]:
    """What of a run is still on server `name`: state files, processes of the project or
    Mininet, interfaces besides lo and the underlay, folders in its /tmp."""
    out = []
    state = bed.server(name, ["sh", "-c", "ls /run/mn-harness 2>/dev/null"], check=False).stdout.split()
    out += [f"state file {f}" for f in state]
    procs = bed.server(name, ["ps", "-ww", "-e", "-o", "pid=,args="], check=False).stdout
    out += [f"process {line.strip()}" for line in procs.splitlines()
            if any(k in line for k in ("mn_harness", "mininet:", "mnexec", "bpftool"))]
    links = bed.server(name, ["ip", "-o", "link"], check=False).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in links.splitlines() if ":" in line]
    out += [f"interface {n}" for n in names if n not in ("lo", "eth0")]
    tmp = bed.server(name, ["sh", "-c", "ls /tmp"], check=False).stdout.split()
    out += [f"/tmp/{f}" for f in tmp if f.startswith("mn-harness-")]
    return out


def wait_clean(bed: ClusterBed, names, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        left = {n: leftovers(bed, n) for n in names}
        if not any(left.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"left on the servers: {left}")
        time.sleep(0.5)


def summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())

"""A sweep planned into rounds, each round run as its own process on another server (over ssh,
as GNU parallel would), merged on the head: the same comparison as the sweep run at once. The
runs are real, so "the same" is: the same rows (label × scope × metric), the same run counts, the
same pairing, and every mean iteration time within 10% of the sweep run at once (a job alone on
its link: network-bound, steady); and `compare --resume` on the merged folder, which runs
nothing, prints exactly the merged table."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from mn_harness.cluster.bed import ClusterBed
from tests.cluster.bedtools import cli, wait_clean
from tests.helpers import ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.root, pytest.mark.slow]

EXPERIMENT = {
    "experiment": "rounds", "hosts": ["h1", "h2"], "switches": ["s1", "s2"],
    "link_defaults": {"bw": "100Mbit", "queue": 100},
    "links": [{"endpoints": ["h1", "s1"]}, {"endpoints": ["s1", "s2"]}, {"endpoints": ["s2", "h2"]}],
    "jobs": [{"name": "job1", "workers": ["h1", "h2"], "bytes_per_iteration": "1250KB", "compute": "20ms",
              "iterations": 6}],
    "run": {"dataplane": "linux"},
}


def table(folder: Path) -> dict[tuple[str, str, str], tuple[int, int, float | None]]:
    with open(folder / "compare.csv") as fh:
        return {(r["label"], r["scope"], r["metric"]): (int(r["runs"]), int(r["n"]),
                                                        float(r["mean"]) if r["mean"] else None)
                for r in csv.DictReader(fh)}


def on_server(bed: ClusterBed, name: str, *args: str) -> subprocess.CompletedProcess:
    """`mn-harness ARGS` on server `name`, over ssh from the head, as a round runner would."""
    command = " ".join([sys.executable, "-m", "mn_harness.cli", *args])
    proc = subprocess.run(bed.head_argv(["ssh", "-F", str(bed.ssh_config), bed.addresses[name],
                                         f"cd {ROOT} && {command}"]),
                          env=bed.env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_a_sweep_split_into_rounds_on_two_servers_equals_it_run_at_once():
    work = Path(tempfile.mkdtemp(prefix="mn-harness-rounds-", dir="/var/tmp"))  # every server sees it
    try:
        spec = work / "rounds.yaml"
        spec.write_text(yaml.safe_dump(EXPERIMENT))
        with ClusterBed(2) as bed:
            on_server(bed, "a", "compare", str(spec), "--cc", "reno,cubic", "--repeat", "2", "--out",
                      str(work / "at-once"), "--no-plots")
            at_once = next((work / "at-once").glob("rounds-compare-*"))
            plan = subprocess.run(cli("compare", str(spec), "--cc", "reno,cubic", "--repeat", "2", "--out",
                                      str(work / "split"), "--rounds"), capture_output=True, text=True, cwd=ROOT)
            assert plan.returncode == 0, plan.stderr
            split = next((work / "split").glob("rounds-compare-*"))
            assert (split / "rounds.txt").read_text().split() == ["r001", "r002"]
            assert not list(split.glob("runs")), "planning runs nothing"
            for server, name in (("a", "r001"), ("b", "r002")):
                on_server(bed, server, "compare", "--round", str(split), name, "--no-plots")
            wait_clean(bed, bed.names, timeout=5)
        merged = subprocess.run(cli("compare", "--merge", str(split), "--no-plots"), capture_output=True,
                                text=True, cwd=ROOT)
        assert merged.returncode == 0, merged.stderr
        again = subprocess.run(cli("compare", "--resume", str(split), "--no-plots"), capture_output=True,
                               text=True, cwd=ROOT)
        assert again.returncode == 0, again.stderr
        tail = merged.stdout.split("\n", 1)[1]
        assert tail.split("comparison:")[0] == again.stdout.split("\n", 1)[1].split("comparison:")[0]

        a, b = table(at_once), table(split)
        assert set(a) == set(b) and {k: v[:2] for k, v in a.items()} == {k: v[:2] for k, v in b.items()}
        for key in [k for k in a if k[2] == "mean_iter_s"]:
            assert abs(b[key][2] / a[key][2] - 1) <= 0.10, (key, a[key], b[key])
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.skipif(shutil.which("parallel") is None, reason="needs GNU parallel (apt-get install parallel, or "
                    "`sudo make setup CLUSTER=1`)")
def test_gnu_parallel_runs_the_rounds_over_ssh_and_resume_failed_reruns_only_the_failed_one():
    """docs/cluster.md's GNU parallel form on a shared folder (as with Slurm): one round per
    server at a time over ssh, a joblog; a round that failed (here r002's first attempt, made to
    fail before it runs) is run again by --resume-failed, and only it; then --merge."""
    work = Path(tempfile.mkdtemp(prefix="mn-harness-parallel-", dir="/var/tmp"))
    try:
        spec = work / "rounds.yaml"
        spec.write_text(yaml.safe_dump({**EXPERIMENT, "jobs": [{**EXPERIMENT["jobs"][0], "iterations": 4}]}))
        plan = subprocess.run(cli("compare", str(spec), "--cc", "reno,cubic", "--repeat", "2", "--out",
                                  str(work), "--rounds"), capture_output=True, text=True, cwd=ROOT)
        assert plan.returncode == 0, plan.stderr
        split = next(work.glob("rounds-compare-*"))
        command = (f"test {{}} != r002 -o -e {work}/second && cd {ROOT} && "
                   f"{sys.executable} -m mn_harness.cli compare --round {split} {{}} --no-plots")
        with ClusterBed(2) as bed:
            logins = ",".join(f"1/{bed.addresses[n]}" for n in bed.names)

            def parallel() -> subprocess.CompletedProcess:
                argv = ["parallel", "--will-cite", "--ssh", f"ssh -F {bed.ssh_config}", "--sshlogin", logins,
                        "--joblog", str(work / "rounds.log"), "--resume-failed", command,
                        "::::", str(split / "rounds.txt")]
                return subprocess.run(bed.head_argv(argv), env=bed.env(), capture_output=True, text=True,
                                      timeout=600)

            first = parallel()
            assert first.returncode == 1, first.stderr  # parallel's exit: the number of failed jobs
            (work / "second").touch()
            second = parallel()
            assert second.returncode == 0, second.stderr
            wait_clean(bed, bed.names, timeout=5)
        with open(work / "rounds.log") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        attempts = [(r["Command"].split()[-2], r["Exitval"]) for r in rows]
        assert sorted(attempts) == [("r001", "0"), ("r002", "0"), ("r002", "1")], attempts
        assert all(r["Host"].endswith(("10.213.0.1", "10.213.0.2")) for r in rows), rows  # on the servers
        merged = subprocess.run(cli("compare", "--merge", str(split), "--no-plots"), capture_output=True,
                                text=True, cwd=ROOT)
        assert merged.returncode == 0, merged.stderr
        assert len({k[0] for k in table(split)}) == 2  # both CCs, each from its rounds
    finally:
        shutil.rmtree(work, ignore_errors=True)

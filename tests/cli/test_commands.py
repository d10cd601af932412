"""The CLI's contract: one line and exit 2 for bad input, no traceback; sudo hint when not root."""

import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tests.unprivileged import temporary_root


def cli(*args):
    cmd = [sys.executable, "-m", "mn_harness.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_validate_ok_lists_shared_links():
    out = cli("validate", "topologies/dumbbell-2jobs.yaml")
    assert out.returncode == 0, out.stderr
    assert "shared link s1->s2: job1, job2" in out.stdout


def test_bad_experiment_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    text = (ROOT / "topologies/dumbbell-2jobs.yaml").read_text().replace("workers: [h2, h4]", "workers: [h2, h9]")
    bad.write_text(text)
    for command in ("validate", "run"):
        out = cli(command, str(bad))
        assert out.returncode == 2
        assert out.stderr.strip() == "mn-harness: jobs[1].workers[1]: unknown host 'h9'"
        assert "Traceback" not in out.stderr


def test_missing_file_is_one_line():
    out = cli("validate", "topologies/nope.yaml")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "cannot read" in out.stderr


def test_cc_override_is_validated():
    out = cli("run", "topologies/dumbbell-2jobs.yaml", "--cc", "warp-speed")
    assert out.returncode == 2 and "--cc" in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.root
def test_not_root_gets_sudo_hint(unprivileged_python):
    work = temporary_root()  # pytest's tmp_path is private to root
    try:
        shutil.copy(ROOT / "topologies/dumbbell-2jobs.yaml", work / "demo.yaml")
        (work / "demo.yaml").chmod(0o644)
        out = subprocess.run(unprivileged_python("-m", "mn_harness.cli", "run", "demo.yaml"),
                             capture_output=True, text=True, cwd=work, timeout=60)
    finally:
        shutil.rmtree(work)
    assert out.returncode == 2
    assert "run it with sudo" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_validate_prints_cassini_loops_and_warnings(tmp_path):
    out = cli("validate", "topologies/leaf-spine.yaml")
    assert out.returncode == 0, out.stderr
    assert "CASSINI leaf1->spine1, spine1->leaf1 (jobA, jobC): compatibility 1.000" in out.stdout
    assert "circular dependency (affinity-graph loop): " in out.stdout
    assert "predicted per job (best shifts / aligned): jobA 1.06x / 1.39x" in out.stdout
    text = (ROOT / "topologies/dumbbell-2jobs.yaml").read_text().replace(
        "    cc: cubic\n  - name: job2", "    cc: {name: mltcp-reno, idle_gap: 300ms}\n  - name: job2")
    (tmp_path / "gap.yaml").write_text(text)
    out = cli("validate", str(tmp_path / "gap.yaml"))
    assert out.returncode == 0 and out.stdout.count("warning:") == 1
    assert ("warning: jobs[0].cc.idle_gap: 300 ms is not below the job's idle time between "
            "iterations (300 ms)") in out.stdout


def test_validate_ecmp_shows_bmv2_paths_and_linux_candidates(tmp_path):
    text = (ROOT / "topologies/leaf-spine.yaml").read_text().replace("run:\n", "routing: ecmp\nrun:\n")
    (tmp_path / "ecmp.yaml").write_text(text)
    linux = cli("validate", str(tmp_path / "ecmp.yaml"))
    assert linux.returncode == 0, linux.stderr
    assert "routing ecmp (hash seed 2): 6 of 6 flows have equal-cost paths; the Linux routers' hash" in linux.stdout
    assert "shared link leaf1->spine2: may share jobA, jobC" in linux.stdout and "CASSINI leaf" not in linux.stdout
    bmv2 = cli("validate", str(tmp_path / "ecmp.yaml"), "--dataplane", "bmv2")
    assert bmv2.returncode == 0, bmv2.stderr
    assert "BMv2's hash sends them: jobA r0 h1-leaf1-" in bmv2.stdout and "may share" not in bmv2.stdout
    assert "CASSINI leaf" in bmv2.stdout


def test_version_prints_the_package_version():
    from mn_harness import __version__

    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"mn-harness {__version__}"


def test_every_argument_has_help_and_every_command_an_example():
    import argparse

    from mn_harness.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) >= {"validate", "run", "report", "compare", "clean"}
    for name, command in sub.choices.items():
        assert "example" in (command.epilog or ""), name
        for action in command._actions:
            assert action.help and action.help.strip(), f"{name} {action.dest}"


@pytest.mark.parametrize("args, where", [
    (["run", "topologies/dumbbell-2jobs.yaml", "--pcap", "s1-s9"], "--pcap: no link 's1-s9'"),
    (["run", "topologies/dumbbell-2jobs.yaml", "--window", "5s:2s"], "--window: the end must be after"),
    (["report", "topologies", "--window", "2"], "--window: expected START:END"),
    (["run", "topologies/dumbbell-2jobs.yaml", "--cli=before"], "argument --cli: invalid choice"),
])
def test_bad_new_options_are_one_line_exit_2(args, where):
    out = cli(*args)
    assert out.returncode == 2 and where in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_window_parses_durations():
    from mn_harness.cli.commands import parse_window

    assert parse_window("2s:5s") == (2.0, 5.0) and parse_window("500ms:1") == (0.5, 1.0)
    assert parse_window(None) is None


def test_validate_prints_the_rates_a_dilated_run_runs(tmp_path):
    text = (ROOT / "topologies/dumbbell-2jobs.yaml").read_text()
    (tmp_path / "slow.yaml").write_text(text.replace("run:\n", "run:\n  emulation: {time_scale: 4}\n", 1))
    out = cli("validate", str(tmp_path / "slow.yaml"))
    assert out.returncode == 0, out.stderr
    assert "time scale 4: the emulation runs 4 times slower: links at 250 Mbit/s (1000 nominal)" in out.stdout
    plain = cli("validate", "topologies/dumbbell-2jobs.yaml")
    assert "time scale" not in plain.stdout

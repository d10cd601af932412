"""The package works from a wheel installed outside the checkout: P4 programs and BPF sources
are package data, the worker is part of the package, nothing looks for the repository."""

import ast
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_validates_the_demo_outside_the_checkout(tmp_path):
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                            "-w", str(dist), str(ROOT)], check=True, capture_output=True, text=True, timeout=300)
    assert "deprecat" not in (build.stdout + build.stderr).lower(), "the build warns about a deprecation"
    wheel = next(dist.glob("mn_harness-*.whl"))
    import zipfile

    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        metadata = whl.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    venv = tmp_path / "venv"
    # the distribution's python3, as scripts/setup.sh makes .venv (Mininet lives there)
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install", "-q",
                    "--no-deps", str(wheel)], check=True, capture_output=True, timeout=300)
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(ROOT / "topologies/dumbbell-2jobs.yaml", work / "demo.yaml")
    # dependencies from the test venv; its editable finder is a .pth file, which PYTHONPATH
    # entries do not run, so `mn_harness` can only come from the wheel
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    where = subprocess.run([str(venv / "bin/python"), "-c", "import mn_harness, mn_harness.p4 as p, "
                            "mn_harness.cc.build as b, mn_harness.dataplane.egress.build as e; "
                            "print(mn_harness.__file__); "
                            "print(sorted(x.name for x in p.PROGRAMS_DIR.rglob('*.p4'))); "
                            "print(sorted(x.name for x in b.BPF_DIR.iterdir())"
                            " + [e.SOURCE.name] * e.SOURCE.is_file())"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    path, programs, bpf = where.stdout.splitlines()
    assert path.startswith(str(venv)), path
    assert "ecn_telemetry.p4" in programs and "aggregation.p4" in programs and "ecn_headers.p4" in programs
    assert "mltcp_reno.bpf.c" in bpf and "egress_queue.bpf.c" in bpf
    # every header and source the variants compile from (mltcp_common.h includes its parts)
    sources = {x.name for x in (ROOT / "mn_harness/cc/bpf").iterdir() if x.suffix in (".c", ".h")}
    assert {"mltcp_common.h", "mltcp_adapt.h"} <= sources and sources <= set(ast.literal_eval(bpf)), (sources, bpf)
    out = subprocess.run([str(venv / "bin/mn-harness"), "validate", "demo.yaml"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "demo.yaml: ok" in out.stdout and "shared link s1->s2: job1, job2" in out.stdout
    starter = subprocess.run([str(venv / "bin/mn-harness"), "p4", "new", "mine"], cwd=work, env=env,
                             capture_output=True, text=True, timeout=60)
    assert starter.returncode == 0, starter.stderr
    assert sorted(p.name for p in (work / "mine").iterdir()) == [
        "README.md", "experiment.yaml", "program.p4", "program.p4test.yaml", "test_program.py"]
    worker = subprocess.run([str(venv / "bin/python"), "-m", "mn_harness.worker"], cwd=work, env=env,
                            capture_output=True, text=True, timeout=60)
    assert worker.returncode == 2 and "SPEC.json" in worker.stderr  # usage: the module is there

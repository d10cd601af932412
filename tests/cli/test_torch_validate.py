"""validate rejects a torch collective in one line when torch cannot be imported."""

import subprocess
import sys

import pytest
import yaml

from tests.helpers import ROOT, small_demo

HIDE_TORCH = ("import sys; sys.modules['torch'] = None; sys.argv[0] = 'mn-harness'; "
              "from mn_harness.cli import main; sys.exit(main())")


def validate(path, hide_torch: bool):
    cmd = [sys.executable, "-c", HIDE_TORCH] if hide_torch else [sys.executable, "-m", "mn_harness.cli"]
    return subprocess.run([*cmd, "validate", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=60)


def torch_demo(tmp_path):
    raw = small_demo()
    raw["jobs"][1]["collective"] = "torch_allreduce"
    path = tmp_path / "torch.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_torch_collective_without_torch_is_one_line_exit_2(tmp_path):
    out = validate(torch_demo(tmp_path), hide_torch=True)
    assert out.returncode == 2, out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert lines[0].startswith("mn-harness: jobs[1].collective: torch_allreduce needs PyTorch")
    assert "pip install -e '.[torch]'" in lines[0]


def test_synthetic_collectives_need_no_torch(tmp_path):
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(small_demo()))
    assert validate(path, hide_torch=True).returncode == 0


@pytest.mark.torch
def test_torch_collective_with_torch_validates(tmp_path):
    out = validate(torch_demo(tmp_path), hide_torch=False)
    assert out.returncode == 0, out.stderr

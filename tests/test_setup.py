"""scripts/setup.sh's launcher: `sudo mn-harness` under sudo's default secure_path."""

import subprocess

import pytest

from tests.helpers import ROOT

pytestmark = [pytest.mark.root, pytest.mark.slow]
SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # sudo's default


def setup(bin_dir, *args, **env):
    return subprocess.run([str(ROOT / "scripts/setup.sh"), *args], capture_output=True, text=True, timeout=900,
                          env={"PATH": SECURE_PATH, "MN_HARNESS_BIN_DIR": str(bin_dir), **env})


def test_the_launcher_runs_this_checkouts_mn_harness_and_uninstall_removes_it(tmp_path):
    from mn_harness import __version__

    out = setup(tmp_path)
    assert out.returncode == 0, out.stderr
    launcher = tmp_path / "mn-harness"
    version = subprocess.run([str(launcher), "--version"], capture_output=True, text=True,
                             env={"PATH": SECURE_PATH}, timeout=60)
    assert version.stdout.strip() == f"mn-harness {__version__}"
    assert f'exec "{ROOT.resolve()}/.venv/bin/mn-harness"' in launcher.read_text()
    out = subprocess.run(["make", "-C", str(ROOT), "uninstall"], capture_output=True, text=True, timeout=60,
                         env={"PATH": SECURE_PATH, "MN_HARNESS_BIN_DIR": str(tmp_path)})
    assert out.returncode == 0 and not launcher.exists(), out.stdout + out.stderr


def test_another_program_or_checkouts_launcher_is_left_alone(tmp_path):
    other = tmp_path / "mn-harness"
    other.write_text("#!/bin/sh\necho someone else's\n")
    out = setup(tmp_path)
    assert out.returncode == 0 and "not an mn-harness launcher; left as is" in out.stdout
    assert other.read_text() == "#!/bin/sh\necho someone else's\n"
    assert "not this checkout's launcher" in setup(tmp_path, "--uninstall").stdout and other.exists()

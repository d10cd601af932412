"""Run-state files, so `mn-harness clean` can undo a crashed run without touching anything else.

While a run is alive it keeps /run/mn-harness/<run_id>.json up to date with what it created:
node shell pids, worker pids, switch processes, root-namespace interfaces, registered BPF
congestion controls, names added to tcp_allowed_congestion_control. `clean` reads only these
files: it never guesses from names, so it never kills another tool's Mininet or deletes an
interface it did not create. A pid is only signalled when its command line still looks like the
process we started (pids get reused)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

STATE_DIR = Path(os.environ.get("MN_HARNESS_STATE_DIR", "/run/mn-harness"))


class RunState:
    def __init__(self, run_id: str, results_dir: Path):
        self.path = STATE_DIR / f"{run_id}.json"
        self.data: dict = {"run_id": run_id, "harness_pid": os.getpid(),
                           "harness_cmdline": _cmdline(os.getpid()), "results_dir": str(results_dir),
                           "processes": [], "root_interfaces": [], "bpf_cc": []}
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self.save()

    def set_processes(self, processes: list[tuple[int, str]]) -> None:
        """(pid, marker): marker is a substring the pid's command line must contain."""
        self.data["processes"] = [[pid, marker] for pid, marker in processes]
        self.save()

    def set(self, key: str, value) -> None:
        self.data[key] = value
        self.save()

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kill_process(pid: int, marker: str) -> bool:
    """SIGKILL the process group (or the process) if its command line still contains marker."""
    if marker not in _cmdline(pid):
        return False
    try:
        # node shells and workers lead their own process groups (mnexec -d calls setsid)
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def egress_program_loaded(prog_id: int | None) -> bool:
    """Whether the Linux data plane's egress program `prog_id` is still loaded (an id is only
    reused after 2^31 loads, and the name is checked too)."""
    from mn_harness.bpf.errors import BpfError
    from mn_harness.bpf.syscall import prog_map_ids
    from mn_harness.dataplane.egress.build import PROGRAM_NAME

    if not prog_id:
        return False
    try:
        return prog_map_ids(int(prog_id))[0] == PROGRAM_NAME
    except BpfError:
        return False


def clean(log=print, include_live: bool = False) -> int:
    """Undo every run whose harness is gone (or all runs with include_live). Returns the number
    of things removed."""
    from mn_harness.cc.manager import unregister_by_name
    from mn_harness.cc.namespace import remove_allowed

    removed = 0
    if not STATE_DIR.is_dir():
        return 0
    for path in sorted(STATE_DIR.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        harness = data.get("harness_pid")
        still_running = harness and _cmdline(harness) == data.get("harness_cmdline")
        if still_running and not include_live:
            log(f"skipping run {data['run_id']}: its harness (pid {harness}) is still running")
            continue
        dataplane = data.get("dataplane") or {}
        for pid, marker in data.get("processes", []) + dataplane.get("processes", []):
            if kill_process(pid, marker):
                log(f"killed pid {pid} ({marker})")
                removed += 1
        time.sleep(0.2)
        for intf in data.get("root_interfaces", []):
            proc = subprocess.run(["ip", "link", "del", intf], capture_output=True)
            if proc.returncode == 0:
                log(f"deleted interface {intf}")
                removed += 1
        run_dir = dataplane.get("run_dir")  # e.g. the BMv2 switches' socket directory
        if run_dir and Path(run_dir).is_dir() and Path(run_dir).name.startswith("mn-harness-"):
            shutil.rmtree(run_dir, ignore_errors=True)
            log(f"removed {run_dir}")
        for prog in dataplane.get("egress_programs", []):  # they die with their namespace
            if egress_program_loaded(prog.get("prog_id")):
                log(f"egress program {prog['prog_id']} on {prog.get('intf')} is still loaded: its "
                    "namespace is alive (a process of the run survived?)")
        added = (data.get("allowed_cc") or {}).get("added") or []
        if added:  # before unregistering: the list may only name registered CCs
            try:
                remove_allowed(added)
                log(f"removed {' '.join(added)} from tcp_allowed_congestion_control")
                removed += 1
            except Exception as exc:  # keep cleaning the rest; report what failed
                log(f"could not restore tcp_allowed_congestion_control: {exc}")
        for name in data.get("bpf_cc", []):
            try:
                unregister_by_name(name)
                log(f"unregistered congestion control {name}")
                removed += 1
            except Exception as exc:  # keep cleaning the rest; report what failed
                log(f"could not unregister {name}: {exc}")
        path.unlink(missing_ok=True)
        log(f"cleaned run {data['run_id']}")
    return removed

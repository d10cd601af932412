"""The verdict of real runs: an ordinary short run is faithful; a data plane starved of CPU is
not, and the verdict names its link."""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

import mn_harness as mh

pytestmark = [pytest.mark.root, pytest.mark.slow]


def line_experiment(bw: str = "100Mbit", dataplane: str = "linux", iterations: int = 8,
                    nbytes: str = "10MB", **run) -> dict:
    """h1 - s1 - s2 - h2, one ring job across it."""
    return {"experiment": "fidelity-line", "hosts": ["h1", "h2"], "switches": ["s1", "s2"],
            "link_defaults": {"bw": bw, "queue": 100},
            "links": [{"endpoints": ["h1", "s1"]}, {"endpoints": ["s1", "s2"]}, {"endpoints": ["s2", "h2"]}],
            "jobs": [{"name": "j", "workers": ["h1", "h2"], "bytes_per_iteration": nbytes,
                      "compute": "100ms", "iterations": iterations, "cc": "reno"}],
            "run": {"dataplane": dataplane, **run}}


def test_an_ordinary_short_run_is_faithful(tmp_path):
    results = mh.run(mh.ExperimentBuilder.from_raw(line_experiment()), out=tmp_path, quiet=True, report=False)
    fidelity = results.summary.fidelity
    assert fidelity is not None and fidelity.link_monitor == "on", fidelity
    judged = {name: link for name, link in fidelity.links.items() if (link.gaps or 0) >= 500}
    assert judged, fidelity.links  # the bottleneck (here the hosts' own egress) was backlogged and judged
    if any(v.invariant == "host" for v in fidelity.violations):
        # the VM's host took the CPU, or another load saturated it: what else broke follows
        # from that, not from the emulation this test checks
        pytest.skip(f"the machine was not quiet: {fidelity.reason}")
    assert fidelity.verdict == "faithful", fidelity.reason
    assert all(link.within_share >= 0.9 for link in judged.values())


@contextmanager
def cpu_limited_cgroup(share: float):
    """A cgroup whose tasks get at most `share` of one CPU (cgroup v2 cpu.max, or v1's cpu
    controller); yields a function adding a pid to it; removed afterwards."""
    name = f"mn-harness-test-{uuid.uuid4().hex[:8]}"
    period = 100_000
    v2, v1 = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/cpu")
    if (v2 / "cgroup.controllers").exists() and "cpu" in (v2 / "cgroup.subtree_control").read_text():
        group = v2 / name
        group.mkdir()
        (group / "cpu.max").write_text(f"{int(share * period)} {period}")
    elif (v1 / "cpu.cfs_quota_us").exists():
        group = v1 / name
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text(str(period))
        (group / "cpu.cfs_quota_us").write_text(str(int(share * period)))
    else:
        pytest.skip("no cgroup cpu controller to starve a switch with (cgroup v2 cpu.max or v1 cpu)")
    moved: list[int] = []

    def add(pid: int) -> None:
        (group / "cgroup.procs").write_text(str(pid))
        moved.append(pid)

    try:
        yield add
    finally:
        parent = group.parent / "cgroup.procs"
        for pid in moved:
            try:
                parent.write_text(str(pid))
            except OSError:
                pass  # it ended with the run
        os.rmdir(group)


@pytest.mark.bmv2
def test_a_switch_starved_of_cpu_is_unfaithful_and_named(tmp_path):
    """BMv2 switches in a cgroup allowed 5% of a core: their queues back up and drain below the
    configured rate, and the verdict names the link."""
    with cpu_limited_cgroup(0.05) as add:
        def starve(session) -> None:
            for switch in session.dataplane.switches.values():
                assert switch.pid is not None
                add(switch.pid)

        raw = line_experiment("10Mbit", "bmv2", iterations=2, nbytes="1MB", timeout="240s")
        results = mh.run(mh.ExperimentBuilder.from_raw(raw),
                         out=tmp_path, quiet=True, report=False, on_network_up=starve)
    fidelity = results.summary.fidelity
    assert fidelity is not None and fidelity.verdict == "unfaithful", fidelity
    named = [v for v in fidelity.violations if v.invariant == "link"]
    assert named and all(v.where in {"s1->s2", "s2->s1", "s1->h1", "s2->h2"} for v in named), fidelity.violations
    assert "(BMv2)" in named[0].text and fidelity.links[named[0].where].kind == "bmv2 port"
    assert fidelity.links[named[0].where].rate_ratio < 0.9

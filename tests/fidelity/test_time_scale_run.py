"""A real dilated run (run.emulation.time_scale 2) beside the same experiment in real time: the
machine's link carries the dilated rate, the hosts' routes the dilated minimum RTO, and the
results are the experiment's times (close to the real-time run's, where a missing conversion
would make them twice as long), with the fidelity verdict."""

from __future__ import annotations

import copy
import json
import statistics

import pytest

import mn_harness as mh

pytestmark = [pytest.mark.root, pytest.mark.slow]

K = 2
NBYTES = 5_000_000
RAW = {"experiment": "time-scale", "hosts": ["h1", "h2"], "switches": ["s1", "s2"],
       "link_defaults": {"bw": "100Mbit", "queue": 100},
       "links": [{"endpoints": ["h1", "s1"]}, {"endpoints": ["s1", "s2"]}, {"endpoints": ["s2", "h2"]}],
       "jobs": [{"name": "j", "workers": ["h1", "h2"], "bytes_per_iteration": NBYTES, "compute": "100ms",
                 "iterations": 6, "cc": "cubic"}],
       "run": {"dataplane": "linux", "warmup": 1}}


def _run(tmp_path, scale: float):
    raw = copy.deepcopy(RAW)
    raw["run"]["emulation"] = {"time_scale": scale}
    seen: dict[str, str] = {}

    def look(session) -> None:
        seen["route"] = session.net["h1"].cmd("ip route show default")
        seen["class"] = session.net["s1"].cmd("tc class show dev s1-eth2")

    results = mh.run(mh.ExperimentBuilder.from_raw(raw), out=tmp_path / f"k{scale}", quiet=True,
                     on_network_up=look)
    return results, seen


def _machine_comm_rates(results_dir) -> list[float]:
    """Each rank's sending rate in its collective, from the workers' own lines (machine time)."""
    rates = []
    for path in sorted((results_dir / "raw").glob("*.iterations.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["iteration"] >= 1:
                rates.append(row["bytes_sent"] * 8 / (row["t_comm_end"] - row["t_comm_start"]))
    return rates


def test_a_dilated_run_runs_slower_and_reports_the_experiments_times(tmp_path):
    real, _ = _run(tmp_path, 1)
    dilated, seen = _run(tmp_path, K)
    s1, sk = real.summary, dilated.summary
    assert s1.status == sk.status == "completed"
    assert sk.time_scale == K and s1.time_scale == 1

    # the machine: the link's class at 100/K Mbit/s, the host's route with rto_min 200 ms x K
    assert f"rate {100 // K}Mbit" in seen["class"], seen["class"]
    assert f"rto_min {200 * K}ms" in seen["route"].replace("rto_min lock", "rto_min"), seen["route"]
    # ... and the link measured at the dilated rate: the ranks' sending rate in the ring
    rate = statistics.median(_machine_comm_rates(dilated.path))
    assert 0.75 * 100e6 / K <= rate <= 1.02 * 100e6 / K, rate

    # the results: the experiment's rates and times, the real-time run's within 30% (a missing
    # conversion would make them K = 2 times longer)
    assert sk.link_bps == s1.link_bps and sk.link_bps["s1->s2"] == 100e6
    j1, jk = s1.jobs["j"], sk.jobs["j"]
    assert jk.ideal_iter_s == pytest.approx(j1.ideal_iter_s) and jk.compute_s == pytest.approx(0.1)
    assert jk.mean_iter_s / j1.mean_iter_s == pytest.approx(1.0, abs=0.3), (jk.mean_iter_s, j1.mean_iter_s)
    assert jk.slowdown_mean == pytest.approx(j1.slowdown_mean, abs=0.3)
    assert jk.mean_iter_s >= jk.ideal_iter_s * 0.95
    compute = next(p for p in jk.phase_stats if p["kind"] == "compute")
    assert compute["mean_s"] == pytest.approx(0.1, rel=0.25)

    # the verdict is there, and the report says the run was dilated
    assert sk.fidelity is not None and sk.fidelity.verdict in ("faithful", "unfaithful"), sk.fidelity
    assert f"time scale {K}" in (dilated.path / "report.md").read_text()

"""gloo's schedules for the torch_* collectives: bytes per rank, ring direction, the schedule's
meaning, their records (torch call, counterpart, torch detection), and how the config and the
ideal time use them."""

import subprocess
import sys

import pytest

from mn_harness import collectives
from mn_harness.collectives import gloo
from mn_harness.config import Experiment
from mn_harness.errors import ConfigError
from mn_harness.jobs.ideal import bytes_sent_per_rank, ideal_iteration_s
from mn_harness.network.plan import NetworkPlan
from tests.helpers import run_schedule

S = 24_000_000  # divisible by 4 (fp32) and by every n below
TORCH_NAMES = collectives.names(engine=collectives.TORCH)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_bytes_per_rank_are_gloos(n):
    per = {name: collectives.schedule(name, S, n).bytes_sent_per_rank() for name in TORCH_NAMES}
    assert per["torch_allreduce"] == per["torch_reduce_scatter"] == [2 * (n - 1) * S // n] * n
    assert per["torch_all_gather"] == per["torch_all_to_all"] == [(n - 1) * S // n] * n
    assert per["torch_broadcast"] == [(n - 1) * S] + [0] * (n - 1)


def test_fp32_tensor_has_whole_elements():
    assert gloo.tensor_bytes(10) == 12
    assert collectives.schedule("torch_allreduce", 10, 2).sent_by(0) == 12


@pytest.mark.parametrize("n", [2, 3, 5])
def test_allreduce_ring_runs_towards_rank_minus_1_and_reduces_everything(n):
    sched = collectives.schedule("torch_allreduce", S, n)
    assert sched.directed_pairs() == sorted((r, (r - 1) % n) for r in range(n))
    final = run_schedule(sched, [{c: {r} for c in range(n)} for r in range(n)])
    assert all(final[r][c] == set(range(n)) for r in range(n) for c in range(n))


def test_torch_records_run_on_torch_with_their_counterparts_conventions():
    assert TORCH_NAMES == ("torch_allreduce", "torch_reduce_scatter", "torch_all_gather", "torch_all_to_all",
                           "torch_broadcast")
    assert not set(TORCH_NAMES) & set(collectives.names(engine=collectives.SYNTHETIC))
    assert not set(TORCH_NAMES) & set(collectives.names(phase=True))  # short form only
    for name in TORCH_NAMES:
        record = collectives.get(name)
        assert record.torch_call and record.missing is gloo.missing_torch
        counterpart = collectives.get(record.counterpart)
        assert counterpart.engine == collectives.SYNTHETIC
        assert record.busbw_factor(4) == counterpart.busbw_factor(4)
    with pytest.raises(ValueError):
        collectives.schedule("torch_nothing", S, 2)


def test_detection_does_not_import_torch_and_sees_it_hidden():
    code = ("import sys; from mn_harness.collectives.gloo import missing_torch, torch_importable; "
            "a = torch_importable(); sys.modules['torch'] = None; b = torch_importable(); "
            "print(a, b, missing_torch() is not None, 'torch' in sys.modules and sys.modules['torch'] is not None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    importable, hidden, missing, imported = out.stdout.split()
    assert hidden == "False" and missing == "True" and imported == "False"
    assert importable in ("True", "False")


def star(job: dict) -> Experiment:
    hosts = ["h1", "h2", "h3", "h4"]
    return Experiment.from_dict({
        "experiment": "star", "hosts": hosts, "switches": ["s1"], "link_defaults": {"bw": "1Gbit"},
        "links": [{"endpoints": [h, "s1"]} for h in hosts],
        "jobs": [{"name": "j", "workers": hosts, "iterations": 1, **job}]})


@pytest.mark.torch
def test_ideal_of_a_torch_broadcast_is_the_roots_link():
    exp = star({"collective": "torch_broadcast", "bytes_per_iteration": S, "compute": "10ms"})
    job = exp.jobs[0]
    assert bytes_sent_per_rank(job) == [3 * S, 0, 0, 0]
    ideal, rate = ideal_iteration_s(job, NetworkPlan(exp))
    assert (ideal, rate) == (pytest.approx(0.01 + 3 * S * 8 / 1e9, rel=1e-6), 1e9)


def test_torch_collectives_only_in_the_short_form():
    with pytest.raises(ConfigError, match=r"jobs\[0\]\.phases\[1\]\.collective"):
        star({"phases": [{"compute": "10ms"}, {"collective": "torch_allreduce", "bytes": S}]})
    with pytest.raises(ConfigError, match=r"jobs\[0\]\.overlap"):
        star({"collective": "torch_allreduce", "bytes_per_iteration": S, "compute": "10ms", "overlap": {}})

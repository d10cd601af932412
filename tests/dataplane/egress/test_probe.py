"""Which experiments need CE marks, and the tracker choice (no network needed)."""

from mn_harness.config import load_experiment_dict
from mn_harness.dataplane.egress.probe import TRACKER_ENV, Support, choose_tracker, ecn_demand, kernel_has_kfunc
from tests.helpers import two_switch_line


def test_what_needs_marks():
    raw = two_switch_line()
    assert ecn_demand(load_experiment_dict(raw)) is None  # cubic, defaults: nothing needs marks
    raw["jobs"][0]["cc"] = "mltcp-dctcp"
    assert ecn_demand(load_experiment_dict(raw)) == "job j uses mltcp-dctcp"
    assert ecn_demand(load_experiment_dict(two_switch_line(tcp_ecn=True))) == "run.tcp_ecn is true"
    raw = two_switch_line()
    raw["links"][1]["ecn_threshold"] = 10
    assert ecn_demand(load_experiment_dict(raw)) == "links[1].ecn_threshold is set"
    raw["links"][1]["ecn_threshold"] = "off"
    assert ecn_demand(load_experiment_dict(raw)) is None


def test_tracker_can_be_forced(monkeypatch):
    monkeypatch.setenv(TRACKER_ENV, "vq")
    assert choose_tracker() == "vq"
    monkeypatch.setenv(TRACKER_ENV, "backlog")
    assert choose_tracker() == "backlog"
    monkeypatch.delenv(TRACKER_ENV)
    assert choose_tracker() == ("backlog" if kernel_has_kfunc() else "vq")
    assert not kernel_has_kfunc(b"no_such_kfunc_in_any_kernel_0x5f3")


def test_support_descriptions():
    assert Support("bpf", "backlog").describe() == "bpf-backlog"
    assert Support("red", reason="tc without libbpf").describe() == "red (tc without libbpf)"
    assert Support("off").describe() == "off"

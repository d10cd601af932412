"""mn_harness.dataplane.bmv2 without BMv2: availability message, host hooks, queue.csv format and
summary, and `dataplane: bmv2` failing with one line where BMv2 is absent."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mn_harness.config import Experiment
from mn_harness.dataplane import BMV2_FAITHFUL_LINK_BPS, DataplaneError, needs_bmv2, select_dataplane
from mn_harness.dataplane.bmv2 import Bmv2Dataplane
from mn_harness.dataplane.bmv2_setup import resolve_program
from mn_harness.results.loaders import load_queue
from mn_harness.results.queue import QueueSummary, summarise_queue_csv
from mn_harness.results.schema import queue_columns
from tests.helpers import small_demo


@pytest.fixture
def no_bmv2(monkeypatch, tmp_path):
    empty = tmp_path / "empty-prefix"
    (empty / "bin").mkdir(parents=True)
    monkeypatch.setenv("P4_TOOLCHAIN", str(empty))
    monkeypatch.setenv("P4_TOOLCHAIN_ONLY", "1")


def test_unavailable_reason_is_one_line_naming_what_to_install(no_bmv2):
    reason = Bmv2Dataplane.unavailable_reason()
    assert reason and "\n" not in reason
    assert "simple_switch_grpc" in reason and "p4lang-bmv2" in reason
    with pytest.raises(DataplaneError) as err:
        select_dataplane("bmv2", log=lambda *_: None)
    assert str(err.value).startswith("run.dataplane: bmv2 unavailable: BMv2/p4c not found")
    said = []
    assert select_dataplane("auto", log=said.append).name == "linux"
    assert said == ["data plane: auto -> linux"]


def with_program(bw: str) -> Experiment:
    raw = small_demo()
    raw["switches"] = [{"name": "s1", "program": "ecn_telemetry"}, "s2"]
    raw["link_defaults"] = {"bw": bw, "queue": 100}
    for link in raw["links"]:
        link.pop("bw", None)
    raw["run"]["dataplane"] = "auto"
    return Experiment.from_dict(raw, "auto")


def test_auto_picks_bmv2_only_for_a_p4_program_and_only_at_a_rate_it_carries(no_bmv2):
    said: list[str] = []
    plain = Experiment.from_dict({**small_demo(), "run": {"dataplane": "auto"}}, "auto")
    assert needs_bmv2(plain) is None
    assert select_dataplane("auto", log=said.append, experiment=plain).name == "linux"
    slow = with_program("50Mbit")
    assert needs_bmv2(slow) == "switches[0].program"
    with pytest.raises(DataplaneError) as err:  # BMv2 is needed here and is not installed
        select_dataplane("auto", log=said.append, experiment=slow)
    assert str(err.value).startswith("run.dataplane: auto: switches[0].program needs the bmv2 data plane, "
                                     "which is unavailable")


@pytest.mark.bmv2
def test_auto_refuses_bmv2_above_what_it_carries_and_takes_it_below():
    said: list[str] = []
    fast = with_program("1Gbit")
    with pytest.raises(DataplaneError) as err:
        select_dataplane("auto", log=said.append, experiment=fast)
    text = str(err.value)
    assert "\n" not in text and "links[0].bw (1000 Mbit/s)" in text
    assert f"at most {BMV2_FAITHFUL_LINK_BPS / 1e6:g} Mbit/s per link" in text
    dataplane = select_dataplane("auto", log=said.append, experiment=with_program("50Mbit"))
    assert dataplane.name == "bmv2" and said[-1] == "data plane: auto -> bmv2 (switches[0].program needs a P4 program)"
    dataplane.stop()


@pytest.mark.root
def test_run_with_bmv2_absent_fails_with_one_line_exit_1(no_bmv2, topologies, tmp_path, capsys):
    from mn_harness.cli import main

    code = main(["run", str(topologies / "dumbbell-2jobs-bmv2.yaml"), "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert len(err.splitlines()) == 1, err
    assert "bmv2 unavailable" in err and "install the p4lang packages" in err


def test_host_hooks_and_defaults():
    dp = Bmv2Dataplane(sample_hz=60)
    assert dp.name == "bmv2"
    assert dp.host_gso_max_segs(16) == 1
    assert dp.host_sysctls() == {"net.ipv4.tcp_ecn": "1"}
    assert not dp.host_neighbours_static()  # the switch answers ARP (proxy ARP)
    assert dp.undo_records() == []
    dp.check_alive()  # no switch yet: nothing has died
    assert dp.stop_telemetry() == {}
    dp.stop()
    dp.stop()  # idempotent
    assert resolve_program(None).name == "ecn_telemetry.p4"
    with pytest.raises(DataplaneError, match="not found"):
        resolve_program("no_such_program")
    with pytest.raises(DataplaneError):
        Bmv2Dataplane(sample_hz=-1)


def write_queue_csv(path: Path) -> None:
    rows = [
        # t, switch, port, link, depth (mean), depth_max, packets, marks, drops (BMv2: not
        # measured), bytes_job1, bytes_job2
        (0.00, "s1", 3, "s1->s2", 0.0, 0, 0, 0, "", 0, 0),
        (0.00, "s1", 1, "s1->h1", 1.0, 2, 10, 0, "", 100, 0),
        (0.01, "s1", 3, "s1->s2", 10.0, 20, 30, 4, "", 30000, 15000),
        (0.01, "s1", 1, "s1->h1", 0.0, 0, 0, 0, "", 0, 0),
        (0.02, "s1", 3, "s1->s2", 30.0, 44, 10, 6, "", 0, 15000),
        (0.02, "s1", 1, "s1->h1", 0.0, 0, 0, 0, "", 0, 0),
    ]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(queue_columns(["job1", "job2"]))
        w.writerows(rows)


def test_queue_csv_summary_and_report_loader(tmp_path):
    path = tmp_path / "queue.csv"
    write_queue_csv(path)
    s = summarise_queue_csv(path, job_marks={"job1": 7, "job2": 3})
    b = s["queue"]["s1:3"]
    assert b["link"] == "s1->s2" and b["max_depth"] == 44 and b["marks"] == 10
    assert b["packets"] == 40 and b["drops"] is None
    assert b["mean_depth"] == pytest.approx((10 * 30 + 30 * 10) / 40)  # packet-weighted
    assert s["queue"]["s1:1"]["mean_depth"] == 1.0
    assert s["telemetry"] == {"samples": 3, "samples_per_s": 100.0}
    assert s["ecn_marks"] == {"job1": 7, "job2": 3}
    # the report package reads the same file
    rows, bad = load_queue(path)
    assert bad == 0 and len(rows) == 6
    r = rows[2]
    assert (r.t, r.switch, r.port, r.depth, r.marks, r.drops) == (0.01, "s1", "3", 10.0, 4.0, None)
    assert r.job_bytes == {"job1": 30000.0, "job2": 15000.0}


def test_queue_summary_accumulates_marks_per_job():
    acc = QueueSummary(["a", "b"])
    acc.add_tick(0.0)
    acc.add_row("s1", 2, "s1->s2", 5.0, 9, 4, 3, {"a": 2, "b": 1})
    acc.add_tick(0.5)
    acc.add_row("s1", 2, "s1->s2", 0.0, 0, 0, 0, {"a": 0, "b": 0})
    acc.add_row("s2", 1, "s2->s1", 2.0, 2, 1, 1, {"a": 0, "b": 1})
    out = acc.result()
    assert out["ecn_marks"] == {"a": 2, "b": 2}
    assert out["queue"]["s1:2"] == {"link": "s1->s2", "max_depth": 9, "mean_depth": 5.0,
                                    "packets": 4, "marks": 3, "drops": None}
    assert out["telemetry"]["samples_per_s"] == 2.0

"""The queue.csv collector both data planes share: columns from the schema, one row per port
and sample, the summary accumulated on the way, and a failing source ending sampling only."""

import csv
import time

from mn_harness.dataplane.queue_csv import QueueCollector, QueueSample, sample_hz_from_env
from mn_harness.results.queue import summarise_queue_csv
from mn_harness.results.schema import queue_columns


class Source:
    """Samples the way a data plane returns them: the first call is the baseline."""

    def __init__(self, fail_after: int | None = None):
        self.calls = 0
        self.fail_after = fail_after

    def __call__(self) -> list[QueueSample]:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise RuntimeError("switch s1 went away\nsecond line")
        if self.calls == 1:
            return []
        n = self.calls
        return [QueueSample("s1", 3, "s1->s2", 10.0 + n, 20.0 + n, 100, 4, 1, {"a": 1000, "b": 500},
                            {"a": 3, "b": 1}),
                QueueSample("s2", 1, "s2->s1", 0.0, 0.0, 0, 0, None, {}, {})]


def run_for(source, tmp_path, seconds=0.3, hz=100.0):
    c = QueueCollector(tmp_path / "queue.csv", ["a", "b"], source, time.monotonic(), hz)
    c.start()
    time.sleep(seconds)
    c.stop()
    return c


def test_rows_columns_and_summary(tmp_path):
    c = run_for(Source(), tmp_path)
    with open(tmp_path / "queue.csv") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == queue_columns(["a", "b"])
        rows = list(reader)
    assert len(rows) >= 10 and len(rows) % 2 == 0
    first = rows[0]
    assert (first["switch"], first["port"], first["link"], first["drops"], first["bytes_a"]) == \
        ("s1", "3", "s1->s2", "1", "1000")
    assert rows[1]["drops"] == ""  # not measured
    s = c.summary()
    n = len(rows) // 2
    assert s["queue"]["s1:3"]["marks"] == 4 * n and s["queue"]["s1:3"]["drops"] == n
    assert s["queue"]["s2:1"]["drops"] is None
    assert s["ecn_marks"] == {"a": 3 * n, "b": n}
    assert s["telemetry"]["samples"] == n and s["telemetry"]["busy_s"] >= 0
    again = summarise_queue_csv(tmp_path / "queue.csv")
    assert again["queue"] == s["queue"]


def test_a_failing_source_ends_sampling_with_one_line(tmp_path):
    c = run_for(Source(fail_after=3), tmp_path)
    assert c.summary()["telemetry"]["error"] == "switch s1 went away"
    assert not c.is_alive()


def test_sample_rate_from_the_environment(monkeypatch):
    monkeypatch.delenv("MN_HARNESS_QUEUE_SAMPLE_HZ", raising=False)
    monkeypatch.delenv("MN_HARNESS_BMV2_SAMPLE_HZ", raising=False)
    assert sample_hz_from_env("MN_HARNESS_BMV2_SAMPLE_HZ") == 100.0
    monkeypatch.setenv("MN_HARNESS_QUEUE_SAMPLE_HZ", "250")
    assert sample_hz_from_env("MN_HARNESS_BMV2_SAMPLE_HZ") == 250.0
    monkeypatch.setenv("MN_HARNESS_BMV2_SAMPLE_HZ", "60")
    assert sample_hz_from_env("MN_HARNESS_BMV2_SAMPLE_HZ") == 60.0


def test_an_unwritable_file_is_an_error_in_the_summary(tmp_path):
    c = QueueCollector(tmp_path / "missing" / "queue.csv", ["a"], Source(), time.monotonic(), 100)
    c.start()
    c.stop()
    assert c.summary()["telemetry"]["error"].startswith("cannot write ")

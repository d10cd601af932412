"""summary.json's one schema (results.schema's records): the docs' table is made from it, the
one writer and the one reader agree, and folders written before the schema had a version
(tests/results/fixtures/summary-v1: a real run's folder as the harness wrote it then, jobs'
hosts under `workers`) read through the loader and report as they did."""

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from mn_harness.errors import ConfigError
from mn_harness.report.markdown import report_run
from mn_harness.report.metrics import compute_metrics
from mn_harness.results import records
from mn_harness.results.loaders import load_run, load_summary, parse_summary
from mn_harness.results.schema import (
    DOCS_BEGIN,
    SUMMARY_VERSION,
    JobSummary,
    RunSummary,
    summary_docs,
)
from mn_harness.results.summary import update_summary, write_summary
from tests.helpers import ROOT

OLD = Path(__file__).parent / "fixtures" / "summary-v1"


def documented_pages() -> list[Path]:
    return [p for p in (ROOT / "docs").rglob("*.md") if DOCS_BEGIN in p.read_text()]


def test_the_docs_table_is_the_schema():
    """Fails when a key is added to the records (or its text changed) and docs/ was not
    regenerated (`python -m mn_harness.results docs/results.md`), or the other way round."""
    pages = documented_pages()
    assert len(pages) == 1, pages
    text = pages[0].read_text()
    assert summary_docs(text) == text, "regenerate: python -m mn_harness.results " + str(pages[0].relative_to(ROOT))
    for key, _, _ in records.describe(RunSummary):
        assert f"| `{key}` |" in text


def test_every_key_a_current_run_writes_is_declared_and_documented():
    """Every key of the fixture's summary (and of its jobs) is a declared field, so nothing the
    harness wrote goes undocumented; the rename is the one difference."""
    raw = json.loads((OLD / "summary.json").read_text())
    top = {f.name for f in dataclasses.fields(RunSummary)}
    job = {f.name for f in dataclasses.fields(JobSummary)}
    assert set(raw) - top == set()
    assert {k for j in raw["jobs"].values() for k in j} - job == {"workers"}


def test_an_old_folder_reads_through_the_loader_and_reports_as_it_did(tmp_path):
    """The fixture's summary.json holds the metrics the report of its day computed from its
    CSVs: the new loader and report compute the same, and its hosts (parameter server
    included) come from `workers`."""
    stored = json.loads((OLD / "summary.json").read_text())
    assert "version" not in stored
    run = load_run(OLD)
    s = run.summary
    assert s.version == 1 and s.status == "completed" and s.dataplane == "linux"
    assert s.jobs["ps"].hosts == stored["jobs"]["ps"]["workers"] and len(s.jobs["ps"].hosts) == 3
    assert s.jobs["ps"].servers == stored["jobs"]["ps"]["servers"]
    assert s.jobs["ring"].worker_cpu.share == stored["jobs"]["ring"]["worker_cpu"]["share"]
    assert s.flow_paths["ps"][0].path == stored["flow_paths"]["ps"][0]["path"]
    metrics = compute_metrics(s, run.iterations, run.throughput, malformed_rows=run.malformed_rows)
    assert json.loads(json.dumps(metrics.to_dict())) == stored["metrics"]
    # the report rewrites it in the current version, every value kept
    folder = tmp_path / "old"
    shutil.copytree(OLD, folder)
    report_run(folder, plots=False)
    new = json.loads((folder / "summary.json").read_text())
    assert new["version"] == SUMMARY_VERSION and list(new)[0] == "version"
    for job in new["jobs"].values():
        job["workers"] = job.pop("hosts")
    del new["version"]
    assert new == stored


def test_writer_and_reader_agree(tmp_path):
    """What the writer writes reads back equal, and writes back to the same text."""
    summary = load_summary(OLD)
    write_summary(tmp_path, summary)
    text = (tmp_path / "summary.json").read_text()
    again = load_summary(tmp_path)
    assert again == dataclasses.replace(summary, version=SUMMARY_VERSION)
    write_summary(tmp_path, again)
    assert (tmp_path / "summary.json").read_text() == text


def test_keys_this_version_does_not_know_are_kept(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(
        {"version": 3, "experiment": "x", "emulation_audit": {"verdict": "ok"},
         "jobs": {"a": {"hosts": ["h1"], "future": [1, 2]}}}))
    summary = update_summary(tmp_path, lambda s: dataclasses.replace(s, label="l"))
    assert summary.extra == {"emulation_audit": {"verdict": "ok"}}
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["emulation_audit"] == {"verdict": "ok"} and written["jobs"]["a"]["future"] == [1, 2]
    assert written["label"] == "l" and written["version"] == SUMMARY_VERSION


def test_a_value_that_is_merely_not_a_number_is_its_default_a_wrong_shape_is_named():
    s = parse_summary({"jobs": {"a": {"iterations": "many", "warmup": None, "mean_iter_s": "0.5",
                                      "hosts": ["h1", 2]}}, "setup_s": float("nan")})
    a = s.jobs["a"]
    assert a.iterations is None and a.warmup == 0 and a.mean_iter_s == 0.5 and a.hosts == ["h1", "2"]
    assert s.setup_s is None
    for raw, key in (({"jobs": []}, "jobs"), ({"jobs": {"a": {"workers": 3}}}, "jobs.a.workers"),
                     ({"link_bps": {"s1->s2": "fast"}}, "link_bps.s1->s2"),
                     ({"link_ranks": {"l": {"a": ["x"]}}}, "link_ranks.l.a[0]"),
                     ({"flow_paths": {"a": [5]}}, "flow_paths.a[0]"), ("[]", None)):
        with pytest.raises(ConfigError) as err:
            parse_summary(raw, "f/summary.json")
        assert str(err.value).startswith(f"f/summary.json: {key}: " if key else "f/summary.json: expected")


def test_optional_keys_are_absent_while_null_and_the_rest_always_written():
    data = records.to_json(RunSummary(experiment="x", jobs={"a": JobSummary(hosts=["h1"])}))
    assert "label" not in data and "metrics" not in data and "isolated_iter_s" not in data["jobs"]["a"]
    assert data["status"] is None and data["cassini"] is None and data["jobs"]["a"]["worker_cpu"] is None
    data = records.to_json(RunSummary(label="l", jobs={"a": JobSummary(isolated_iter_s=0.5)}))
    assert data["label"] == "l" and data["jobs"]["a"]["isolated_iter_s"] == 0.5


@dataclasses.dataclass(frozen=True)
class Check:
    """A nested block as a new key of the schema would add it: nothing but its declaration."""

    verdict: str | None = records.entry("ok or off")
    margin: float | None = records.entry("how far")


@dataclasses.dataclass(frozen=True)
class Extended(RunSummary):
    check: Check | None = records.entry("the checks", optional=True)


def test_a_nested_block_is_one_declaration_for_writer_reader_and_docs():
    summary = Extended(experiment="x", check=Check("ok", 0.2))
    data = records.to_json(summary)
    assert data["check"] == {"verdict": "ok", "margin": 0.2} and list(data)[0] == "check"
    assert records.from_json(Extended, json.loads(json.dumps(data)), "f") == summary
    assert records.from_json(Extended, {"check": {"verdict": 1}}, "f").check == Check("1", None)
    keys = [key for key, _, _ in records.describe(Extended)]
    assert keys[:3] == ["check", "check.verdict", "check.margin"]
    assert "| `check.margin` | `number or null` | how far |" in records.markdown(Extended)

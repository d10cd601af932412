"""Results folders on disk: loaders, write_report (plots, report.md, summary.json), compare."""

import csv
import json
import math

import pytest

from mn_harness.config.overrides import (
    apply_path,
    apply_variant,
    expand_set_specs,
    get_path,
    parse_path,
    parse_set_spec,
    variant_label,
)
from mn_harness.report.compare import aggregate, flatten_metrics, write_compare
from mn_harness.report.markdown import write_report
from mn_harness.report.metrics import compute_metrics
from mn_harness.results.loaders import load_iterations, load_run
from mn_harness.results.stats import mean_ci95, t_critical_95

ITER_HEADER = "job,rank,iteration,t_start,t_comm_start,t_comm_end,iter_time,comm_time,bytes_sent"


def write_folder(root, compute=0.6, comm=0.4, n_iter=4, offset_b=0.0, queue=True, extra=None):
    """Two jobs (A: 2 ranks, B: 1 rank) on link s1-s2, identical periods; B offset by offset_b.

    Each rank sends 1000 bytes per 10 ms bin during its communication phase."""
    root.mkdir(parents=True, exist_ok=True)
    period = compute + comm
    it_lines = [ITER_HEADER]
    tp_lines = ["job,rank,t,bin_s,bytes"]
    for job, ranks, off in (("A", 2, 0.0), ("B", 1, offset_b)):
        for i in range(n_iter):
            t0 = off + i * period
            for r in range(ranks):
                c0, c1 = t0 + compute, t0 + period
                it_lines.append(f"{job},{r},{i},{t0},{c0},{c1},{period},{comm},4000")
                for k in range(round(comm / 0.01)):
                    tp_lines.append(f"{job},{r},{c0 + k * 0.01:.6f},0.01,1000")
    (root / "iterations.csv").write_text("\n".join(it_lines) + "\n")
    (root / "throughput.csv").write_text("\n".join(tp_lines) + "\n")
    if queue:
        q = ["t,switch,port,depth,marks,bytes_A,bytes_B"]
        q += [f"{k * 0.05:.2f},s1,2,{k % 7},{k % 2},100,200" for k in range(40)]
        (root / "queue.csv").write_text("\n".join(q) + "\n")
    summary = {
        "experiment": "demo",
        "cc": {"A": "reno", "B": "reno"},
        "jobs": {
            "A": {
                "workers": ["h1", "h2"],
                "iterations": n_iter,
                "bytes_per_iteration": 4000,
                "compute_s": compute,
                "ideal_iter_s": 0.8,
                "bottleneck_bps": 1e8,
            },
            "B": {
                "workers": ["h3"],
                "iterations": n_iter,
                "bytes_per_iteration": 4000,
                "compute_s": compute,
                "ideal_iter_s": 0.8,
                "bottleneck_bps": 1e8,
            },
        },
        "link_jobs": {"s1-s2": ["A", "B"]},
        "status": "completed",
        **(extra or {}),
    }
    (root / "summary.json").write_text(json.dumps(summary))
    return root


# ----------------------------------------------------------------- loaders


def test_truncated_and_bad_rows_are_counted_not_fatal(tmp_path):
    p = tmp_path / "iterations.csv"
    p.write_text(
        ITER_HEADER + "\n"
        "A,0,0,0.0,0.6,1.0,1.0,0.4,4000\n"
        "A,0,1,1.0,x,2.0,1.0,0.4,4000\n"  # not a number
        "A,0,2,2.0,2.6\n"  # cut by a kill
    )
    rows, bad = load_iterations(p)
    assert len(rows) == 1 and rows[0].t_comm_end == 1.0
    assert bad == 2


def test_load_run_optional_files(tmp_path):
    root = write_folder(tmp_path / "r", queue=False)
    (root / "throughput.csv").unlink()
    run = load_run(root)
    assert run.queue is None and run.throughput == []
    assert len(run.iterations) == 4 * 3
    assert run.summary.jobs["A"].workers == ["h1", "h2"]
    assert run.job_order() == ["A", "B"]


# ----------------------------------------------------------------- write_report


def test_write_report_full_folder(tmp_path):
    root = write_folder(tmp_path / "run", offset_b=0.5)
    report = write_report(root)
    assert report == root / "report.md"
    text = report.read_text()
    for name in ("throughput", "iteration_times", "iteration_cdf", "queue"):
        png = root / "plots" / f"{name}.png"
        assert png.exists() and png.stat().st_size > 1000
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"(plots/{name}.png)" in text
    summary = json.loads((root / "summary.json").read_text())
    assert summary["status"] == "completed"  # the runner's keys are kept
    metrics = summary["metrics"]
    # B is offset by half a period: A comm [i+0.6, i+1.0], B comm [i+1.1, i+1.5]
    assert metrics["jobs"]["A"]["overlap_mean"] == 0.0
    assert metrics["jobs"]["A"]["convergence_iteration"] == 0
    assert metrics["jobs"]["A"]["mean_iter_s"] == pytest.approx(1.0)
    assert metrics["jobs"]["A"]["slowdown_mean"] == pytest.approx(1.0 / 0.8)
    # every full window of A holds 40 bins of 1000 bytes per rank: 80 kB for A (2 ranks);
    # B's phase in A's window [i, i+1.0] is the previous one [i+0.1, i+0.5]: 40 kB
    link = metrics["links"]["s1-s2"]
    assert link["windows"] == 3  # A's iteration 0 [0, 1.0] starts before B (0.5)
    assert link["jain_mean"] == pytest.approx(120_000**2 / (2 * (80_000**2 + 40_000**2)))
    assert "| A |" in text and "s1-s2" in text


def test_write_report_without_queue_or_plots(tmp_path):
    root = write_folder(tmp_path / "run", queue=False)
    text = write_report(root).read_text()
    assert "queue.png" not in text
    assert not (root / "plots" / "queue.png").exists()
    assert (root / "plots" / "throughput.png").exists()

    root2 = write_folder(tmp_path / "run2")
    text2 = write_report(root2, plots=False).read_text()
    assert not (root2 / "plots").exists()
    assert ".png" not in text2
    assert "metrics" in json.loads((root2 / "summary.json").read_text())


def test_write_report_killed_worker(tmp_path):
    root = write_folder(tmp_path / "run")
    lines = (root / "iterations.csv").read_text().splitlines()
    # drop rank 1 of A from iteration 2 on, and leave a truncated line behind
    kept = [ln for ln in lines if not (ln.startswith("A,1,2") or ln.startswith("A,1,3"))]
    (root / "iterations.csv").write_text("\n".join(kept) + "\nA,1,2,2.0,2.6\n")
    text = write_report(root).read_text()
    metrics = json.loads((root / "summary.json").read_text())["metrics"]
    assert metrics["jobs"]["A"]["missing_rows"] == 2
    assert metrics["jobs"]["A"]["n_iterations"] == 2
    assert metrics["missing_rows_total"] == 2
    assert "A: 2 missing row(s)" in text
    assert "iterations.csv: 1 malformed" in text


# ----------------------------------------------------------------- compare


def test_t_table():
    assert t_critical_95(1) == 12.706
    assert t_critical_95(2) == 4.303
    assert t_critical_95(30) == 2.042
    assert t_critical_95(35) == 2.042
    assert t_critical_95(45) == 2.021
    assert t_critical_95(10_000) == 1.980
    with pytest.raises(ValueError):
        t_critical_95(0)


def test_mean_ci95_by_hand():
    m, s, h = mean_ci95([1.0, 1.2, 1.4])
    assert m == pytest.approx(1.2)
    assert s == pytest.approx(0.2)
    assert h == pytest.approx(4.303 * 0.2 / math.sqrt(3))
    assert mean_ci95([5.0]) == (5.0, None, None)


def test_compare_aggregates_with_ci(tmp_path):
    # "reno": compute 0.6/0.8/1.0 s + comm 0.4 s -> iteration times 1.0, 1.2, 1.4 s
    # "mltcp": 0.5, 0.7 -> 0.9, 1.1 s
    runs = []
    for rep, compute in enumerate((0.6, 0.8, 1.0)):
        runs.append(("reno", rep, write_folder(tmp_path / f"reno-{rep}", compute=compute)))
    for rep, compute in enumerate((0.5, 0.7)):
        runs.append(("mltcp", rep, write_folder(tmp_path / f"mltcp-{rep}", compute=compute)))
    runs.append(("mltcp", 2, tmp_path / "never-ran"))
    rows = {(r.label, r.scope, r.metric): r for r in aggregate(runs)}

    reno = rows[("reno", "A", "mean_iter_s")]
    assert (reno.runs, reno.n) == (3, 3)
    assert reno.mean == pytest.approx(1.2)
    assert reno.ci95_half == pytest.approx(4.303 * 0.2 / math.sqrt(3))
    assert reno.ci95_low == pytest.approx(1.2 - 4.303 * 0.2 / math.sqrt(3))
    mltcp = rows[("mltcp", "all", "mean_iter_s")]
    assert mltcp.mean == pytest.approx(1.0)
    assert mltcp.std == pytest.approx(math.sqrt(0.02))
    assert mltcp.ci95_half == pytest.approx(12.706 * math.sqrt(0.02) / math.sqrt(2))
    # in-phase jobs never converge: the convergence metric has no value in any run
    conv = rows[("reno", "all", "convergence_iteration")]
    assert conv.n == 0 and conv.mean is None
    assert rows[("reno", "link:s1-s2", "overlap_mean")].mean == pytest.approx(1.0)

    md = write_compare(runs, tmp_path / "cmp")
    text = md.read_text()
    assert "1200.0 ± 496.9 (n=3/3)" in text  # 4.303 * 0.2 / sqrt(3) = 0.4969 s
    assert "never-ran" in text
    for png in ("compare_metrics.png", "compare_throughput.png"):
        assert (tmp_path / "cmp" / png).stat().st_size > 1000
        assert f"({png})" in text
    with (tmp_path / "cmp" / "compare.csv").open() as fh:
        table = list(csv.DictReader(fh))
    hit = [r for r in table if (r["label"], r["scope"], r["metric"]) == ("reno", "A", "mean_iter_s")]
    assert len(hit) == 1
    assert float(hit[0]["ci95_high"]) == pytest.approx(1.2 + 4.303 * 0.2 / math.sqrt(3))
    assert json.loads(hit[0]["values"]) == pytest.approx([1.0, 1.2, 1.4])


def test_flatten_all_scope_convergence(tmp_path):
    run = load_run(write_folder(tmp_path / "r", offset_b=0.5))
    flat = flatten_metrics(compute_metrics(run.summary, run.iterations, run.throughput))
    assert flat[("all", "convergence_iteration")] == 0.0
    assert flat[("A", "overlap_mean")] == 0.0
    assert flat[("all", "mean_iter_s")] == pytest.approx(1.0)


# ----------------------------------------------------------------- --set


def test_parse_set_spec():
    assert parse_set_spec("jobs[0].compute=80ms,120ms") == [
        ("jobs[0].compute", "80ms"),
        ("jobs[0].compute", "120ms"),
    ]
    assert parse_set_spec("run.iterations=3, 5") == [("run.iterations", 3), ("run.iterations", 5)]
    assert parse_set_spec("a.b=[1,2],[3]") == [("a.b", [1, 2]), ("a.b", [3])]
    assert parse_set_spec("flag=true") == [("flag", True)]
    for bad in ("no-equals", "jobs[0].=1", "jobs[x].compute=1", "a=1,,2", "a="):
        with pytest.raises(ValueError):
            parse_set_spec(bad)
    assert parse_path("jobs[0].links[2].bw") == ["jobs", 0, "links", 2, "bw"]


def test_expand_and_label():
    variants = expand_set_specs(["a=1,2", "b=x,y,z"])
    assert len(variants) == 6
    assert variants[0] == [("a", 1), ("b", "x")]
    assert variant_label(variants[-1]) == "a=2 b=z"
    assert expand_set_specs([]) == [[]]


def test_apply_path():
    cfg = {"jobs": [{"compute": "100ms", "workers": ["h1"]}], "cc": "reno"}
    out = apply_path(cfg, "jobs[0].compute", "80ms")
    assert out["jobs"][0]["compute"] == "80ms"
    assert cfg["jobs"][0]["compute"] == "100ms"  # the original is untouched
    assert apply_path(cfg, "cc", "cubic")["cc"] == "cubic"
    assert apply_path(cfg, "jobs[0].workers[0]", "h9")["jobs"][0]["workers"] == ["h9"]
    assert get_path(cfg, "jobs[0].workers[0]") == "h1"
    for path, missing in (
        ("jobs[1].compute", "jobs[1]"),
        ("jobs[0].comptue", "jobs[0].comptue"),
        ("cc.name", "cc.name"),
        ("nope", "nope"),
    ):
        with pytest.raises(ValueError, match=missing.replace("[", r"\[").replace("]", r"\]")):
            apply_path(cfg, path, 1)
    assert apply_path(cfg, "jobs[0].offset", "5ms", create=True)["jobs"][0]["offset"] == "5ms"
    with pytest.raises(ValueError):
        apply_path(cfg, "jobs[3].offset", "5ms", create=True)
    both = apply_variant(cfg, [("cc", "cubic"), ("jobs[0].compute", "1s")])
    assert (both["cc"], both["jobs"][0]["compute"]) == ("cubic", "1s")


def test_write_report_on_a_run_that_produced_nothing(tmp_path):
    root = write_folder(tmp_path / "run", queue=False)
    (root / "iterations.csv").write_text(ITER_HEADER + "\n")
    (root / "throughput.csv").write_text("job,rank,t,bin_s,bytes\n")
    text = write_report(root).read_text()
    metrics = json.loads((root / "summary.json").read_text())["metrics"]
    # 4 planned iterations x (2 + 1) ranks, none written
    assert metrics["missing_rows_total"] == 12
    assert metrics["jobs"]["A"]["mean_iter_s"] is None
    assert ".png" not in text

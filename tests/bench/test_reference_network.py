"""bench/reference_network.py (no runs, no root): every scenario × network or flip × traffic × CC
is a valid experiment with the emulation it names, the runs go round-robin and resume, and a
run's metrics and the two tables come out of hand-built results folders."""

import json

import pytest

from tests.helpers import bench_module, write_folder


@pytest.fixture(scope="module")
def bench():
    return bench_module("reference_network")


@pytest.mark.parametrize("traffic", [pytest.param("real", marks=pytest.mark.torch), "synthetic"])
def test_every_cell_is_a_valid_experiment(bench, traffic):
    """Real cells name torch_allreduce, which validates only where PyTorch is installed."""
    collective = bench.TRAFFIC[traffic]
    for scenario, (_, ccs) in bench.SCENARIOS.items():
        for variant in bench.VARIANTS:
            exp = bench.experiment(scenario, variant, traffic, ccs[0], 7)
            assert {(j.collective, j.iterations, j.cc.name) for j in exp.jobs} == {(collective, 7, ccs[0])}
            assert exp.run.dataplane == "linux"


def test_every_network_and_flip_has_the_emulation_it_names(bench):
    plain = bench.experiment("3jobs-ssai", "plain", "synthetic", "cubic", 30).run
    assert (plain.emulation.switches, plain.emulation.access_links, plain.emulation.queue_limit) == \
        ("bridge", "unshaped", "txqueuelen")
    assert plain.emulation.htb_burst.bytes == 15360 and plain.emulation.htb_cburst.auto
    assert plain.gso_max_segs == 65535 and plain.slow_start_after_idle
    access = bench.experiment("3jobs-ssai", "plain-access", "synthetic", "cubic", 30).run
    assert access.emulation.access_links == "shaped" and access.emulation.switches == "bridge"
    project = bench.experiment("3jobs-ssai", "project", "synthetic", "cubic", 30).run
    assert project.emulation.changed() == {} and project.gso_max_segs == 16
    # a flip changes exactly one choice; the scenario's own run options stay
    flip = bench.experiment("4jobs-ecn", "host-queue-link", "synthetic", "dctcp", 30).run
    assert flip.emulation.changed() == {"host_queue": "link"} and not flip.slow_start_after_idle


def test_the_three_job_scenario_is_compatible_at_500_mbit(bench):
    exp = bench.experiment("3jobs-ssai", "project", "synthetic", "reno", 30)
    assert {(j.bytes_per_iteration, j.compute_s) for j in exp.jobs} == {(12_500_000, 0.5)}
    assert {link.bw_bps for link in exp.links} == {500e6}
    assert [j.start_offset_s for j in exp.jobs] == [0.0, 0.01, 0.02]


def test_cells_are_round_robin_and_flips_only_where_asked(bench):
    cells = bench.cells(["3jobs-ssai", "4jobs-ecn"], ["plain", "gso-1"], ["real", "synthetic"], ["synthetic"], 2,
                        ["3jobs-ssai"])
    assert cells[0] == "3jobs-ssai__plain__real__cubic__r0"
    assert cells.index("3jobs-ssai__plain__real__cubic__r1") > cells.index("4jobs-ecn__plain__synthetic__dctcp__r0")
    assert "3jobs-ssai__gso-1__synthetic__reno__r1" in cells
    assert not any(c.startswith("4jobs-ecn__gso-1") for c in cells)
    assert not any("gso-1__real" in c for c in cells)
    assert len(cells) == 2 * (2 * 2 + 2 + 2 * 1)


def test_run_metrics_and_tables_from_results_folders(bench, tmp_path):
    fidelity = {"verdict": "faithful", "reason": None, "host": {"steal_mean": 0.01},
                "links": {"s1->s2": {"within_share": 0.9}, "s2->s1": {"within_share": 0.8}}}
    link_stats = {"h1->s1": {"drops": 3}, "h3->s1": {"drops": 2}, "s1->s2": {"drops": 5}}
    apart = write_folder(tmp_path / "apart", offset_b=0.5, n_iter=12,
                         extra={"fidelity": fidelity, "link_stats": link_stats})
    m = bench.run_metrics(apart, warmup=2)
    assert m["slowdown"] == pytest.approx(1.25)  # 1.0 s iterations against an ideal of 0.8 s
    assert m["interleaved"] is True and m["verdict"] == "faithful"
    assert m["bottleneck_within"] == pytest.approx(0.85)
    assert m["host_drops"] == 5 and m["bottleneck_drops"] == 5  # h3 runs job B: a host too
    in_step = write_folder(tmp_path / "in_step", offset_b=0.0, n_iter=12, extra={"fidelity": {"verdict": "unfaithful"}})
    assert bench.run_metrics(in_step, warmup=2)["interleaved"] is False

    out = tmp_path / "bench"
    (out / "runs").mkdir(parents=True)
    for k, (variant, slowdown) in enumerate([("plain", 1.0), ("plain", 1.1), ("project", 1.2), ("project", 1.4),
                                             ("gso-1", 1.3), ("gso-1", 1.3)]):
        run = {**m, "slowdown": slowdown, "interleaved": variant == "plain"}
        (out / "runs" / f"3jobs-ssai__{variant}__synthetic__reno__r{k}.json").write_text(json.dumps(run))
    (out / "runs" / "3jobs-ssai__project__synthetic__reno__r9.json").write_text(
        json.dumps({**m, "slowdown": 9.0, "status": "failed: x"}))  # left out
    done = bench.load_done(out)
    reference = "\n".join(bench.reference_table(done, ["3jobs-ssai"], ["synthetic"]))
    assert "| 3jobs-ssai | reno | synthetic | 1.050 ± " in reference
    assert "(n=2), 2/2, 2/2 | - | 1.300 ± " in reference and "(n=2), 0/2, 2/2 | 1.238 ± " in reference
    sensitivity = bench.sensitivity_table(done, ["3jobs-ssai"], ["synthetic"])
    row = next(line for line in sensitivity if "| gso-1 |" in line)
    assert "| 1.300 ± 0.000 (n=2) | 1.000 ± " in row and "| 85.0% | 5 | " in row

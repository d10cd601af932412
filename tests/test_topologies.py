"""The shipped experiment files (topologies/): `validate` accepts every one; every feature has an
example, named in FEATURES and checked to use it; every collective but the torch_* ones (their
jobs validate only where PyTorch is installed: bench/fidelity.py builds them) is in one; and
each feature's example runs, shrunk to a few iterations (root), or is run by the test named."""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Callable

import pytest

from mn_harness import collectives
from mn_harness.cli import main
from mn_harness.config import Experiment, load_experiment
from mn_harness.jobs.program import job_program
from mn_harness.jobs.scaling import apply_scaling
from mn_harness.runner import run_experiment
from mn_harness.worker.program_ops import CollectiveOp, ComputeOp
from tests.helpers import ROOT, TOPOLOGIES


def comm(e: Experiment) -> list:
    return [p for j in e.jobs for p in j.comm_phases]


@dataclasses.dataclass(frozen=True)
class Feature:
    file: str
    uses: Callable[[Experiment], bool]
    run_by: str | None = None  # the test that runs the file; None: test_the_example_runs_small


FEATURES = {
    "DDP overlap": Feature("ddp-overlap.yaml", lambda e: any(p.overlap for p in comm(e))),
    "phase lists": Feature("fsdp-moe-phases.yaml", lambda e: any(len(j.phases) > 2 for j in e.jobs)),
    "non-blocking collectives": Feature("fsdp-moe-phases.yaml", lambda e: any(not p.blocking for p in comm(e))),
    "broadcast root": Feature("fsdp-moe-phases.yaml",
                              lambda e: any(p.collective == "broadcast" and p.participants[0] != j.workers[0]
                                            for j in e.jobs for p in j.comm_phases)),
    "pipeline 1F1B": Feature("pipeline-1f1b.yaml", lambda e: any(p.record.pipeline_pass for p in comm(e))),
    "parameter server": Feature("parameter-server.yaml", lambda e: any(j.servers for j in e.jobs)),
    "compute jitter": Feature("stragglers-3jobs.yaml",
                              lambda e: any(p.compute.jitter for j in e.jobs for p in j.compute_phases)),
    "stragglers": Feature("stragglers-3jobs.yaml", lambda e: any(j.stragglers for j in e.jobs)),
    "Chakra trace": Feature("ddp-trace.yaml", lambda e: any(j.trace for j in e.jobs)),
    "model presets": Feature("mixed-presets.yaml", lambda e: any(j.model for j in e.jobs)),
    "scale rule": Feature("mixed-presets.yaml", lambda e: any(j.scaled for j in e.jobs)),
    "ECMP routing": Feature("leaf-spine-ecmp.yaml", lambda e: e.routing == "ecmp"),
    "loops in the topology": Feature("leaf-spine.yaml", lambda e: len(e.links) > len(e.hosts) + len(e.switches) - 1),
    "ECN marking, DCTCP, MLTCP": Feature("dumbbell-2jobs-dctcp.yaml",
                                         lambda e: any(j.cc.name == "mltcp-dctcp" for j in e.jobs)),
    "slow start after idle": Feature("dumbbell-2jobs-ssai.yaml", lambda e: e.run.slow_start_after_idle),
    "BMv2 data plane": Feature("dumbbell-2jobs-bmv2.yaml", lambda e: e.run.dataplane == "bmv2",
                               "tests/test_runner_faults.py"),
    "in-network aggregation": Feature("inc-vs-ring-bmv2.yaml",
                                      lambda e: any(collectives.get(j.collective).engine == collectives.INC
                                                    for j in e.jobs),
                                      "tests/p4/test_inc_harness_bmv2.py"),
}
FILES = sorted(TOPOLOGIES.glob("*.yaml"))


def loaded(name: str) -> Experiment:
    return apply_scaling(load_experiment(TOPOLOGIES / name))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_validate_accepts_every_shipped_file(path, capsys):
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"{path}: ok")


@pytest.mark.parametrize("feature", FEATURES)
def test_every_feature_has_an_example_that_uses_it(feature):
    spec = FEATURES[feature]
    assert spec.uses(loaded(spec.file)), f"{spec.file} does not show {feature}"
    if spec.run_by:
        assert spec.file in (ROOT / spec.run_by).read_text(), f"{spec.run_by} does not run {spec.file}"


def test_every_collective_but_torch_is_in_an_example():
    used = {p.collective for path in FILES for p in comm(loaded(path.name))}
    wanted = set(collectives.names()) - set(collectives.names(engine=collectives.TORCH))
    assert wanted - used == set()


def read(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted({f.file for f in FEATURES.values() if f.run_by is None}))
def test_the_example_runs_small(name, tmp_path):
    """Three iterations per job on the Linux data plane: every row, and every operation of
    every job's program in phases.csv (its buckets, pipeline pass, trace phases, ...)."""
    from tests.test_runner_workloads import check_rows_and_bytes

    exp = loaded(name)
    exp = exp.with_jobs(dataclasses.replace(j, iterations=3) for j in exp.jobs).with_run(dataplane="linux")
    results = run_experiment(exp, out_root=tmp_path, log=lambda *_: None)
    check_rows_and_bytes(exp, results)
    phases = read(results / "phases.csv")
    for job in exp.jobs:
        names = {op.name for op in job_program(job) if isinstance(op, ComputeOp | CollectiveOp)}
        assert names == {p["name"] for p in phases if p["job"] == job.name}, job.name

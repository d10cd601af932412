"""The collective registry: the shipped records agree with their schedules, and a collective
added to the registry alone (here, from this test) is validated, planned, timed, bucketed,
dumped and reported like a shipped one — no other module names it."""

import json

import pytest
import yaml

from mn_harness import collectives
from mn_harness.cli import main
from mn_harness.collectives import Call, Collective, Schedule, Transfer
from mn_harness.collectives.registry import RECORDS
from mn_harness.config import ConfigError, Experiment, load_experiment
from mn_harness.config.dump import experiment_to_raw, experiment_to_yaml
from mn_harness.jobs.ideal import bytes_sent_per_rank, ideal_iteration_s, link_bytes_per_iteration, phase_summary
from mn_harness.jobs.program import job_program
from mn_harness.jobs.specs import worker_specs
from mn_harness.network.flows import job_flows
from mn_harness.network.plan import NetworkPlan
from mn_harness.results.collect import phase_rows
from mn_harness.results.phases import phase_stats
from mn_harness.worker.program_ops import CollectiveOp, WaitOp, op_from_json
from tests.results.test_phases import worker_line

S = 8_000_000
SLOW_BPS = 100e6  # h4's link; the others run at 1 Gbit/s


def test_shipped_records_name_their_schedules_and_conventions():
    assert collectives.names()[:8] == ("ring_allreduce", "tree_allreduce", "reduce_scatter", "all_gather",
                                       "broadcast", "all_to_all", "parameter_server", "pipeline")
    for name in collectives.names():
        record = collectives.get(name)
        assert record.short_form or record.phase
        if record.schedule is None:
            continue
        call = Call(1_000_000, 4, servers=1 if record.uses_servers else 0, micro_batches=2)
        sched = record.transfers(call)
        assert sched.collective == name and sched.transfers
        assert record.bytes_sent(call) == sched.bytes_sent_per_rank()
        assert record.busbw_factor(3 if record.uses_servers else 4) > 0
    assert collectives.names(bucketable=True) == ("ring_allreduce", "tree_allreduce")
    assert collectives.names(uses_servers=True) == ("parameter_server",)
    assert collectives.names(short_form=False) == ("pipeline",)
    inc = collectives.get("inc_allreduce")  # no TCP schedule: its record says what one would
    assert inc.bytes_sent(Call(10, 3)) == [10, 10, 10]
    assert inc.directed_pairs(Call(10, 3)) == [(0, 1), (1, 2), (2, 0)]
    with pytest.raises(ValueError, match="unknown collective 'gather'"):
        collectives.get("gather")


def test_a_record_without_what_its_arithmetic_needs_is_refused():
    with pytest.raises(ValueError, match="no schedule"):
        Collective("nothing", None, None)
    with pytest.raises(ValueError, match="already"):
        collectives.register(collectives.get("ring_allreduce"))
    with pytest.raises(ValueError, match="counterpart"):
        collectives.register(Collective("torch_gather", None, None, counterpart="gather", wire_time=lambda c, n: 0,
                                        sends=lambda c: [], pairs=lambda c: []))


def shift_schedule(call: Call) -> Schedule:
    """Every rank sends its S bytes to the next one, all at once."""
    n = call.ranks
    return Schedule("shift", n, call.nbytes, tuple(Transfer(0, 0, r, r, (r + 1) % n, call.nbytes) for r in range(n)),
                    dependent=False)


@pytest.fixture
def shift():
    record = collectives.register(Collective("shift", shift_schedule, lambda n: 1.0, bucketable=True))
    yield record
    del RECORDS["shift"]


def star(job: dict) -> dict:
    hosts = ["h1", "h2", "h3", "h4"]
    return {"experiment": "star", "hosts": hosts, "switches": ["s1"], "link_defaults": {"bw": "1Gbit"},
            "links": [{"endpoints": [h, "s1"], **({"bw": "100Mbit"} if h == "h4" else {})} for h in hosts],
            "jobs": [{"name": "j", "workers": hosts, "iterations": 3, **job}], "run": {"dataplane": "linux"}}


PHASES = {"phases": [{"compute": "10ms"}, {"collective": "shift", "bytes": S},
                     {"compute": "30ms"}, {"collective": "shift", "bytes": S, "overlap": {"bucket": "3MB"}}]}


def test_an_unregistered_name_is_refused_where_the_yaml_names_it():
    with pytest.raises(ConfigError, match=r"jobs\[0\]\.phases\[1\]\.collective: unknown collective 'shift'"):
        Experiment.from_dict(star(PHASES))
    with pytest.raises(ConfigError, match=r"jobs\[0\]\.collective: unknown collective 'shift'"):
        Experiment.from_dict(star({"collective": "shift", "bytes_per_iteration": S, "compute": "10ms"}))


def test_a_collective_added_to_the_registry_alone_runs_through_every_layer(shift, tmp_path, capsys):
    exp = Experiment.from_dict(star(PHASES))
    job = exp.jobs[0]
    plan = NetworkPlan(exp)

    # the program: a blocking collective, then DDP buckets of 1 MiB (the first), 3 MB, 3 MB, ...
    program = job_program(job)
    ops = [op for op in program if isinstance(op, CollectiveOp)]
    assert {op.collective for op in ops} == {"shift"} and ops[0].ranks == (0, 1, 2, 3)
    buckets = job.phases[3].overlap.buckets(S)
    assert [op.bytes for op in ops[1:]] == buckets and all(op.is_async for op in ops[1:])
    assert isinstance(program[-1], WaitOp)

    # the arithmetic: every rank sends S per use; h4's link carries S in and S out at 100 Mbit/s
    assert bytes_sent_per_rank(job) == [2 * S] * 4
    assert link_bytes_per_iteration(job, plan) == {f"{a}->{b}": 2 * S for h in exp.hosts
                                                   for a, b in ((h, "s1"), ("s1", h))}
    one_use = S * 8 / SLOW_BPS
    # 10 ms compute, the blocking shift, 10 ms forward, then backward (20 ms) in slices, each
    # followed by its bucket on the stream; the iteration ends with the last bucket
    t = stream = 0.010 + one_use + 0.010
    for size in buckets:
        t += 0.020 * size / S
        stream = max(t, stream) + size * 8 / SLOW_BPS
    ideal, rate = ideal_iteration_s(job, plan)
    assert rate == SLOW_BPS and ideal == pytest.approx(max(t, stream))
    rows = phase_summary(job, plan)
    assert rows[1]["ideal_s"] == pytest.approx(one_use) and rows[1]["bottleneck"] in ("h4->s1", "s1->h4")
    assert rows[3]["buckets"] == len(buckets) and rows[1]["busbw_factor"] == 1.0

    # the flows (one connection per pair that talks) and the workers' specs
    assert sorted((f.src, f.dst) for f in job_flows(exp)) == [("h1", "h2"), ("h2", "h3"), ("h3", "h4"), ("h4", "h1")]
    specs = worker_specs(exp, plan, tmp_path, {"j": "cubic"})
    assert [op_from_json(op.to_json()) for op in specs[0][1].program] == program

    # config.yaml: written with the name and read back to the same experiment
    raw = experiment_to_raw(exp)
    assert [p.get("collective") for p in raw["jobs"][0]["phases"]] == [None, "shift", None, "shift"]
    path = tmp_path / "config.yaml"
    path.write_text(experiment_to_yaml(exp))
    assert load_experiment(path) == exp

    # `validate` prints its ideal iteration
    assert main(["validate", str(path)]) == 0
    assert f"shift 8MB; ideal iteration {ideal * 1e3:.1f} ms" in capsys.readouterr().out

    # the short form, and the results' bus bandwidth from its factor
    short = Experiment.from_dict(star({"collective": "shift", "bytes_per_iteration": S, "compute": "10ms"}))
    assert ideal_iteration_s(short.jobs[0], NetworkPlan(short))[0] == pytest.approx(0.010 + one_use)
    raw_dir = tmp_path / "raw"
    raw_dir.mkdir()
    lines = [worker_line(0, it, it * 1.0, 0.5, collective="shift", nbytes=S) for it in range(2)]
    (raw_dir / "j-r0.iterations.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    comm = phase_stats(phase_rows(raw_dir), "j")[1]
    assert comm["collective"] == "shift" and comm["busbw_Bps"] == pytest.approx(S / 0.5)


def test_its_properties_are_the_records(shift):
    with pytest.raises(ConfigError, match=r"phases\[1\]\.root: unknown key"):
        Experiment.from_dict(star({"phases": [{"compute": "1ms"}, {"collective": "shift", "bytes": 1, "root": "h2"}]}))
    RECORDS["shift"] = Collective("shift", shift_schedule, None, phase=False)  # short form only, not bucketable
    with pytest.raises(ConfigError, match=r"phases\[1\]\.collective: .*only as the short form's collective"):
        Experiment.from_dict(star(PHASES))
    with pytest.raises(ConfigError, match=r"jobs\[0\]\.overlap: only for ring_allreduce or tree_allreduce"):
        Experiment.from_dict(star({"collective": "shift", "bytes_per_iteration": S, "compute": "10ms",
                                   "overlap": {}}))
    short = Experiment.from_dict(star({"collective": "shift", "bytes_per_iteration": S, "compute": "10ms"}))
    assert yaml.safe_load(experiment_to_yaml(short))["jobs"][0]["collective"] == "shift"

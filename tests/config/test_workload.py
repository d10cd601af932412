"""A job's iteration as phases: the three forms, compute jitter, overlap, stragglers, servers —
and every bad value one line naming its YAML path."""

import copy

import pytest

from mn_harness.config import ConfigError, Experiment
from mn_harness.config.workload import DDP_BUCKET_BYTES, DDP_FIRST_BUCKET_BYTES, CommPhase, ComputePhase

BASE = {
    "experiment": "w",
    "hosts": ["h1", "h2", "h3", "h4", "h5"],
    "switches": ["s1"],
    "link_defaults": {"bw": "1Gbit"},
    "links": [{"endpoints": [h, "s1"]} for h in ("h1", "h2", "h3", "h4", "h5")],
    "jobs": [{"name": "j", "workers": ["h1", "h2", "h3"], "iterations": 2,
              "phases": [{"compute": "100ms"}, {"collective": "all_gather", "bytes": "3MB"}]}],
}


def build(mutate=None) -> Experiment:
    raw = copy.deepcopy(BASE)
    if mutate:
        mutate(raw["jobs"][0])
    return Experiment.from_dict(raw)


def rejects(mutate, path: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        build(mutate)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    assert words in message, message


def test_phases_resolve_with_participants_and_totals():
    job = build().jobs[0]
    assert [p.kind for p in job.phases] == ["compute", "comm"]
    comm = job.phases[1]
    assert isinstance(comm, CommPhase) and comm.participants == ("h1", "h2", "h3") and comm.bytes == 3_000_000
    assert job.bytes_per_iteration == 3_000_000 and job.compute_s == pytest.approx(0.1)
    assert job.collective == "all_gather"


def test_short_form_is_a_two_phase_iteration():
    def short(job):
        del job["phases"]
        job.update(bytes_per_iteration="2MB", compute="50ms", collective="tree_allreduce")

    job = build(short).jobs[0]
    assert isinstance(job.phases[0], ComputePhase) and job.phases[0].compute.mean_s == pytest.approx(0.05)
    assert isinstance(job.phases[1], CommPhase) and job.phases[1].collective == "tree_allreduce"
    assert job.phases[1].bytes == 2_000_000 and job.phases[1].participants == ("h1", "h2", "h3")


def test_compute_jitter_and_distribution():
    def jitter(job):
        job["phases"][0]["compute"] = {"mean": "300ms", "jitter": "10%", "distribution": "lognormal"}

    spec = build(jitter).jobs[0].phases[0].compute
    assert (spec.mean_s, spec.jitter, spec.distribution) == (pytest.approx(0.3), pytest.approx(0.1), "lognormal")
    rejects(lambda j: j["phases"][0].update(compute={"mean": "1s", "jitter": "150%"}),
            "jobs[0].phases[0].compute.jitter", "between 0 and 1")
    rejects(lambda j: j["phases"][0].update(compute={"mean": "1s", "distribution": "uniform"}),
            "jobs[0].phases[0].compute.distribution", "unknown distribution")
    rejects(lambda j: j["phases"][0].update(compute={"jitter": "1%"}), "jobs[0].phases[0].compute.mean", "missing")


def test_overlap_defaults_are_ddps():
    def overlap(job):
        job["phases"][1] = {"collective": "ring_allreduce", "bytes": "60MB", "overlap": {}}

    ov = build(overlap).jobs[0].phases[1].overlap
    assert ov.bucket_bytes == DDP_BUCKET_BYTES == 25 * 2**20
    assert ov.first_bucket_bytes == DDP_FIRST_BUCKET_BYTES == 2**20 and ov.backward == pytest.approx(2 / 3)
    assert ov.buckets(60_000_000) == [2**20, 25 * 2**20, 25 * 2**20, 60_000_000 - 51 * 2**20]
    rejects(lambda j: j["phases"][1].update(overlap={"bucket": "1MB"}), "jobs[0].phases[1].overlap",
            "only for ring_allreduce or tree_allreduce")
    rejects(lambda j: j.update(phases=[{"collective": "ring_allreduce", "bytes": "1MB", "overlap": {}}]),
            "jobs[0].phases[0].overlap", "compute phase before it")
    rejects(lambda j: j["phases"][1].update(collective="ring_allreduce", overlap={"backward": 0}),
            "jobs[0].phases[1].overlap.backward", "must be > 0")


def test_bad_phases_name_their_path():
    rejects(lambda j: j["phases"].append({"compute": "1ms", "collective": "all_gather"}),
            "jobs[0].phases[2]", "exactly one of")
    rejects(lambda j: j["phases"][1].update(collective="gather"), "jobs[0].phases[1].collective",
            "unknown collective")
    rejects(lambda j: j["phases"][1].update(collective="inc_allreduce"), "jobs[0].phases[1].collective",
            "only as the short form")
    rejects(lambda j: j["phases"][1].update(bytes="0B"), "jobs[0].phases[1].bytes", "at least 1 byte")
    rejects(lambda j: j["phases"][1].update(participants=["h1", "h9"]), "jobs[0].phases[1].participants[1]",
            "not one of the job's workers")
    rejects(lambda j: j["phases"][1].update(participants=["h1"]), "jobs[0].phases[1].participants",
            "at least 2")
    rejects(lambda j: j["phases"][1].update(root="h1"), "jobs[0].phases[1].root", "unknown key")
    rejects(lambda j: j.update(phases=[{"compute": "1ms"}]), "jobs[0].phases", "communication phase")
    rejects(lambda j: j.update(phases=[]), "jobs[0].phases", "non-empty list")
    rejects(lambda j: j.update(compute="1ms"), "jobs[0].compute", "not with phases")
    rejects(lambda j: j.update(bytes_per_iteration="1MB"), "jobs[0].bytes_per_iteration", "exactly one of")
    rejects(lambda j: j.update(phases=[{"compute": "1ms"}] * 300), "jobs[0].phases", "at most 256")


def test_broadcast_root_goes_first_and_pipeline_needs_micro_batches():
    exp = build(lambda j: j["phases"].append({"collective": "broadcast", "bytes": "1MB", "root": "h3"}))
    assert exp.jobs[0].phases[2].participants == ("h3", "h1", "h2")
    pipe = build(lambda j: j["phases"].append({"collective": "pipeline", "bytes": "1MB", "micro_batches": 4,
                                               "forward": "2ms", "backward": "4ms"})).jobs[0].phases[2]
    assert (pipe.micro_batches, pipe.forward_s, pipe.backward_s, pipe.grad_bytes) == (4, 0.002, 0.004, 1_000_000)
    rejects(lambda j: j["phases"].append({"collective": "pipeline", "bytes": "1MB"}),
            "jobs[0].phases[2].micro_batches", "missing")
    rejects(lambda j: j["phases"].append({"collective": "broadcast", "bytes": "1MB", "root": "h5"}),
            "jobs[0].phases[2].root", "not a participant")


def test_parameter_servers_are_ranks_after_the_workers():
    def ps(job):
        job["servers"] = ["h4", "h5"]
        job["phases"][1] = {"collective": "parameter_server", "bytes": "4MB"}

    job = build(ps).jobs[0]
    assert job.hosts == ("h1", "h2", "h3", "h4", "h5") and job.n_workers == 3 and job.n_ranks == 5
    assert job.phases[1].participants == job.hosts and job.phases[1].servers == 2
    rejects(lambda j: j["phases"].__setitem__(1, {"collective": "parameter_server", "bytes": "4MB"}),
            "jobs[0].phases", "needs the job's `servers`")
    rejects(lambda j: j.update(servers=["h4"]), "jobs[0].phases", "no parameter_server phase")
    rejects(lambda j: j.update(servers=["h1"]), "jobs[0].servers[0]", "already a worker")
    rejects(lambda j: j.update(servers=["h9"], phases=[{"compute": "1ms"},
                                                       {"collective": "parameter_server", "bytes": 10}]),
            "jobs[0].servers[0]", "unknown host")


def test_stragglers():
    def stragglers(job):
        job["stragglers"] = [{"ranks": [1], "delay": "50ms", "probability": 0.2}, {"ranks": [0], "slowdown": 1.5}]

    s = build(stragglers).jobs[0].stragglers
    assert (s[0].ranks, s[0].delay_s, s[0].probability) == ((1,), 0.05, 0.2) and s[1].slowdown == 1.5
    rejects(lambda j: j.update(stragglers=[{"ranks": [3], "delay": "1ms"}]), "jobs[0].stragglers[0].ranks[0]",
            "worker rank 0..2")
    rejects(lambda j: j.update(stragglers=[{"ranks": [0]}]), "jobs[0].stragglers[0]", "a delay")
    rejects(lambda j: j.update(stragglers=[{"ranks": [0], "slowdown": 1.2, "probability": 0.5}]),
            "jobs[0].stragglers[0].probability", "only with a delay")
    rejects(lambda j: j.update(stragglers=[{"ranks": [0], "delay": "1ms", "probability": 2}]),
            "jobs[0].stragglers[0].probability", "between 0 and 1")
    rejects(lambda j: j.update(stragglers={"ranks": [0]}), "jobs[0].stragglers", "expected a list")

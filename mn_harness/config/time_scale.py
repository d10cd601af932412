"""Time dilation (`run.emulation.time_scale: K`): the experiment the emulation runs, K times
slower than the one the user wrote (the technique of DieCast, SliceTime and time-warped
emulation). Every link's rate is divided by K and every time of the model is multiplied by K,
so every byte count, queue and ECN threshold stays what it was (a link's bandwidth-delay
product in bytes is unchanged) and each step of the machine (a timer firing late, a dequeue
delayed, a worker scheduled late) is K times smaller beside the model's times. The results
are converted back to the experiment's (nominal) times in one place, mn_harness/results/nominal.py.

Every number field of the configuration is in exactly one of the three tables below, which say
what dilation does to it; tests/config/test_time_scale.py fails on a field in none of them."""

from __future__ import annotations

from dataclasses import replace

from mn_harness.cc.spec import CCSpec
from mn_harness.config.experiment import Experiment
from mn_harness.config.model import JobConfig, LinkConfig, RunConfig
from mn_harness.config.workload import CommPhase, ComputePhase, Phase

# times of the model: x K
DILATED = {
    "LinkConfig.delay_s": "the propagation delay of each link end",
    "JobConfig.compute_s": "the mean compute per iteration (the phases' sum)",
    "JobConfig.start_offset_s": "when the job starts after the common start",
    "ComputeSpec.mean_s": "a compute phase's mean duration",
    "StragglerConfig.delay_s": "a straggler's added compute delay",
    "CommPhase.forward_s": "a pipeline stage's forward per micro-batch",
    "CommPhase.backward_s": "a pipeline stage's backward per micro-batch",
    "CCSpec.idle_gap_s": "MLTCP's idle gap that marks an iteration boundary",
    "RunConfig.throughput_bin_s": "the workers' throughput bin (a bin of the model's time)",
    "RunConfig.timeout_s": "the whole run's limit",
}
# rates: / K
SLOWED = {
    "LinkConfig.bw_bps": "each link's rate",
}
# unchanged, and why
KEPT = {
    "ComputeSpec.jitter": "a share of the mean",
    "StragglerConfig.probability": "a probability",
    "StragglerConfig.slowdown": "a factor of the compute",
    "OverlapConfig.backward": "a share of the compute phase",
    "IncConfig.scale": "a fixed-point factor",
    "CCSpec.slope": "MLTCP's slope: a factor of the bytes share",
    "CCSpec.intercept": "MLTCP's intercept: a factor",
    "CCSpec.hold": "MLTCP's held slope: a factor of the bytes share",
    "ShiftSchedule.drift": "a share of the job's period (CASSINI's shifts come from the dilated jobs)",
    "FidelityThresholds.link_tolerance": "a share of a serialisation time",
    "FidelityThresholds.link_within": "a share of gaps",
    "FidelityThresholds.host_saturated": "a share of intervals",
    "FidelityThresholds.host_steal": "a share of the cores' time",
    "FidelityThresholds.clock_error": "a share of an iteration time",
    "FidelityThresholds.compute_overshoot_s": "nominal: judged on the nominal phases (results/nominal.py)",
    "FidelityThresholds.send_lag_s": "nominal: judged on the nominal rows (results/nominal.py)",
    "Burst.seconds": "the machine's: HTB's bucket covers the machine's timer slack, so it is a time of the "
                     "machine at the dilated rate (fewer bytes), as in the hand-built twin it was measured on",
    "Emulation.time_scale": "K itself",
    "Preset.compute_s": "a record of where the phases came from (the phases are dilated)",
    "ScaleConfig.real_link_bps": "a record: the real cluster's link",
    "ScaledWorkload.real_link_bps": "a record of the scale rule",
    "ScaledWorkload.emulated_link_bps": "a record of the scale rule (on the nominal network)",
    "ScaledWorkload.comm_fraction": "a record: a share",
}


def dilate(experiment: Experiment) -> Experiment:
    """The experiment as the emulation runs it: K = run.emulation.time_scale times slower
    (itself when K is 1)."""
    k = experiment.run.emulation.time_scale
    if k == 1:
        return experiment
    return replace(experiment,
                   links=tuple(_link(link, k) for link in experiment.links),
                   jobs=tuple(_job(job, k) for job in experiment.jobs),
                   run=_run(experiment.run, k))


def _link(link: LinkConfig, k: float) -> LinkConfig:
    return replace(link, bw_bps=link.bw_bps / k, delay_s=link.delay_s * k)


def _job(job: JobConfig, k: float) -> JobConfig:
    return replace(job, compute_s=job.compute_s * k, start_offset_s=job.start_offset_s * k,
                   phases=tuple(_phase(p, k) for p in job.phases),
                   stragglers=tuple(replace(s, delay_s=s.delay_s * k) for s in job.stragglers),
                   cc=_cc(job.cc, k))


def _phase(phase: Phase, k: float) -> Phase:
    if isinstance(phase, ComputePhase):
        return replace(phase, compute=replace(phase.compute, mean_s=phase.compute.mean_s * k))
    assert isinstance(phase, CommPhase)
    return replace(phase, forward_s=phase.forward_s * k, backward_s=phase.backward_s * k)


def _cc(cc: CCSpec, k: float) -> CCSpec:
    """An idle gap, given or derived from the nominal job, is a time of the model; the
    variant's own default (no gap set) would be one of the machine, so it is dilated too."""
    if not cc.is_bpf:
        return cc
    return replace(cc, idle_gap_s=cc.resolved().idle_gap_s * k)


def _run(run: RunConfig, k: float) -> RunConfig:
    return replace(run, throughput_bin_s=run.throughput_bin_s * k,
                   timeout_s=None if run.timeout_s is None else run.timeout_s * k)

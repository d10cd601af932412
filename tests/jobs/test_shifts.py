"""CASSINI's time shifts as a run option (jobs/shifts.py): the shifts applied to the workers'
start, drift detected from the jobs' communication starts, the holds that re-apply the shifts
(and the worker's side of them, worker/holds.py), without a network."""

import io
import json

import pytest

from mn_harness.config import Experiment
from mn_harness.errors import ConfigError
from mn_harness.jobs.shifts import JobShift, ShiftDriver, ShiftScheduler, job_shifts, start_shifts
from mn_harness.jobs.specs import worker_specs
from mn_harness.network.plan import NetworkPlan
from mn_harness.worker.holds import Holds
from tests.jobs.test_cassini import GBIT


def two_jobs(shifts=None) -> Experiment:
    """Two 2-worker jobs on one 1 Gbit/s bottleneck, a = 0.4 each (period 0.5 s)."""
    raw = {"hosts": ["a0", "a1", "b0", "b1"], "switches": ["s1", "s2"], "link_defaults": {"bw": "1Gbit"},
           "links": [{"endpoints": ["s1", "s2"]}, {"endpoints": ["a0", "s1"]}, {"endpoints": ["a1", "s1"]},
                     {"endpoints": ["b0", "s2"]}, {"endpoints": ["b1", "s2"]}],
           "jobs": [{"name": f"j{i}", "workers": [f"a{i}", f"b{i}"], "bytes_per_iteration": int(0.2 * GBIT / 8),
                     "compute": "300ms", "iterations": 10, "start_offset": f"{10 * i}ms"} for i in range(2)],
           "run": {} if shifts is None else {"shifts": shifts}}
    return Experiment.from_dict(raw)


def test_shifts_applied_to_the_workers_start_offsets(tmp_path):
    """With run.shifts: cassini each worker starts at its job's offset plus CASSINI's shift (the
    joint rotation validate prints); without it, at its offset."""
    exp = two_jobs("cassini")
    plan = NetworkPlan(exp)
    shifts = job_shifts(exp, plan)
    assert shifts["j0"].shift_s == 0.0 and 0.2 - 1e-3 <= shifts["j1"].shift_s <= 0.3 + 1e-3
    assert shifts["j0"].component == shifts["j1"].component
    assert shifts["j1"].comm_at_s == pytest.approx(0.3) and shifts["j1"].period_s == pytest.approx(0.5, rel=0.01)
    ccs = {"j0": "reno", "j1": "reno"}
    starts = {spec.job: spec.start_offset_s for _, spec in worker_specs(exp, plan, tmp_path, ccs)}
    assert starts == {"j0": 0.0, "j1": pytest.approx(0.010 + shifts["j1"].shift_s)}
    off = two_jobs()
    assert start_shifts(off, NetworkPlan(off)) == {}
    assert {s.start_offset_s for _, s in worker_specs(off, NetworkPlan(off), tmp_path, ccs)} == {0.0, 0.010}


def test_run_shifts_is_parsed_written_back_and_bad_values_name_their_path():
    from mn_harness.config.dump import experiment_to_raw
    for value in ("cassini", {"schedule": "cassini", "drift": 0.05}):
        exp = two_jobs(value)
        assert exp.run.shifts.enabled and Experiment.from_dict(experiment_to_raw(exp)).run.shifts == exp.run.shifts
    assert two_jobs({"schedule": "cassini", "drift": 0.05}).run.shifts.drift == 0.05
    assert "shifts" not in experiment_to_raw(two_jobs())["run"]
    assert not two_jobs(False).run.shifts.enabled  # YAML's `shifts: off`
    for bad, path in (("sometimes", "run.shifts"), ({"schedule": "cassini", "drift": 0.9}, "run.shifts.drift"),
                      ({"drift": 0.1}, "run.shifts.schedule"), (True, "run.shifts"),
                      ({"schedule": "cassini", "every": 1}, "run.shifts.every")):
        with pytest.raises(ConfigError) as exc:
            two_jobs(bad)
        assert exc.value.path == path and "\n" not in str(exc.value)


PERIOD = 1.0
SHIFTS = {"A": JobShift("A", 0, 0.0, PERIOD, 0.6), "B": JobShift("B", 0, 0.5, PERIOD, 0.6)}


def feed(scheduler, job, first, comm_starts, natural=PERIOD):
    for k, c in enumerate(comm_starts, start=first):
        scheduler.observe(job, k, c, natural)


def test_jobs_on_their_shifts_are_left_alone_also_when_both_run_slower_than_ideal():
    """B's communication starts half a period after A's, as the shifts say: no hold. Both 10%
    slower than ideal (headers, the VM): the pace σ stretches the circle, still no hold."""
    s = ShiftScheduler(SHIFTS, drift=0.1)
    feed(s, "A", 0, [0.6, 1.6, 2.6])
    feed(s, "B", 0, [1.1, 2.1, 3.1])
    assert s.decide() == []
    slow = ShiftScheduler(SHIFTS, drift=0.1)
    feed(slow, "A", 0, [0.66, 1.76, 2.86], natural=1.1)
    feed(slow, "B", 0, [1.21, 2.31, 3.41], natural=1.1)
    assert slow.pace(["A", "B"]) == pytest.approx(1.1)
    assert slow.decide() == []


def test_drift_detected_and_the_job_ahead_held_two_iterations_on():
    """B's last phase began 0.3 of a period late (A + 0.8 where its shift puts it at A + 0.5).
    It is judged once A has begun a phase near it; holding A by 0.3 then realigns them for less
    than holding B by 0.7, so A is held by 0.3 at the iteration after the one it is computing;
    the component is not judged again until A reported the held iteration, and then A and B are
    on their shifts."""
    s = ShiftScheduler(SHIFTS, drift=0.1)
    feed(s, "A", 0, [0.6, 1.6, 2.6])
    feed(s, "B", 0, [1.1, 2.1, 3.4])
    assert s.decide() == []  # nothing of A's near B's newest start yet
    s.observe("A", 3, 3.6, PERIOD)
    (c,) = s.decide()
    assert (c.job, c.iteration) == ("A", 5) and c.delay_s == pytest.approx(0.3)
    s.observe("A", 4, 4.6, PERIOD)
    s.observe("B", 3, 4.4, PERIOD)
    assert s.decide() == []  # still off, but A's hold (iteration 5) is not reported yet
    s.observe("A", 5, 5.6 + 0.3, PERIOD, held=True)
    feed(s, "B", 4, [5.4, 6.4])
    assert s.decide() == []
    assert [(x.job, x.iteration) for x in s.corrections] == [("A", 5)]


def test_a_start_is_judged_against_the_nearest_of_the_others_not_the_last():
    """A's iterations took 0.7 and 0.5 s where B's pace is 0.6: B's newest start (1.45) is 0.75
    after A's last reported one (0.7) but 0.25 after A's next (1.2), where its shift puts it. It is
    not judged against A's old start through a period A did not keep; once A reports 1.2 it is
    on its shift."""
    shifts = {"A": JobShift("A", 0, 0.0, 0.5, 0.3), "B": JobShift("B", 0, 0.25, 0.5, 0.3)}
    s = ShiftScheduler(shifts, drift=0.1)
    s.observe("A", 0, 0.0, 0.6)
    s.observe("A", 1, 0.7, 0.6)
    for k, c in enumerate([0.3, 0.95, 1.45]):
        s.observe("B", k, c, 0.6)
    assert s.errors(["A", "B"], s.pace(["A", "B"]))["A"] == pytest.approx(0.05)  # 0.25 before B, not 0.3
    assert s.decide() == []
    s.observe("A", 2, 1.2, 0.6)
    assert s.decide() == []


def test_a_hold_that_came_late_keeps_the_component_waiting_until_it_was_taken():
    """The worker began the iteration the hold was for before the line came, so it takes it at
    the next one: the iteration asked for, reported without a hold, is no reason to judge again."""
    s = ShiftScheduler(SHIFTS, drift=0.1)
    feed(s, "A", 0, [0.6, 1.6, 2.6, 3.6])
    feed(s, "B", 0, [1.1, 2.1, 3.4])
    (c,) = s.decide()
    assert c.iteration == 5
    s.observe("A", 4, 4.6, PERIOD)
    s.observe("A", 5, 5.6, PERIOD)  # iteration 5 without its hold
    feed(s, "B", 3, [4.4, 5.4])
    assert s.decide() == [] and s.seen["A"].pending == 5
    s.observe("A", 6, 6.6 + c.delay_s, PERIOD, held=True)
    feed(s, "B", 5, [6.4, 7.4])
    assert s.decide() == [] and s.seen["A"].pending is None


def test_drift_within_the_threshold_is_tolerated_on_either_side():
    for late in (-0.08, 0.08):
        s = ShiftScheduler(SHIFTS, drift=0.1)
        feed(s, "A", 0, [0.6, 1.6])
        feed(s, "B", 0, [1.1 + late, 2.1 + late])
        assert s.decide() == [], late
    s = ShiftScheduler(SHIFTS, drift=0.05)
    feed(s, "A", 0, [0.6, 1.6])
    feed(s, "B", 0, [1.1 + 0.08, 2.1 + 0.08])
    (c,) = s.decide()
    assert c.job == "A" and c.delay_s == pytest.approx(0.08)  # B is late: A waits for it


def test_a_job_that_runs_faster_than_the_others_is_held_each_time_it_drifts():
    """B's iterations take 0.9 of A's: it gains 0.1 per iteration on its shift, and the scheduler
    holds it whenever that passes the drift (CASSINI keeps the shifts: the faster job waits)."""
    s = ShiftScheduler(SHIFTS, drift=0.15)
    t_a, t_b, held = 0.6, 1.1, []
    for k in range(12):
        s.observe("A", k, t_a, 1.0)
        s.observe("B", k, t_b, 0.9, held=any(c.job == "B" and c.iteration == k for c in s.corrections))
        for c in s.decide():
            held.append((c.job, c.iteration))
            assert c.job == "B"
        t_a += 1.0
        t_b += 0.9 + sum(c.delay_s for c in s.corrections if c.job == "B" and c.iteration == k + 1)
    assert len(held) >= 2


def test_components_apart_are_judged_apart_and_lone_jobs_never():
    shifts = {**SHIFTS, "C": JobShift("C", 1, 0.0, PERIOD, 0.6)}
    s = ShiftScheduler(shifts, drift=0.1)
    feed(s, "A", 0, [0.6, 1.6])
    feed(s, "B", 0, [1.1, 2.1])
    feed(s, "C", 0, [0.1, 1.3])
    assert s.decide() == []


def test_driver_observes_complete_iterations_only_and_sends_holds_to_every_rank(tmp_path):
    """The driver reads the workers' iteration lines as they are appended (a half-written line
    waits), takes an iteration once every rank reported it (the earliest rank's communication
    start, the slowest rank's time without its hold) and sends each hold to the job's ranks."""
    paths = {job: [str(tmp_path / f"{job}-r{r}.jsonl") for r in range(2)] for job in SHIFTS}
    sent: list[tuple[str, str]] = []
    driver = ShiftDriver(ShiftScheduler(SHIFTS, drift=0.1), paths, lambda job, line: sent.append((job, line)))

    def line(job, rank, k, comm, hold=0.0):
        return json.dumps({"job": job, "rank": rank, "iteration": k, "t_start": comm - 0.6 - hold,
                           "t_comm_start": comm + 0.01 * rank, "t_comm_end": comm + 0.4, "t_end": comm + 0.4,
                           "hold_s": hold}) + "\n"

    for k, (a, b) in enumerate([(0.6, 1.1), (1.6, 2.1), (2.6, 3.4), (3.6, None)]):
        for r in range(2):
            with open(paths["A"][r], "a") as f:
                f.write(line("A", r, k, a))
            if b is not None:
                with open(paths["B"][r], "a") as f:
                    f.write(line("B", r, k, b) if (k, r) != (2, 1) else line("B", r, k, b)[:20])  # rank 1 mid-write
    assert driver.tick() == []  # B's iteration 2 is not complete: A and B are on their shifts
    with open(paths["B"][1], "a") as f:
        f.write(line("B", 1, 2, 3.4)[20:])
    (c,) = driver.tick()
    assert c.job == "A" and sent == [("A", f"DELAY 5 {c.delay_s!r}")]
    assert driver.scheduler.seen["B"].comm_start == pytest.approx(3.4)
    assert driver.scheduler.seen["A"].natural == [pytest.approx(1.0)] * 4


def test_worker_holds_apply_at_the_iteration_due_or_the_first_after():
    holds = Holds(io.StringIO("DELAY 4 0.25\nnonsense\nDELAY x 1\nDELAY 6 -1\nDELAY 7 0.5\n")).start()
    holds._thread.join(2)
    assert holds.take(3) == 0.0
    assert holds.take(5) == 0.25  # came late for 4: held at 5
    assert holds.take(5) == 0.0  # once
    assert holds.take(9) == 0.5

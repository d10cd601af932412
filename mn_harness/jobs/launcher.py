"""Start every job's workers in their hosts, release them together, follow their progress.

All workers connect their rings first and report READY; only then does the harness hand out
one experiment-wide start time t0 (a CLOCK_MONOTONIC value, the same clock in every namespace),
and each job begins at t0 + its start offset. Progress is read from the per-worker JSON-lines
files (flushed each iteration), so it costs the workers nothing. A worker that dies ends the
run with its stderr tail in the error."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from mn_harness import collectives
from mn_harness.config import Experiment
from mn_harness.jobs.errors import JobError
from mn_harness.jobs.ideal import ideal_iteration_s
from mn_harness.jobs.shifts import ShiftDriver, ShiftScheduler, job_shifts
from mn_harness.jobs.specs import worker_specs, worker_stem
from mn_harness.network.cpu_placement import worker_prefix
from mn_harness.network.emulated import EmulatedNetwork
from mn_harness.progress import format_eta, run_eta_s
from mn_harness.worker.spec import WorkerSpec
from mn_harness.worker.threads import realtime_refused
from mn_harness.worker.torch_worker import sockets_file

WORKER_MODULE = "mn_harness.worker"  # also the marker `mn-harness clean` matches
START_MARGIN_S = 0.3


@dataclass
class WorkerProcess:
    job: str
    rank: int
    host: str
    spec: WorkerSpec
    proc: subprocess.Popen
    stderr_path: Path

    @property
    def stdout(self) -> IO[bytes]:
        assert self.proc.stdout is not None  # started with stdout=PIPE
        return self.proc.stdout

    @property
    def stdin(self) -> IO[bytes]:
        assert self.proc.stdin is not None  # started with stdin=PIPE
        return self.proc.stdin

    def stderr_tail(self, lines: int = 3) -> str:
        try:
            text = self.stderr_path.read_text().strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])


def count_lines(path: str) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


class JobLauncher:
    def __init__(self, experiment: Experiment, network: EmulatedNetwork, raw_dir: Path,
                 cc_names: dict[str, str], log: Callable[[str], None] = print,
                 on_change: Callable[[], None] = lambda: None):
        self.experiment = experiment
        self.network = network
        self.raw_dir = raw_dir
        self.cc_names = cc_names  # job -> kernel CC name
        self.log = log
        self.workers: list[WorkerProcess] = []
        self._on_change = on_change
        self.t0: float | None = None
        self.shift_driver: ShiftDriver | None = None  # run.shifts: keeps the jobs on CASSINI's shifts

    def specs(self) -> list[tuple[str, WorkerSpec]]:
        return worker_specs(self.experiment, self.network.plan, self.raw_dir, self.cc_names)

    def start(self) -> None:
        python = os.environ.get("MN_HARNESS_PYTHON") or sys.executable
        try:
            self.raw_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise JobError(f"cannot write the workers' files to {self.raw_dir}: {exc.strerror}") from None
        prefix = worker_prefix(self.experiment.run.emulation.cpu_placement)
        specs = self.specs()
        if any(spec.realtime_main for _, spec in specs) and (refused := realtime_refused()) is not None:
            self.log(f"run.emulation.worker_main_thread realtime: the kernel refuses SCHED_FIFO ({refused}); "
                     f"the workers' main threads stay in the fair class")
        for host, spec in specs:
            stem = worker_stem(self.raw_dir, spec.job, spec.rank)
            spec_path = stem.with_name(stem.name + ".spec.json")
            stderr_path = stem.with_name(stem.name + ".stderr")
            try:
                spec.save(spec_path)
                stderr = open(stderr_path, "w")  # noqa: SIM115 - the worker's; closed below
            except OSError as exc:  # a full or read-only results disk
                raise JobError(f"cannot write the workers' files to {self.raw_dir}: {exc.strerror}") from None
            node = self.network.nodes[host]
            # the worker is part of the installed package: no PYTHONPATH, no checkout needed
            with stderr:
                proc = node.popen([*prefix, python, "-u", "-m", WORKER_MODULE, str(spec_path)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=stderr, cwd=str(self.raw_dir))
            self.workers.append(WorkerProcess(spec.job, spec.rank, host, spec, proc, stderr_path))
            self._on_change()

    def release(self, timeout_s: float | None = None) -> float:
        """Wait until every worker is READY, then send all of them the same start time.
        Default timeout: 30 s, plus 10 s per torch worker (importing torch and the rendezvous
        take seconds each on a loaded 2-core machine)."""
        self.wait_ready(timeout_s)
        return self.go(time.monotonic() + START_MARGIN_S)

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Until every worker has reported READY (release's first half; a server of a cluster
        run waits here, and its head sends the start time: mn_harness.cluster)."""
        if timeout_s is None:
            timeout_s = 30.0 + 10.0 * sum(collectives.get(w.spec.collective).engine == collectives.TORCH
                                          for w in self.workers)
        pending = {w.stdout.fileno(): w for w in self.workers}
        deadline = time.monotonic() + timeout_s
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                w = next(iter(pending.values()))
                raise JobError(f"{w.job} rank {w.rank} on {w.host} not ready after {timeout_s:.0f}s: "
                               f"{w.stderr_tail() or 'no output'}")
            ready, _, _ = select.select(list(pending), [], [], min(left, 0.5))
            for fd in ready:
                w = pending[fd]
                line = w.stdout.readline().decode().strip()
                if line == "READY":
                    del pending[fd]
                elif not line and w.proc.poll() is not None:
                    raise JobError(f"{w.job} rank {w.rank} on {w.host} exited with code "
                                   f"{w.proc.returncode} before the start: {w.stderr_tail()}")

    def go(self, t0: float) -> float:
        """Send every worker the start time `t0` (CLOCK_MONOTONIC here); returns it."""
        self.t0 = t0
        for w in self.workers:
            w.stdin.write(f"GO {self.t0!r}\n".encode())
            w.stdin.flush()
        if self.experiment.run.shifts.enabled:
            paths: dict[str, list[str]] = {}
            for w in self.workers:
                paths.setdefault(w.job, []).append(w.spec.iterations_path)
            scheduler = ShiftScheduler(job_shifts(self.experiment, self.network.plan), self.experiment.run.shifts.drift)
            self.shift_driver = ShiftDriver(scheduler, paths, self.send_line)
        return self.t0

    def send_line(self, job: str, line: str) -> None:
        """One line to every worker of `job` that is still running (the shift scheduler's holds)."""
        for w in self.workers:
            if w.job != job or w.proc.poll() is not None:
                continue
            try:
                w.stdin.write(f"{line}\n".encode())
                w.stdin.flush()
            except OSError:  # it exited meanwhile: its iterations are over
                pass

    def socket_cc(self) -> dict[str, list[str]]:
        """Per torch job, the congestion controls the kernel reported on its workers'
        connections (each worker checked them against the job's before READY)."""
        seen: dict[str, set[str]] = {}
        for w in self.workers:
            if collectives.get(w.spec.collective).engine != collectives.TORCH:
                continue
            try:
                sockets = json.loads(sockets_file(w.spec).read_text())
            except (OSError, ValueError):
                sockets = []
            seen.setdefault(w.job, set()).update(str(s.get("cc")) for s in sockets)
        return {job: sorted(names) for job, names in seen.items()}

    def progress(self) -> dict[str, int]:
        """Iterations completed by every rank of each job."""
        done = {}
        for job in self.experiment.jobs:
            ranks = [w for w in self.workers if w.job == job.name]
            done[job.name] = min(count_lines(w.spec.iterations_path) for w in ranks)
        return done

    def wait(self, timeout_s: float, report_every_s: float = 2.0,
             on_tick: Callable[[], None] | None = None, check: Callable[[], None] | None = None,
             note: Callable[[], str] | None = None) -> None:
        """Until every worker has exited 0 (JobError when one dies or the run times out);
        `on_tick` is called at every poll (the session's per-iteration callbacks), `check` too
        (the data plane's check_alive: it raises when a switch died); `note` adds to each
        progress line (the fidelity monitors' warnings)."""
        deadline = time.monotonic() + timeout_s
        last_report = 0.0
        totals = {j.name: j.iterations for j in self.experiment.jobs}
        while True:
            if check is not None:
                check()
            failed = [w for w in self.workers if w.proc.poll() not in (None, 0)]
            if failed:
                w = failed[0]
                raise JobError(f"{w.job} rank {w.rank} on {w.host} died (exit {w.proc.returncode}): "
                               f"{w.stderr_tail() or 'no stderr'}")
            if all(w.proc.poll() == 0 for w in self.workers):
                self.log(self._progress_line(totals))
                return
            now = time.monotonic()
            if now > deadline:
                raise JobError(f"run timed out after {timeout_s:.0f}s: {self._progress_line(totals)}")
            if now - last_report >= report_every_s:
                self.log(self._progress_line(totals) + (note() if note is not None else ""))
                last_report = now
            if on_tick is not None:
                on_tick()
            if self.shift_driver is not None:
                for c in self.shift_driver.tick():
                    self.log(f"shifts: {c.job} off its CASSINI shift, held {c.delay_s * 1e3:.0f} ms "
                             f"at iteration {c.iteration}")
            time.sleep(0.2)

    def _progress_line(self, totals: dict[str, int]) -> str:
        done = self.progress()
        elapsed = time.monotonic() - (self.t0 or time.monotonic())
        parts = "  ".join(f"{job} {done[job]}/{totals[job]}" for job in totals)
        eta = run_eta_s(done, totals, elapsed)
        return f"[{elapsed:6.1f}s] {parts}" + (f"  ETA {format_eta(eta)}" if eta is not None else "")

    def default_timeout(self) -> float:
        """Generous: 5x the ideal run time of the slowest job, plus a margin."""
        plan = self.network.plan
        longest = 0.0
        for job in self.experiment.jobs:
            ideal, _ = ideal_iteration_s(job, plan)
            longest = max(longest, job.start_offset_s + 5 * ideal * job.iterations)
        return longest + 30.0

    def pids(self) -> list[int]:
        """The pids of the workers still running (one that ended may have a new owner)."""
        return [w.proc.pid for w in self.workers if w.proc.poll() is None]

    def stop(self) -> None:
        """Idempotent: TERM, short grace, then KILL every worker still alive."""
        alive = [w for w in self.workers if w.proc.poll() is None]
        for w in alive:
            _signal(w.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 2.0
        for w in alive:
            try:
                w.proc.wait(max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal(w.proc.pid, signal.SIGKILL)
                w.proc.wait(2)
        for w in self.workers:
            for stream in (w.proc.stdin, w.proc.stdout):
                if stream:
                    try:
                        stream.close()
                    except OSError:
                        pass


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass

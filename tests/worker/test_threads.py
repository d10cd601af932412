"""worker/threads.py on the real kernel, each in a process of its own (a real-time class must
not leak into pytest's): a real-time main thread, the threads it starts back in the fair class
once named, a compute sleep real-time only while it sleeps, and the probe the harness runs
before it asks for the real-time class."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import json, os, resource, threading, time
from mn_harness.worker import threads
if os.geteuid() != 0:  # an unprivileged process: no real-time priority may be asked for
    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
out = {"probe": threads.realtime_refused(), "main_after_probe": os.sched_getscheduler(0)}
out["enter"] = threads.enter_realtime()
out["main"] = os.sched_getscheduler(0)
out["main_priority"] = os.sched_getparam(0).sched_priority
def started():
    out["inherited"] = os.sched_getscheduler(0)
    threads.name_thread(threads.SEND)
    out["named"] = os.sched_getscheduler(0)
    out["comm"] = open("/proc/thread-self/comm").read().strip()
t = threading.Thread(target=started)
t.start()
t.join()
threads.stay_fair()
main_tid = threading.get_native_id()
def look():
    time.sleep(0.15)
    out["sleeping"] = os.sched_getscheduler(main_tid)
watcher = threading.Thread(target=look)
watcher.start()
compute = threads.ComputeSleep(True, "job rank 0")
compute(0.4)
watcher.join()
compute(0.01)
out["awake"] = os.sched_getscheduler(0)
print(json.dumps(out))
"""


def run_script(argv: list[str]) -> dict:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.root
def test_the_main_thread_runs_real_time_and_the_threads_it_starts_do_not():
    out = run_script([sys.executable, "-c", SCRIPT])
    assert out["probe"] is None and out["main_after_probe"] == os.SCHED_OTHER  # the probe's thread only
    assert out["enter"] is None
    assert (out["main"], out["main_priority"]) == (os.SCHED_FIFO, 1)
    assert out["inherited"] == os.SCHED_FIFO  # what the kernel gives a new thread ...
    assert out["named"] == os.SCHED_OTHER and out["comm"] == "mnh-send"  # ... and what naming it leaves
    assert (out["sleeping"], out["awake"]) == (os.SCHED_FIFO, os.SCHED_OTHER)  # a compute sleep


def test_a_refused_real_time_class_is_a_reason_and_changes_nothing(unprivileged_python):
    done = subprocess.run(unprivileged_python("-c", SCRIPT), capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert isinstance(out["probe"], str) and "not permitted" in out["probe"]
    assert out["enter"] == out["probe"]
    assert out["main"] == out["inherited"] == out["named"] == out["sleeping"] == out["awake"] == os.SCHED_OTHER
    assert done.stderr.count("compute phases wake in the fair class") == 1  # said once, then slept fair

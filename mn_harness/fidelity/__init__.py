"""Is the emulation faithful? Mininet-HiFi's invariants, checked on every run.

A real link with packets queued sends them back to back; a real host has a CPU of its own for
each worker. An emulator on a small machine falls behind both without saying so: an HTB timer
or a softirq that comes late stretches a gap on a link, a worker that waits for a core stretches
a compute phase. The monitors here measure those invariants while the jobs run (link: the
kernel program on every shaped egress, link.py; host: every core's idle, steal, softirq and
run queue, host.py; workers: how far compute phases overshot, workers.py) and the verdict
(verdict.py) says whether the run was faithful, and if not, which invariant broke, where and by
how much."""

"""The callbacks a script gives a session (mn_harness.network(...), run_experiment's options)
and the promise about when on_iteration runs.

Hooks get the session: `on_network_up(session)` once the network is built, `on_jobs_started
(session)` after the common start, `on_iteration(session, job, iteration)` when every rank of a
job has finished an iteration. Its own module: the session owns bring-up and teardown, this is
the user's side of it; IterationWatcher keeps the once-per-(job, iteration), in-order promise
in one place, apart from how progress is read (the launcher) and how often (its wait loop)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mn_harness.session import Session

Hook = Callable[["Session"], None]
IterationHook = Callable[["Session", str, int], None]


class IterationWatcher:
    """Turns progress counts (iterations every rank of each job has finished so far) into
    on_iteration calls: one per (job, iteration), in order, even for several iterations that
    finished between two polls, so a hook runs while later iterations go on."""

    def __init__(self, hooks: list[IterationHook]):
        self.hooks = hooks  # the session's own list: hooks added later are called too
        self.seen: dict[str, int] = {}  # per job, iterations whose hooks were called

    def poll(self, session: Session, progress: dict[str, int]) -> None:
        for job, done in progress.items():
            for iteration in range(self.seen.get(job, 0), done):
                self.seen[job] = iteration + 1
                for hook in self.hooks:
                    hook(session, job, iteration)

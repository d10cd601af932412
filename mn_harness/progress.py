"""Estimated time to completion for the progress lines of a run and of a sweep.

A run's estimate takes each job at its own pace so far (iterations done / time since the
common start) and reports the slowest job; a sweep's takes the mean duration of its runs so far.
Both are None until there is a pace to go by."""

from __future__ import annotations


def run_eta_s(done: dict[str, int], totals: dict[str, int], elapsed_s: float) -> float | None:
    """Seconds until the slowest job is done; None before every job finished an iteration."""
    if elapsed_s <= 0 or any(done.get(job, 0) <= 0 for job in totals):
        return None
    return max((totals[job] - done[job]) * elapsed_s / done[job] for job in totals)


def sweep_eta_s(done: int, todo: int, elapsed_s: float) -> float | None:
    """Seconds until the sweep's `todo` runs are done, `done` of them in `elapsed_s`."""
    if done <= 0 or elapsed_s <= 0:
        return None
    return (todo - done) * elapsed_s / done


def format_eta(seconds: float) -> str:
    """`42s`, `3m05s`."""
    whole = max(0, int(round(seconds)))
    return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s"

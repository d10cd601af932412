"""The project's targets for the MLTCP variants by name (issue 33), read off bench/reproduce.py's
rows: each target names a scenario of the suite, a row (a CC label) and a measure of it, and
reads "met" when the measure over the runs is at or above its bound, "not met" when below, and
"not measured" when the bench folder has no such row. Beside the verdict: the measure's 95% CI
and whether the CI's lower end clears the bound too (a mean over 3 runs may meet a bound that its
CI does not), the runs and how many were faithful. Pure functions over the rows
(repro_table.scenario_rows), no runs; docs/reproduction.md#the-targets says why each target."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mn_harness.report.headline import APART_WITHIN, apart_by
from mn_harness.results.stats import mean_ci95, wilson_ci95

MET, NOT_MET, NOT_MEASURED = "met", "not met", "not measured"

# what a target measures: a row's list of per-round values (their mean with its t interval), or
# the share of runs apart within APART_WITHIN iterations (with its Wilson interval)
GAIN_MEAN, GAIN_P99, APART = "gain_mean", "gain_p99", "apart"
MEASURE_TEXT = {GAIN_MEAN: "mean gain over the base CC", GAIN_P99: "p99 gain over the base CC",
                APART: f"share of runs apart within {APART_WITHIN} iterations"}


@dataclass(frozen=True)
class Target:
    """`measure` of the row `cc` in `scenario` at least `bound`."""

    scenario: str
    cc: str
    measure: str
    bound: float
    why: str  # the target's group, as the issue states it

    @property
    def text(self) -> str:
        bound = f"{self.bound * 100:.0f}%" if self.measure == APART else f"{self.bound:g}x"
        return f"{MEASURE_TEXT[self.measure]} ≥ {bound}"


DEMO = "4jobs-ecn-sync-q400-500m"  # make demo's scenario (topologies/dumbbell-4jobs-ecn.yaml)
BY_NAME = "defaults on the demo"
TUNED_WHERE = "defaults where the tuned variants gain"
NO_SCHEDULE = "no tail harm where no schedule exists"

TARGETS: tuple[Target, ...] = (
    Target(DEMO, "mltcp-dctcp", GAIN_MEAN, 1.3, BY_NAME),
    Target(DEMO, "mltcp-dctcp", APART, 0.8, BY_NAME),
    Target("3jobs-slack-sync", "mltcp-reno", GAIN_MEAN, 1.2, TUNED_WHERE),
    Target("3jobs-slack-sync", "mltcp-cubic", GAIN_MEAN, 1.2, TUNED_WHERE),
    *(Target(scenario, cc, GAIN_P99, 0.95, NO_SCHEDULE)
      for scenario in ("partial", "overload") for cc in ("mltcp-reno", "mltcp-cubic")),
    # DCTCP needs the switch's marks: the same scenarios with ECN at the bottleneck
    *(Target(scenario, "mltcp-dctcp", GAIN_P99, 0.95, NO_SCHEDULE) for scenario in ("partial-ecn", "overload-ecn")),
)


@dataclass(frozen=True)
class Verdict:
    target: Target
    verdict: str
    value: float | None = None
    interval: tuple[float, float] | None = None  # 95%; None for one run or nothing measured
    runs: int = 0
    faithful: int = 0

    @property
    def ci_clears(self) -> bool | None:
        """Does the whole 95% CI lie at or above the bound? None without a CI."""
        return None if self.interval is None else self.interval[0] >= self.target.bound


def measured(target: Target, row: dict) -> tuple[float, tuple[float, float] | None, int] | None:
    """The target's measure of a row: (value, 95% interval or None, runs it is over); None when
    the row has no such values (a base CC's row has no gain)."""
    if target.measure == APART:
        seps = [s for s in row.get("apart", []) if apart_by(s) is not None]
        if not seps:
            return None
        early = sum(1 for s in seps if apart_by(s))
        return early / len(seps), wilson_ci95(early, len(seps)), len(seps)
    values = list(row.get(target.measure) or [])
    if not values:
        return None
    m, _, half = mean_ci95(values)
    return m, None if half is None else (m - half, m + half), len(values)


def evaluate(target: Target, rows: Sequence[dict]) -> Verdict:
    """The target against the bench's rows (those of every scenario)."""
    row = next((r for r in rows if r["scenario"] == target.scenario and r["cc"] == target.cc), None)
    got = None if row is None else measured(target, row)
    if row is None or got is None:
        return Verdict(target, NOT_MEASURED)
    value, interval, n = got
    faithful = sum(v == "faithful" for v in row.get("faithful", []))
    return Verdict(target, MET if value >= target.bound else NOT_MET, value, interval, n, faithful)


def evaluate_all(rows: Sequence[dict], targets: Sequence[Target] = TARGETS) -> list[Verdict]:
    return [evaluate(t, rows) for t in targets]


HEADERS = ["target", "scenario", "row", "measured [95% CI]", "verdict", "CI clears the bound", "runs", "faithful"]


def format_verdict(v: Verdict) -> list[str]:
    t = v.target
    if v.value is None:
        value = "-"
    elif t.measure == APART:
        value = f"{v.value * 100:.0f}% of {v.runs}" + \
            ("" if v.interval is None else f" [{v.interval[0] * 100:.0f}–{v.interval[1] * 100:.0f}]")
    else:
        value = f"{v.value:.3f}x" + ("" if v.interval is None else f" [{v.interval[0]:.3f}–{v.interval[1]:.3f}]")
    clears = "-" if v.ci_clears is None else ("yes" if v.ci_clears else "no")
    return [f"{t.why}: {t.text}", t.scenario, t.cc, value, v.verdict, clears, str(v.runs) if v.runs else "-",
            f"{v.faithful} of {v.runs}" if v.runs else "-"]


def targets_table(rows: Sequence[dict]) -> str:
    from mn_harness.report.markdown import markdown_table
    return markdown_table(HEADERS, [format_verdict(v) for v in evaluate_all(rows)])

"""The adaptive step's rule in Python (tests/cc/adapt_rule.py, the copy the root tests check the
kernel against) does what docs/cc.md#the-adaptive-step says, on made-up rates."""

from __future__ import annotations

import re

from mn_harness.cc.variants import ADAPT_BACKOFF_MAX, ADAPT_PATIENCE
from tests.cc.adapt_rule import (
    BACKOFF_BITS_MAX,
    CA_CWR,
    CA_DISORDER,
    CA_LOSS,
    CA_OPEN,
    CA_RECOVERY,
    CALM_SHIFT,
    LOSSES_MAX,
    RELAPSE,
    adapt_states,
    adapt_trace,
    factor_fp,
    loss_episodes,
    row_rate,
)

FAST, SLOW = 25_000, 15_000  # x1024 bytes per us: 200 Mbit/s, and 0.6 of it (a collision)


def rates_of(kinds: str) -> list[int]:
    """A made-up run's rates: F fast, anything else slow."""
    return [FAST if k == "F" else SLOW for k in kinds]


def run(kinds: str) -> str:
    return adapt_states(rates_of(kinds))


def test_row_rate_is_the_kernels_integer_rate():
    row = {"bytes": 2_000_000, "start_s": 1.0, "end_s": 1.08}
    assert row_rate(row) == 2_000_000 * 1024 // 80_000
    assert row_rate({"bytes": 5, "start_s": 1.0, "end_s": 1.0}) == 5 * 1024  # 0 us: 1 us


def test_a_steady_socket_searches_patience_plus_one_iterations_then_runs_as_the_base_cc():
    assert run("F" * 20) == "S" * (ADAPT_PATIENCE + 1) + "b" * 12


def test_two_slow_iterations_start_a_search_whose_best_is_the_usual_rate():
    got = run("F" * 12 + "SS" + "F" * 10)
    # 9 searching, 5 as the base CC, the search from the relapse: 8 iterations that only get
    # back to the usual rate are no progress
    assert got == "S" * 9 + "b" * 5 + "S" * ADAPT_PATIENCE + "b" * 3


def test_each_relapse_doubles_the_slow_iterations_the_next_one_needs():
    head = "F" * 12 + "SS" + "F" * 10  # one relapse: the next needs 4
    assert re.fullmatch(r"S{9}b{5}S{8}b{3}", run(head))
    assert run(head + "SSS" + "F").endswith("b" * 5)
    assert run(head + "SSSS" + "F").endswith("bbbbS" + "S")


def fewest_slow_that_start_a_search(kinds: str) -> int:
    return next(n for n in range(1, ADAPT_BACKOFF_MAX + 2) if run(kinds + "S" * n).endswith("S"))


def test_the_backoff_doubles_up_to_its_cap():
    kinds, seen = "F" * 12, []
    for _ in range(8):  # relapse after relapse
        n = fewest_slow_that_start_a_search(kinds)
        seen.append(n)
        kinds += "S" * n + "F" * (ADAPT_PATIENCE + 2)
    assert seen == [min(RELAPSE << i, ADAPT_BACKOFF_MAX) for i in range(8)] == \
        [2, 4, 8, 16, 32, 64, 64, 64]


def test_progress_in_a_search_does_not_reset_the_backoff():
    kinds = "F" * 12
    for _ in range(3):  # three relapses: the next needs 16
        kinds += "S" * fewest_slow_that_start_a_search(kinds) + "F" * (ADAPT_PATIENCE + 2)
    assert fewest_slow_that_start_a_search(kinds) == 16
    rates = rates_of(kinds + "S" * 16)
    assert adapt_states(rates).endswith("bS")
    # the search's rate beats the usual one by more than ADAPT_GAIN, as a searching socket's does
    # where it takes the link from rivals running as their base CC: the next search needs 32
    rates += [2 * FAST] * (ADAPT_PATIENCE + 1) + [FAST] * 3
    assert adapt_states(rates).endswith("S" * (ADAPT_PATIENCE + 1) + "bbbb")
    assert adapt_states(rates + [FAST // 2] * 31).endswith("b" * 32)
    assert adapt_states(rates + [FAST // 2] * 32).endswith("bS")


def test_the_usual_rate_is_the_base_ccs_own_not_the_searchs():
    # the search ends on a fast iteration (its rate is no measure of the base CC); two slower
    # base iterations after it are the base CC's usual rate, not a relapse
    rates = [2 * FAST] * (ADAPT_PATIENCE + 1) + [FAST] * 4
    assert adapt_states(rates) == "S" * (ADAPT_PATIENCE + 1) + "b" * 5
    assert adapt_states(rates + [SLOW, SLOW]).endswith("bbS")


def run_t(kinds: str) -> str:
    """F fast, S slow, T fast but with a retransmission timeout, t slow with one."""
    return adapt_states([FAST if k in "FT" else SLOW for k in kinds], [k in "Tt" for k in kinds])


RELAPSE_SEARCH = "F" * 12 + "SS"  # the first search, 3 iterations as the base CC, a relapse
IN_RELAPSE = "S" * 9 + "b" * 5  # the states of RELAPSE_SEARCH's iterations


def test_a_timeout_ends_a_relapse_search_at_once():
    assert run_t(RELAPSE_SEARCH + "T" + "F" * 5) == IN_RELAPSE + "S" + "b" * 6
    assert run_t(RELAPSE_SEARCH + "FFt" + "F" * 3) == IN_RELAPSE + "SSS" + "bbbb"
    # however much the iteration gained: progress does not save the search
    rates = [FAST] * 12 + [SLOW] * 2 + [2 * FAST, 4 * FAST]
    assert adapt_states(rates, [False] * 15 + [True]).endswith("bSSb")


def test_a_timeout_in_the_first_search_changes_nothing():
    # all jobs starting at once time out whatever their CC: the first search goes on
    assert run_t("FFFT" + "F" * 10) == run("FFFS" + "F" * 10) == "S" * 9 + "b" * 6
    assert run_t("T" * 12) == run("F" * 12)


def test_a_timeout_as_the_base_cc_changes_nothing():
    assert run_t("F" * 12 + "TTTT") == run("F" * 16)


def test_a_relapse_search_a_timeout_ended_doubles_the_next_relapses_count_once_more():
    # the relapse doubled it (4), the timeout doubles it again: the next needs 8
    kinds = RELAPSE_SEARCH + "FFt" + "F" * 6
    assert run_t(kinds) == IN_RELAPSE + "SSS" + "b" * 7
    assert run_t(kinds + "S" * 7).endswith("b")
    assert run_t(kinds + "S" * 8).endswith("bS")


def test_without_timeouts_the_rule_is_the_one_before():
    kinds = "F" * 12 + "SS" + "F" * 10 + "SSSS" + "FF"
    assert run_t(kinds) == run(kinds)


SLOPE, INTERCEPT = 32.0, 1.0  # the defaults by name (variants.DEFAULT_SLOPE, DEFAULT_INTERCEPT)
BELIEVED = 2_000_000


def steep(done: int, losses: int = 0, damp: int = 0, searching: bool = True, count: int = 0,
          damp_after: int = 0, backoff: int = 0) -> int:
    return factor_fp(done, BELIEVED, searching, SLOPE, INTERCEPT, losses, damp, count, damp_after, backoff)


def test_fast_recovery_and_timeouts_are_loss_episodes_ecn_is_not():
    assert loss_episodes([CA_DISORDER, CA_RECOVERY, CA_OPEN, CA_LOSS, CA_LOSS, CA_OPEN]) == 3
    assert loss_episodes([CA_CWR, CA_OPEN, CA_CWR, CA_DISORDER, CA_OPEN]) == 0  # DCTCP's marks
    assert loss_episodes([CA_RECOVERY] * 300) == LOSSES_MAX == 255  # saturates (8 bits)


def test_f_rises_from_the_intercept_to_slope_plus_intercept_without_losses():
    assert [steep(d) for d in (0, BELIEVED // 2, BELIEVED, 2 * BELIEVED)] == \
        [1024, 17 * 1024, 33 * 1024, 33 * 1024]  # the ratio is capped at 1
    assert factor_fp(BELIEVED, 0, True, SLOPE, INTERCEPT, 3, 1) == 1024  # nothing learned yet


def test_each_loss_halves_fs_part_above_one_damp_times():
    # damp 1: 33 -> 17 -> 9 -> 5 -> 3 -> 2 (F - 1 halved per loss)
    assert [steep(BELIEVED, n, 1) for n in range(6)] == [1024 * f for f in (33, 17, 9, 5, 3, 2)]
    # damp 2: a quarter per loss; half-way through the iteration (F 17): 17 -> 5 -> 2
    assert [steep(BELIEVED // 2, n, 2) for n in range(3)] == [1024 * f for f in (17, 5, 2)]
    # in fixed point: the part above 1 is shifted, not F
    assert steep(BELIEVED // 3, 1, 1) == 1024 + (steep(BELIEVED // 3) - 1024) // 2


def test_damp_0_is_the_undamped_rule_and_the_base_cc_stays_at_one():
    for done in (0, BELIEVED // 3, BELIEVED):
        assert {steep(done, n, 0) for n in range(LOSSES_MAX + 1)} == {steep(done)}
    assert {steep(BELIEVED, n, d, searching=False) for n in range(4) for d in range(9)} == {1024}


def test_past_the_search_f_follows_the_held_slope_undamped():
    def held(done: int, losses: int = 0, damp: int = 0) -> int:
        return factor_fp(done, BELIEVED, False, SLOPE, INTERCEPT, losses, damp, hold=4.0)
    assert [held(d) for d in (0, BELIEVED // 2, BELIEVED, 2 * BELIEVED)] == [1024, 3 * 1024, 5 * 1024, 5 * 1024]
    assert {held(BELIEVED, n, d) for n in range(4) for d in range(9)} == {5 * 1024}  # losses do not damp it
    assert factor_fp(BELIEVED, 0, False, SLOPE, INTERCEPT, hold=4.0) == 1024  # nothing learned yet
    assert factor_fp(BELIEVED, BELIEVED, True, SLOPE, INTERCEPT, hold=4.0) == steep(BELIEVED)  # searching: the slope


def test_many_losses_with_a_large_damp_leave_the_base_ccs_increase_and_nothing_overflows():
    assert steep(BELIEVED, 1, 8) == 1024 + (32 * 1024 >> 8)  # one loss: F - 1 = 1/8
    assert steep(BELIEVED, 2, 8) == 1024  # two losses: the base CC's increase
    assert steep(BELIEVED, 99, 8) == 1024  # count and shift saturate
    # the steepest F the spec allows (slope 63 + intercept 1 = 64) damps to 1 once shifted past 16
    assert factor_fp(BELIEVED, BELIEVED, True, 63.0, 1.0, 9, 2) == 1024
    assert factor_fp(BELIEVED, BELIEVED, True, 63.0, 1.0, 7, 2) == 1024 + (63 * 1024 >> 14)
    # damp 1: 15 losses leave F - 1 = 1/1024 of the steepest F, 16 nothing
    assert factor_fp(BELIEVED, BELIEVED, True, 63.0, 1.0, 15, 1) == 1024 + (63 * 1024 >> 15) == 1025
    assert factor_fp(BELIEVED, BELIEVED, True, 63.0, 1.0, 300, 1) == 1024


def counts(kinds: str) -> list[int]:
    """The count during each iteration (and after the last) of a made-up run."""
    return [s.count for s in adapt_trace(rates_of(kinds))]


def test_the_count_is_the_iterations_since_the_last_progress_during_each_iteration():
    # steady: the first iteration is progress (no best yet), then none: 0, 0, 1, ... until the
    # patience ends the search (count back to 0 as the base CC)
    assert counts("F" * 10) == [0, 0, 1, 2, 3, 4, 5, 6, 7, 0, 0]
    # slow, then fast: the first fast iteration is progress, the count starts over after it
    assert counts("SSSSFFFF") == [0, 0, 1, 2, 3, 0, 1, 2, 3]
    # a search's count never reaches the patience: damp_after = ADAPT_PATIENCE never damps the first search
    trace = adapt_trace(rates_of("SSFFFFFFFFFFFSSFFFFFFFFF"))
    assert max(s.count for s in trace if s.searching) == ADAPT_PATIENCE - 1


def test_damp_after_k_leaves_the_first_k_iterations_since_progress_undamped():
    for k in (1, 2, 3):
        assert [steep(BELIEVED, 2, 1, count=c, damp_after=k) for c in range(k)] == [33 * 1024] * k
        assert [steep(BELIEVED, 2, 1, count=c, damp_after=k) for c in range(k, ADAPT_PATIENCE)] == \
            [9 * 1024] * (ADAPT_PATIENCE - k)  # 33 -> 17 -> 9: damped as damp_after 0 damps
    # damp_after 0: today's rule, whatever the count
    assert {steep(BELIEVED, 2, 1, count=c) for c in range(ADAPT_PATIENCE)} == {9 * 1024}
    # it only holds the damping back: no losses, or damp 0, or the base CC: as before
    assert steep(BELIEVED, 0, 1, count=5, damp_after=2) == steep(BELIEVED, 3, 0, count=5, damp_after=2) \
        == 33 * 1024
    assert steep(BELIEVED, 2, 1, searching=False, count=5, damp_after=2) == 1024


def test_a_relapses_search_is_damped_from_its_first_iteration_the_first_search_after_damp_after():
    # the backoff tells them apart: 0 in the first search, 1 or more in a search a relapse started
    trace = adapt_trace(rates_of("F" * 12 + "SS" + "FFFF"))
    assert {s.backoff for s in trace[:12] if s.searching} == {0}
    relapse = next(s for s in trace[12:] if s.searching)
    assert relapse.backoff == 1 and relapse.count == 0
    for k in (1, 2, 3):
        assert steep(BELIEVED, 2, 1, count=0, damp_after=k, backoff=0) == 33 * 1024
        assert [steep(BELIEVED, 2, 1, count=c, damp_after=k, backoff=b) for c in range(k) for b in (1, 3)] == \
            [9 * 1024] * (2 * k)  # as damp_after 0 damps
    # without losses, or damp 0, or as the base CC: the backoff changes nothing
    assert steep(BELIEVED, 0, 1, backoff=2, damp_after=2) == steep(BELIEVED, 2, 0, backoff=2, damp_after=2) \
        == 33 * 1024
    assert steep(BELIEVED, 2, 1, searching=False, backoff=2) == 1024


def calm_run(kinds: str, losses: list[int], calm_by: int) -> str:
    return adapt_states(rates_of(kinds), None, losses, calm_by)


def test_a_first_search_whose_losses_never_fall_ends_at_calm_by_and_backs_off_to_the_most():
    """Losses that stay high (no schedule) end the first search at iteration calm_by (not before,
    not at the patience), and then a new search needs ADAPT_BACKOFF_MAX slow iterations in a row."""
    kinds = "F" * 12 + "SS" + "F" * 4
    lossy = [3, 12, 9, 7, 5, 6, 8, 9] + [4] * 10
    assert calm_run(kinds, lossy, 0) == run(kinds)  # off: the rule without it
    assert calm_run(kinds, lossy, 6) == "S" * 6 + "b" * 13  # and the two slow ones start nothing
    assert calm_run(kinds, lossy, 3) == "S" * 3 + "b" * 16
    trace = adapt_trace(rates_of(kinds), None, lossy, 6)
    assert trace[6].backoff == BACKOFF_BITS_MAX and min(RELAPSE << trace[6].backoff, ADAPT_BACKOFF_MAX) \
        == ADAPT_BACKOFF_MAX
    slow = "F" * 12 + "S" * ADAPT_BACKOFF_MAX + "F"  # the most slow iterations in a row do, one fewer not
    assert calm_run(slow, [9] * len(slow), 6) == "S" * 6 + "b" * (6 + ADAPT_BACKOFF_MAX) + "SS"
    fewer = "F" * 12 + "S" * (ADAPT_BACKOFF_MAX - 1) + "F"
    assert calm_run(fewer, [9] * len(fewer), 6) == "S" * 6 + "b" * (len(fewer) - 5)


def test_two_calm_iterations_in_a_row_an_eighth_of_the_worst_ones_losses_or_fewer_keep_the_search():
    """Two iterations in a row whose loss episodes fell to the most so far >> CALM_SHIFT keep the
    search (the patience ends it); one more episode in either does not, nor does one calm iteration
    alone (losses fall now and then for one iteration where no schedule exists), nor a fall after
    calm_by."""
    kinds, worst = "F" * 20, 3 << CALM_SHIFT
    patience = "S" * (ADAPT_PATIENCE + 1) + "b" * 12
    cut = "S" * 6 + "b" * 15
    assert calm_run(kinds, [0, worst, 16, 3, 3] + [9] * 15, 6) == patience  # 3 <= worst >> CALM_SHIFT
    assert calm_run(kinds, [0, worst, 16, 4, 3] + [9] * 15, 6) == cut
    assert calm_run(kinds, [0, worst, 16, 3, 4] + [9] * 15, 6) == cut
    assert calm_run(kinds, [0, worst, 0, 16, 0, 16, 0] + [9] * 13, 6) == cut  # never two in a row
    assert calm_run(kinds, [0, worst, 16, 9, 9, 0, 0] + [9] * 13, 6) == cut  # the second one at 7
    assert calm_run(kinds, [0, worst, 16, 9, 9, 0, 0] + [9] * 13, 7) == patience
    assert calm_run(kinds, [40, 0, 0] + [30] * 17, 6) == patience  # relative: 0 of 40, then 30s


def test_a_socket_that_never_loses_learns_nothing_from_the_loss_signal():
    """ECN marks instead of losses (DCTCP), or an uncontended link: no peak, the rule without it;
    an iteration without losses before any was seen is no fall."""
    kinds = "SSSSSS" + "F" * 14
    assert calm_run(kinds, [0] * 20, 4) == run(kinds)
    assert calm_run("F" * 20, [0, 0, 9, 9, 9, 9] + [9] * 14, 4) == "S" * 4 + "b" * 17


def test_a_socket_whose_worst_iteration_lost_under_eight_times_learns_nothing_from_it():
    """A worst iteration of fewer than 1 << CALM_SHIFT loss episodes (an eighth of it under one;
    DCTCP's sockets under ECN on the demo) ends no search, however late the losses come or however
    long they last; once an iteration reaches it, the signal ends the search as for any socket."""
    few, eight = (1 << CALM_SHIFT) - 1, 1 << CALM_SHIFT
    kinds = "F" * 20
    assert calm_run(kinds, [0] * 6 + [2, 2] + [0] * 12, 4) == run(kinds)  # the demo's: one late loss
    assert calm_run(kinds, [few] * 20, 4) == run(kinds)
    assert calm_run(kinds, [few] * 5 + [eight] + [few] * 14, 4) == "S" * 6 + "b" * 15
    assert calm_run(kinds, [eight] * 20, 4) == "S" * 4 + "b" * 17
    # its calm iterations count all the same: two without loss by then keep the search past it
    assert calm_run(kinds, [few, 0, 0] + [eight] * 17, 4) == run(kinds)


def test_the_loss_signal_leaves_relapse_searches_alone():
    """Only the first search is ended by it: a relapse's search (backoff > 0) runs as before."""
    kinds = "F" * 12 + "SS" + "F" * 10
    lossy = [0] * 14 + [9] * 10  # none in the first search, then losses that do not fall
    assert calm_run(kinds, lossy, 4) == run(kinds)

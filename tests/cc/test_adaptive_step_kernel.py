"""Root tests of the adaptive step (mltcp_common.h with mltcp_adapt.h and mltcp_factor.h: restart,
the search and its patience, the relapse backoff, the loss-damped search, the loss signal, the
held slope) on the real kernel: one connection through the shaped router of
tests/cc/kernel_net.py, its iterations given a pattern (fast, slow, timing out, losing packets
once or many times), and the kernel's state per iteration (the telemetry) held to the rule's
Python mirror, tests/cc/adapt_rule.py, computed from the same rows' rates, timeouts and loss
episodes.
"""

from __future__ import annotations

import re
import time

import pytest

from mn_harness.cc.spec import CCSpec
from tests.cc.adapt_rule import CALM_SHIFT, adapt_states, adapt_trace, factor_fp, row_rate
from tests.cc.kernel_net import (
    IP_B,
    ITERATION_FIFO_LIMIT,
    M_FIFO_LIMIT,
    NS_A,
    NS_B,
    NS_R,
    SET_FIFO_LIMIT,
    bottleneck_fifo,
    finish,
    one_connection_rows,
    sh,
    traffic,
)

pytestmark = pytest.mark.root


@pytest.mark.parametrize("variant", ["mltcp-reno", "mltcp-dctcp"])
def test_restart_starts_each_iteration_from_the_initial_window(net, manager, variant):
    """`restart: true` (the default) sets the window to the initial 10 segments at the iteration
    boundary MLTCP sees (a send after more than idle_gap of idle); without it the window the first
    iteration ended with is kept. The idle here (150 ms) is below the RTO, so the kernel's own
    slow start after idle, off in this namespace anyway, would not restart it."""
    on, off = (CCSpec(variant, idle_gap_s=0.05, restart=True), CCSpec(variant, idle_gap_s=0.05, restart=False))
    manager.prepare([on, off])
    sh("sysctl", "-qw", "net.ipv4.tcp_slow_start_after_idle=0", ns=NS_A)
    got = {}
    try:
        for spec in (on, off):
            sink = traffic(NS_B, "sink", 5206, 10)
            time.sleep(0.3)
            try:
                got[spec.restart] = finish(traffic(NS_A, "restart", IP_B, 5206, manager.kernel_name(spec),
                                                   3_000_000, 0.15))
            finally:
                sink.kill()
                sink.wait()
    finally:
        sh("sysctl", "-qw", "net.ipv4.tcp_slow_start_after_idle=1", ns=NS_A)
    assert got[False]["before"] >= 20 and got[True]["before"] >= 20, got  # a grown window first
    assert got[False]["after"] >= 20, got
    assert got[True]["after"] <= 12, got  # 10, plus what the one byte's ACK added


@pytest.mark.parametrize("kinds,shape", [
    # steady (a job alone, or apart from its rivals): nothing to gain, the search ends
    ("FFFFFFFFFFFF", "S{9,10}b+"),
    # alternately fast and slow (jobs that keep taking the link from each other): the search
    # ends, and single slow iterations start no new one
    ("FSFSFSFSFSFSFS", "S{9,10}b+"),
    # slow, then fast (pushed, then apart): progress at the 7th, 8 more iterations searching
    ("SSSSSSFFFFFFFFFFFF", "S{15,16}b+"),
    # apart, then colliding twice in a row (a relapse, a new rival): a new search
    ("FFFFFFFFFFFFSSFFFF", "S{9,10}b{4,5}S+"),
    # the backoff: after one relapse the next search needs 4 slow iterations in a row: 2 start
    # none, 4 do
    ("F" * 12 + "SS" + "F" * 10 + "SS" + "FF" + "SSSS" + "FF", "S{9,10}b{4,5}S{8}b{10}S+"),
    # a retransmission timeout (T) in a search a relapse started ends it, and doubles the next
    # relapse's count once more (8): 4 slow iterations in a row start no search
    ("F" * 12 + "SS" + "FFT" + "F" * 4 + "SSSS" + "F", "S{9,10}b{4,5}SSSb+"),
    # a timeout in the first search changes nothing
    ("FFFT" + "F" * 10, "S{9,10}b+"),
    # a timeout as the base CC (one slow iteration) starts nothing
    ("F" * 12 + "T" + "F" * 4, "S{9,10}b+"),
])
def test_adaptive_step_searches_while_it_pays(net, manager, kinds, shape):
    """The adaptive step (mltcp_adapt.h mltcp_adapt) on one connection whose iterations are
    fast (F: 2 MB at once, 200 Mbit/s) or slow (S: the second MB 60 ms after the first was
    acknowledged, ~0.6 of F's rate) or time out (T: the path a blackhole for 0.5 s). The kernel's
    state per row (telemetry `slope`: 32 while it searches, 0 as its base CC) must be what the
    rule computes in Python from the rows' own rates and timeouts (adapt_rule.adapt_states), and
    have the shape each pattern is for; rows as the base CC have F = 1, searching rows reach
    F > 20 (slope 32)."""
    spec = CCSpec("mltcp-reno", idle_gap_s=0.1, calm_by=0)  # the loss signal off: the rule alone
    assert spec.resolved().adapt and spec.resolved().slope == 32
    mine = one_connection_rows(manager, "pattern", 5207, 0.2, 0.06, 2_000_000, kinds, NS_R, spec=spec)
    assert [r["iteration"] for r in mine] == list(range(1, len(kinds) + 1)), \
        [(r["iteration"], r["bytes"]) for r in mine]
    got = "".join("S" if r["slope"] == 32 else "b" if r["slope"] == 0 else "?" for r in mine)
    rates = [round(r["bytes"] / (r["end_s"] - r["start_s"]) / 1e6) for r in mine if r["end_s"]]
    complete = [r for r in mine if not r["final"]]
    rtos = [r["rto"] for r in complete]
    assert got == adapt_states([row_rate(r) for r in complete], rtos), (got, rates, rtos)  # last: at close
    # the telemetry's count is the rule's during each iteration (searching: since the last progress)
    assert [r["count"] for r in complete] == [s.count for s in adapt_trace([row_rate(r) for r in complete], rtos)][:-1]
    # the telemetry says which iterations timed out: every T's (others may, on a loss that
    # fast retransmit did not repair)
    assert all(rtos[i] for i, k in enumerate(kinds[:len(complete)]) if k == "T"), (rtos, kinds)
    assert re.fullmatch(shape, got), (got, rates)
    assert all(r["f_last"] == 1.0 for r in complete if got[r["iteration"] - 1] == "b"), \
        [r["f_last"] for r in complete]
    assert all(r["f_last"] > 20 for r in complete[1:] if got[r["iteration"] - 1] == "S"), \
        [r["f_last"] for r in complete]  # searching: F up to 33 by the end of each iteration


@pytest.mark.parametrize("damp,damp_after,hold", [(0, 0, 0), (1, 0, 0), (1, 2, 0), (1, 0, 4)])
def test_losses_damp_a_searching_iterations_f(net, manager, damp, damp_after, hold):
    """The loss-damped search (`damp`, `damp_after`, mltcp_factor.h mltcp_factor) on one
    connection whose iterations are fast (F), slow (S), lose packets that fast recovery repairs
    (L: the path a blackhole for 2 ms) or time out (T): the first search, the base CC, then a
    search the two slow iterations start (a relapse). The telemetry's `count` must be the rule's
    (adapt_rule.adapt_trace, from the rows' own rates), and each row's F at its last ACK the one
    the mirror computes from the row's bytes, estimate, state, loss episodes, count and backoff
    (adapt_rule.factor_fp): with damp 1 a searching row that lost packets has F - 1 halved per
    loss episode, with damp 0 it reaches F > 20 as without losses; with damp_after 2 the first
    search's rows are damped only 2 or more iterations past its last progress (its third
    iteration, an L, is at most 1 past it), a relapse's from its first iteration (count 0). Past
    the search F is 1 (the base CC), or with `hold` rises to 1 + hold over the iteration, losses
    or not. The telemetry counts the loss episodes of every L and T row, searching or not."""
    # the loss signal off: the L rows of the first search would end it at calm_by
    spec = CCSpec("mltcp-reno", idle_gap_s=0.1, damp=damp, damp_after=damp_after, calm_by=0, hold=hold)
    assert (spec.resolved().damp, spec.resolved().damp_after, spec.resolved().hold) == (damp, damp_after, hold)
    assert spec.resolved().slope == 32
    kinds = "FFLFLFTFL" + "F" * 5 + "L" + "FF" + "SS" + "LFLFF"
    mine = one_connection_rows(manager, "pattern", 5208 + damp + damp_after + 4 * hold, 0.2, 0.06, 2_000_000, kinds,
                               NS_R, spec=spec)
    assert [r["iteration"] for r in mine] == list(range(1, len(kinds) + 1)), \
        [(r["iteration"], r["bytes"]) for r in mine]
    complete = [r for r in mine if not r["final"]]
    got = "".join("S" if r["slope"] == 32 else "b" if r["slope"] == 0 else "?" for r in complete)
    relapse = len(kinds) - 5  # the first L after the two slow iterations
    assert re.fullmatch("S{9,10}b+", got[:relapse]) and got[relapse] == "S", got
    losses = [r["losses"] for r in complete]
    count = [r["count"] for r in complete]
    trace = adapt_trace([row_rate(r) for r in complete], [r["rto"] for r in complete])[:-1]
    assert count == [s.count for s in trace], (count, trace)
    f_last = [round(r["f_last"] * 1024) for r in complete]
    assert f_last == [factor_fp(r["bytes"], r["believed_bytes_per_iteration"] or 0, g == "S", 32, 1,
                                r["losses"], damp, r["count"], damp_after, s.backoff, hold)
                      for r, g, s in zip(complete, got, trace, strict=True)], (f_last, losses, count)
    # every L and T iteration lost packets, searching or not
    assert all(n >= 1 for n, k in zip(losses, kinds, strict=False) if k in "LT"), (losses, kinds)
    lossy = [(f, s) for f, r, g, s in zip(f_last, complete, got, trace, strict=True)
             if g == "S" and r["losses"] and r["believed_bytes_per_iteration"]]  # F = 1 before an estimate
    def damps(step) -> bool:  # the first search once stalled, a relapse's from its first iteration
        return bool(damp) and (step.count >= damp_after or step.backoff > 0)
    damped = [f for f, s in lossy if damps(s)]
    undamped = [f for f, s in lossy if not damps(s)]
    assert damped or not damp, (f_last, losses, count)
    assert undamped or (damp and not damp_after), (f_last, losses, count)
    # the relapse's first iteration (count 0, an L) is damped whatever damp_after says
    assert trace[relapse].backoff == 1 and trace[relapse].count == 0 and losses[relapse], (trace, losses)
    assert (f_last[relapse] <= 17 * 1024) == bool(damp), (f_last, trace)
    assert all(f <= 17 * 1024 for f in damped), (f_last, losses, count)  # halved at least once: F <= 17
    assert all(f > 20 * 1024 for f in undamped), (f_last, losses, count)  # as before damp: up to 33
    base = [f for f, g in zip(f_last, got, strict=True) if g == "b"]
    assert base and all(f > 4 * 1024 if hold else f == 1024 for f in base), (f_last, got)
    assert not hold or any(r["losses"] for r, g in zip(complete, got, strict=True) if g == "b"), \
        (losses, got)  # a held F that lost packets, undamped


@pytest.mark.parametrize("kinds,calm_by,shape", [
    # losses that do not fall (M: loss episodes in every iteration): the first search ends at
    # iteration calm_by, not at the patience, and two slow iterations later start no new search
    # (the backoff at its most)
    ("F" + "MMMMM" + "F" * 8 + "SS" + "FF", 4, r"S{4}b+"),
    # the same with the signal off: the patience ends the search, the two slow ones start a relapse
    ("F" + "MMMMM" + "F" * 8 + "SS" + "FF", 0, r"S{9,}b+S+"),
    # the losses fall to none and stay there for two iterations by calm_by: the search goes on
    # until the patience ends it, and the two slow iterations start a relapse
    ("F" + "MM" + "F" * 13 + "SS" + "FF", 5, r"S{9,}b+S+"),
    # one iteration without losses by calm_by is no fall
    ("F" + "MM" + "F" + "MMM" + "F" * 7 + "SS" + "FF", 6, r"S{6}b+"),
    # losses that do not fall but are few (L: one episode; ECN's sockets): no signal, the rule
    ("F" + "LLLLL" + "F" * 8 + "SS" + "FF", 4, r"S{9,}b+S+"),
])
def test_a_first_search_whose_losses_do_not_fall_ends_at_calm_by(net, manager, kinds, calm_by, shape):
    """The loss signal (`calm_by`, mltcp_adapt.h mltcp_calmless) on one connection whose
    iterations are fast (F), slow (S), lose packets once (L: a 2 ms blackhole) or many times (M:
    through a FIFO of M_FIFO_LIMIT packets, at least 1 << CALM_SHIFT loss episodes). The
    bottleneck's FIFO holds a whole iteration otherwise (ITERATION_FIFO_LIMIT): F and S do not
    overflow it.
    The kernel's state per row must be what the mirror computes from the rows' own rates,
    timeouts and loss episodes (adapt_rule.adapt_trace with `calm_by`), count and backoff
    included, and have the shape each pattern is for."""
    spec = CCSpec("mltcp-reno", idle_gap_s=0.1, calm_by=calm_by)
    assert spec.resolved().calm_by == calm_by and spec.resolved().adapt
    with bottleneck_fifo(ITERATION_FIFO_LIMIT):
        # a port of its own per pattern (the L one's 10 above the M ones')
        mine = one_connection_rows(manager, "pattern", 5212 + calm_by + kinds.count("M") + 10 * kinds.count("L"),
                                   0.2, 0.06, 2_000_000, kinds, NS_R, f"{SET_FIFO_LIMIT} {M_FIFO_LIMIT}",
                                   f"{SET_FIFO_LIMIT} {ITERATION_FIFO_LIMIT}", spec=spec)
    assert [r["iteration"] for r in mine] == list(range(1, len(kinds) + 1)), \
        [(r["iteration"], r["bytes"]) for r in mine]
    complete = [r for r in mine if not r["final"]]
    got = "".join("S" if r["slope"] == 32 else "b" if r["slope"] == 0 else "?" for r in complete)
    losses = [r["losses"] for r in complete]
    rates, rtos = [row_rate(r) for r in complete], [r["rto"] for r in complete]
    trace = adapt_trace(rates, rtos, losses, calm_by)
    assert got == adapt_states(rates, rtos, losses, calm_by)[:-1], (got, losses, rtos)
    assert [r["count"] for r in complete] == [s.count for s in trace][:-1], (losses, trace)
    # what the patterns are for: every M iteration loses packets at least 1 << CALM_SHIFT times,
    # every L one fewer, the others of the first search are calm in the rule's sense (none before
    # any loss, at most 1 << CALM_SHIFT times fewer than the worst before them: the emulated path
    # drops a packet of an F now and then, about 1 in 30 right after an M, and the rule reads
    # that F as calm all the same)
    peaks = [max(losses[:i], default=0) for i in range(len(losses))]
    assert all((n >= 1 << CALM_SHIFT if k == "M" else 0 < n < 1 << CALM_SHIFT if k == "L" else n << CALM_SHIFT <= peak)
               for n, k, peak in zip(losses[:8], kinds, peaks, strict=False)), (losses, kinds)
    assert re.fullmatch(shape, got), (got, losses)

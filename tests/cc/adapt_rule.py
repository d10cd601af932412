"""The adaptive step's rule (mltcp_adapt.h mltcp_adapt with mltcp_calmless's loss signal;
mltcp_set_state's loss count and mltcp_factor's F, damped by it in a relapse's search or a
stalled one) in Python, in the kernel's integer arithmetic: the root tests check the kernel's
state and F per telemetry row against it, the unit tests check it does what
docs/cc.md#the-adaptive-step says. A copy held in step with the BPF code."""

from __future__ import annotations

from dataclasses import dataclass

from mn_harness.cc.variants import ADAPT_BACKOFF_MAX, ADAPT_DROP, ADAPT_GAIN, ADAPT_PATIENCE

RELAPSE = 2  # mltcp_common.h MLTCP_ADAPT_RELAPSE: collided iterations in a row that start a search
U32_MAX = 2**32 - 1
LOSSES_MAX = 255  # mltcp_common.h MLTCP_LOSSES_MAX: the loss-episode count saturates (8 bits)
DAMP_SHIFT_MAX = 31  # MLTCP_DAMP_SHIFT_MAX
CALM_SHIFT = 3  # MLTCP_CALM_SHIFT: a calm iteration's loss episodes are at most the peak's 1/8
BACKOFF_BITS_MAX = 7  # MLTCP_F_BACKOFF's three bits, all set: what a calmless first search leaves
# include/net/tcp.h enum tcp_ca_state: what the CC's set_state is told
CA_OPEN, CA_DISORDER, CA_CWR, CA_RECOVERY, CA_LOSS = range(5)


def loss_episodes(states: list[int]) -> int:
    """An iteration's loss-episode count from the states set_state was told during it: each
    fast recovery or timeout (ECN's window reduction, CWR, is none), saturating at LOSSES_MAX."""
    return min(sum(s in (CA_RECOVERY, CA_LOSS) for s in states), LOSSES_MAX)


def factor_fp(done: int, believed: int, searching: bool, slope: float, intercept: float,
              losses: int = 0, damp: int = 0, count: int = 0, damp_after: int = 0, backoff: int = 0,
              hold: float = 0) -> int:
    """F x1024 (mltcp_factor) after `done` bytes of an iteration whose bytes were estimated at
    `believed` (0: not learned yet) with `losses` loss episodes so far: intercept + slope x
    done/believed (the ratio capped at 1) while the socket searches, its part above 1 divided by
    2**(damp x losses) in a search a relapse started (`backoff` > 0) and, in the first, once it
    has gone `damp_after` iterations without progress (`count` and `backoff` as adapt_trace gives
    them); past the search intercept + hold x the ratio, never damped (1 with hold 0: the base CC)."""
    one = 1024
    if not believed or not (searching or hold):
        return one
    ratio = min((done << 10) // believed, one)
    f = max(1, min(round(intercept * one) + ((round((slope if searching else hold) * one) * ratio) >> 10), 64 * one))
    if searching and damp and losses and f > one and (count >= damp_after or backoff):
        f = one + ((f - one) >> min(damp * min(losses, LOSSES_MAX), DAMP_SHIFT_MAX))
    return f


def row_rate(row: dict) -> int:
    """An iteration's rate as the kernel takes it: bytes x1024 per microsecond of the time from
    its first send to its last ACK."""
    us = round((row["end_s"] - row["start_s"]) * 1e9) // 1000
    return min((row["bytes"] << 10) // max(1, us), U32_MAX)


@dataclass(frozen=True)
class Step:
    """The adaptive step's state during one iteration (mltcp_state's flags and count)."""
    searching: bool
    count: int  # searching: iterations since the last progress; as the base CC: slow ones in a row
    backoff: int  # relapses and searches a timeout ended so far (0 in the first search)


def adapt_trace(rates: list[int], rtos: list[bool] | None = None, losses: list[int] | None = None,
                calm_by: int = 0) -> list[Step]:
    """Per iteration (the socket's first on) rate, whether it had a retransmission timeout and its
    loss episodes: the Step during each iteration, then after the last. Searching: with `calm_by`,
    the first search ends at its iteration `calm_by` or later once its worst iteration had at
    least 1 << CALM_SHIFT loss episodes and no two of its iterations in a row were calm (loss
    episodes at most the most so far >> CALM_SHIFT, some loss seen), and the
    backoff goes to its maximum; a timeout ends a search a relapse started (not the first); a
    rate over the best by ADAPT_GAIN is progress (count back to 0), ADAPT_PATIENCE iterations
    without end the search. As the base CC the usual rate is the first iteration's, then moves a quarter of
    the way to each rate not ADAPT_DROP under it; RELAPSE << backoff rates in a row under it (at
    most ADAPT_BACKOFF_MAX; count) start a search whose best so far is the usual rate. The backoff
    grows by one with every relapse and every search a timeout ended (so it is 0 in the first
    search)."""
    gain, drop = round(ADAPT_GAIN * 1024), round(ADAPT_DROP * 1024)
    ref = count = backoff = peak = 0
    base, calm, last_calm, out = False, False, False, []
    for number, (rate, rto, lost) in enumerate(zip(rates, rtos or [False] * len(rates),
                                                   losses or [0] * len(rates), strict=True), start=1):
        out.append(Step(not base, count, backoff))
        calmless, lost = False, min(lost, LOSSES_MAX)
        if calm_by and not base and not backoff and not calm:
            peak = max(peak, lost)
            this_calm = bool(peak) and lost << CALM_SHIFT <= peak
            calm, last_calm = this_calm and last_calm, this_calm
            calmless = not calm and peak >= 1 << CALM_SHIFT and number >= calm_by
        if not base:
            if calmless:
                base, ref, count, backoff = True, 0, 0, BACKOFF_BITS_MAX
            elif rto and backoff:
                base, ref, count = True, 0, 0
                backoff += RELAPSE << backoff < ADAPT_BACKOFF_MAX
            elif rate * 1024 > ref * (1024 + gain):
                ref, count = rate, 0
            else:
                count += 1
                if count >= ADAPT_PATIENCE:
                    base, ref, count = True, 0, 0
        elif not ref:
            ref = rate or 1
        elif rate * 1024 < ref * (1024 - drop):
            count += 1
            if count >= min(RELAPSE << backoff, ADAPT_BACKOFF_MAX):
                base, count = False, 0
                backoff += RELAPSE << backoff < ADAPT_BACKOFF_MAX
        else:
            count, ref = 0, (ref * 3 + rate) // 4
    return [*out, Step(not base, count, backoff)]


def adapt_states(rates: list[int], rtos: list[bool] | None = None, losses: list[int] | None = None,
                 calm_by: int = 0) -> str:
    """adapt_trace's states as letters: S while searching, b as the base CC."""
    return "".join("S" if step.searching else "b" for step in adapt_trace(rates, rtos, losses, calm_by))

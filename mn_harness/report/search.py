"""How the adaptive step ran (docs/cc.md#the-adaptive-step), per socket, from a run's
cc_telemetry.csv: the iteration at which the socket's first search ended, the most loss episodes
an iteration of that search had, and how many new searches (relapses) it started after.

Why: an MLTCP variant's gain or cost on a scenario is made while its sockets search. Whether the
first search ended by the patience (at iteration 9 or later: 8 iterations without progress), by
the loss signal (at `calm_by`, 8 by name, on a socket whose worst iteration lost at least 8
times) or never, and whether the sockets searched
again, says which of the rule's parts a number measures; the table shows it beside the number
instead of leaving it to a script over the telemetry."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from mn_harness.results.schema import CCTelemetryRow


@dataclass(frozen=True)
class SocketSearch:
    src: str
    first_end: int | None  # the first search's last iteration (0: it never searched); None: searched to the end
    peak_losses: int  # the most loss episodes of an iteration of the first search
    relapses: int  # searches started after the first ended


def socket_searches(rows: Iterable[CCTelemetryRow]) -> list[SocketSearch]:
    """One SocketSearch per socket (telemetry `src`), from its complete iterations: the row written
    when the socket closed is mid-iteration and left out. A socket with no complete iteration is
    left out too."""
    by_socket: dict[str, list[CCTelemetryRow]] = defaultdict(list)
    for row in rows:
        if not row.final:
            by_socket[row.src].append(row)
    out = []
    for src, mine in sorted(by_socket.items()):
        mine.sort(key=lambda r: r.iteration)
        searching = [r.slope != 0 for r in mine]
        end = next((i for i, s in enumerate(searching) if not s), None)
        first = mine if end is None else mine[:end]
        relapses = 0 if end is None else sum(1 for i in range(end + 1, len(mine))
                                            if searching[i] and not searching[i - 1])
        last = None if end is None else mine[end - 1].iteration if end else 0
        out.append(SocketSearch(src=src, first_end=last,
                                peak_losses=max((r.losses for r in first), default=0), relapses=relapses))
    return out


def search_text(searches: list[SocketSearch]) -> str:
    """A table cell over the sockets of a row's runs: the first search's end as median [min–max]
    ("never" for sockets that searched to the end; they count as later than any iteration), the
    sockets counted, and the relapses: "8 [8–8] of 24; 0 relapses". "-" without telemetry."""
    if not searches:
        return "-"
    never = float("inf")
    ends = sorted(never if s.first_end is None else s.first_end for s in searches)

    def text(value: float) -> str:
        return "never" if value == never else f"{value:g}"

    median = statistics.median_low(ends)
    relapses = sum(s.relapses for s in searches)
    return f"{text(median)} [{text(ends[0])}–{text(ends[-1])}] of {len(searches)}; {relapses} relapses"

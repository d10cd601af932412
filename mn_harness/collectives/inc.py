"""In-network aggregation (inc_allreduce): each worker sends its S bytes once to the BMv2 switch,
which adds them and sends the sum back (mn_harness/worker/inc.py, p4/programs/aggregation.p4).

It is not a schedule of TCP transfers between ranks, so its record says directly what the
arithmetic needs: every worker sends S; the traffic is classified by the workers' ring hops
(rank r to r+1, as the P4 entries match it); its time on the wire is S over the slowest of those
paths. Short form only, on the in-network aggregation worker."""

from __future__ import annotations

from mn_harness.collectives.registry import INC, Call, Collective, Ideal, Network


def ring_pairs(call: Call) -> list[tuple[int, int]]:
    return [(r, (r + 1) % call.ranks) for r in range(call.ranks)]


def wire_time(call: Call, network: Network) -> Ideal:
    rate = min(network.path_bps(a, b) for a, b in ring_pairs(call))
    return Ideal(call.nbytes * 8 / rate, rate, None)


INC_ALLREDUCE = Collective("inc_allreduce", None, None, engine=INC, phase=False, wire_time=wire_time,
                           sends=lambda c: [c.nbytes] * c.ranks, pairs=ring_pairs)

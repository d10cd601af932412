"""The link invariant on a BMv2 port, judged by mn_harness.fidelity: while its data queue holds
packets, it sends at its configured rate.

BMv2 forwards in user space, so the kernel program of link.py cannot see its queues. What its
P4 program counts per port and sampling interval (mn_harness/p4/telemetry.py: packets sent, and
the depth every enqueued packet saw) gives the invariant at the sampler's granularity: in every
interval whose packets found the queue at least BACKLOGGED_DEPTH deep on average (the port had
packets to send throughout), the packets it sent per second against the queue's configured
rate (packets/s of 1514-byte frames; mn_harness/p4/bmv2/queues.py). A switch that lost the CPU
sends fewer."""

from __future__ import annotations

from dataclasses import dataclass, field

BACKLOGGED_DEPTH = 2.0  # packets: the mean depth seen by an interval's packets


MIN_INTERVALS = 20  # fewer backlogged intervals are reported, not judged


@dataclass
class PortRate:
    name: str  # the directed link, e.g. "s1->s2"
    rate_pps: float  # the data queue's configured rate
    ratios: list[float] = field(default_factory=list)  # sent / configured, per backlogged interval
    sent: int = 0  # packets sent in those intervals
    expected: float = 0.0  # packets the configured rate would have sent in them

    def add(self, interval_s: float, tx_packets: int, mean_depth: float) -> None:
        if interval_s <= 0 or mean_depth < BACKLOGGED_DEPTH:
            return
        expected = interval_s * self.rate_pps
        self.ratios.append(tx_packets / expected)
        self.sent += tx_packets
        self.expected += expected

    def within_share(self, tolerance: float) -> float | None:
        if not self.ratios:
            return None
        return sum(abs(r - 1.0) <= tolerance for r in self.ratios) / len(self.ratios)

    @property
    def rate_ratio(self) -> float | None:
        return self.sent / self.expected if self.expected else None


@dataclass
class Bmv2Rates:
    """Every sampled BMv2 port of a run."""

    ports: dict[tuple[str, int], PortRate] = field(default_factory=dict)

    def watch(self, switch: str, port: int, name: str, rate_pps: float) -> None:
        current = self.ports.get((switch, port))
        if current is None:
            self.ports[(switch, port)] = PortRate(name, rate_pps)
        else:
            current.rate_pps = rate_pps  # a rate change: later intervals at the new rate

    def add(self, switch: str, port: int, interval_s: float, tx_packets: int, mean_depth: float) -> None:
        port_rate = self.ports.get((switch, port))
        if port_rate is not None:
            port_rate.add(interval_s, tx_packets, mean_depth)

    def by_link(self) -> dict[str, PortRate]:
        return {p.name: p for p in self.ports.values()}

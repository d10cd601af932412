"""BMv2 egress queue settings: depth in packets and drain rate in packets/s, per priority queue.

The bottleneck queue of an experiment is BMv2's own (a qdisc outside BMv2 would keep enq_qdepth
near 0, so ECN marking and the depth telemetry would see nothing). BMv2 paces each queue in
packets/s, not bytes: `pps_for_rate` converts a link rate for a frame size.

Two priority queues per port (PRIORITY_QUEUES): with a single queue at the link rate in
FRAME_BYTES frames, the reverse direction's pure ACKs took full-frame slots and data got ~2/3 of
the link. The programs put small packets (IPv4 total length <= SMALL_PACKET_MAX_IP_BYTES) into
QUEUE_SMALL, served first, and everything else into QUEUE_DATA. `QueueConfig.for_link(mbit,
depth)` gives the data queue the link's depth and rate in FRAME_BYTES frames and the small queue
the link's byte rate in SMALL_FRAME_BYTES frames (the largest small packet), with the same depth.
`set_queue_depth N port prio` / `set_queue_rate N port prio` are simple_switch_CLI's
per-priority forms (BMv2 >= 1.15); without a priority they set every queue of the port."""

from __future__ import annotations

from dataclasses import dataclass

from mn_harness.p4.limits import FRAME_BYTES, PRIORITY_QUEUES, QUEUE_DATA, QUEUE_SMALL, SMALL_FRAME_BYTES


def pps_for_rate(mbit_per_s: float, packet_bytes: int = FRAME_BYTES) -> int:
    """Packets per second that carry `mbit_per_s` with packets of `packet_bytes` (BMv2 queues
    drain in packets, not bytes). At least 1."""
    if mbit_per_s <= 0:
        raise ValueError("link rate must be > 0 Mbit/s")
    return max(1, round(mbit_per_s * 1e6 / (8 * packet_bytes)))


@dataclass(frozen=True)
class QueueConfig:
    """Egress queues of one port. `depth`/`rate_pps` are the data queue's (QUEUE_DATA),
    `small_depth`/`small_rate_pps` the small-packet queue's (QUEUE_SMALL); None leaves that
    setting alone. On a switch with one queue per port only the data settings apply."""
    depth: int | None = None          # packets; BMv2's default is 64
    rate_pps: int | None = None       # packets/s; None leaves the queue draining at CPU speed
    small_depth: int | None = None
    small_rate_pps: int | None = None

    @classmethod
    def for_link(cls, mbit_per_s: float | None, depth: int | None = None,
                 packet_bytes: int = FRAME_BYTES) -> QueueConfig:
        """A link of `mbit_per_s` (None: unlimited) with a queue of `depth` packets: data at
        the link rate in `packet_bytes` frames, small packets at the link's byte rate in
        SMALL_FRAME_BYTES frames, both queues `depth` deep."""
        return cls(depth=depth,
                   rate_pps=pps_for_rate(mbit_per_s, packet_bytes) if mbit_per_s else None,
                   small_depth=depth,
                   small_rate_pps=pps_for_rate(mbit_per_s, SMALL_FRAME_BYTES) if mbit_per_s else None)

    def commands(self, port: int, priority_queues: int = PRIORITY_QUEUES) -> list[str]:
        """simple_switch_CLI commands for this port."""
        settings = [(QUEUE_DATA, "depth", self.depth), (QUEUE_DATA, "rate", self.rate_pps)]
        if priority_queues > QUEUE_SMALL:
            settings += [(QUEUE_SMALL, "depth", self.small_depth),
                         (QUEUE_SMALL, "rate", self.small_rate_pps)]
        cmds = []
        for prio, what, value in settings:
            if value is None:
                continue
            if value < 1:
                unit = "packet" if what == "depth" else "packet/s"
                raise ValueError(f"queue {what} must be >= 1 {unit}, got {value}")
            suffix = f" {port} {prio}" if priority_queues > 1 else f" {port}"
            cmds.append(f"set_queue_{what} {int(value)}{suffix}")
        return cmds


def queue_suffix(port: int | None, priority: int | None) -> str:
    """The `port [priority]` tail of a set_queue_* command; no port: every port of the switch."""
    if port is None:
        if priority is not None:
            raise ValueError("a queue priority needs a port")
        return ""
    return f" {port}" + (f" {priority}" if priority is not None else "")

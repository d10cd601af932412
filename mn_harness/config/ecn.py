"""The ECN and queue-telemetry options of an experiment file, parsed and checked once.

* `ecn_threshold` (switches[i], the default of that switch's egress ports; links[i], both of the
  link's switch ends): a queue depth in packets (`20`, frames of the link's MTU: 1514 bytes at 1500), a size
  with a unit (`30KB`, `45420B`; mn_harness/units.py), or `off`. A switch egress port marks
  ECT packets CE when the queue it joins holds at least that much. Unset everywhere: 20 packets
  (DEFAULT_ECN_THRESHOLD_PACKETS), on both data planes.
* `run.tcp_ecn`: `auto` (BMv2: every host requests ECN, as it always did; Linux: the kernel
  default, so only the ECN congestion controls `dctcp`/`mltcp-dctcp` negotiate it), `true`
  (net.ipv4.tcp_ecn=1 in every host: cubic/reno request ECN too and react to marks) or `false`
  (tcp_ecn=0: only CCs that demand ECN use it).
* `run.queue_telemetry`: `true` (every switch egress port), `false`, or a list of links: `a-b`
  (both directions of that link, either order) or `a->b` (one direction; host ends allowed).

Which value a port ends up with is decided from the plan in mn_harness/dataplane/queues.py."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mn_harness.errors import ConfigError
from mn_harness.p4.limits import FRAME_BYTES, NO_MARKING, QDEPTH_BITS
from mn_harness.units import parse_size

if TYPE_CHECKING:
    from mn_harness.config.experiment import Experiment

DEFAULT_ECN_THRESHOLD_PACKETS = 20
# BMv2 compares it with a 19-bit queue depth (mn_harness/p4/limits.py); far below the 32-bit
# byte backlog of a Linux qdisc, so one limit serves both data planes
MAX_THRESHOLD_PACKETS = NO_MARKING - 1


@dataclass(frozen=True)
class EcnThreshold:
    """A marking threshold as written: `packets` (full frames of the port's link, FRAME_BYTES
    at the default MTU) or `bytes`; neither set means `off` (never mark)."""

    packets: int | None = None
    bytes: int | None = None

    @property
    def off(self) -> bool:
        return self.packets is None and self.bytes is None

    def threshold_bytes(self, frame_bytes: int = FRAME_BYTES) -> int | None:
        """Queue bytes at which ECT packets are marked (the Linux FIFO counts bytes) on a link of
        `frame_bytes` frames; None: off."""
        if self.bytes is not None:
            return self.bytes
        return None if self.packets is None else self.packets * frame_bytes

    def threshold_packets(self, frame_bytes: int = FRAME_BYTES) -> int | None:
        """Queue depth in packets (BMv2 counts packets): a byte threshold rounded up to frames."""
        if self.packets is not None:
            return self.packets
        return None if self.bytes is None else math.ceil(self.bytes / frame_bytes)

    def describe(self) -> str:
        if self.off:
            return "off"
        return f"{self.packets} packets" if self.packets is not None else f"{self.bytes} bytes"


DEFAULT_ECN_THRESHOLD = EcnThreshold(packets=DEFAULT_ECN_THRESHOLD_PACKETS)


def parse_ecn_threshold(raw: Any, path: str) -> EcnThreshold:
    """`20` (packets), `30KB` (bytes, any size unit), or `off` / `false`."""
    if raw is False or (isinstance(raw, str) and raw.strip().lower() == "off"):
        return EcnThreshold()
    if isinstance(raw, bool) or raw is None:
        raise ConfigError(path, f"expected packets (e.g. 20), a size (e.g. 30KB) or off, got {raw!r}")
    if isinstance(raw, int):
        if raw <= 0:
            raise ConfigError(path, f"expected a positive number of packets, got {raw!r}")
        threshold = EcnThreshold(packets=raw)
    elif isinstance(raw, float):
        raise ConfigError(path, f"packets are a whole number (or give a size such as 30KB), got {raw!r}")
    else:
        threshold = EcnThreshold(bytes=parse_size(raw, path))
    if (threshold.threshold_packets() or 0) > MAX_THRESHOLD_PACKETS:
        raise ConfigError(path, f"at most {MAX_THRESHOLD_PACKETS} packets (the P4 queue depth is "
                          f"{QDEPTH_BITS} bits), got {raw!r}")
    return threshold


def parse_tcp_ecn(raw: Any, path: str) -> str | bool:
    if raw == "auto" or isinstance(raw, bool):
        return raw
    raise ConfigError(path, f"expected auto, true or false, got {raw!r}")


def tcp_ecn_sysctl(value: str | bool) -> str | None:
    """The hosts' net.ipv4.tcp_ecn for `run.tcp_ecn`; None: leave it to the data plane."""
    if value == "auto":
        return None
    return "1" if value is True else "0"


def parse_queue_telemetry(raw: Any, path: str) -> bool | tuple[str, ...]:
    if isinstance(raw, bool):
        return raw
    if not isinstance(raw, list) or not raw:
        raise ConfigError(path, f"expected true, false or a list of links (s1-s2, s1->s2), got {raw!r}")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, str) or not _split_link(item):
            raise ConfigError(f"{path}[{i}]", f"expected a link like s1-s2 or s1->s2, got {item!r}")
        out.append(item.strip())
    return tuple(out)


def _split_link(text: str) -> tuple[str, str, bool] | None:
    """'a->b' -> (a, b, True: directed); 'a-b' -> (a, b, False); None if neither form."""
    text = text.strip()
    if "->" in text:
        a, _, b = text.partition("->")
        return (a, b, True) if a and b and "-" not in a + b else None
    a, sep, b = text.partition("-")
    return (a, b, False) if sep and a and b and "-" not in b else None


def queue_telemetry_directions(experiment: Experiment) -> set[tuple[str, str]] | None:
    """The (from, to) link directions `run.queue_telemetry` names; None: every switch egress
    port (true); empty: none (false). Raises ConfigError for a link that does not exist."""
    value = experiment.run.queue_telemetry
    if value is True:
        return None
    if value is False:
        return set()
    links = {frozenset((link.a, link.b)) for link in experiment.links}
    out: set[tuple[str, str]] = set()
    for i, item in enumerate(value):
        split = _split_link(item)
        assert split is not None  # checked when parsed
        a, b, directed = split
        if frozenset((a, b)) not in links:
            raise ConfigError(f"run.queue_telemetry[{i}]", f"no link between {a!r} and {b!r}")
        out.add((a, b))
        if not directed:
            out.add((b, a))
    return out

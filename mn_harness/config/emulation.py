"""`run.emulation`: the emulator's own choices that could move an experiment's answer, in one
frozen configuration. The defaults are the project's network; what each choice is, why its
default, and how far flipping it moved measured answers: docs/fidelity.md#the-emulators-choices.

    run:
      emulation:
        switches: router          # router: a Linux router per switch (L3) | bridge: a Linux bridge (L2)
        access_links: shaped      # shaped: both ends of a host's link are shaped like any link |
                                  #   unshaped: left as the veth is (no qdisc, no rate), as plain Mininet
        host_queue: txqueuelen    # a shaped host egress's leaf: txqueuelen (a NIC's own qdisc: a FIFO of
                                  #   the device's 1000 packets) | link (the link's `queue`, as every port)
        queue_limit: bytes        # the ports' FIFO: bytes (`queue` x the link's frame, 1514 bytes) | packets (`queue`
                                  #   packets, a GSO super-packet counts as one) | txqueuelen (1000
                                  #   packets, `queue` ignored: TCLink's default leaf)
        htb_burst: 1ms            # HTB's burst: a duration at the link rate (at least 4 frames), a size,
        htb_cburst: 1ms           #   or auto (tc's default); cburst likewise
        htb_quantum: auto         # HTB's quantum: a size, or auto (tc's: rate / 10, at most 200000 B)
        cpu_placement: shared     # shared: every core runs everything | split: workers on the last
                                  #   core(s), the hosts' and switches' receive work (RPS) on core 0
        worker_main_thread: realtime  # realtime: a worker's main thread wakes from its compute phases
                                  #   in SCHED_FIFO priority 1 (a synthetic worker's stays there; a torch
                                  #   or inc worker's runs its collective fair); the threads that move
                                  #   bytes stay fair (worker/threads.py) | fair: every thread of a
                                  #   worker in the kernel's fair class
        time_scale: 1             # K >= 1: the emulation runs K times slower (every rate / K, every
                                  #   model time x K: config/time_scale.py); the results stay nominal

Three more choices live where they always have: `run.gso_max_segs`, `run.queue_telemetry` and
`run.throughput_bin`; summary.json's `emulation` records all of them together (`record`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from mn_harness.errors import ConfigError, shown
from mn_harness.p4.limits import FRAME_BYTES
from mn_harness.units import TIME_UNITS, format_duration, parse_duration, parse_size

if TYPE_CHECKING:
    from mn_harness.config.model import RunConfig

SWITCHES = ("router", "bridge")
ACCESS_LINKS = ("shaped", "unshaped")
HOST_QUEUES = ("txqueuelen", "link")
QUEUE_LIMITS = ("bytes", "packets", "txqueuelen")
CPU_PLACEMENTS = ("shared", "split")
WORKER_MAIN_THREADS = ("fair", "realtime")
TXQUEUELEN = 1000  # a veth's (and most NICs') default txqueuelen: the leaf FIFO tc gives an HTB class
MIN_BURST_FRAMES = 4  # a burst given as a duration never drops below 4 frames (slow links)
MAX_BURST_S = 1.0
MAX_HTB_BYTES = 2**32 - 1  # tc's burst and quantum fields are 32-bit
MAX_TIME_SCALE = 100.0  # beyond, a 1 s iteration takes minutes and links meet HTB's lowest rate


@dataclass(frozen=True)
class Burst:
    """An HTB bucket: `seconds` of the link rate (at least MIN_BURST_FRAMES frames), or `bytes`;
    neither set means `auto`, tc's own default (given to tc as nothing)."""

    seconds: float | None = None
    bytes: int | None = None

    @property
    def auto(self) -> bool:
        return self.seconds is None and self.bytes is None

    def bytes_at(self, bw_bps: float, frame_bytes: int = FRAME_BYTES) -> int | None:
        """The bucket in bytes at `bw_bps` on a link of `frame_bytes` frames; None for auto."""
        if self.bytes is not None:
            return self.bytes
        if self.seconds is None:
            return None
        return max(MIN_BURST_FRAMES * frame_bytes, int(bw_bps / 8 * self.seconds))

    def to_yaml(self) -> str | int:
        if self.bytes is not None:
            return f"{self.bytes}B"
        if self.seconds is not None:
            text = format_duration(self.seconds)
            return text if parse_duration(text, "dump") == self.seconds else f"{self.seconds!r}s"
        return "auto"

    @classmethod
    def parse(cls, raw: Any, path: str) -> Burst:
        if raw == "auto":
            return cls()
        if isinstance(raw, str) and _time_unit(raw):
            seconds = parse_duration(raw, path, allow_zero=False, max_s=MAX_BURST_S)
            return cls(seconds=seconds)
        if isinstance(raw, str):
            size = parse_size(raw, path)
            if size > MAX_HTB_BYTES:
                raise ConfigError(path, f"{raw!r}: at most {MAX_HTB_BYTES} bytes (tc's 32-bit field)")
            return cls(bytes=size)
        raise ConfigError(path, f"expected a duration at the link rate (1ms), a size (15KiB) or auto, "
                                f"got {raw!r}")


def _time_unit(text: str) -> bool:
    unit = text.strip().lstrip("+-0123456789.eE")
    return unit in TIME_UNITS and unit != ""


@dataclass(frozen=True)
class Emulation:
    switches: str = "router"
    access_links: str = "shaped"
    host_queue: str = "txqueuelen"
    queue_limit: str = "bytes"
    htb_burst: Burst = Burst(seconds=0.001)
    htb_cburst: Burst = Burst(seconds=0.001)
    htb_quantum: int | None = None  # None: tc's default
    cpu_placement: str = "shared"
    worker_main_thread: str = "realtime"
    time_scale: float = 1.0  # K: the emulation runs K times slower than the experiment

    @classmethod
    def from_dict(cls, raw: Any, path: str) -> Emulation:
        if not isinstance(raw, Mapping):
            raise ConfigError(path, f"expected a mapping of emulation choices, got {raw!r}")
        allowed = {f.name for f in fields(cls)}
        for key in raw:
            if key not in allowed:
                raise ConfigError(f"{path}.{shown(key)}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
        values: dict[str, Any] = {}
        for key, choices in (("switches", SWITCHES), ("access_links", ACCESS_LINKS), ("host_queue", HOST_QUEUES),
                             ("queue_limit", QUEUE_LIMITS), ("cpu_placement", CPU_PLACEMENTS),
                             ("worker_main_thread", WORKER_MAIN_THREADS)):
            if key in raw:
                if raw[key] not in choices:
                    raise ConfigError(f"{path}.{key}", f"expected one of {', '.join(choices)}, got {raw[key]!r}")
                values[key] = raw[key]
        for key in ("htb_burst", "htb_cburst"):
            if key in raw:
                values[key] = Burst.parse(raw[key], f"{path}.{key}")
        if "htb_quantum" in raw and raw["htb_quantum"] != "auto":
            quantum = parse_size(raw["htb_quantum"], f"{path}.htb_quantum")
            if quantum > MAX_HTB_BYTES:
                raise ConfigError(f"{path}.htb_quantum", f"at most {MAX_HTB_BYTES} bytes, got {quantum}")
            values["htb_quantum"] = quantum
        if "time_scale" in raw:
            values["time_scale"] = _time_scale(raw["time_scale"], f"{path}.time_scale")
        return cls(**values)

    def to_yaml(self) -> dict[str, Any]:
        """config.yaml's `run.emulation`: every choice, as the loader reads it back."""
        return {"switches": self.switches, "access_links": self.access_links, "host_queue": self.host_queue,
                "queue_limit": self.queue_limit, "htb_burst": self.htb_burst.to_yaml(),
                "htb_cburst": self.htb_cburst.to_yaml(),
                "htb_quantum": "auto" if self.htb_quantum is None else f"{self.htb_quantum}B",
                "cpu_placement": self.cpu_placement, "worker_main_thread": self.worker_main_thread,
                "time_scale": int(self.time_scale) if self.time_scale.is_integer() else self.time_scale}

    def shapes_access(self) -> bool:
        """Are both ends of a host's link shaped (links between switches always are)?"""
        return self.access_links == "shaped"

    def changed(self) -> dict[str, Any]:
        """The choices that differ from the project's defaults (for a run's log line)."""
        default = Emulation().to_yaml()
        return {k: v for k, v in self.to_yaml().items() if default[k] != v}


def _time_scale(raw: Any, path: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 1 <= raw <= MAX_TIME_SCALE:
        raise ConfigError(path, f"expected a number from 1 (real time) to {MAX_TIME_SCALE:g} (times slower), "
                                f"got {raw!r}")
    return float(raw)


def record(run: RunConfig) -> dict[str, Any]:
    """summary.json `emulation`: every emulator choice of the run, those kept in `run:` too
    (but `time_scale`: summary.json's own top-level key, as every time in the folder depends on it)."""
    telemetry = run.queue_telemetry
    choices = {k: v for k, v in run.emulation.to_yaml().items() if k != "time_scale"}
    return {**choices, "gso_max_segs": run.gso_max_segs,
            "queue_telemetry": telemetry if isinstance(telemetry, bool) else list(telemetry),
            "throughput_bin_s": run.throughput_bin_s}


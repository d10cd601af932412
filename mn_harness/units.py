"""The one parser of the unit strings people write in experiment files and on the command line.

Every quantity the harness reads (link rates, sizes, durations, counts) goes through here, so
one set of rules holds everywhere:

* **Bits and bytes are told apart by case**: `b` is a bit, `B` a byte. `1Gbit`, `1Gbps` and
  `1Gb/s` are 10^9 bit/s; `1GBps` and `1GB/s` are 10^9 bytes/s = 8·10^9 bit/s. A size is in
  bytes (`25MB`, `4MiB`); a size written in bits (`25Mb`) is rejected rather than guessed.
* **Ambiguous spellings are rejected**: tc reads `mbps` as megabytes/s while most people mean
  megabits, so the all-lower-case `kbps`/`mbps`/`gbps` (and `mb`, `kb`, `gb` for sizes) name no
  unit here; the error says what to write instead. tc's own `kbit`/`mbit`/`gbit` are fine (they
  say bit).
* Decimal prefixes are powers of 1000 (tc's convention for rates), binary ones (`KiB`, `MiB`)
  powers of 1024. A bare number is bit/s, bytes, seconds or a plain count.
* Every number must be finite: NaN, infinity and overflowing literals (`1e400`) are rejected, as
  are values that round to zero where zero makes no sense.

Each parser takes the path of the value (YAML path or option) and raises `ConfigError` naming
it, so the CLI prints one line and exits 2."""

from __future__ import annotations

import math
import re

from mn_harness.errors import ConfigError

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_SPLIT = re.compile(rf"\s*({_NUMBER})\s*([A-Za-zµ/]*)\s*")

_BIT_PREFIXES = {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9, "t": 1e12,
                 "T": 1e12}


def _bandwidth_units() -> dict[str, float]:
    units: dict[str, float] = {"": 1.0}
    for p, scale in _BIT_PREFIXES.items():
        units[f"{p}bit"] = scale                       # tc: kbit, mbit, Gbit ...
        units[f"{p}bit/s"] = scale
        if p.isupper() or p == "":
            units[f"{p}bps"] = scale                   # Mbps, Gbps: megabits, gigabits
            units[f"{p}b/s"] = scale
            units[f"{p}Bps"] = 8 * scale               # MBps: megabytes per second
            units[f"{p}B/s"] = 8 * scale
    return units


BANDWIDTH_UNITS = _bandwidth_units()
SIZE_UNITS = {"": 1, "B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
              "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
COUNT_UNITS = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "T": 1e12}
TIME_UNITS = {"": 1, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0}

# Spellings that mean different things to different tools: say what to write instead.
_AMBIGUOUS_BANDWIDTH = {
    "kbps": "tc reads 'kbps' as kilobytes/s; write 'kbit' or 'Kbps' (bits) or 'KBps' (bytes)",
    "mbps": "tc reads 'mbps' as megabytes/s; write 'Mbit' or 'Mbps' (bits) or 'MBps' (bytes)",
    "gbps": "tc reads 'gbps' as gigabytes/s; write 'Gbit' or 'Gbps' (bits) or 'GBps' (bytes)",
    "tbps": "write 'Tbit' or 'Tbps' (bits) or 'TBps' (bytes)",
    "mb": "'mb' is neither megabits nor megabytes here; write 'Mbit' (bits/s) or 'MBps' (bytes/s)",
}
_BIT_SIZES = {"b", "kb", "Kb", "Mb", "Gb", "Tb", "kbit", "Kbit", "Mbit", "mbit", "Gbit", "gbit", "bit"}
_AMBIGUOUS_SIZE = {"mb": "MB", "kb": "KB", "gb": "GB", "tb": "TB", "kib": "KiB", "mib": "MiB",
                   "gib": "GiB"}


def _split(value: object, path: str, what: str, example: str) -> tuple[float, str]:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(path, f"expected {what} like {example!r}, got {value!r}")
    if isinstance(value, int | float):
        number, unit = float(value), ""
        if isinstance(value, int) and abs(value) > 1e300:
            number = math.inf
    else:
        match = _SPLIT.fullmatch(value)
        if not match:
            raise ConfigError(path, f"expected {what} like {example!r}, got {value!r}")
        number, unit = float(match.group(1)), match.group(2)
    if not math.isfinite(number):
        raise ConfigError(path, f"expected a finite number for {what}, got {value!r}")
    return number, unit


_SHOWN_BANDWIDTH = ("bit", "kbit", "Mbit", "Gbit", "Kbps", "Mbps", "Gbps", "KBps", "MBps", "GBps")


def _unknown(value: object, unit: str, units: dict | tuple) -> str:
    known = ", ".join(units if isinstance(units, tuple) else
                      sorted({u for u in units if u and "/" not in u}, key=lambda u: (len(u), u)))
    return f"unknown unit {unit!r} in {value!r} (use one of: {known})"


def parse_bandwidth(value: object, path: str) -> float:
    """Bits per second; a bare number is bits per second."""
    number, unit = _split(value, path, "a bandwidth", "1Gbit")
    if unit not in BANDWIDTH_UNITS:
        if unit.lower() in _AMBIGUOUS_BANDWIDTH and unit == unit.lower():
            raise ConfigError(path, f"ambiguous unit in {value!r}: {_AMBIGUOUS_BANDWIDTH[unit.lower()]}")
        raise ConfigError(path, _unknown(value, unit, _SHOWN_BANDWIDTH))
    bps = number * BANDWIDTH_UNITS[unit]
    if not math.isfinite(bps) or bps < 1:
        raise ConfigError(path, f"bandwidth must be at least 1 bit/s, got {value!r}")
    return bps


def parse_size(value: object, path: str, *, allow_zero: bool = False) -> int:
    """Bytes (rounded to a whole byte); a bare number is bytes."""
    number, unit = _split(value, path, "a size", "25MB")
    if unit not in SIZE_UNITS:
        if unit in _BIT_SIZES:
            raise ConfigError(path, f"{value!r} is in bits ('b'); sizes are bytes ('B'), e.g. "
                                    f"{number:g}{unit.replace('bit', 'B').replace('b', 'B')}")
        if unit in _AMBIGUOUS_SIZE:
            raise ConfigError(path, f"ambiguous unit in {value!r}: write {_AMBIGUOUS_SIZE[unit]} "
                                    "(B = byte, b = bit)")
        raise ConfigError(path, _unknown(value, unit, SIZE_UNITS))
    size = number * SIZE_UNITS[unit]
    if size < 0 or not math.isfinite(size):
        raise ConfigError(path, f"size must be positive, got {value!r}")
    rounded = int(round(size))
    if rounded <= 0 and not (allow_zero and size == 0):
        raise ConfigError(path, f"size must be at least 1 byte, got {value!r}")
    return rounded


def parse_count(value: object, path: str) -> int:
    """A whole count with an optional K/M/G/T (or B, billions) suffix, e.g. parameters `6.25M`."""
    number, unit = _split(value, path, "a count", "6.25M")
    if unit not in COUNT_UNITS:
        raise ConfigError(path, _unknown(value, unit, COUNT_UNITS))
    count = number * COUNT_UNITS[unit]
    if not math.isfinite(count) or round(count) < 1:
        raise ConfigError(path, f"count must be at least 1, got {value!r}")
    return int(round(count))


def parse_duration(value: object, path: str, allow_zero: bool = True,
                   max_s: float | None = None) -> float:
    """Seconds; a bare number is seconds. `max_s` bounds it (e.g. an idle gap)."""
    number, unit = _split(value, path, "a duration", "300ms")
    if unit not in TIME_UNITS:
        raise ConfigError(path, _unknown(value, unit, TIME_UNITS))
    seconds = number * TIME_UNITS[unit]
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise ConfigError(path, f"duration must be {'>= 0' if allow_zero else '> 0'}: {value!r}")
    if max_s is not None and seconds > max_s:
        raise ConfigError(path, f"{value!r} is longer than {format_duration(max_s)}")
    return seconds


def format_bandwidth(bps: float) -> str:
    for unit, scale in (("Tbit", 1e12), ("Gbit", 1e9), ("Mbit", 1e6), ("kbit", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g}{unit}"
    return f"{bps:g}bit"


def format_size(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return f"{nbytes:g}B"


def format_duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:g}s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:g}ms"
    return f"{seconds * 1e6:g}us"


def parse_fraction(value: object, path: str, *, max_value: float = 1.0) -> float:
    """A share: `10%` or `0.1`; between 0 and `max_value` (inclusive)."""
    if isinstance(value, str) and value.strip().endswith("%"):
        number, unit = _split(value.strip()[:-1], path, "a fraction", "10%")
        number /= 100
    else:
        number, unit = _split(value, path, "a fraction", "10%")
    if unit:
        raise ConfigError(path, f"expected a fraction like '10%' or 0.1, got {value!r}")
    if not 0 <= number <= max_value:
        raise ConfigError(path, f"expected a fraction between 0 and {max_value:g}, got {value!r}")
    return number

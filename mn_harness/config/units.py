"""Parse the unit strings people write in experiment files.

Bandwidth follows tc's convention (`1Gbit` = 10^9 bit/s), sizes accept decimal and binary
prefixes (`25MB`, `4MiB`), durations accept `ms`/`us`/`s` or a bare number of seconds. Each
parser takes the YAML path so an error says where the bad value is."""

from __future__ import annotations

import re

from mn_harness.config.errors import ConfigError

_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"

_BW_UNITS = {
    "": 1, "bit": 1, "bps": 1, "kbit": 1e3, "kbps": 1e3, "mbit": 1e6, "mbps": 1e6,
    "gbit": 1e9, "gbps": 1e9,
}
_SIZE_UNITS = {
    "": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9,
    "kib": 2**10, "mib": 2**20, "gib": 2**30,
}
_COUNT_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "b": 1e9}
_TIME_UNITS = {"": 1, "s": 1, "ms": 1e-3, "us": 1e-6}


def _split(value: object, path: str, what: str, example: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise ConfigError(path, f"expected {what} like {example!r}, got {value!r}")
    if isinstance(value, int | float):
        return float(value), ""
    if not isinstance(value, str):
        raise ConfigError(path, f"expected {what} like {example!r}, got {value!r}")
    match = re.fullmatch(rf"\s*({_NUMBER})\s*([A-Za-z]*)\s*", value)
    if not match:
        raise ConfigError(path, f"expected {what} like {example!r}, got {value!r}")
    return float(match.group(1)), match.group(3).lower()


def _scaled(value, path, what, example, units) -> float:
    number, unit = _split(value, path, what, example)
    if unit not in units:
        known = ", ".join(u for u in units if u)
        raise ConfigError(path, f"unknown unit {unit!r} in {value!r} (use one of: {known})")
    return number * units[unit]


def parse_bandwidth(value: object, path: str) -> float:
    """Bits per second; a bare number is bits per second."""
    bps = _scaled(value, path, "a bandwidth", "1Gbit", _BW_UNITS)
    if bps <= 0:
        raise ConfigError(path, f"bandwidth must be positive, got {value!r}")
    return bps


def parse_size(value: object, path: str) -> int:
    """Bytes; a bare number is bytes."""
    size = _scaled(value, path, "a size", "25MB", _SIZE_UNITS)
    if size <= 0:
        raise ConfigError(path, f"size must be positive, got {value!r}")
    return int(round(size))


def parse_count(value: object, path: str) -> int:
    """A count with optional K/M/G (or B, billions) suffix, e.g. model parameters `6.25M`."""
    count = _scaled(value, path, "a count", "6.25M", _COUNT_UNITS)
    if count <= 0:
        raise ConfigError(path, f"count must be positive, got {value!r}")
    return int(round(count))


def parse_duration(value: object, path: str, allow_zero: bool = True) -> float:
    """Seconds; a bare number is seconds."""
    seconds = _scaled(value, path, "a duration", "300ms", _TIME_UNITS)
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise ConfigError(path, f"duration must be {'>= 0' if allow_zero else '> 0'}: {value!r}")
    return seconds


def format_bandwidth(bps: float) -> str:
    for unit, scale in (("Gbit", 1e9), ("Mbit", 1e6), ("kbit", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g}{unit}"
    return f"{bps:g}bit"

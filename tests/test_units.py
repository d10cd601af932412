"""The one units module: bits and bytes told apart by case, ambiguous spellings refused, every
number finite, every error one line naming the path."""

import pytest

from mn_harness.errors import ConfigError
from mn_harness.units import parse_bandwidth, parse_count, parse_duration, parse_size


@pytest.mark.parametrize("text,bps", [
    ("1Gbit", 1e9), ("100Mbit", 1e8), ("2.5Gbps", 2.5e9), ("1gbit", 1e9), ("10Mb/s", 1e7),
    ("1GBps", 8e9), ("1MB/s", 8e6), ("64kbit", 64e3), (500, 500.0), ("1e9", 1e9),
])
def test_bandwidth(text, bps):
    assert parse_bandwidth(text, "x") == bps


@pytest.mark.parametrize("text,size", [
    ("25MB", 25_000_000), ("4MiB", 4 * 2**20), ("1e3", 1000), (7, 7), ("1.5KB", 1500), ("2GB", 2e9),
])
def test_size(text, size):
    assert parse_size(text, "x") == size


@pytest.mark.parametrize("text,secs", [
    ("300ms", 0.3), ("200us", 2e-4), ("1.5s", 1.5), (2, 2.0), ("0", 0.0), ("750ns", 7.5e-7), ("2min", 120.0),
])
def test_duration(text, secs):
    assert parse_duration(text, "x") == pytest.approx(secs)


def test_counts():
    assert parse_count("6.25M", "x") == 6_250_000 and parse_count("1.5B", "x") == 1_500_000_000
    assert parse_count(340e6, "x") == 340_000_000


@pytest.mark.parametrize("parser,value,words", [
    (parse_bandwidth, "1mbps", "ambiguous unit"),          # tc: megabytes/s
    (parse_bandwidth, "1gbps", "ambiguous unit"),
    (parse_bandwidth, "1 Gbyte", "unknown unit 'Gbyte'"),
    (parse_bandwidth, "nan", "expected a bandwidth"),
    (parse_bandwidth, float("nan"), "finite"),
    (parse_bandwidth, float("inf"), "finite"),
    (parse_bandwidth, "1e400", "finite"),
    (parse_bandwidth, "0.5bit", "at least 1 bit/s"),
    (parse_bandwidth, 0, "at least 1 bit/s"),
    (parse_bandwidth, True, "expected a bandwidth"),
    (parse_size, "25Mb", "is in bits"),                    # megabits are not a size
    (parse_size, "25mb", "ambiguous unit"),
    (parse_size, "0.4", "at least 1 byte"),
    (parse_size, "0B", "at least 1 byte"),
    (parse_size, "1e400B", "finite"),
    (parse_size, -5, "positive"),
    (parse_size, [1], "expected a size"),
    (parse_count, "0.2", "at least 1"),
    (parse_count, "5 parsecs", "unknown unit"),
    (parse_duration, "-5ms", ">= 0"),
    (parse_duration, "5 parsecs", "unknown unit"),
    (parse_duration, "5MS", "unknown unit 'MS'"),
    (parse_duration, float("inf"), "finite"),
    (parse_duration, "1e999s", "finite"),
])
def test_refusals_are_one_line_naming_the_path(parser, value, words):
    with pytest.raises(ConfigError) as info:
        parser(value, "jobs[0].x")
    message = str(info.value)
    assert message.startswith("jobs[0].x: ") and "\n" not in message and words in message, message


def test_duration_bounds():
    with pytest.raises(ConfigError, match="> 0"):
        parse_duration(0, "x", allow_zero=False)
    with pytest.raises(ConfigError, match="longer than 10s"):
        parse_duration("11s", "x", max_s=10)

"""mn_harness.p4.limits against the P4 sources (CPU only: the sources are parsed, not compiled).

Every `#define NAME value` and `const bit<N> NAME = value;` of mn_harness/p4/programs/**/*.p4 is
either mirrored in limits.py (MIRRORED, DERIVED) or declared P4-internal (P4_ONLY); the limits
that are declarations rather than constants (a register's width, a parameter's width, a
counter's size, a header's layout) are checked one by one below. Every name of limits.py is
checked here or listed in PYTHON_ONLY, so a new limit on either side fails until it is covered.
Change a limit in both places: this test fails when only one side changes."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from mn_harness.p4 import PROGRAMS_DIR, ecmp, limits
from mn_harness.p4.aggregation import STATS, stats_indices
from mn_harness.p4.entries import job_port_index, qdepth_index
from mn_harness.worker import inc

NUMBER = r"(0[xX][0-9a-fA-F]+|\d+)"
DEFINE_RE = re.compile(rf"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+{NUMBER}[ \t]*$", re.MULTILINE)
CONST_RE = re.compile(rf"\bconst\s+bit<(\d+)>\s+(\w+)\s*=\s*{NUMBER}\s*;")
TYPEDEF_RE = re.compile(r"\btypedef\s+bit<(\d+)>\s+(\w+)\s*;")
REGISTER_RE = re.compile(r"\bregister<bit<(\d+)>>\s*\(([^)]*)\)\s*(\w+)\s*;")
COUNTER_RE = re.compile(r"\bcounter\s*\(([^,]+),\s*CounterType\.\w+\s*\)\s*(\w+)\s*;")
ACTION_RE = re.compile(r"\baction\s+(\w+)\s*\(([^)]*)\)")
HEADER_RE = re.compile(r"\bheader\s+(\w+)\s*\{([^}]*)\}")
FIELD_RE = re.compile(r"^\s*(bit<(\d+)>|\w+)\s+(\w+)\s*;", re.MULTILINE)
VARIABLE_RE = re.compile(rf"^\s*bit<(\d+)>\s+(\w+)\s*=\s*{NUMBER}\s*;", re.MULTILINE)
PRIORITY_RE = re.compile(r"standard_metadata\.priority\s*=\s*(\w+)\s*;")

# P4 constant -> the limits.py name holding the same value
MIRRORED = {
    "MAX_PORTS": "MAX_PORTS",
    "PORT_MASK": "PORT_MASK",
    "MAX_JOBS": "MAX_JOBS",
    "QBUCKETS": "QBUCKETS",
    "QUEUE_DATA": "QUEUE_DATA",
    "QUEUE_SMALL": "QUEUE_SMALL",
    "SMALL_PKT_MAX_LEN": "SMALL_PACKET_MAX_IP_BYTES",
    "AGG_VECLEN": "AGG_VECLEN",
    "AGG_POOL": "AGG_POOL",
    "AGG_STATS_KINDS": "AGG_STATS_KINDS",
    "AGG_PORT_BASE": "AGG_PORT_BASE",
    "AGG_PORT_MASK": "AGG_PORT_MASK",
    "AGG_FLAG_RESULT": "AGG_FLAG_RESULT",
    "AGG_FLAG_SATURATED": "AGG_FLAG_SATURATED",
    "ECMP_MEMBERS": "ECMP_MEMBERS",
}
# P4 constants Python has no name for, but whose value follows from limits.py
DERIVED: dict[str, Callable[[], int]] = {
    "QBUCKET_MAX": lambda: limits.QBUCKETS - 1,
}
# protocol numbers and program-internal codes: nothing in Python depends on them
P4_ONLY = {"TYPE_IPV4", "TYPE_ARP", "PROTO_TCP", "PROTO_UDP", "ARP_REQUEST", "ARP_REPLY",
           "ECN_NOT_ECT", "ECN_CE", "AGG_MODE_NONE", "AGG_MODE_MCAST", "AGG_MODE_UNICAST"}
# limits.py names that are facts of the harness, not of the programs (each asserted below)
PYTHON_ONLY = {"FRAME_BYTES", "SMALL_FRAME_BYTES", "INC_MAX_SLOTS"}


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", "", text)


def sources() -> dict[Path, str]:
    files = sorted(PROGRAMS_DIR.rglob("*.p4"))
    assert files, f"no P4 sources under {PROGRAMS_DIR}"
    return {f: strip_comments(f.read_text()) for f in files}


@pytest.fixture(scope="module")
def p4() -> str:
    """All program text, comments removed (the programs include each other textually)."""
    return "\n".join(sources().values())


@pytest.fixture(scope="module")
def constants() -> dict[str, int]:
    """NAME -> value of every #define and const of the programs; a name defined twice must
    have one value."""
    found: dict[str, tuple[int, Path]] = {}

    def add(name: str, value: int, where: Path) -> None:
        if name in found:
            assert found[name][0] == value, (f"{name} is {found[name][0]} in {found[name][1].name} "
                                             f"but {value} in {where.name}")
        found[name] = (value, where)

    for path, text in sources().items():
        for name, value in DEFINE_RE.findall(text):
            add(name, int(value, 0), path)
        for width, name, value in CONST_RE.findall(text):
            assert int(value, 0) < 1 << int(width), f"{name} = {value} does not fit bit<{width}>"
            add(name, int(value, 0), path)
    return {name: value for name, (value, _) in found.items()}


def size_of(expr: str, constants: dict[str, int]) -> int:
    """A declaration's size: a product of numbers and constants ("MAX_JOBS * MAX_PORTS")."""
    out = 1
    for factor in expr.split("*"):
        factor = factor.strip()
        out *= int(factor, 0) if factor[0].isdigit() else constants[factor]
    return out


def declarations(regex: re.Pattern, text: str) -> dict[str, tuple[str, ...]]:
    return {m[-1]: m[:-1] for m in regex.findall(text)}


def action_params(text: str, action: str) -> dict[str, int]:
    """parameter name -> bit width of `action`."""
    params = dict(ACTION_RE.findall(text))[action]
    return {name: int(width) for width, name in re.findall(r"bit<(\d+)>\s+(\w+)", params)}


def header_widths(text: str, header: str) -> list[int]:
    """Field widths of `header` in order, typedefs (mac_t, ip4_t, ...) resolved."""
    typedefs = {name: int(width) for width, name in TYPEDEF_RE.findall(text)}
    body = dict(HEADER_RE.findall(text))[header]
    return [int(width) if width else typedefs[kind] for kind, width, _ in FIELD_RE.findall(body)]


# -- constants ----------------------------------------------------------------------------------

def test_every_p4_constant_is_mirrored_derived_or_p4_only(constants):
    unknown = set(constants) - set(MIRRORED) - set(DERIVED) - P4_ONLY
    assert not unknown, f"new P4 constants {sorted(unknown)}: mirror them in limits.py (and here)"
    gone = (set(MIRRORED) | set(DERIVED)) - set(constants)
    assert not gone, f"{sorted(gone)} no longer in the P4 sources"


@pytest.mark.parametrize("p4_name", sorted(MIRRORED))
def test_mirrored_constant_equals_limits(constants, p4_name):
    python_name = MIRRORED[p4_name]
    assert constants[p4_name] == getattr(limits, python_name), (
        f"P4 {p4_name} = {constants[p4_name]} but limits.{python_name} = "
        f"{getattr(limits, python_name)}: change both")


@pytest.mark.parametrize("p4_name", sorted(DERIVED))
def test_derived_constant_follows_from_limits(constants, p4_name):
    assert constants[p4_name] == DERIVED[p4_name]()


def test_every_limit_is_checked():
    names = {n for n in vars(limits) if n.isupper()}
    checked = set(MIRRORED.values()) | set(DECLARED) | PYTHON_ONLY
    assert names - checked == set(), f"limits {sorted(names - checked)} are checked nowhere"
    assert checked - names == set()


# -- declarations -------------------------------------------------------------------------------

def check_qdepth_bits(p4, constants):
    widths = {name: int(w) for w, name, _ in VARIABLE_RE.findall(p4)}
    assert widths["ecn_threshold"] == limits.QDEPTH_BITS      # bit<19> like enq_qdepth
    assert action_params(p4, "set_port_cfg")["threshold"] == limits.QDEPTH_BITS


def check_no_marking(p4, constants):
    initial = {name: int(v, 0) for _, name, v in VARIABLE_RE.findall(p4)}
    assert initial["ecn_threshold"] == limits.NO_MARKING
    assert limits.NO_MARKING == (1 << limits.QDEPTH_BITS) - 1   # no depth reaches it
    default = re.search(rf"default_action\s*=\s*set_port_cfg\(\s*{NUMBER}\s*,", p4)
    assert default and int(default.group(1), 0) == limits.NO_MARKING


def check_qbucket_max_shift(p4, constants):
    shift_bits = action_params(p4, "set_port_cfg")["bucket_shift"]
    assert limits.QBUCKET_MAX_SHIFT < 1 << shift_bits
    assert limits.QBUCKET_MAX_SHIFT == limits.QDEPTH_BITS - 1   # one bucket at the deepest


def check_priority_queues(p4, constants):
    used = set(PRIORITY_RE.findall(p4))
    assert used and used <= {"QUEUE_DATA", "QUEUE_SMALL"}, used
    assert limits.PRIORITY_QUEUES == 1 + max(constants[q] for q in used)


def check_ethernet_header_bytes(p4, constants):
    assert sum(header_widths(p4, "ethernet_t")) == 8 * limits.ETHERNET_HEADER_BYTES


def check_agg_max_job_id(p4, constants):
    assert limits.AGG_MAX_JOB_ID == limits.MAX_JOBS - 1            # agg_stats[job * kinds + k]
    assert limits.AGG_MAX_JOB_ID < 1 << header_widths(p4, "agg_t")[0]


def check_agg_max_workers(p4, constants):
    registers = declarations(REGISTER_RE, p4)
    width, pool = registers["agg_bitmap"]                          # one bit per worker rank
    assert int(width) == limits.AGG_MAX_WORKERS
    assert size_of(pool, constants) == limits.AGG_POOL
    assert size_of(registers["agg_values"][1], constants) == limits.AGG_POOL * limits.AGG_VECLEN
    assert limits.AGG_MAX_WORKERS <= 1 << int(registers["agg_count"][0])


def check_agg_ports(p4, constants):
    mask = constants["AGG_PORT_MASK"]
    assert limits.AGG_PORTS == (~mask & 0xFFFF) + 1
    assert constants["AGG_PORT_BASE"] & ~mask & 0xFFFF == 0        # the range starts at the base
    assert limits.AGG_PORT_BASE + limits.AGG_MAX_JOB_ID < limits.AGG_PORT_BASE + limits.AGG_PORTS


HASH_RE = re.compile(r"\bhash\(\s*crc\s*,\s*HashAlgorithm\.crc32\s*,\s*32w0\s*,"
                     r"\s*\{([^}]*)\}\s*,\s*64w0x100000000\s*\)")
MIX_RE = re.compile(r"bit<32>\s+mixed\s*=\s*\(crc\s*\*\s*\(seed\s*\|\s*32w1\)\)\s*>>\s*(\d+)\s*;")
MEMBER_RE = re.compile(r"\bhash\(\s*meta\.ecmp_member\s*,\s*HashAlgorithm\.identity\s*,\s*base\s*,"
                       r"\s*\{\s*mixed\s*\}\s*,\s*count\s*\)")


def check_ecmp_hash_inputs(p4, constants):
    """ecmp_group hashes exactly the fields mn_harness/p4/ecmp.py packs, with these widths, and
    mixes the seed in as ecmp.member_index does."""
    inputs = [f.strip() for f in HASH_RE.search(p4).group(1).split(",")]
    assert int(MIX_RE.search(p4).group(1)) == ecmp.MIX_SHIFT
    assert MEMBER_RE.search(p4)
    assert inputs == [name for name, _ in limits.ECMP_HASH_INPUTS]
    params = action_params(p4, "ecmp_group")
    assert params == {"base": 16, "count": 16, "seed": dict(limits.ECMP_HASH_INPUTS)["seed"]}
    ipv4 = dict(zip([n for _, _, n in FIELD_RE.findall(dict(HEADER_RE.findall(p4))["ipv4_t"])],
                    header_widths(p4, "ipv4_t"), strict=True))
    widths = dict(limits.ECMP_HASH_INPUTS)
    for field in ("srcAddr", "dstAddr", "protocol"):
        assert ipv4[field] == widths[f"hdr.ipv4.{field}"]
    for port in ("srcPort", "dstPort"):
        assert dict(zip([n for _, _, n in FIELD_RE.findall(dict(HEADER_RE.findall(p4))["l4_ports_t"])],
                        header_widths(p4, "l4_ports_t"), strict=True))[port] == widths["meta.l4_src"]
    assert sum(widths.values()) % 8 == 0  # BMv2 hashes whole bytes: no padding to guess
    assert limits.ECMP_MEMBERS < 1 << params["base"]


DECLARED = {
    "QDEPTH_BITS": check_qdepth_bits,
    "NO_MARKING": check_no_marking,
    "QBUCKET_MAX_SHIFT": check_qbucket_max_shift,
    "PRIORITY_QUEUES": check_priority_queues,
    "ETHERNET_HEADER_BYTES": check_ethernet_header_bytes,
    "AGG_MAX_JOB_ID": check_agg_max_job_id,
    "AGG_MAX_WORKERS": check_agg_max_workers,
    "AGG_PORTS": check_agg_ports,
    "ECMP_HASH_INPUTS": check_ecmp_hash_inputs,
}


@pytest.mark.parametrize("limit", sorted(DECLARED))
def test_declared_limit_matches_the_program(p4, constants, limit):
    DECLARED[limit](p4, constants)


def test_python_indexes_address_exactly_the_counter_cells(p4, constants):
    """entries.qdepth_index / job_port_index and aggregation.stats_indices lay the cells out as
    the programs size their counters."""
    counters = {name: size_of(expr, constants) for name, (expr,) in
                declarations(COUNTER_RE, p4).items()}
    for name in ("port_enq", "port_tx", "port_marks"):
        assert counters[name] == limits.MAX_PORTS
    last_port, last_job = limits.MAX_PORTS - 1, limits.MAX_JOBS - 1
    assert limits.PORT_MASK == last_port and limits.MAX_PORTS & limits.PORT_MASK == 0
    assert counters["qdepth_hist"] == qdepth_index(last_port, limits.QBUCKETS - 1) + 1
    for name in ("job_tx", "job_marks"):
        assert counters[name] == job_port_index(last_job, last_port) + 1
    assert counters["agg_stats"] == (limits.AGG_MAX_JOB_ID + 1) * limits.AGG_STATS_KINDS
    assert max(stats_indices(limits.AGG_MAX_JOB_ID)) < counters["agg_stats"]
    assert len(STATS) <= limits.AGG_STATS_KINDS


def test_job_ids_are_the_width_of_set_job(p4):
    assert 1 << action_params(p4, "set_job")["job"] == limits.MAX_JOBS   # job ids bit<6>


def test_worker_packet_is_the_agg_header(p4):
    """mn_harness/worker/inc.py packs aggregation.p4's agg_t and vec_t (the worker says so)."""
    codes = {8: "B", 16: "H", 32: "I"}
    assert inc.HEADER.format == "!" + "".join(codes[w] for w in header_widths(p4, "agg_t"))
    assert set(header_widths(p4, "vec_t")) == {32}
    assert inc.PACKET.size == inc.HEADER.size + 4 * limits.AGG_VECLEN
    assert struct.calcsize(f"!{limits.AGG_VECLEN}i") == 4 * limits.AGG_VECLEN


# -- harness facts --------------------------------------------------------------------------------

def test_python_only_limits():
    assert limits.FRAME_BYTES == 1500 + limits.ETHERNET_HEADER_BYTES   # a full-MTU frame
    assert limits.SMALL_FRAME_BYTES == limits.SMALL_PACKET_MAX_IP_BYTES + limits.ETHERNET_HEADER_BYTES
    assert limits.INC_MAX_SLOTS == limits.AGG_POOL // 2   # two physical slots per window slot

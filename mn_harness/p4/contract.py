"""What a P4 program must provide to run on the BMv2 data plane, and the check of a compiled
program's P4Info against it.

The harness programs every switch by name (mn_harness.p4.entries, aggregation, telemetry): the
tables it writes, their match fields and actions with their parameters, and the counters it
reads. A program given as `program: mine.p4` is usable when its P4Info has those names with
wide enough fields. They come in features; `forwarding` is needed by every switch, the others
only when the experiment asks for them (which it does is decided in
mn_harness/dataplane/bmv2_setup.py):

    forwarding       proxy ARP and IPv4 routes                       always
    ecmp             hash a flow to one of several next hops          routing: ecmp, with equal-cost paths
    ecn_marking      a per-port marking threshold                     a port's ecn_threshold is not off
    queue_telemetry  the counters queue.csv is read from              run.queue_telemetry samples a port
    aggregation      in-network aggregation jobs                      an inc_allreduce job on the switch

Only names, match kinds, bit widths, counter sizes and units are checked: what the program does
with them (which packets it marks, when it counts) is the program's own and is what its unit
tests check (mn_harness.testing.pytest_p4). Needs no switch and no p4c once the P4Info exists.

    gaps = missing(P4Info.from_file(prog.p4info_path), {"forwarding", "ecn_marking"})
    if gaps: print(describe(gaps))        # "table 'egress_port_cfg' (ECN marking)"
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .errors import P4Error, P4InfoLookupError
from .limits import (
    AGG_MAX_WORKERS,
    AGG_POOL,
    AGG_STATS_KINDS,
    ECMP_MEMBERS,
    MAX_JOBS,
    MAX_PORTS,
    QBUCKETS,
    QDEPTH_BITS,
)

# P4Info MatchField.MatchType values (p4info.proto), kept here so the check needs no protobuf
_MATCH_KINDS = {"exact": 2, "lpm": 3, "ternary": 4, "range": 5, "optional": 6}
_PRIORITY_KINDS = {4, 5, 6}
# P4Info CounterSpec.Unit values
_UNIT_BYTES, _UNIT_PACKETS, _UNIT_BOTH = 1, 2, 3


class ContractError(P4Error):
    """A program lacks what the features asked of it need (the message names the first gaps)."""


@dataclass(frozen=True)
class Key:
    field: str      # the match field's P4Info name (alias, or a unique dotted suffix)
    match: str      # exact, lpm, ternary
    bits: int       # at least this wide


@dataclass(frozen=True)
class Action:
    name: str
    params: tuple[tuple[str, int], ...] = ()  # (parameter, at least this many bits), all of them


@dataclass(frozen=True)
class Table:
    name: str
    keys: tuple[Key, ...]
    actions: tuple[Action, ...]


@dataclass(frozen=True)
class Counter:
    name: str
    size: int               # at least this many cells
    packets: bool = True    # the harness reads the packet count
    bytes: bool = False     # ... and/or the byte count


@dataclass(frozen=True)
class Feature:
    name: str
    title: str
    tables: tuple[Table, ...] = ()
    counters: tuple[Counter, ...] = ()


_FORWARD = Action("forward", (("port", 9), ("src_mac", 48), ("dst_mac", 48)))
_PORT_CFG = Table("egress_port_cfg", (Key("standard_metadata.egress_port", "exact", 9),),
                  (Action("set_port_cfg", (("threshold", QDEPTH_BITS), ("bucket_shift", 5))),))


def _bits(largest: int) -> int:
    """Bits a field needs to hold values up to `largest`."""
    return largest.bit_length()


_JOB_BITS = _bits(MAX_JOBS - 1)

FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature("forwarding", "forwarding", tables=(
        Table("arp_responder", (Key("standard_metadata.ingress_port", "exact", 9),),
              (Action("arp_reply", (("port_mac", 48),)),)),
        Table("ipv4_lpm", (Key("hdr.ipv4.dstAddr", "lpm", 32),), (_FORWARD,)),
    )),
    Feature("ecmp", "ECMP", tables=(
        Table("ipv4_lpm", (Key("hdr.ipv4.dstAddr", "lpm", 32),),
              (Action("ecmp_group", (("base", 16), ("count", 16), ("seed", 32))),)),
        Table("ecmp_members", (Key("meta.ecmp_member", "exact", _bits(ECMP_MEMBERS - 1)),), (_FORWARD,)),
    )),
    Feature("ecn_marking", "ECN marking", tables=(_PORT_CFG,)),
    Feature("queue_telemetry", "queue telemetry", tables=(
        _PORT_CFG,
        Table("job_classify", (Key("hdr.ipv4.srcAddr", "ternary", 32), Key("hdr.ipv4.dstAddr", "ternary", 32),
                               Key("hdr.ipv4.protocol", "ternary", 8)),
              (Action("set_job", (("job", _JOB_BITS),)),)),
    ), counters=(
        Counter("port_enq", MAX_PORTS),
        Counter("port_tx", MAX_PORTS, bytes=True),
        Counter("port_marks", MAX_PORTS),
        Counter("qdepth_hist", MAX_PORTS * QBUCKETS),
        Counter("job_tx", MAX_JOBS * MAX_PORTS, packets=False, bytes=True),
        Counter("job_marks", MAX_JOBS * MAX_PORTS),
    )),
    Feature("aggregation", "in-network aggregation", tables=(
        Table("agg_job", (Key("hdr.agg.job", "exact", _JOB_BITS), Key("udp_dst", "exact", 16)),
              (Action("agg_set_job", (("slot_base", _bits(AGG_POOL)), ("slot_count", _bits(AGG_POOL)),
                                      ("nworkers", _bits(AGG_MAX_WORKERS)), ("mcast_group", _JOB_BITS))),)),
        Table("agg_result_dst", (Key("hdr.agg.job", "exact", _JOB_BITS),
                                 Key("standard_metadata.egress_rid", "exact", _bits(AGG_MAX_WORKERS))),
              (Action("set_result_dst", (("dst_ip", 32), ("src_ip", 32), ("dst_mac", 48),
                                         ("src_mac", 48))),)),
    ), counters=(Counter("agg_stats", MAX_JOBS * AGG_STATS_KINDS),)),
)}
REQUIRED = ("forwarding",)
OPTIONAL = tuple(name for name in FEATURES if name not in REQUIRED)


@dataclass(frozen=True)
class Gap:
    feature: str    # FEATURES key
    what: str       # "table 'egress_port_cfg'", "counter 'qdepth_hist' with >= 2048 cells (has 64)"


def _name(obj) -> str:
    return obj.preamble.name


def _table_gaps(info, feature: str, need: Table) -> list[Gap]:
    try:
        table = info.table(need.name)
    except P4InfoLookupError as exc:
        return [Gap(feature, f"table {need.name!r}" + (" (ambiguous name)" if "ambiguous" in str(exc) else ""))]
    gaps = []
    where = f"of table {need.name!r}"
    kinds = set()
    known: set[int] = set()
    for key in need.keys:
        try:
            mf = info.match_field(need.name, key.field)
        except P4InfoLookupError:
            last = key.field.rsplit(".", 1)[-1]
            alike = [m for m in table.match_fields if m.name.rsplit(".", 1)[-1] == last]
            hint = ""
            if alike:  # `h.ipv4.dstAddr`: the control's parameter is named differently
                known.update(m.id for m in alike)
                hint = (f"; it has {alike[0].name!r}: name the controls' parameters hdr, meta, "
                        f"standard_metadata or annotate the key @name({key.field!r})")
            gaps.append(Gap(feature, f"match field {key.field!r} ({key.match}) {where}{hint}"))
            continue
        known.add(mf.id)
        kinds.add(mf.match_type)
        if mf.match_type != _MATCH_KINDS[key.match]:
            gaps.append(Gap(feature, f"match field {key.field!r} {where} must be {key.match}"))
        elif mf.bitwidth < key.bits:
            gaps.append(Gap(feature, f"match field {key.field!r} {where} must have >= {key.bits} bits "
                                     f"(has {mf.bitwidth})"))
    for mf in table.match_fields:
        # the harness leaves other fields out: only a don't-care (ternary, range, optional) may be
        # left out, and only in a table whose entries carry a priority anyway
        if mf.id not in known and not (mf.match_type in _PRIORITY_KINDS and kinds <= _PRIORITY_KINDS):
            gaps.append(Gap(feature, f"no other match field {where} (it has {mf.name!r}, which the "
                                     "harness does not set)"))
    allowed = {ref.id for ref in table.action_refs}
    for act in need.actions:
        try:
            action = info.action(act.name)
        except P4InfoLookupError:
            gaps.append(Gap(feature, f"action {act.name!r} {where}"))
            continue
        if action.preamble.id not in allowed:
            gaps.append(Gap(feature, f"action {act.name!r} in the actions {where}"))
        params = {p.name: p.bitwidth for p in action.params}
        for pname, bits in act.params:
            if pname not in params:
                gaps.append(Gap(feature, f"parameter {pname!r} of action {act.name!r}"))
            elif params[pname] < bits:
                gaps.append(Gap(feature, f"parameter {pname!r} of action {act.name!r} with >= {bits} "
                                         f"bits (has {params[pname]})"))
        extra = sorted(set(params) - {p for p, _ in act.params})
        if extra:
            gaps.append(Gap(feature, f"no other parameter of action {act.name!r} (it has "
                                     f"{', '.join(map(repr, extra))}, which the harness does not set)"))
    return gaps


def _counter_gaps(info, feature: str, need: Counter) -> list[Gap]:
    try:
        counter = info.counter(need.name)
    except P4InfoLookupError:
        return [Gap(feature, f"counter {need.name!r}")]
    gaps = []
    if counter.size < need.size:
        gaps.append(Gap(feature, f"counter {need.name!r} with >= {need.size} cells (has {counter.size})"))
    unit = counter.spec.unit
    if need.packets and unit not in (_UNIT_PACKETS, _UNIT_BOTH):
        gaps.append(Gap(feature, f"packet counts in counter {need.name!r} (CounterType.packets "
                                 "or packets_and_bytes)"))
    if need.bytes and unit not in (_UNIT_BYTES, _UNIT_BOTH):
        gaps.append(Gap(feature, f"byte counts in counter {need.name!r} (CounterType.bytes or "
                                 "packets_and_bytes)"))
    return gaps


def missing(info, features: Iterable[str]) -> list[Gap]:
    """What `info` (a P4Info) lacks for `features` (FEATURES keys; `forwarding` is always
    checked), in feature order; [] when the program meets them."""
    wanted = set(features) | set(REQUIRED)
    unknown = wanted - set(FEATURES)
    if unknown:
        raise ValueError(f"unknown program features: {', '.join(sorted(unknown))}")
    gaps: list[Gap] = []
    seen: set[str] = set()
    for name, feature in FEATURES.items():
        if name not in wanted:
            continue
        for table in feature.tables:
            for gap in _table_gaps(info, name, table):
                if gap.what not in seen:  # egress_port_cfg serves two features: name it once
                    seen.add(gap.what)
                    gaps.append(gap)
        for counter in feature.counters:
            gaps += _counter_gaps(info, name, counter)
    return gaps


def provided(info) -> list[str]:
    """The features `info` meets, in FEATURES order."""
    return [name for name in FEATURES if not [g for g in missing(info, {name}) if g.feature == name]]


def describe(gaps: Iterable[Gap], reasons: dict[str, str] | None = None, limit: int = 3) -> str:
    """One line: per feature its first `limit` gaps, then the feature (and why it is needed,
    from `reasons`: feature -> text)."""
    by_feature: dict[str, list[str]] = {}
    for gap in gaps:
        by_feature.setdefault(gap.feature, []).append(gap.what)
    parts = []
    for feature, whats in by_feature.items():
        shown = ", ".join(whats[:limit]) + (f" and {len(whats) - limit} more" if len(whats) > limit else "")
        why = (reasons or {}).get(feature)
        parts.append(f"{shown} ({FEATURES[feature].title}{': ' + why if why else ''})")
    return "; ".join(parts)


def check(info, features: Iterable[str], program: str, reasons: dict[str, str] | None = None) -> None:
    """Raise ContractError naming what `program` lacks for `features`."""
    gaps = missing(info, features)
    if gaps:
        raise ContractError(f"{program} lacks {describe(gaps, reasons)}")

"""The P4 programs' ECMP choice computed in Python (CPU only; tests/p4/test_ecmp_bmv2.py checks it
against a real BMv2): repeatable by seed, spread over the paths, and what the entries install."""

import zlib
from collections import Counter

import yaml

from mn_harness.config import Experiment
from mn_harness.dataplane.bmv2 import bmv2_paths
from mn_harness.network.plan import NetworkPlan
from mn_harness.p4.ecmp import ecmp_hash, member_index
from mn_harness.p4.entries import switch_entries, switch_specs
from tests.helpers import TOPOLOGIES


def test_hash_is_crc32_of_the_packed_fields():
    data = bytes([10, 0, 6, 1, 10, 0, 8, 1, 6]) + (45001).to_bytes(2, "big") + (40001).to_bytes(2, "big") \
        + (7).to_bytes(4, "big")
    assert ecmp_hash("10.0.6.1", "10.0.8.1", 6, 45001, 40001, 7) == zlib.crc32(data)


def test_choice_repeats_with_the_seed_and_spreads_over_paths():
    tuples = [(f"10.0.{i % 200}.1", f"10.1.{i // 200}.2", 6, 45000 + i % 7, 40000 + i % 5) for i in range(2000)]
    for count in (2, 3, 4):
        once = [member_index(*t, seed=11, count=count) for t in tuples]
        assert once == [member_index(*t, seed=11, count=count) for t in tuples]  # repeatable
        spread = Counter(once)
        assert set(spread) == set(range(count))
        assert min(spread.values()) > 0.8 * len(tuples) / count  # every path gets its share
    other = [member_index(*t, seed=12, count=2) for t in tuples]
    assert 0.3 < sum(a != b for a, b in zip(other, [member_index(*t, seed=11, count=2) for t in tuples],
                                           strict=True)) / len(tuples) < 0.7  # another seed: other paths


def leaf_spine(seed):
    raw = yaml.safe_load((TOPOLOGIES / "leaf-spine.yaml").read_text())
    raw.update(routing="ecmp")
    raw["run"]["seed"] = seed
    return NetworkPlan(Experiment.from_dict(raw))


def spines(plan):
    return {flow.label: next(n for n in nodes if n.startswith("spine"))
            for flow in plan.flows for nodes in [plan.flow_nodes(flow)]}


def test_bmv2_paths_are_resolved_repeatably_and_use_both_spines_over_seeds():
    first = spines(bmv2_paths(leaf_spine(1)))
    assert first == spines(bmv2_paths(leaf_spine(1)))
    used = Counter(s for seed in range(1, 21) for s in spines(bmv2_paths(leaf_spine(seed))).values())
    assert set(used) == {"spine1", "spine2"} and min(used.values()) > 0.3 * sum(used.values())


def test_entries_install_one_group_per_next_hop_set():
    plan = leaf_spine(1)
    spec = switch_specs(plan)["leaf1"]
    entries = switch_entries(spec)
    lpm = {e.match["hdr.ipv4.dstAddr"]: e for e in entries if e.table == "ipv4_lpm"}
    members = [e for e in entries if e.table == "ecmp_members"]
    assert len(members) == 2  # one group (spine1, spine2) shared by the 4 remote hosts
    remote = [e for e in lpm.values() if e.action == "ecmp_group"]
    assert len(remote) == 4 and {e.params["base"] for e in remote} == {0}
    assert all(e.params["count"] == 2 and e.params["seed"] == spec.ecmp_seed for e in remote)
    by_index = {e.match["meta.ecmp_member"]: e.params["port"] for e in members}
    assert by_index == {0: spec.port_to("spine1"), 1: spec.port_to("spine2")}  # the plan's order
    local = lpm[f"{plan.host_ip['h1']}/32"]
    assert local.action == "forward" and local.params["port"] == spec.port_to("h1")

"""Root tests of the BPF congestion controls on the real kernel, with real TCP transfers
between two network namespaces through a router that shapes to 200 Mbit/s
(tests/cc/kernel_net.py).

Why these checks: each variant registers, carries traffic and shows in `ss -ti`; nothing stays
registered after the experiment (also after a failure); with F == 1 the MLTCP variants move the
same bytes as the kernel's own reno / cubic through a shared bottleneck; the in-kernel iteration
detection learns the application's bytes per iteration and finds its boundaries. The adaptive
step's rules on the same network: test_adaptive_step_kernel.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mn_harness.cc.errors import CCError, CCUnavailable
from mn_harness.cc.manager import (
    CongestionControlManager,
    available_congestion_controls,
    unregister_by_name,
)
from mn_harness.cc.spec import CCSpec
from tests.cc.kernel_net import IP_B, NS_A, NS_B, finish, one_connection_rows, sh, struct_ops_names, traffic

pytestmark = pytest.mark.root


@pytest.mark.parametrize("variant", ["mltcp-reno", "mltcp-cubic", "dctcp", "mltcp-dctcp"])
def test_variant_registers_carries_traffic_and_unregisters(net, tmp_path, variant):
    spec = CCSpec(variant)
    with CongestionControlManager(log=lambda m: None) as mgr:
        mgr.prepare([spec])
        name = mgr.kernel_name(spec)
        assert len(name) <= 15 and name in mgr.registered_names()
        assert name in Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text()
        sink = traffic(NS_B, "sink", 5201, 6)
        time.sleep(0.3)
        client = traffic(NS_A, "blast", IP_B, 5201, time.monotonic() + 0.2, 0.3, 1.2, 1, name)
        time.sleep(0.8)
        ss = sh("ss", "-tin", "dst", IP_B, ns=NS_A)
        result = finish(client)
        sink.kill()
        sink.wait()
        assert name in ss, f"{name} not shown by ss -ti:\n{ss}"
        # 1.2 s at 200 Mbit/s is 30 MB; demand a real transfer, not a trickle.
        assert result[0]["bytes"] > 10_000_000, result
    assert name not in available_congestion_controls()
    assert name not in struct_ops_names()


def test_unregistered_after_failure_inside_with(tmp_path):
    specs = [CCSpec("mltcp-reno", slope=0.25, intercept=0.75), CCSpec("cubic")]
    with pytest.raises(RuntimeError, match="boom"):
        with CongestionControlManager(log=lambda m: None) as mgr:
            mgr.prepare(specs)
            names = mgr.registered_names()
            assert len(names) == 1 and names[0] in available_congestion_controls()
            assert mgr.kernel_name(specs[1]) == "cubic"
            raise RuntimeError("boom")
    assert names[0] not in available_congestion_controls()
    assert names[0] not in struct_ops_names()
    mgr.close()  # idempotent


def test_distinct_parameters_get_distinct_instances(manager):
    a = CCSpec("mltcp-reno", slope=1.0, intercept=1.0)
    b = CCSpec("mltcp-reno", slope=2.0, intercept=0.5, idle_gap_s=0.005)
    same_as_a = CCSpec.from_dict({"name": "mltcp_reno", "slope": 1, "intercept": 1.0},
                                 "jobs[2].cc")
    manager.prepare([a, b, same_as_a])
    assert manager.kernel_name(a) != manager.kernel_name(b)
    assert manager.kernel_name(a) == manager.kernel_name(same_as_a)
    assert len(manager.registered_names()) == 2


def test_failed_prepare_leaves_nothing_registered(tmp_path, monkeypatch):
    mgr = CongestionControlManager(log=lambda m: None)
    mgr.prepare([CCSpec("mltcp-cubic", slope=0.5)])
    name = mgr.registered_names()[0]
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without clang/bpftool/modprobe
    with pytest.raises(CCUnavailable) as exc:
        mgr.prepare([CCSpec("mltcp-cubic", slope=0.75)])
    monkeypatch.undo()
    assert "apt-get install" in str(exc.value) and "\n" not in str(exc.value)
    assert name not in available_congestion_controls()
    assert mgr.registered_names() == []


def test_unknown_kernel_cc_is_one_clear_line(tmp_path):
    # 'lp' is a real Linux CC that this test machine may or may not have as a module.
    with CongestionControlManager(log=lambda m: None) as mgr:
        try:
            mgr.prepare([CCSpec("lp")])
        except CCUnavailable as exc:
            assert "modprobe tcp_lp" in str(exc) and "\n" not in str(exc)
        else:
            assert mgr.kernel_name(CCSpec("lp")) == "lp"
        with pytest.raises(CCError):
            mgr.kernel_name(CCSpec("bbr"))  # not prepared


def test_unregister_by_name(tmp_path):
    mgr = CongestionControlManager(log=lambda m: None)
    mgr.prepare([CCSpec("mltcp-reno", slope=3.0)])
    name = mgr.registered_names()[0]
    unregister_by_name(name)  # what `mn-harness clean` does after a crash
    assert name not in available_congestion_controls()
    unregister_by_name(name)  # idempotent
    mgr.close()  # nothing left to do, no error
    with pytest.raises(CCError):
        unregister_by_name("not a name; rm -rf")


ROUNDS, FLOWS, WARM_S, MEASURE_S = 10, 4, 1.0, 4.0


def compete(a: str, b: str, rounds: int = ROUNDS, flows: int = FLOWS) -> list[tuple[int, int]]:
    """Per round, bytes acked by `flows` connections of CC `a` and as many of CC `b`, all
    in one sender process and sharing the bottleneck, over MEASURE_S after WARM_S warm-up;
    which CC connects first alternates between rounds. a == b is allowed (the control)."""
    out = []
    for i in range(rounds):
        sink = traffic(NS_B, "sink", 5202, 12)
        time.sleep(0.3)
        try:
            first, second = (a, b) if i % 2 == 0 else (b, a)
            flows_out = finish(traffic(NS_A, "blast", IP_B, 5202, time.monotonic() + 0.5,
                                       WARM_S, MEASURE_S, flows, f"{first},{second}"))
        finally:
            sink.kill()
            sink.wait()
        # sockets alternate first, second, first, ...: sides by position (works for a == b)
        got = [0, 0]
        for k, f in enumerate(flows_out):
            got[k % 2 if i % 2 == 0 else 1 - k % 2] += f["bytes"]
        out.append((got[0], got[1]))
    return out


# Controls on the 2-core CI VM (kernel 6.18), 4 + 4 flows in one process, 200 Mbit/s,
# 200-packet FIFO, 6 rounds x 4 s: per round b/a swings 0.77-1.31, per 6-round test
# reno/reno 0.940-1.009, mlreno/mlreno 0.954-1.022, cubic/cubic 0.945-1.063,
# mlcubic/mlcubic 0.948-1.067. With 10 rounds, 5 runs in a row: mltcp-reno/reno
# 1.002-1.092, mltcp-cubic/cubic 0.971-1.029. The 10% tolerance stays.
TOLERANCE = 0.10


def _ratio(rounds: list[tuple[int, int]]) -> float:
    return sum(r[1] for r in rounds) / sum(r[0] for r in rounds)


@pytest.mark.slow
@pytest.mark.parametrize("base,variant", [("reno", "mltcp-reno"), ("cubic", "mltcp-cubic")])
def test_f_equal_one_moves_same_bytes_as_kernel(net, manager, base, variant, capsys):
    """With slope 0 / intercept 1 the variant is its base algorithm: over a shared
    bottleneck it must get the same bytes as the kernel's own CC within TOLERANCE.
    Before mltcp_tcp.h's lost-callback guard, BPF Reno won by 1.1-1.5x in about one
    run of three here (kernel returned garbage ssthresh, see mltcp_tcp.h)."""
    spec = CCSpec(variant, slope=0.0, intercept=1.0, restart=False, adapt=False)
    manager.prepare([spec, CCSpec(base)])
    rounds = compete(base, manager.kernel_name(spec))
    ratio = _ratio(rounds)
    if not 1 - TOLERANCE <= ratio <= 1 + TOLERANCE:
        # One round swings 0.77-1.31, so 10 rounds carry a ~3-4% standard error: a sample
        # near the bound is extended (same bound, twice the data) rather than judged alone.
        # A real bias of 10% or more, like the 1.1-1.5x before the lost-callback guard,
        # still fails on the pooled 20 rounds.
        rounds += compete(base, manager.kernel_name(spec))
        ratio = _ratio(rounds)
    per_round = " ".join(f"{m / k:.3f}" for k, m in rounds)
    used = sum(k + m for k, m in rounds) / (len(rounds) * MEASURE_S * 200e6 / 8)
    with capsys.disabled():
        print(f"\n{variant}(F=1)/{base} bytes ratio {ratio:.3f}, bottleneck {used:.0%} used "
              f"(rounds: {per_round})")
    # The flows must have shared a full link, or the ratio says nothing about the CCs. One CI
    # run on the 2-core VM used 79% (63-87 MB per 100 MB round: the one sender process, 8
    # flows, competes with pytest for 2 cores); the same VM idle used 89-90% (2 runs, 3 Dec
    # 2026). The bound only catches a sender that stalled or a link that was not the limit.
    assert used > 0.6, f"bottleneck only {used:.0%} used: the CCs did not compete"
    assert 1 - TOLERANCE <= ratio <= 1 + TOLERANCE, per_round


def test_learned_bytes_per_iteration(net, manager, capsys):
    # default slope/intercept; the pauses here are 60 ms, so a gap below the 50 ms default
    spec = CCSpec("mltcp-reno", idle_gap_s=0.02)
    manager.prepare([spec])
    sizes = [400_000, 1_500_000]
    sink = traffic(NS_B, "sink", 5203, 15)
    time.sleep(0.3)
    try:
        conns = finish(traffic(NS_A, "iter", IP_B, 5203, manager.kernel_name(spec), 8, 0.06,
                               *sizes))
    finally:
        sink.kill()
        sink.wait()
    time.sleep(0.2)  # let the closed sockets be destroyed (release() writes the last row)
    rows = manager.read_telemetry()
    for conn in conns:
        mine = [r for r in rows if r["src"].endswith(f":{conn['sport']}")]
        iterations = {r["iteration"] for r in mine}
        assert iterations >= set(range(1, 9)), (conn, sorted(iterations))
        assert len(iterations) == 8, f"iteration boundaries mis-detected: {sorted(iterations)}"
        for r in mine:
            if r["iteration"] >= 2 and not r["final"]:
                err = abs(r["learned_bytes_per_iteration"] / conn["size"] - 1)
                with capsys.disabled():
                    print(f"\nsize {conn['size']} iter {r['iteration']}: learned "
                          f"{r['learned_bytes_per_iteration']} ({err:.2%})", end="")
                assert err <= 0.05, r
        assert all(r["kernel_name"] == manager.kernel_name(spec) for r in mine)



def test_stall_inside_an_iteration_does_not_end_it(net, manager):
    """A pause longer than idle_gap after half of an iteration's bytes (a ring step stalled on
    its neighbour) is not an iteration boundary: one telemetry row per iteration, each with
    the whole iteration's bytes (variants.MIN_ITERATION_FRACTION). Before that rule every
    such iteration showed as two rows of half the bytes, F restarting mid-phase."""
    size, iters = 2_000_000, 6
    mine = one_connection_rows(manager, "split", 5204, iters, 0.3, 0.15, size)
    assert [r["iteration"] for r in mine] == list(range(1, iters + 1)), \
        [(r["iteration"], r["bytes"]) for r in mine]
    for r in mine:
        assert abs(r["bytes"] / size - 1) <= 0.01, r
        if r["iteration"] >= 2:
            assert r["f_last"] > 4.5, r  # F reached ~slope + intercept by the iteration's end


def test_missed_boundary_does_not_merge_the_iterations_after_it(net, manager):
    """One compute pause shorter than idle_gap makes two iterations one row of twice the
    bytes; the iterations after it must again be one row each. Before the estimate ignored a
    single iteration over 1.5x, the doubled bytes raised it until every later boundary fell
    under MIN_ITERATION_FRACTION of it, and all later iterations were merged in pairs."""
    size, iters = 2_000_000, 9
    mine = one_connection_rows(manager, "merge", 5205, iters, 0.3, 3, size)
    got = [round(r["bytes"] / size) for r in mine]
    assert got == [1, 1, 2] + [1] * (iters - 3 - 1), got
    assert all(abs(r["learned_bytes_per_iteration"] / size - 1) <= 0.01 for r in mine), \
        [r["learned_bytes_per_iteration"] for r in mine]


# DCTCP's response to ECN marks needs a marking bottleneck, which this kernel lacks (no RED):
# it is tested on BMv2's marking queue in tests/p4/test_harness_bmv2.py (dctcp keeps the
# bottleneck near the threshold where cubic fills it).

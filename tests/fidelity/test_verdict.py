"""The verdict: thresholds against measured invariants, and what it says."""

from __future__ import annotations

import pytest

from mn_harness.config.fidelity import FidelityThresholds
from mn_harness.dataplane.port_rates import Bmv2Rates
from mn_harness.fidelity.link import HIST_BUCKETS, SIZE_CLASSES, LinkGaps
from mn_harness.fidelity.verdict import fidelity_block
from mn_harness.results.schema_fidelity import (
    FAITHFUL,
    UNCHECKED,
    UNFAITHFUL,
    FidelityHost,
    FidelityLink,
    FidelityWorkers,
    WorkerTiming,
)


def gaps(n: int, within: int, late: int) -> LinkGaps:
    hist = [0] * HIST_BUCKETS
    hist[0] = n - late
    hist[200] = late
    sizes = [0] * SIZE_CLASSES
    sizes_in = [0] * SIZE_CLASSES
    sizes[1], sizes_in[1] = n, within
    return LinkGaps(n + 1, n * 1514, n, within, late, n - within - late, n * 1000, n * 1000, tuple(hist),
                    tuple(sizes), tuple(sizes_in))


HOST_OK = FidelityHost(all_saturated_share=0.0, steal_mean=0.0)
WORKERS_OK = FidelityWorkers(jobs={"j": WorkerTiming(compute_overshoot_p99_ms=0.5)})


def test_every_invariant_held():
    block = fidelity_block(FidelityThresholds(), {"s1->s2": gaps(1000, 990, 5)}, None, HOST_OK, WORKERS_OK)
    assert block.verdict == FAITHFUL and block.violations == [] and block.reason is None and block.faithful
    assert block.links["s1->s2"].within_share == 0.99 and block.link_monitor == "on"
    assert block.line() == "fidelity: faithful"


def test_a_slow_link_names_itself_and_by_how_much():
    block = fidelity_block(FidelityThresholds(), {"s1->s2": gaps(1000, 600, 300), "s2->s1": gaps(10, 0, 10)},
                           None, HOST_OK, WORKERS_OK)
    assert block.verdict == UNFAITHFUL
    (v,) = block.violations  # s2->s1 has too few gaps to be judged
    assert v.invariant == "link" and v.where == "s1->s2" and v.measured == 0.6 and v.threshold == 0.9
    assert block.reason.startswith("link s1->s2: 60.0% of 1000 backlogged gaps within ±10%")
    assert "30.0% late" in block.reason


def test_host_and_workers_violations_and_their_thresholds():
    t = FidelityThresholds(host_steal=0.02, compute_overshoot_s=0.001)
    block = fidelity_block(t, {}, None, FidelityHost(all_saturated_share=0.2, steal_mean=0.03), WORKERS_OK)
    assert [v.invariant for v in block.violations] == ["host", "host"]
    assert "every core saturated in 20.0%" in block.violations[0].text
    block = fidelity_block(t, {}, None, HOST_OK,
                           FidelityWorkers(jobs={"j": WorkerTiming(compute_overshoot_p99_ms=1.5)}))
    assert block.violations[0].where == "j" and block.verdict == UNFAITHFUL


def test_unchecked_when_off_or_when_the_link_monitor_could_not_run():
    off = fidelity_block(FidelityThresholds(enabled=False), None, None, None, None)
    assert off.verdict == UNCHECKED and "off" in off.reason
    blind = fidelity_block(FidelityThresholds(), None, "no BTF", HOST_OK, WORKERS_OK)
    assert blind.verdict == UNCHECKED and blind.link_monitor == "unavailable: no BTF"
    # what was checked still counts
    broken = fidelity_block(FidelityThresholds(), None, "no BTF", FidelityHost(all_saturated_share=0.5), WORKERS_OK)
    assert broken.verdict == UNFAITHFUL


def test_a_bmv2_port_that_sends_below_its_rate_while_backlogged():
    rates = Bmv2Rates()
    rates.watch("s1", 1, "s1->s2", rate_pps=1000)
    for _ in range(30):
        rates.add("s1", 1, 0.02, 20, mean_depth=10)  # backlogged, 1000 pkt/s: on rate
        rates.add("s1", 1, 0.02, 12, mean_depth=10)  # backlogged, 600 pkt/s: the switch fell behind
        rates.add("s1", 1, 0.02, 3, mean_depth=0.5)  # not backlogged: not judged
    port = rates.by_link()["s1->s2"]
    assert len(port.ratios) == 60 and port.within_share(0.1) == 0.5
    block = fidelity_block(FidelityThresholds(), {}, None, HOST_OK, WORKERS_OK, switch_ports=rates.by_link())
    assert block.verdict == UNFAITHFUL and block.violations[0].where == "s1->s2"
    assert block.links["s1->s2"] == FidelityLink(kind="bmv2 port", intervals=60, within_share=0.5, rate_ratio=0.8)
    rates.watch("s1", 1, "s1->s2", rate_pps=600)  # the link's rate was halved mid-run
    rates.add("s1", 1, 0.02, 12, mean_depth=10)
    assert rates.by_link()["s1->s2"].ratios[-1] == 1.0


def test_a_send_that_waited_is_a_workers_violation_and_thresholds_parse_with_their_paths():
    from mn_harness.config.fidelity import FidelityThresholds as T
    from mn_harness.errors import ConfigError

    t = T.from_dict({"send_lag": "2ms", "link_within": 0.95, "compute_overshoot": "1ms"}, "run.fidelity")
    assert (t.send_lag_s, t.link_within, t.compute_overshoot_s, t.link_tolerance) == (0.002, 0.95, 0.001, 0.1)
    assert T.from_dict(False, "run.fidelity").enabled is False and T().to_yaml() is True
    assert T.from_dict(t.to_yaml(), "run.fidelity") == t
    block = fidelity_block(t, {}, None, HOST_OK, FidelityWorkers(jobs={"j": WorkerTiming(send_lag_p99_ms=3.5)}))
    (v,) = block.violations
    assert (v.invariant, v.where, v.measured, v.threshold) == ("workers", "j", 3.5, 2.0)
    bad = (({"link_within": 1.5}, "run.fidelity.link_within"), ({"send_lag": "-1ms"}, "run.fidelity.send_lag"),
           ({"link_min_gaps": 0}, "run.fidelity.link_min_gaps"), ({"bogus": 1}, "run.fidelity.bogus"),
           ("yes", "run.fidelity"))
    for raw, path in bad:
        with pytest.raises(ConfigError) as err:
            T.from_dict(raw, "run.fidelity")
        assert str(err.value).startswith(path + ":"), str(err.value)


def test_time_dilation_is_advised_only_for_shaped_links_that_lost_time_on_a_host_that_kept_up():
    from mn_harness.fidelity.verdict import time_scale_advice

    slow = {"s1->s2": gaps(1000, 600, 300)}
    rates = {"s1->s2": 1e9, "h1->s1": 10e9}
    advice = time_scale_advice(fidelity_block(FidelityThresholds(), slow, None, HOST_OK, WORKERS_OK), 1, rates)
    assert advice is not None and "s1->s2" in advice and "run.emulation.time_scale" in advice
    assert "time scale 5" in (time_scale_advice(fidelity_block(FidelityThresholds(), slow, None, HOST_OK,
                                                                 WORKERS_OK), 5, rates) or "")
    busy = FidelityHost(all_saturated_share=0.5, steal_mean=0.0)  # a busy host: its own verdict comes first
    assert time_scale_advice(fidelity_block(FidelityThresholds(), slow, None, busy, WORKERS_OK), 1, rates) is None
    ok = fidelity_block(FidelityThresholds(), {"s1->s2": gaps(1000, 990, 5)}, None, HOST_OK, WORKERS_OK)
    assert time_scale_advice(ok, 1, rates) is None and time_scale_advice(None, 1, rates) is None


def test_the_advised_time_scale_runs_the_fastest_slow_link_at_the_faithful_rate():
    """The advice names the scale that brings the fastest link that lost time (the machine's
    rate, not a faster link that kept it) to FAITHFUL_LINK_BPS, from the present scale; a link
    already that slow gets twice the present scale."""
    from mn_harness.fidelity.verdict import FAITHFUL_LINK_BPS, suggested_time_scale, time_scale_advice

    slow = fidelity_block(FidelityThresholds(), {"s1->s2": gaps(1000, 600, 300), "s2->s1": gaps(1000, 600, 300),
                                                 "h1->s1": gaps(1000, 990, 5)}, None, HOST_OK, WORKERS_OK)
    rates = {"s1->s2": 10 * FAITHFUL_LINK_BPS, "s2->s1": 4 * FAITHFUL_LINK_BPS, "h1->s1": 40 * FAITHFUL_LINK_BPS}
    assert "time_scale, e.g. 10 " in (time_scale_advice(slow, 1, rates) or "")
    # at scale 5 the machine already runs s1->s2 at 2x the yardstick: 5 x 2
    dilated = {name: bps / 5 for name, bps in rates.items()}
    assert "time_scale, e.g. 10 " in (time_scale_advice(slow, 5, dilated) or "")
    assert suggested_time_scale(1, 5 * FAITHFUL_LINK_BPS) == 5
    assert suggested_time_scale(2, 1.5 * FAITHFUL_LINK_BPS) == 3  # 2 x 1.5
    assert suggested_time_scale(3, FAITHFUL_LINK_BPS) == 6  # at the yardstick and still slow: twice
    assert suggested_time_scale(1, 0.5 * FAITHFUL_LINK_BPS) == 2
    assert "e.g. 5 " in (time_scale_advice(slow, 1, {}) or "")  # rates unknown: the documented example

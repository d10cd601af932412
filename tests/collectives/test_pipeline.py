"""Pipeline point-to-point: the 1F1B order, bytes per stage, and the ideal pass time."""

import pytest

from mn_harness.collectives import pipeline
from mn_harness.collectives.pipeline import BACKWARD as B
from mn_harness.collectives.pipeline import FORWARD as F


def test_1f1b_warms_up_then_alternates_then_drains():
    assert pipeline.one_f_one_b(4, 6, 0) == [(F, 0), (F, 1), (F, 2), (F, 3), (B, 0), (F, 4), (B, 1),
                                             (F, 5), (B, 2), (B, 3), (B, 4), (B, 5)]
    assert pipeline.one_f_one_b(4, 6, 3) == [x for b in range(6) for x in ((F, b), (B, b))]
    assert pipeline.one_f_one_b(4, 2, 0) == [(F, 0), (F, 1), (B, 0), (B, 1)]  # m < p - 1


@pytest.mark.parametrize("p,m", [(2, 1), (3, 4), (4, 8)])
def test_every_stage_runs_each_micro_batch_forward_then_backward(p, m):
    for s in range(p):
        order = pipeline.one_f_one_b(p, m, s)
        assert sorted(order) == sorted([(F, b) for b in range(m)] + [(B, b) for b in range(m)])
        assert all(order.index((F, b)) < order.index((B, b)) for b in range(m))
        # 1F1B: at most p - s micro-batches in flight on stage s
        in_flight = peak = 0
        for kind, _ in order:
            in_flight += 1 if kind == F else -1
            peak = max(peak, in_flight)
        assert peak <= p - s


def test_pipeline_bytes_per_stage():
    sched = pipeline.pipeline(1000, 4, 3, grad_bytes=400)
    assert sched.bytes_sent_per_rank() == [3 * 1000, 3 * 1400, 3 * 1400, 3 * 400]
    assert sched.directed_pairs() == [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)]
    assert sched.total_bytes == 3000


def test_ideal_time_without_network_is_the_1f1b_bubble_formula():
    # zero transfer time: (m + p - 1) * (tf + tb)
    p, m, tf, tb = 4, 8, 0.01, 0.02
    t = pipeline.ideal_time(p, m, tf, tb, 0, 0, lambda *_: 0.0)
    assert t == pytest.approx((m + p - 1) * (tf + tb))


def test_ideal_time_adds_transfer_time_on_the_critical_path():
    p, m, tf, tb = 2, 1, 0.01, 0.02
    t = pipeline.ideal_time(p, m, tf, tb, 1000, 1000, lambda s, d, b: b * 1e-5)
    assert t == pytest.approx(tf + 0.01 + tf + tb + 0.01 + tb)

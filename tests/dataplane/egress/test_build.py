"""What one port's egress program is compiled with (no compiler needed)."""

import pytest

from mn_harness.dataplane.egress.build import EgressConfig


def defines(**kw) -> dict[str, str]:
    cfg = EgressConfig(**{"mark_bytes": 30280, "limit_bytes": 151400, "rate_bps": 1e9,
                          "burst_bytes": 125000, "jobs": 3, **kw})
    return dict(d[2:].split("=", 1) for d in cfg.defines())


def test_threshold_limit_tracker_and_virtual_queue_constants():
    d = defines()
    assert d["MNH_MARK_BYTES"] == "30280ULL" and d["MNH_LIMIT_BYTES"] == "151400ULL"
    assert d["MNH_TRACK"] == "1" and d["MNH_COMPARE"] == "0" and d["MNH_JOBS"] == "3"
    assert d["MNH_VQ_RATE_FP"] == f"{1 << 17}ULL"  # 1 Gbit/s = 1/8 byte per ns, << 20
    assert d["MNH_VQ_BURST_BYTES"] == "125000"
    assert defines(mark_bytes=None)["MNH_MARK_BYTES"] == "0ULL"  # off
    assert defines(tracker="vq", compare=True)["MNH_TRACK"] == "2"
    assert defines(tracker="vq", compare=True)["MNH_COMPARE"] == "0"  # compare needs the backlog
    assert defines(compare=True)["MNH_COMPARE"] == "1"
    with pytest.raises(ValueError):
        EgressConfig(1, 1, 1, 1, 1, tracker="sojourn").defines()

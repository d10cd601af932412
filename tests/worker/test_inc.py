"""inc_allreduce without BMv2 or root: fixed-point conversion and saturation, packet encoding,
slot numbering, result checking, and the worker protocol (window, retransmission, duplicate
results) against a Python model of aggregation.p4 on loopback UDP that drops packets."""

from __future__ import annotations

import random
import socket
import struct
import threading

import pytest

from mn_harness.worker import inc
from mn_harness.worker.inc import (
    FLAG_RESULT,
    FLAG_SATURATED,
    INT32_MAX,
    INT32_MIN,
    PAYLOAD_BYTES,
    VECLEN,
    IncSession,
    check_result,
    decode,
    encode,
    expected_inputs,
    from_fixed,
    rotate,
    slot_of,
    to_fixed,
)
from mn_harness.worker.spec import WorkerSpec


# -- fixed point ------------------------------------------------------------------------------
def test_to_fixed_rounds_and_scales():
    ints, clipped = to_fixed([0.5, -0.25, 1.0 / 3, 0.0, -1e-9], 65536)
    assert ints == [32768, -16384, 21845, 0, 0]
    assert clipped == 0
    assert from_fixed(ints, 65536)[:2] == [0.5, -0.25]


def test_to_fixed_saturates_and_counts():
    ints, clipped = to_fixed([1e9, -1e9, 3.0, 32767.99997], 65536)
    assert ints[:2] == [INT32_MAX, INT32_MIN]
    assert ints[2] == 3 * 65536
    assert clipped == 2
    # exactly the bounds are not counted as clipped
    ints, clipped = to_fixed([INT32_MAX / 4, INT32_MIN / 4], 4)
    assert ints == [INT32_MAX, INT32_MIN] and clipped == 0


def test_to_fixed_rejects_nan():
    with pytest.raises(inc.IncError):
        to_fixed([float("nan")], 10)


def test_saturating_add_matches_the_switch():
    assert inc.saturating_add(INT32_MAX - 1, 5) == INT32_MAX
    assert inc.saturating_add(INT32_MIN + 1, -5) == INT32_MIN
    assert inc.saturating_add(-3, 5) == 2


# -- packets ----------------------------------------------------------------------------------
def test_packet_layout_is_the_p4_header():
    vals = list(range(-3, VECLEN - 3))
    data = encode(7, 9, 0x01020304, 3, 4, vals, flags=FLAG_RESULT)
    assert len(data) == PAYLOAD_BYTES == 12 + 4 * VECLEN
    assert data[:12] == bytes([0, 7, 0, 9, 1, 2, 3, 4, 3, 4, FLAG_RESULT, 0])
    assert data[12:16] == struct.pack("!i", -3)
    assert decode(data) == (7, 9, 0x01020304, 3, 4, FLAG_RESULT, tuple(vals))


def test_short_vectors_are_padded_and_long_ones_refused():
    assert decode(encode(1, 0, 1, 0, 2, [5]))[6] == (5,) + (0,) * (VECLEN - 1)
    with pytest.raises(inc.IncError):
        encode(1, 0, 1, 0, 2, [0] * (VECLEN + 1))
    with pytest.raises(inc.IncError):
        decode(b"\0" * 20)


def test_slots_alternate_copies_per_lane():
    w = 4
    assert [slot_of(s, w) for s in range(1, 13)] == [0, 2, 4, 6, 1, 3, 5, 7, 0, 2, 4, 6]
    assert max(slot_of(s, w) for s in range(1, 1000)) == 2 * w - 1


def test_sizes():
    assert inc.chunks(inc.n_values(1000)) == 4                      # 250 values
    assert inc.bytes_sent_per_iteration(1000) == 4 * PAYLOAD_BYTES
    assert inc.wire_bytes_per_iteration(256) == PAYLOAD_BYTES + 42


def test_check_result():
    exact = list(range(2 * VECLEN))
    assert check_result(exact, exact, set()) is None
    bad = list(exact)
    bad[VECLEN + 3] = INT32_MAX
    assert check_result(bad, exact, set()) == VECLEN + 3
    assert check_result(bad, exact, {1}) is None        # saturated chunk: a bound is accepted
    bad[VECLEN + 3] = 12345
    assert check_result(bad, exact, {1}) == VECLEN + 3


def test_deterministic_inputs():
    a = expected_inputs(3, "job1", 3, 100, 65536)
    b = expected_inputs(3, "job1", 3, 100, 65536)
    assert a == b
    inputs, clipped, total = a
    assert clipped == [0, 0, 0]
    assert total == [x + y + z for x, y, z in zip(*inputs, strict=True)]
    assert expected_inputs(4, "job1", 3, 100, 65536)[2] != total
    assert rotate(total, 1) != total and sorted(rotate(total, 5)) == sorted(total)


def test_spec_defaults_keep_old_callers_working(tmp_path):
    spec = WorkerSpec(job="j", rank=0, ips=("10.0.0.1", "10.0.0.2"), port=1,
                      collective="ring_allreduce", bytes_per_iteration=10, compute_s=0.1,
                      iterations=1, start_offset_s=0, cc="cubic", iterations_path="a",
                      throughput_path="b")
    spec.save(tmp_path / "s.json")
    assert WorkerSpec.load(tmp_path / "s.json") == spec
    assert spec.inc_slots == 32 and spec.inc_window == 0 and spec.agg_switch_ip is None


# -- the protocol against a model switch --------------------------------------------------------
class ModelSwitch(threading.Thread):
    """aggregation.p4's slot logic in Python on a UDP socket; drops a fraction of the packets
    it receives and of the result copies it sends."""

    def __init__(self, ip, port, workers, slots, loss=0.0, seed=1):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((ip, port))
        self.sock.settimeout(0.2)
        self.workers = workers          # rank -> (ip, port)
        self.n = len(workers)
        self.slots = slots
        self.state = {}                 # slot -> [seq, bitmap, count, values, sat]
        self.rng = random.Random(seed)
        self.loss = loss
        self.stop = threading.Event()
        self.stats = {"added": 0, "duplicate": 0, "stale": 0, "resent": 0, "results": 0}

    def run(self):
        while not self.stop.is_set():
            try:
                data, src = self.sock.recvfrom(4096)
            except TimeoutError:
                continue
            if self.rng.random() < self.loss:
                continue
            job, slot, seq, worker, n, flags, vals = decode(data)
            assert slot < 2 * self.slots and n == self.n
            st = self.state.setdefault(slot, [0, 0, 0, [0] * VECLEN, False])
            d = (seq - st[0]) & 0xFFFFFFFF
            if d != 0 and d < 1 << 31:
                st[:] = [seq, 0, 0, [0] * VECLEN, False]
            elif d != 0:
                self.stats["stale"] += 1
                continue
            bit = 1 << worker
            if st[1] & bit:
                if st[2] == self.n:
                    self.stats["resent"] += 1
                    self._send(src, job, slot, seq, st)
                else:
                    self.stats["duplicate"] += 1
                continue
            self.stats["added"] += 1
            st[1] |= bit
            st[2] += 1
            for i, v in enumerate(vals):
                s = st[3][i] + v
                if not INT32_MIN <= s <= INT32_MAX:
                    st[4] = True
                st[3][i] = inc.saturating_add(st[3][i], v)
            if st[2] == self.n:
                self.stats["results"] += 1
                for addr in self.workers.values():
                    if self.rng.random() >= self.loss:
                        self._send(addr, job, slot, seq, st)

    def _send(self, addr, job, slot, seq, st):
        flags = FLAG_RESULT | (FLAG_SATURATED if st[4] else 0)
        self.sock.sendto(encode(job, slot, seq, 0, self.n, st[3], flags), addr)


def run_workers(n, loss, values, window=4, port=48641, seed=1):
    ips = [f"127.0.{port % 200}.{r + 1}" for r in range(n)]
    switch_ip = f"127.0.{port % 200}.200"
    model = ModelSwitch(switch_ip, port, {r: (ip, port) for r, ip in enumerate(ips)}, window,
                        loss=loss, seed=seed)
    model.start()
    results, errors = {}, []

    def worker(rank):
        s = IncSession(job_id=1, rank=rank, n=n, my_ip=ips[rank], switch_ip=switch_ip,
                       port=port, window=window, min_rto_s=0.02, give_up_s=20)
        try:
            for it, vec in enumerate(values[rank]):
                results[(rank, it)] = s.allreduce(vec)
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            s.close()

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    model.stop.set()
    model.join(2)
    model.sock.close()
    assert not errors, errors
    return results, model


@pytest.mark.parametrize("n", [2, 3])
def test_protocol_exact_sums_without_loss(n):
    rng = random.Random(n)
    count = 10 * VECLEN + 17       # not a whole number of chunks
    values = [[[rng.randint(-1000, 1000) for _ in range(count)] for _ in range(2)]
              for _ in range(n)]
    results, model = run_workers(n, 0.0, values, port=48650 + n)
    for it in range(2):
        expected = [sum(col) for col in zip(*(values[r][it] for r in range(n)), strict=True)]
        for r in range(n):
            got, stats = results[(r, it)]
            assert got == expected
            assert stats["retransmits"] == 0 and stats["sat_chunks"] == []
            assert stats["bytes_sent"] == 11 * PAYLOAD_BYTES
    assert model.stats["duplicate"] == model.stats["resent"] == model.stats["stale"] == 0


def test_protocol_recovers_from_loss():
    rng = random.Random(11)
    n, count = 3, 40 * VECLEN
    values = [[[rng.randint(-1000, 1000) for _ in range(count)] for _ in range(3)]
              for _ in range(n)]
    results, model = run_workers(n, 0.1, values, port=48660, seed=3)
    retrans = 0
    for it in range(3):
        expected = [sum(col) for col in zip(*(values[r][it] for r in range(n)), strict=True)]
        for r in range(n):
            got, stats = results[(r, it)]
            assert got == expected
            retrans += stats["retransmits"]
            assert stats["bytes_sent"] == (40 + stats["retransmits"]) * PAYLOAD_BYTES
    assert retrans > 0
    assert model.stats["duplicate"] + model.stats["resent"] > 0   # duplicates were not re-added


def test_protocol_reports_switch_saturation():
    n = 2
    values = [[[INT32_MAX - 5] + [1] * (VECLEN - 1)], [[10] + [2] * (VECLEN - 1)]]
    results, _ = run_workers(n, 0.0, values, port=48670)
    got, stats = results[(0, 0)]
    assert got[0] == INT32_MAX and got[1:] == [3] * (VECLEN - 1)
    assert stats["sat_chunks"] == [0]

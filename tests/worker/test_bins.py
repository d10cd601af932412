"""The shared throughput sampler (worker/bins.py) on real loopback TCP connections: bins on the
t0 grid whose bytes add up to what the kernel acknowledged, the end-of-run flush, and the rows
the workers write read back by the results collector."""

import socket
import threading
import time

from mn_harness.results.collect import throughput_rows
from mn_harness.worker import tcpinfo
from mn_harness.worker.bins import BinSampler, throughput_line
from mn_harness.worker.spec import WorkerSpec

BIN_S = 0.010


def _pair() -> tuple[socket.socket, socket.socket]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    return client, server


def _send_until_acked(client: socket.socket, server: socket.socket, nbytes: int) -> float:
    """Send nbytes and return, as time.monotonic(), once the receiver has read them all and its
    reply came back: the reply carries the cumulative ACK of every byte, so the sender's
    tcpi_bytes_acked then includes them."""

    def drain() -> None:
        got = 0
        while got < nbytes:
            got += len(server.recv(1 << 20))
        server.sendall(b"k")

    reader = threading.Thread(target=drain)
    reader.start()
    client.sendall(b"x" * nbytes)
    assert client.recv(1) == b"k"
    acked_at = time.monotonic()
    reader.join()
    return acked_at


def _on_grid(t: float) -> bool:
    return abs(t / BIN_S - round(t / BIN_S)) < 1e-6


def test_bins_of_two_sockets_add_up_to_the_bytes_acked_and_sit_on_the_t0_grid():
    pairs = [_pair(), _pair()]
    clients = [c for c, _ in pairs]
    before = [tcpinfo.bytes_acked(c) for c in clients]
    t0 = time.monotonic() - 1.2345  # started late: the bins still line up on t0's grid
    sampler = BinSampler(lambda: tcpinfo.combined(tcpinfo.sender_state(c) for c in clients), t0, BIN_S)
    sampler.start()
    sent: list[tuple[float, int]] = []  # (acknowledged by, bytes) of each chunk, in order
    for (client, server), size in zip(pairs, (2_000_000, 700_000), strict=True):
        for _chunk in range(4):
            sent.append((_send_until_acked(client, server, size // 4), size // 4))
            time.sleep(3 * BIN_S)
    first = sampler.take()
    sampler.stop.set()
    sampler.join()
    sampler.flush()
    bins = first + sampler.take()
    assert sum(b[1] for b in bins) == sum(n for _, n in sent)
    assert [tcpinfo.bytes_acked(c) - b for c, b in zip(clients, before, strict=True)] == [500_000 * 4, 175_000 * 4]
    # a bin starting at t holds bytes acknowledged after t0 + t only: the bytes of bins that
    # start after a chunk was acknowledged are at most the bytes sent after that chunk
    for i, (acked_at, _n) in enumerate(sent):
        later = sum(b[1] for b in bins if t0 + b[0] >= acked_at)
        assert later <= sum(n for _, n in sent[i + 1:]), (i, bins)
    starts = [b[0] for b in bins]
    assert starts == sorted(set(starts)), "one entry per bin, in time order"
    assert all(_on_grid(t) for t in starts), starts
    assert starts[0] >= 1.23 - 1e-9  # nothing before the bin the sampler started in
    assert all(b[1] > 0 for b in bins)  # empty bins are left out
    assert len(bins) >= 2  # the pauses between chunks spread the bytes over several bins
    for client, server in pairs:
        client.close()
        server.close()


def test_flush_puts_what_was_acked_after_the_last_bin_into_the_next_bin():
    client, server = _pair()
    t0 = time.monotonic()
    sampler = BinSampler(lambda: tcpinfo.sender_state(client), t0, BIN_S)
    sampler.start()
    _send_until_acked(client, server, 300_000)
    time.sleep(3 * BIN_S)  # the sampler closes the bins holding those bytes
    sampler.stop.set()
    sampler.join()
    during = sampler.take()
    assert sum(b[1] for b in during) == 300_000
    _send_until_acked(client, server, 50_000)  # acknowledged after the sampler stopped
    assert sampler.take() == []
    flushed_at = time.monotonic() - t0
    sampler.flush()
    late = sampler.take()
    assert len(late) == 1 and late[0][1] == 50_000
    assert late[0][0] > max(b[0] for b in during) and _on_grid(late[0][0])
    assert late[0][0] <= flushed_at  # the bin after the last one the thread closed has begun
    client.close()
    server.close()


def test_a_socket_that_closes_ends_the_sampling_and_keeps_the_bins():
    client, server = _pair()
    sampler = BinSampler(lambda: tcpinfo.sender_state(client), time.monotonic(), BIN_S)
    sampler.start()
    _send_until_acked(client, server, 100_000)
    time.sleep(3 * BIN_S)
    client.close()  # the next read raises OSError (bad file descriptor)
    sampler.join(5.0)
    assert not sampler.is_alive()
    assert sum(b[1] for b in sampler.take()) == 100_000
    server.close()


def test_flush_without_a_first_read_adds_nothing():
    sampler = BinSampler(lambda: tcpinfo.SenderState(1 << 20), time.monotonic(), BIN_S)
    sampler.flush()
    assert sampler.take() == []


def test_throughput_lines_are_read_back_by_the_results_collector(tmp_path):
    spec = WorkerSpec(job="j", rank=1, ips=("10.0.0.1", "10.0.0.2"), port=1, collective="allreduce",
                      bytes_per_iteration=1, compute_s=0.0, iterations=2, start_offset_s=0.0, cc="reno",
                      iterations_path="", throughput_path="", bin_s=BIN_S)
    path = tmp_path / "j-r1.throughput.jsonl"
    path.write_text(throughput_line(spec, 0, [(0.0, 100), (0.01, 50)])
                    + throughput_line(spec, 1, [])
                    + throughput_line(spec, 2, [(0.05, 7)]))
    rows = throughput_rows(tmp_path)
    assert [(r.job, r.rank, r.t, r.bin_s, r.bytes) for r in rows] == [
        ("j", 1, 0.0, BIN_S, 100), ("j", 1, 0.01, BIN_S, 50), ("j", 1, 0.05, BIN_S, 7)]
    assert all(r.cwnd is None and r.busy_us is None for r in rows)  # (t, bytes) bins: no sender state
    path.write_text(throughput_line(spec, 0, [(0.0, 100, 10, 250, 8000, 0, 4000)]))
    (row,) = throughput_rows(tmp_path)
    assert (row.bytes, row.cwnd, row.srtt_us, row.busy_us, row.rwnd_limited_us, row.sndbuf_limited_us) == (
        100, 10, 250, 8000, 0, 4000)


def test_a_bin_keeps_the_senders_window_rtt_and_busy_time():
    """On loopback: while a sender keeps its socket full the kernel counts the bins as busy
    (the chrono counters, in jiffy steps), and the bin carries the window and RTT at its end;
    once it has nothing to send, acknowledged bytes stop and so does the busy time."""
    client, server = _pair()
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            if not server.recv(1 << 20):
                return

    reader = threading.Thread(target=drain)
    reader.start()
    t0 = time.monotonic()
    sampler = BinSampler(lambda: tcpinfo.sender_state(client), t0, BIN_S)
    sampler.start()
    payload = b"x" * (1 << 20)
    until = time.monotonic() + 0.3
    while time.monotonic() < until:
        client.sendall(payload)
    time.sleep(0.1)
    sampler.stop.set()
    sampler.join()
    bins = sampler.take()
    stop.set()
    client.close()
    reader.join()
    server.close()
    assert bins and all(len(b) == 7 for b in bins)
    assert all(b[2] > 0 and b[3] > 0 for b in bins)  # a window and a smoothed RTT at each bin's end
    busy_us = sum(b[4] for b in bins)
    # ~0.3 s with data queued; the chrono counts jiffies (4 ms at HZ 250): allow two per bin
    assert 0.15e6 <= busy_us <= 0.3e6 + len(bins) * 8000, (busy_us, len(bins))
    assert all(b[5] >= 0 and b[6] >= 0 for b in bins)


def test_send_bins_count_bytes_into_the_bins_of_t0_and_hand_them_over_once():
    from mn_harness.worker.bins import SendBins

    bins = SendBins(t0=100.0, bin_s=0.01)
    for now, nbytes in ((100.001, 10), (100.009, 5), (100.0251, 7)):
        bins.add(now, nbytes)
    assert bins.take() == [(0.0, 15), (0.02, 7)]  # bin 1 had nothing: left out
    assert bins.take() == []

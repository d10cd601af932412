"""The worker's transport and collectives over real kernel TCP on loopback (no root needed).

Each rank is a thread with its own 127.0.0.x address, as each worker has its own host address
in a run. Checked for every collective: one connection per pair that talks, every byte the
schedule says (each socket's tcpi_bytes_acked against the schedule, exactly: loopback loses
nothing; SYN and FIN take a sequence number each), the tags of every segment in the order both
ends agree on, and that a rank with a different schedule is caught by the tag check instead of
passing silently."""

from __future__ import annotations

import threading
import time

import pytest

from mn_harness import collectives

# the ranks listen on 127.0.0.1..n: a port free on every local address, below the ephemeral range
# (a port free only on 127.0.0.1 was now and then still held on 127.0.0.2 by a closing connection)
from mn_harness.p4.bmv2.net import pick_free_port
from mn_harness.worker import tcpinfo
from mn_harness.worker.collective import CommStream, post, runner, segments
from mn_harness.worker.pipeline import run_pass
from mn_harness.worker.program_ops import PipelineOp
from mn_harness.worker.transport import Transport, TransportError
from mn_harness.worker.tunables import Tunables

CC = "reno"  # allowed for unprivileged sockets on every kernel


def ranks_run(n: int, body, tunables: Tunables | None = None, peers=None, timeout=60,
              port: int | None = None, src_port: int = 0):
    """Run body(rank, transport) in n threads on 127.0.0.1..n; returns their results and, per
    rank, bytes acked per peer (read after the transport finished)."""
    addresses = tuple(f"127.0.0.{i + 1}" for i in range(n))
    port = port or pick_free_port()
    results: dict[int, object] = {}
    acked: dict[int, dict[int, int]] = {}
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        t = Transport(rank, addresses, port, CC, tunables or Tunables(segment_bytes=16 * 1024),
                      src_port=src_port)
        try:
            t.connect(peers(rank) if peers else set(range(n)) - {rank}, 20)
            results[rank] = body(rank, t)
            t.finish()
            acked[rank] = {p: tcpinfo.bytes_acked(c.sock) for p, c in t.connections.items()}
        except BaseException as exc:
            errors.append(exc)
        finally:
            t.release()

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout)
    assert not any(th.is_alive() for th in threads), "a rank hung"
    if errors:
        raise errors[0]
    return results, acked


CASES = [(name, n) for name in collectives.names(engine=collectives.SYNTHETIC, pipeline_pass=False) for n in (2, 3, 4)]


@pytest.mark.parametrize("window,recv_ready", [(0, False), (2, False), (2, True), (0, True)])
@pytest.mark.parametrize("name,n", CASES)
def test_collective_moves_exactly_its_schedules_bytes(name, n, window, recv_ready):
    """And with gloo's window of 2 and its receive-ready handshake (rings only; the other
    schedules must not hang on either). Framed, every segment costs one more byte (its kind)
    and, on a ring, every segment received one READY byte back to its sender."""
    nbytes = 100_003  # not a multiple of anything: rounding and short segments
    seg = 16 * 1024
    sched = collectives.schedule(name, nbytes, n, servers=1)

    def body(rank, transport):
        ops, sent = post(transport, sched, rank, list(range(n)), iteration=7, op_id=3)
        for op in ops:
            op.wait(30)
        return sent

    sent, acked = ranks_run(n, body, Tunables(segment_bytes=seg, window=window, recv_ready=recv_ready),
                            peers=lambda r: sched.peers_of(r))
    assert [sent[r] for r in range(n)] == sched.bytes_sent_per_rank()

    def n_segments(src, dst):
        return sum(len(segments(t.nbytes, seg)) for t in sched.wire_order(src, dst))

    for r in range(n):
        assert set(acked[r]) == sched.peers_of(r)  # one connection per pair that talks
        for peer, got in acked[r].items():
            framing = (n_segments(r, peer) + (n_segments(peer, r) if sched.lockstep else 0)
                       if recv_ready else 0)
            # + up to 2: the dialer's SYN and the FIN take a sequence number each
            payload = sum(t.nbytes for t in sched.wire_order(r, peer)) + framing
            assert 0 <= got - payload <= 2, (r, peer, got, payload)


def test_pipeline_pass_moves_activations_and_gradients():
    p, m = 3, 4
    op = PipelineOp("pipeline", 0, 1, "pipeline", 30_000, (0, 1, 2), micro_batches=m, forward_s=0.001,
                    backward_s=0.002, grad_bytes=20_000)
    sent, acked = ranks_run(p, lambda r, t: run_pass(t, op, r, 0), peers=lambda r: {r - 1, r + 1} & {0, 1, 2})
    sched = collectives.schedule("pipeline", 30_000, p, micro_batches=m, grad_bytes=20_000)
    assert [sent[r] for r in range(p)] == sched.bytes_sent_per_rank()
    framing = m if Tunables().recv_ready else 0  # framed (the default): one kind byte per message
    # + up to 2: SYN, FIN
    assert 0 <= acked[1][0] - m * 20_000 - framing <= 2 and 0 <= acked[1][2] - m * 30_000 - framing <= 2


@pytest.mark.parametrize("zero_copy", [True, False])
def test_a_rank_with_another_schedule_is_caught_by_the_tag(zero_copy):
    sched = collectives.schedule("ring_allreduce", 50_000, 2)

    def body(rank, transport):
        ops, _ = post(transport, sched, rank, [0, 1], iteration=0 if rank == 0 else 1, op_id=0)
        for op in ops:
            op.wait(30)

    with pytest.raises(TransportError, match="expected tag"):
        ranks_run(2, body, Tunables(segment_bytes=16 * 1024, zero_copy=zero_copy))


@pytest.mark.parametrize("window,recv_ready,expected", [(0, False, 5), (2, False, 2), (4, False, 4),
                                                      (2, True, 0)])
def test_the_window_holds_a_ring_rank_to_what_it_has_received(window, recv_ready, expected):
    """Rank 1 posts nothing until rank 0 has had time to run ahead: rank 0 then has sent all 5
    segments of its first step with no window (the kernel buffers them), and only `window` with
    one, as gloo's ring does (the next send waits for the receive `window` segments back); with
    gloo's handshake none (no READY has come). Once rank 1 posts, everything moves."""
    sched = collectives.schedule("ring_allreduce", 2 * 5 * 16 * 1024, 2)  # 5 segments per step
    go = threading.Event()
    ahead: list[int] = []

    def body(rank, transport):
        if rank == 1:
            go.wait(10)
        ops, _ = post(transport, sched, rank, [0, 1], iteration=0, op_id=0)
        if rank == 0:
            sends = ops[len(ops) // 2:]  # the receives are posted first
            threading.Event().wait(0.5)
            ahead.append(sum(op.done.is_set() for op in sends))
            go.set()
        for op in ops:
            op.wait(30)

    ranks_run(2, body, Tunables(segment_bytes=16 * 1024, window=window, recv_ready=recv_ready))
    assert ahead == [expected]


def test_a_handshake_send_fails_when_the_peer_leaves_without_posting():
    """Rank 1 finishes without posting anything: rank 0's sends, which no READY will ever
    release, fail in one clear error instead of hanging."""
    sched = collectives.schedule("ring_allreduce", 4 * 16 * 1024, 2)

    def body(rank, transport):
        if rank == 0:
            ops, _ = post(transport, sched, rank, [0, 1], iteration=0, op_id=0)
            for op in ops[len(ops) // 2:]:  # the sends (the receives fail too, but first)
                op.wait(10)

    with pytest.raises(TransportError, match="closed the connection"):
        ranks_run(2, body, Tunables(segment_bytes=16 * 1024, window=2, recv_ready=True), timeout=20)


def test_a_handshake_send_needs_a_framed_transport():
    t = Transport(0, ("127.0.0.1",), pick_free_port(), CC, Tunables(recv_ready=False))
    t.connections[1] = None  # type: ignore[assignment]  # never reached
    with pytest.raises(TransportError, match="recv_ready"):
        t.send(1, 10, b"x", handshake=True)


def test_unsegmented_transfers_and_stream_order():
    """segment_bytes 0 sends every transfer whole; collectives on the stream run in order."""
    sched = collectives.schedule("tree_allreduce", 40_000, 4)

    def body(rank, transport):
        stream = CommStream()
        stream.start()
        handles = [stream.submit(runner(transport, sched, rank, [0, 1, 2, 3], 0, i)) for i in range(3)]
        for h in handles:
            h.wait()
        stream.stop()
        return [(h.t_start, h.t_end, h.bytes_sent) for h in handles]

    got, _ = ranks_run(4, body, Tunables(segment_bytes=0))
    for r in range(4):
        (s0, e0, b0), (s1, e1, _), (s2, _, _) = got[r]
        assert e0 <= s1 and e1 <= s2 and b0 == sched.sent_by(r)


def test_unknown_tunable_is_refused():
    with pytest.raises(ValueError, match="unknown transport tunable"):
        Tunables.from_overrides({"chunk": 1})
    with pytest.raises(ValueError, match="window"):
        Tunables.from_overrides({"window": -1})
    assert Tunables.from_overrides({"segment_bytes": 0}).segment_bytes == 0


def test_a_fixed_source_port_serves_every_connection_a_rank_dials():
    """With src_port (ECMP: network.flows fixes every 5-tuple), a rank dials all its lower peers
    from that one port; the acceptor sees it as the peer's source port, the dialer's peer port
    is the listening port."""
    n, src, port = 4, pick_free_port(), pick_free_port()
    ends, _ = ranks_run(n, lambda rank, t: {p: (c.sock.getsockname()[1], c.sock.getpeername()[1])
                                            for p, c in t.connections.items()},
                        Tunables(), port=port, src_port=src)
    assert len(ends) == n
    for rank, peers in ends.items():
        for peer, (local, remote) in peers.items():
            assert (local, remote) == ((src, port) if rank > peer else (port, src)), (rank, peer)


def test_every_send_records_how_long_it_waited_once_it_could_go():
    """The workers' invariant: a lag per send, from the latest of its posting, its received
    dependency and its READY to its writing; a send held back on purpose (here: behind a
    sleeping peer) does not count as lag."""
    sched = collectives.schedule("ring_allreduce", 200_000, 2)

    def body(rank, transport):
        if rank == 1:
            time.sleep(0.3)  # rank 0's handshake sends wait for rank 1's READYs meanwhile
        ops, _ = post(transport, sched, rank, [0, 1], 0, 7)
        for op in ops:
            op.wait()
        return transport.take_lags(), transport.take_lags()

    tunables = Tunables(segment_bytes=16 * 1024)
    got, _ = ranks_run(2, body, tunables)
    segments_sent = -(-sched.sent_by(0) // tunables.segment_bytes)
    for rank in (0, 1):
        lags, again = got[rank]
        assert len(lags) >= segments_sent and again == []
        assert all(0 <= lag < 0.25 for lag in lags), max(lags)  # the 0.3 s wait for READY is not lag


@pytest.mark.parametrize("zero_copy", [True, False])
def test_zero_copy_and_copying_transports_put_the_same_bytes_on_the_wire(zero_copy):
    """Spliced from a memory file and dropped by the receiving kernel, or written from and read
    into a buffer: the same bytes per connection (the kind byte of every segment and the READYs
    counted), every tag checked. Transfers larger than the filler file (unsegmented, 9 MB a
    step) take several sendfile and discarding calls."""
    nbytes = 2 * 9_000_001
    sched = collectives.schedule("ring_allreduce", nbytes, 2)

    def body(rank, transport):
        ops, sent = post(transport, sched, rank, [0, 1], iteration=1, op_id=2)
        for op in ops:
            op.wait(30)
        return sent

    sent, acked = ranks_run(2, body, Tunables(segment_bytes=0, zero_copy=zero_copy))
    assert sent == {0: nbytes, 1: nbytes}  # 2 ranks: each sends S
    for r in range(2):
        payload = sum(t.nbytes for t in sched.wire_order(r, 1 - r))
        framing = len(sched.wire_order(r, 1 - r)) + len(sched.wire_order(1 - r, r))  # kinds + READYs
        assert 0 <= acked[r][1 - r] - payload - framing <= 2


@pytest.mark.parametrize("zero_copy", [False, True])
def test_a_send_queued_behind_its_own_connections_bytes_is_not_lag(zero_copy):
    """A NIC serializes too: segments posted at once leave one after another, and the time a
    segment waits for the segments before it on the same connection to be written (here held
    up by a peer that reads nothing for 0.3 s, so the socket buffers fill) is the link's, not a
    busy host's."""
    sched = collectives.schedule("ring_allreduce", 64 * 1024 * 1024, 2)

    def body(rank, transport):
        if rank == 1:
            time.sleep(0.3)
        ops, _ = post(transport, sched, rank, [0, 1], 0, 7)
        for op in ops:
            op.wait()
        return transport.take_lags()

    tunables = Tunables(segment_bytes=1024 * 1024, window=0, recv_ready=False, zero_copy=zero_copy)
    got, _ = ranks_run(2, body, tunables)
    assert all(0 <= lag < 0.25 for lag in got[0]), max(got[0])

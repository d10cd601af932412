"""sock_diag netlink reader: the kernel's view of sockets this process did not query itself."""

import socket
import threading

from mn_harness.worker.sockdiag import SockDiag, job_connections


def _pair(cc: bytes):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = socket.socket()
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc)
    client.connect(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    return client, server


def test_reports_cc_and_bytes_acked_of_a_connection():
    client, server = _pair(b"reno")
    nbytes = 3_000_000

    def drain():
        got = 0
        while got < nbytes:
            got += len(server.recv(1 << 20))
        server.sendall(b"k")  # tells the sender that everything arrived

    reader = threading.Thread(target=drain)
    reader.start()
    client.sendall(b"x" * nbytes)
    assert client.recv(1) == b"k"
    reader.join()
    port = client.getsockname()[1]
    with SockDiag() as diag:
        sockets = diag.tcp_sockets()
    mine = [s for s in sockets if s.sport == port and s.dst == "127.0.0.1"]
    assert len(mine) == 1
    sock = mine[0]
    assert sock.established and sock.cc == "reno"
    # the kernel counts the SYN as one acknowledged byte
    assert nbytes <= sock.bytes_acked <= nbytes + 1
    assert sock.bytes_sent - sock.bytes_retrans == nbytes
    assert sock.sndbuf > 0 and sock.rcvbuf > 0
    # the sender state a throughput bin keeps, read from the kernel as getsockopt reads it
    from mn_harness.worker import tcpinfo
    own = tcpinfo.sender_state(client)
    assert sock.sender.bytes_acked == sock.bytes_acked == own.bytes_acked
    assert sock.sender.cwnd == sock.cwnd == own.cwnd > 0 and sock.sender.srtt_us > 0
    # counted in jiffies (4 ms at HZ 250): 3 MB over loopback may finish inside one, so 0 is
    # a valid count here (one run of the suite read 0); the two reads must agree in order
    assert 0 <= sock.sender.busy_us <= own.busy_us
    peer = [s for s in sockets if s.dport == port]
    assert len(peer) == 1 and peer[0].cookie != sock.cookie
    client.close()
    server.close()


def test_job_connections_keeps_established_sockets_to_peers_only():
    client, server = _pair(b"reno")
    port = client.getsockname()[1]
    server_port = server.getsockname()[1]
    with SockDiag() as diag:
        sockets = diag.tcp_sockets()
    both = job_connections(sockets, "127.0.0.1", {"127.0.0.1"})
    assert {port, server_port} <= {s.sport for s in both}
    assert job_connections(sockets, "127.0.0.1", {"127.0.0.2"}) == []
    without_server_port = job_connections(sockets, "127.0.0.1", {"127.0.0.1"}, frozenset({server_port}))
    assert port not in {s.sport for s in without_server_port}
    client.close()
    server.close()


def test_lookup_follows_one_socket_and_sees_it_go():
    client, server = _pair(b"reno")
    port = client.getsockname()[1]
    with SockDiag() as diag:
        found = next(s for s in diag.tcp_sockets() if s.sport == port and s.dst == "127.0.0.1")
        client.sendall(b"y" * 200_000)
        got = 0
        while got < 200_000:
            got += len(server.recv(1 << 20))
        server.sendall(b"k")
        assert client.recv(1) == b"k"
        now = diag.lookup(found)
        assert now is not None and now.cookie == found.cookie
        assert now.bytes_acked - found.bytes_acked == 200_000
        client.close()
        server.close()
        gone = diag.lookup(found)
        assert gone is None or not gone.established  # FIN_WAIT/TIME_WAIT, then gone

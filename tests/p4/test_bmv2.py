"""mn_harness.p4.bmv2: switch command line, start/stop, queue commands and the CLI runner, with
stand-in shell scripts for simple_switch_grpc and simple_switch_CLI (the real ones run in the
*_bmv2.py tests)."""

import os
import time

import pytest

from mn_harness.p4.bmv2 import (
    BMv2Switch,
    QueueConfig,
    pick_free_port,
    port_accepts,
    pps_for_rate,
    run_cli,
)
from mn_harness.p4.errors import SwitchCLIError, SwitchStartError, ToolchainMissing
from mn_harness.p4.toolchain import Toolchain
from tests.p4.fake_tools import script


def test_pps_for_rate():
    assert pps_for_rate(10) == 826            # 10 Mbit/s of 1514-byte frames
    assert pps_for_rate(1, packet_bytes=125) == 1000
    assert pps_for_rate(0.0001) == 1
    with pytest.raises(ValueError):
        pps_for_rate(0)


def test_picked_ports_are_below_the_ephemeral_range_and_never_repeat():
    """A switch's listening port must not be one an outgoing connection can take meanwhile."""
    from mn_harness.p4.bmv2 import net
    low = net._ephemeral_low()
    ports = [pick_free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    if low - net.LISTEN_PORTS_FLOOR >= 1000:
        assert all(net.LISTEN_PORTS_FLOOR <= p < low for p in ports)


def test_picked_port_skips_a_port_in_use(monkeypatch):
    import socket

    from mn_harness.p4.bmv2 import net
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    taken = busy.getsockname()[1]
    choices = iter([taken, taken + 1 if taken + 1 < 65536 else taken - 1])
    monkeypatch.setattr(net, "_ephemeral_low", lambda: 65536)
    monkeypatch.setattr(net.random.SystemRandom, "randrange", lambda self, a, b: next(choices))
    try:
        assert pick_free_port() != taken
    finally:
        busy.close()


def test_picked_port_comes_from_the_kernel_when_nothing_lies_below_the_range(monkeypatch):
    from mn_harness.p4.bmv2 import net
    monkeypatch.setattr(net, "_ephemeral_low", lambda: 1024)
    port = pick_free_port()
    assert net._bindable(port) and port not in (pick_free_port(), pick_free_port())


def test_switch_command_line():
    tc = Toolchain({"simple_switch_grpc": "/x/simple_switch_grpc"})
    sw = BMv2Switch("s1", 3, {2: "p4t-s1-2", 1: "p4t-s1-1"}, grpc_port=50001,
                    thrift_port=9091, cpu_port=64, toolchain=tc)
    assert sw.command() == ["/x/simple_switch_grpc", "--device-id", "3", "--thrift-port", "9091",
                            "-i", "1@p4t-s1-1", "-i", "2@p4t-s1-2", "--no-p4", "--",
                            "--grpc-server-addr", "127.0.0.1:50001", "--priority-queues", "2",
                            "--cpu-port", "64"]
    single = BMv2Switch("s1", 3, {}, 1, 2, priority_queues=1, toolchain=tc).command()
    assert "--priority-queues" not in single
    logged = BMv2Switch("s1", 3, {}, 1, 2, json_path="/p.json", log=True, pcap=True,
                        log_dir="/logs", toolchain=tc).command()
    assert "--log-file" in logged and "/logs/s1-bmv2" in logged
    assert "--pcap" in logged and "/p.json" in logged and "--no-p4" not in logged
    quiet = BMv2Switch("s1", 3, {}, 1, 2, toolchain=tc).command()
    assert "--log-file" not in quiet and "--pcap" not in quiet and "--log-console" not in quiet


def test_notifications_socket_in_the_run_dir_when_the_switch_has_the_option(tmp_path):
    """BMv2 built with nanomsg would otherwise use ipc:///tmp/bmv2-<device id>-notifications.ipc,
    shared by every run; without nanomsg there is no such option and no such socket."""
    sock = tmp_path / "run" / "s1-notifications.ipc"
    for build, help_text in (("nanomsg", "  --notifications-addr arg   Specify the nanomsg address"),
                             ("plain", "  --thrift-port arg   TCP port")):
        (tmp_path / build).mkdir()
        fake = script(tmp_path / build / "simple_switch_grpc", f"""
            echo "{help_text}"
            """)
        tc = Toolchain({"simple_switch_grpc": fake})
        cmd = BMv2Switch("s1", 1, {}, 1, 2, notifications_socket=sock, toolchain=tc).command()
        if build == "nanomsg":
            i = cmd.index("--notifications-addr")
            assert cmd[i + 1] == f"ipc://{sock}" and i < cmd.index("--")  # a bmv2 option
        else:
            assert "--notifications-addr" not in cmd
    # not asked for: no option, even where the switch has it
    tc = Toolchain({"simple_switch_grpc": str(tmp_path / "nanomsg" / "simple_switch_grpc")})
    assert "--notifications-addr" not in BMv2Switch("s1", 1, {}, 1, 2, toolchain=tc).command()


def test_switch_missing_binary():
    with pytest.raises(ToolchainMissing, match="simple_switch_grpc"):
        BMv2Switch("s1", 1, {}, 1, 2, toolchain=Toolchain({})).start()


def test_switch_that_dies_reports_log_tail(tmp_path):
    fake = script(tmp_path / "simple_switch_grpc", """
        echo "Error: interface p4t-nope does not exist"
        exit 3
        """)
    sw = BMv2Switch("s1", 1, {1: "p4t-nope"}, pick_free_port(), pick_free_port(),
                    toolchain=Toolchain({"simple_switch_grpc": fake}))
    with pytest.raises(SwitchStartError) as exc:
        sw.start(timeout=5)
    text = str(exc.value)
    assert "exited with code 3" in text and "interface p4t-nope does not exist" in text
    assert not sw.running


def test_switch_never_ready_times_out_and_is_stopped(tmp_path):
    fake = script(tmp_path / "simple_switch_grpc", """
        echo "starting forever"
        exec sleep 60
        """)
    sw = BMv2Switch("s1", 1, {}, pick_free_port(), pick_free_port(),
                    toolchain=Toolchain({"simple_switch_grpc": fake}))
    with pytest.raises(SwitchStartError, match=r"not accepting after 1s(.|\n)*starting forever"):
        sw.start(timeout=1)
    assert not sw.running and sw.pid is None


def test_switch_whose_port_was_taken_fails_at_once(tmp_path):
    fake = script(tmp_path / "simple_switch_grpc", """
        echo "Thrift returned an exception when trying to bind to port 9"
        echo "The exception is: Could not bind: Address already in use"
        exec sleep 60
        """)
    sw = BMv2Switch("s1", 1, {}, pick_free_port(), pick_free_port(),
                    toolchain=Toolchain({"simple_switch_grpc": fake}))
    t0 = time.monotonic()
    with pytest.raises(SwitchStartError, match=r"taken by another process(.|\n)*Could not bind"):
        sw.start(timeout=20)
    assert time.monotonic() - t0 < 10
    assert not sw.running and sw.pid is None


def test_switch_ready_when_ports_accept_and_always_stopped(tmp_path):
    g, t = pick_free_port(), pick_free_port()
    fake = script(tmp_path / "simple_switch_grpc", f"""
        exec python3 -c '
import socket, time
ss = []
for p in ({g}, {t}):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", p)); s.listen(); ss.append(s)
time.sleep(60)'
        """)
    sw = BMv2Switch("s1", 1, {}, g, t, toolchain=Toolchain({"simple_switch_grpc": fake}))
    with sw:
        assert sw.running and port_accepts(g)
        pid = sw.pid
        log_dir = sw.log_dir
    assert not sw.running
    assert not os.path.exists(f"/proc/{pid}")
    assert not os.path.exists(log_dir)  # auto-created log dir removed when logs are off


def test_switch_refuses_busy_port(tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        sw = BMv2Switch("s1", 1, {}, s.getsockname()[1], pick_free_port(),
                        toolchain=Toolchain({"simple_switch_grpc": "/bin/true"}))
        with pytest.raises(SwitchStartError, match="already in use"):
            sw.start()
    finally:
        s.close()


@pytest.fixture
def fake_cli(tmp_path):
    log = tmp_path / "cli-input"
    cli = script(tmp_path / "simple_switch_CLI", f"""
        cat > {log}
        if grep -q "set_queue_rate 0" {log}; then echo "Invalid rate"; fi
        echo "Obtaining JSON from switch..."
        echo "Done"
        """)
    return Toolchain({"simple_switch_CLI": cli, "simple_switch_grpc": cli}), log


def test_configure_queues_in_one_cli_call(fake_cli):
    tc, log = fake_cli
    sw = BMv2Switch("s1", 1, {1: "a", 3: "b"}, 1, 9090, toolchain=tc)
    sw._wait_thrift = lambda timeout=5.0: None  # no switch behind the fake CLI
    sw.configure_queues({2: QueueConfig(depth=100, rate_pps=826), None: QueueConfig(depth=64)})
    # per priority queue: 0 = data, 1 = small packets; None = every port of the switch
    assert log.read_text().splitlines() == ["set_queue_depth 100 2 0", "set_queue_rate 826 2 0",
                                            "set_queue_depth 64 1 0", "set_queue_depth 64 3 0"]
    with pytest.raises(ValueError):
        sw.configure_queues({1: QueueConfig(rate_pps=0)})
    sw.configure_queues({2: QueueConfig.for_link(10, 100)})
    assert log.read_text().splitlines() == ["set_queue_depth 100 2 0", "set_queue_rate 826 2 0",
                                            "set_queue_depth 100 2 1", "set_queue_rate 8803 2 1"]
    single = BMv2Switch("s1", 1, {}, 1, 9090, priority_queues=1, toolchain=tc)
    single._wait_thrift = lambda timeout=5.0: None
    single.configure_queues({2: QueueConfig.for_link(10, 100)})
    assert log.read_text().splitlines() == ["set_queue_depth 100 2", "set_queue_rate 826 2"]


def test_queue_config_for_link():
    cfg = QueueConfig.for_link(50, 100)
    assert (cfg.depth, cfg.rate_pps) == (100, 4128)        # 50 Mbit/s of 1514-byte frames
    assert (cfg.small_depth, cfg.small_rate_pps) == (100, 44014)  # ... of 142-byte frames
    assert QueueConfig.for_link(None, 64) == QueueConfig(depth=64, small_depth=64)


def test_cli_error_detected(fake_cli):
    tc, _ = fake_cli
    with pytest.raises(SwitchCLIError, match="Invalid rate"):
        run_cli(tc, 9090, ["set_queue_rate 0 1"], switch="s1")
    with pytest.raises(ToolchainMissing):
        run_cli(Toolchain({}), 9090, ["x"])


def test_cli_without_thrift_port_explains(tmp_path):
    g = pick_free_port()
    fake = script(tmp_path / "simple_switch_grpc", f"""
        exec python3 -c '
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", {g})); s.listen()
time.sleep(60)'
        """)
    tc = Toolchain({"simple_switch_grpc": fake, "simple_switch_CLI": "/bin/true"})
    with BMv2Switch("s1", 1, {}, g, pick_free_port(), toolchain=tc) as sw:
        with pytest.raises(SwitchCLIError, match="built without Thrift"):
            sw._wait_thrift(timeout=0.5)

"""compile_p4 caching and error reporting, and BMv2 process/CLI handling, with stand-in shell
scripts for p4c, simple_switch_grpc and simple_switch_CLI (the real ones are exercised in
tests/p4/)."""

import os
import stat
import textwrap
from pathlib import Path

import pytest

from mn_harness.p4.bmv2 import (
    BMv2Switch,
    QueueConfig,
    pick_free_port,
    port_accepts,
    pps_for_rate,
    run_cli,
)
from mn_harness.p4.compile import compile_p4, content_digest
from mn_harness.p4.errors import CompileError, SwitchCLIError, SwitchStartError, ToolchainMissing
from mn_harness.p4.toolchain import Toolchain


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def fake_p4c(tmp_path):
    calls = tmp_path / "calls"
    p4c = script(tmp_path / "p4c-bm2-ss", f"""
        echo "$@" >> {calls}
        src=""; out=""; info=""
        while [ $# -gt 0 ]; do
          case "$1" in
            -o) out="$2"; shift 2;;
            --p4runtime-files) info="$2"; shift 2;;
            -I|--std|--arch) shift 2;;
            *) src="$1"; shift;;
          esac
        done
        if grep -q SYNTAX_ERROR "$src"; then
          echo "$src(3): [--Werror=legacy] error: SYNTAX_ERROR: syntax error, unexpected" >&2
          exit 1
        fi
        echo '{{"program": "x"}}' > "$out"
        echo 'pkg_info {{ arch: "v1model" }}' > "$info"
        """)
    return Toolchain({"p4c-bm2-ss": p4c}), calls


def ncalls(calls: Path) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_compile_caches_by_content(tmp_path, fake_p4c):
    tc, calls = fake_p4c
    src = tmp_path / "prog.p4"
    src.write_text('#include <core.p4>\n#include "lib.p4"\ncontrol c() { apply {} }\n')
    (tmp_path / "lib.p4").write_text("const bit<8> X = 1;\n")
    cache = tmp_path / "cache"
    first = compile_p4(src, cache, toolchain=tc)
    assert not first.cached and first.json_path.is_file() and first.p4info_path.is_file()
    assert first.p4info_path.name == "prog.p4info.txt"
    again = compile_p4(src, cache, toolchain=tc)
    assert again.cached and again.json_path == first.json_path and ncalls(calls) == 1
    (tmp_path / "lib.p4").write_text("const bit<8> X = 2;\n")   # an include changed
    changed = compile_p4(src, cache, toolchain=tc)
    assert not changed.cached and changed.digest != first.digest and ncalls(calls) == 2
    forced = compile_p4(src, cache, toolchain=tc, force=True)
    assert not forced.cached and ncalls(calls) == 3
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_compile_error_shows_p4c_message_and_file(tmp_path, fake_p4c):
    tc, _ = fake_p4c
    src = tmp_path / "bad.p4"
    src.write_text("SYNTAX_ERROR\n")
    with pytest.raises(CompileError) as exc:
        compile_p4(src, tmp_path / "cache", toolchain=tc)
    err = exc.value
    assert err.source == str(src.resolve())
    assert "syntax error, unexpected" in err.output
    assert str(err).startswith(f"p4c failed on {src.resolve()} (exit 1): ")
    assert not list((tmp_path / "cache").iterdir())


def test_compile_without_p4c_says_what_to_install(tmp_path):
    src = tmp_path / "p.p4"
    src.write_text("")
    with pytest.raises(ToolchainMissing, match="p4lang-p4c"):
        compile_p4(src, tmp_path, toolchain=Toolchain({}))
    with pytest.raises(FileNotFoundError):
        compile_p4(tmp_path / "missing.p4", tmp_path, toolchain=Toolchain({}))


def test_digest_depends_on_args_and_compiler(tmp_path):
    src = tmp_path / "p.p4"
    src.write_text("x")
    a = content_digest(src, "/nonexistent/p4c")
    assert a == content_digest(src, "/nonexistent/p4c")
    assert a != content_digest(src, "/nonexistent/p4c", ["-DFOO"])
    assert a != content_digest(src, "/other/p4c")


# -- BMv2 ----------------------------------------------------------------------------------

def test_pps_for_rate():
    assert pps_for_rate(10) == 826            # 10 Mbit/s of 1514-byte frames
    assert pps_for_rate(1, packet_bytes=125) == 1000
    assert pps_for_rate(0.0001) == 1
    with pytest.raises(ValueError):
        pps_for_rate(0)


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

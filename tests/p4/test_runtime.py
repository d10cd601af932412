"""mn_harness.p4.runtime: P4Info lookups, value encoding, entity builders and gRPC error
decoding; the client (and mn_harness.testing's controller) against a fake in-process P4Runtime
server. The real switch is tested in the *_bmv2.py tests."""

from concurrent import futures

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from mn_harness.p4.errors import (
    EncodingError,
    NotPrimaryError,
    P4InfoLookupError,
    P4RuntimeError,
)
from mn_harness.p4.runtime import (
    P4Info,
    SwitchConnection,
    action_message,
    counter_entry,
    decode_counter_read_response,
    describe_rpc_error,
    encode_value,
    format_mac,
    multicast_group_entry,
    parse_value,
    table_entry,
)
from mn_harness.testing import P4RuntimeController
from tests.p4.fake_p4info import P4INFO_TEXT


@pytest.fixture(scope="module")
def info():
    return P4Info.from_text(P4INFO_TEXT)


# -- values --------------------------------------------------------------------------------

def test_parse_value_forms():
    assert parse_value(5) == 5
    assert parse_value("10.0.0.1") == 0x0A000001
    assert parse_value("00:11:22:33:44:ff") == 0x0011223344FF
    assert parse_value("0:1:2:3:4:5") == 0x000102030405
    assert parse_value("0x1f") == 31
    assert parse_value("42") == 42
    assert parse_value(b"\x01\x00") == 256
    with pytest.raises(EncodingError):
        parse_value("not-a-value")


def test_encode_value_canonical_and_width_checked():
    assert encode_value(0, 9) == b"\x00"
    assert encode_value(1, 9) == b"\x01"
    assert encode_value(256, 9) == b"\x01\x00"
    assert encode_value("10.0.0.1", 32) == b"\x0a\x00\x00\x01"
    assert encode_value("00:00:00:00:00:01", 48) == b"\x01"
    with pytest.raises(EncodingError, match="does not fit in 9 bits"):
        encode_value(512, 9)
    with pytest.raises(EncodingError, match="negative"):
        encode_value(-1, 8)


def test_format_mac_round_trip():
    assert format_mac(parse_value("02:00:00:00:01:03")) == "02:00:00:00:01:03"


# -- lookups -------------------------------------------------------------------------------

def test_lookup_by_full_name_alias_and_suffix(info):
    assert info.table_id("MyIngress.ipv4_lpm") == 2
    assert info.table_id("ipv4_lpm") == 2
    assert info.action_id("forward") == 12
    assert info.counter_id("port_tx") == 21          # alias beats Other.port_tx's suffix
    assert info.counter_id("Other.port_tx") == 26
    assert info.match_field("ipv4_lpm", "dstAddr").id == 1
    assert info.match_field("ipv4_lpm", "ipv4.dstAddr").id == 1
    assert info.action_param("forward", "dst_mac").bitwidth == 48


def test_lookup_errors_name_candidates(info):
    with pytest.raises(P4InfoLookupError, match="no table 'ipv4_lmp'.*MyIngress.ipv4_lpm"):
        info.table("ipv4_lmp")
    with pytest.raises(P4InfoLookupError, match="no match field 'port' of table "
                                                "MyIngress.ipv4_lpm"):
        info.match_field("ipv4_lpm", "port")
    with pytest.raises(P4InfoLookupError, match="no parameter 'mac' of action"):
        info.action_param("forward", "mac")


def test_ambiguous_suffix():
    p = P4Info.from_text(P4INFO_TEXT + """
counters { preamble { id: 30 name: "A.hits" alias: "A.hits" } spec { unit: PACKETS } size: 1 }
counters { preamble { id: 31 name: "B.hits" alias: "B.hits" } spec { unit: PACKETS } size: 1 }
""")
    with pytest.raises(P4InfoLookupError, match="'hits' is ambiguous: A.hits, B.hits"):
        p.counter("hits")
    assert p.counter_id("B.hits") == 31


# -- builders ------------------------------------------------------------------------------

def test_lpm_entry_masks_host_bits(info):
    e = table_entry(info, "ipv4_lpm", {"hdr.ipv4.dstAddr": "10.0.1.77/24"}, "forward",
                         {"port": 2, "src_mac": "02:00:00:00:01:02", "dst_mac": 0xA})
    assert e.table_id == 2
    assert e.match[0].lpm.value == b"\x0a\x00\x01\x00"
    assert e.match[0].lpm.prefix_len == 24
    assert e.action.action.action_id == 12
    params = {p.param_id: p.value for p in e.action.action.params}
    assert params == {1: b"\x02", 2: bytes.fromhex("020000000102"), 3: b"\x0a"}
    assert e.priority == 0


def test_lpm_slash0_is_omitted(info):
    e = table_entry(info, "ipv4_lpm", {"dstAddr": "0.0.0.0/0"}, "drop")
    assert len(e.match) == 0


def test_ternary_needs_priority_and_omits_wildcards(info):
    with pytest.raises(EncodingError, match="priority"):
        table_entry(info, "job_classify", {"l4_dst": (5201, 0xFFFF)}, "set_job", {"job": 3})
    e = table_entry(info, "job_classify", {"l4_dst": (5201, 0xFFFF), "hdr.ipv4.srcAddr": (0, 0),
                                          "dscp": 7},
                         "set_job", {"job": 3}, priority=5)
    ids = sorted(m.field_id for m in e.match)
    assert ids == [5, 6]
    by_id = {m.field_id: m for m in e.match}
    assert by_id[5].ternary.value == encode_value(5201, 16)
    assert by_id[5].ternary.mask == b"\xff\xff"
    assert by_id[6].ternary.mask == b"\x3f"
    assert e.priority == 5


def test_ternary_value_masked(info):
    e = table_entry(info, "job_classify", {"srcAddr": ("10.0.1.9", 0xFFFFFF00)}, "set_job",
                         {"job": 1}, priority=1)
    assert e.match[0].ternary.value == b"\x0a\x00\x01\x00"


def test_range_match(info):
    e = table_entry(info, "range_demo", {"meta.x": (10, 20)}, "drop", priority=1)
    assert e.match[0].range.low == b"\x0a" and e.match[0].range.high == b"\x14"
    full = table_entry(info, "range_demo", {"meta.x": (0, 0xFFFF)}, "drop", priority=1)
    assert len(full.match) == 0
    with pytest.raises(EncodingError, match="low 3 > high 2"):
        table_entry(info, "range_demo", {"meta.x": (3, 2)}, "drop", priority=1)


def test_action_param_errors(info):
    with pytest.raises(EncodingError, match="needs parameter 'dst_mac'"):
        table_entry(info, "ipv4_lpm", {"dstAddr": "10.0.0.1/32"}, "forward",
                         {"port": 1, "src_mac": 1})
    with pytest.raises(EncodingError, match="no parameter"):
        action_message(info, "drop", {"port": 1})
    with pytest.raises(EncodingError, match=r"set_job\(job\).*does not fit in 6 bits"):
        action_message(info, "set_job", {"job": 64})
    with pytest.raises(P4InfoLookupError, match="not an action of table"):
        table_entry(info, "ipv4_lpm", {"dstAddr": "10.0.0.1/32"}, "set_job", {"job": 1})


def test_default_entry(info):
    e = table_entry(info, "egress_port_cfg", None, "set_port_cfg",
                         {"threshold": 20, "bucket_shift": 0}, default=True)
    assert e.is_default_action and not e.match
    with pytest.raises(EncodingError, match="takes no match"):
        table_entry(info, "egress_port_cfg", {"egress_port": 1}, "set_port_cfg",
                         {"threshold": 20, "bucket_shift": 0}, default=True)


def test_counter_entry_bounds(info):
    assert counter_entry(info, "port_tx", 3).index.index == 3
    assert not counter_entry(info, "port_tx").HasField("index")
    with pytest.raises(EncodingError, match="index 32 outside 0..31"):
        counter_entry(info, "port_tx", 32)


def test_multicast_group_entry():
    e = multicast_group_entry(7, [1, (2, 5)])
    g = e.multicast_group_entry
    assert g.multicast_group_id == 7
    assert [(r.egress_port, r.instance) for r in g.replicas] == [(1, 1), (2, 5)]
    with pytest.raises(EncodingError):
        multicast_group_entry(0, [1])


# -- error decoding ------------------------------------------------------------------------

class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details, trailing=()):
        self._code, self._details, self._trailing = code, details, trailing

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailing


def _status_details(*errors):
    status = status_pb2.Status(code=grpc.StatusCode.UNKNOWN.value[0], message="batch")
    for code, msg in errors:
        a = any_pb2.Any()
        a.Pack(p4runtime_pb2.Error(canonical_code=code, message=msg))
        status.details.append(a)
    return status.SerializeToString()


def test_describe_write_error_lists_failed_updates():
    trailing = (("grpc-status-details-bin",
                 _status_details((0, ""), (6, "Match entry exists, use MODIFY"),
                                 (3, "Bad bytestring\n for field"))),)
    err = describe_rpc_error(FakeRpcError(grpc.StatusCode.UNKNOWN, "", trailing),
                             "Write(insert)", "s1 (device 1 at 127.0.0.1:1)")
    text = str(err)
    assert "\n" not in text
    assert text.startswith("P4Runtime Write(insert) on s1 (device 1 at 127.0.0.1:1) failed: "
                           "UNKNOWN")
    assert "update #1 ALREADY_EXISTS: Match entry exists, use MODIFY" in text
    assert "update #2 INVALID_ARGUMENT: Bad bytestring for field" in text
    assert "update #0" not in text
    assert err.code == "UNKNOWN"
    assert err.update_errors[0] == (1, "ALREADY_EXISTS", "Match entry exists, use MODIFY")


def test_describe_error_truncates_many_updates():
    trailing = (("grpc-status-details-bin", _status_details(*[(3, f"e{i}") for i in range(5)])),)
    text = str(describe_rpc_error(FakeRpcError(grpc.StatusCode.UNKNOWN, "x", trailing), "Write",
                                  "s1"))
    assert "(+2 more)" in text and "e3" not in text


def test_describe_unavailable_has_hint():
    text = str(describe_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE,
                                               "failed to connect to all addresses"),
                                  "connect", "s9"))
    assert "UNAVAILABLE: failed to connect to all addresses" in text
    assert "simple_switch_grpc running" in text


# -- client against a fake server ----------------------------------------------------------

class FakeP4Runtime(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, primary=True):
        self.primary = primary
        self.writes = []
        self.pipelines = []
        self.counters = {}

    def StreamChannel(self, request_iterator, context):
        for req in request_iterator:
            if req.WhichOneof("update") == "arbitration":
                resp = p4runtime_pb2.StreamMessageResponse()
                resp.arbitration.device_id = req.arbitration.device_id
                resp.arbitration.election_id.CopyFrom(req.arbitration.election_id)
                resp.arbitration.status.code = 0 if self.primary else 6
                resp.arbitration.status.message = "" if self.primary else "backup"
                yield resp

    def SetForwardingPipelineConfig(self, request, context):
        self.pipelines.append(request)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def Write(self, request, context):
        for u in request.updates:
            if u.entity.table_entry.table_id == 999:
                context.set_trailing_metadata((("grpc-status-details-bin",
                                                _status_details((5, "no such table"))),))
                context.abort(grpc.StatusCode.UNKNOWN, "Write failure")
        self.writes.append(request)
        return p4runtime_pb2.WriteResponse()

    def Read(self, request, context):
        resp = p4runtime_pb2.ReadResponse()
        for ent in request.entities:
            ce = ent.counter_entry
            indices = [ce.index.index] if ce.HasField("index") else range(4)
            for i in indices:
                out = resp.entities.add().counter_entry
                out.counter_id = ce.counter_id
                out.index.index = i
                out.data.packet_count, out.data.byte_count = self.counters.get(
                    (ce.counter_id, i), (0, 0))
        yield resp


@pytest.fixture
def fake_server():
    servicer = FakeP4Runtime()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(grace=None)


def test_client_arbitration_pipeline_write_read(fake_server, info):
    servicer, address = fake_server
    servicer.counters[(21, 2)] = (10, 15000)
    with SwitchConnection(address, device_id=3, name="s1", timeout=5) as sw:
        sw.set_pipeline(info, b'{"json": 1}', cookie=9)
        assert servicer.pipelines[0].device_id == 3
        assert servicer.pipelines[0].config.p4_device_config == b'{"json": 1}'
        assert servicer.pipelines[0].config.cookie.cookie == 9
        sw.insert_table_entry("ipv4_lpm", {"dstAddr": "10.0.0.2/32"}, "forward",
                              {"port": 2, "src_mac": 1, "dst_mac": 2})
        sw.set_default_action("egress_port_cfg", "set_port_cfg",
                              {"threshold": 5, "bucket_shift": 0})
        sw.write_multicast_group(1, [1, 2, 3])
        assert len(servicer.writes) == 3
        upd = servicer.writes[1].updates[0]
        assert upd.type == p4runtime_pb2.Update.MODIFY
        assert upd.entity.table_entry.is_default_action
        assert servicer.writes[0].election_id.low == 1
        values = sw.read_counter("port_tx", [2, 3])
        assert values[2].packets == 10 and values[2].bytes == 15000
        assert values[3].packets == 0
        many = sw.read_counters({"port_tx": [2], "port_marks": None})
        assert many["port_tx"][2].bytes == 15000
        assert sorted(many["port_marks"]) == [0, 1, 2, 3]


def test_client_write_error_is_one_line(fake_server, info):
    _, address = fake_server
    with SwitchConnection(address, device_id=1, name="s1", timeout=5, p4info=info) as sw:
        bad = p4runtime_pb2.TableEntry(table_id=999)
        with pytest.raises(P4RuntimeError) as exc:
            sw.write([bad])
    text = str(exc.value)
    assert "\n" not in text
    assert "Write(insert) on s1" in text and "update #0 NOT_FOUND: no such table" in text


def test_client_not_primary(info):
    servicer = FakeP4Runtime(primary=False)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(NotPrimaryError, match="not primary"):
            SwitchConnection(f"127.0.0.1:{port}", 1, name="s1", timeout=5).connect()
    finally:
        server.stop(grace=None)


def test_client_no_server_times_out_with_hint():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(P4RuntimeError, match="no gRPC server answered within 1s"):
        SwitchConnection(f"127.0.0.1:{port}", 1, name="s1").connect(timeout=1)


def test_controller_keeps_one_connection_per_switch(fake_server):
    _, address = fake_server
    with P4RuntimeController() as ctl:
        ctl.connect("s1", address, 1, timeout=5)
        ctl.connect("s2", address, 2, timeout=5)
        assert ctl["s1"].device_id == 1 and ctl["s2"].device_id == 2
        with pytest.raises(P4RuntimeError, match="already connected to s1"):
            ctl.connect("s1", address, 1)
    assert ctl.switches == {}


def test_decode_counter_read_response_matches_protobuf():
    resp = p4runtime_pb2.ReadResponse()
    cells = [(21, 0, 0, 0), (21, 31, 5, 7500), (23, 2047, 2**40, 2**62), (25, 3, 1, 0)]
    for cid, idx, pk, by in cells:
        ce = resp.entities.add().counter_entry
        ce.counter_id = cid
        ce.index.index = idx
        ce.data.packet_count = pk
        ce.data.byte_count = by
    resp.entities.add().table_entry.table_id = 7   # other entities are skipped
    assert decode_counter_read_response(resp.SerializeToString()) == cells


def test_counter_read_plan_against_fake_server(fake_server, info):
    servicer, address = fake_server
    servicer.counters[(21, 2)] = (10, 15000)
    servicer.counters[(23, 100)] = (3, 0)
    with SwitchConnection(address, device_id=1, name="s1", timeout=5, p4info=info) as sw:
        plan = sw.counter_read_plan({"port_tx": [2, 3], "qdepth_hist": [100]})
        assert plan.read() == {"port_tx": {2: (10, 15000), 3: (0, 0)},
                               "qdepth_hist": {100: (3, 0)}}
        servicer.counters[(21, 2)] = (11, 16500)
        assert plan.read()["port_tx"][2] == (11, 16500)

"""Chakra traces: our decoder/encoder against Google's protobuf runtime on the same schema, the
shipped trace reproduced by the generator, and the trace as a phase list."""

import gzip
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from mn_harness.chakra import protobuf as pb
from mn_harness.chakra import trace as et
from mn_harness.chakra.generate import ddp_iteration
from mn_harness.chakra.phases import phases_from_trace
from mn_harness.config import ConfigError
from mn_harness.config.workload import CommPhase, ComputePhase
from tests.helpers import TOPOLOGIES

SHIPPED = TOPOLOGIES / "traces" / "ddp-small.et"
F = descriptor_pb2.FieldDescriptorProto


def chakra_classes():
    """Node, AttributeProto and GlobalMetadata of et_def.proto, built for Google's runtime (the
    subset of fields we use, with the schema's numbers and types)."""
    file = descriptor_pb2.FileDescriptorProto(name="et_def_test.proto", package="ChakraProtoMsg", syntax="proto3")
    attr = file.message_type.add(name="AttributeProto")
    for name, number, kind in (("name", 1, F.TYPE_STRING), ("int32_val", 7, F.TYPE_INT32),
                               ("int64_val", 9, F.TYPE_INT64), ("uint64_val", 13, F.TYPE_UINT64),
                               ("sint64_val", 17, F.TYPE_SINT64), ("double_val", 3, F.TYPE_DOUBLE),
                               ("bool_val", 27, F.TYPE_BOOL), ("string_val", 29, F.TYPE_STRING)):
        attr.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL)
    meta = file.message_type.add(name="GlobalMetadata")
    meta.field.add(name="version", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    node = file.message_type.add(name="Node")
    for name, number, kind, label in (("id", 1, F.TYPE_UINT64, F.LABEL_OPTIONAL),
                                      ("name", 2, F.TYPE_STRING, F.LABEL_OPTIONAL),
                                      ("type", 3, F.TYPE_INT32, F.LABEL_OPTIONAL),
                                      ("ctrl_deps", 4, F.TYPE_UINT64, F.LABEL_REPEATED),
                                      ("data_deps", 5, F.TYPE_UINT64, F.LABEL_REPEATED),
                                      ("duration_micros", 7, F.TYPE_UINT64, F.LABEL_OPTIONAL)):
        node.field.add(name=name, number=number, type=kind, label=label)
    node.field.add(name="attr", number=10, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                   type_name=".ChakraProtoMsg.AttributeProto")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return [message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName(f"ChakraProtoMsg.{n}"))
            for n in ("Node", "AttributeProto", "GlobalMetadata")]


def test_our_encoding_is_what_googles_runtime_reads_and_writes():
    Node, Attr, Meta = chakra_classes()
    ours = et.Node(7, "all_reduce", et.COMM_COLL_NODE, ctrl_deps=(1,), data_deps=(2, 300), duration_micros=1234,
                   attrs={"comm_type": et.ALL_REDUCE, "comm_size": 5_000_000_000, "is_cpu_op": False})
    theirs = Node()
    theirs.ParseFromString(et.encode_node(ours))
    assert (theirs.id, theirs.name, theirs.type, list(theirs.ctrl_deps), list(theirs.data_deps),
            theirs.duration_micros) == (7, "all_reduce", 7, [1], [2, 300], 1234)
    assert {a.name: a.int64_val for a in theirs.attr if a.name != "is_cpu_op"} == {"comm_type": 0,
                                                                                 "comm_size": 5_000_000_000}
    # and back: a node written by Google's runtime, every integer kind of attribute
    node = Node(id=9, name="x", type=4, data_deps=[3, 4], duration_micros=77)
    node.attr.extend([Attr(name="a", int32_val=-5), Attr(name="b", uint64_val=2**40), Attr(name="c", sint64_val=-9),
                      Attr(name="d", double_val=0.5), Attr(name="e", string_val="hi"), Attr(name="f", bool_val=True)])
    meta = Meta(version="0.0.4")
    data = b"".join(pb.varint(len(m)) + m for m in (meta.SerializeToString(), node.SerializeToString()))
    trace = et.parse(data)
    assert trace.version == "0.0.4"
    got = trace.nodes[0]
    assert (got.id, got.name, got.type, got.data_deps, got.duration_micros) == (9, "x", 4, (3, 4), 77)
    assert got.attrs == {"a": -5, "b": 2**40, "c": -9, "d": 0.5, "e": "hi", "f": 1}


def test_the_shipped_trace_is_the_generators_output_and_reads_back():
    assert SHIPPED.read_bytes() == et.encode(ddp_iteration())
    trace = et.read(SHIPPED)
    assert trace == ddp_iteration()
    gz = et.parse(gzip.compress(SHIPPED.read_bytes()))
    assert gz == trace


def test_trace_becomes_overlapping_phases(tmp_path):
    phases = phases_from_trace(SHIPPED, "jobs[0].trace", ("h1", "h2"))
    names = [p.name for p in phases]
    assert names == ["forward", "backward.0", "all_reduce.bucket0", "backward.1", "all_reduce.bucket1",
                     "backward.2", "all_reduce.bucket2", "optimizer", "all_gather.params"]
    comm = [p for p in phases if isinstance(p, CommPhase)]
    assert all(not p.blocking and p.participants == ("h1", "h2") for p in comm)
    assert [p.collective for p in comm] == ["ring_allreduce"] * 3 + ["all_gather"]
    optimizer = phases[7]
    assert isinstance(optimizer, ComputePhase) and optimizer.waits == (2, 4, 6)
    assert phases[3].waits == () and phases[0].compute.mean_s == pytest.approx(0.03)


def write(tmp_path: Path, nodes) -> Path:
    path = tmp_path / "t.et"
    path.write_bytes(et.encode(et.Trace("1", tuple(nodes))))
    return path


@pytest.mark.parametrize("nodes,words", [
    ([et.Node(1, "send", et.COMM_SEND_NODE)], "node 1 ('send'): node type 5 is not supported"),
    ([et.Node(1, "r", et.COMM_COLL_NODE, attrs={"comm_type": et.REDUCE, "comm_size": 10})], "type 1 is not"),
    ([et.Node(1, "r", et.COMM_COLL_NODE, attrs={"comm_type": et.ALL_REDUCE})], "comm_size must be"),
    ([et.Node(1, "a", et.COMP_NODE, data_deps=(2,)), et.Node(2, "b", et.COMP_NODE, data_deps=(1,))], "cycle"),
])
def test_bad_traces_are_one_line(tmp_path, nodes, words):
    with pytest.raises(ConfigError) as info:
        phases_from_trace(write(tmp_path, nodes), "jobs[0].trace", ("h1", "h2"))
    assert str(info.value).startswith("jobs[0].trace: ") and words in str(info.value)
    assert "\n" not in str(info.value)


def test_unreadable_and_garbage_files(tmp_path):
    with pytest.raises(ConfigError, match=r"^jobs\[0\]\.trace: cannot read trace"):
        phases_from_trace(tmp_path / "missing.et", "jobs[0].trace", ("h1", "h2"))
    junk = tmp_path / "junk.et"
    junk.write_bytes(b"\xff" * 20)
    with pytest.raises(ConfigError, match="is not a Chakra trace"):
        phases_from_trace(junk, "jobs[0].trace", ("h1", "h2"))

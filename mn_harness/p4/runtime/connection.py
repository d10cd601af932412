"""SwitchConnection: the P4Runtime client of one device.

One per switch, any number of them in one process (p4runtime-shell keeps a single global client
and cannot do that). Each connection opens its own gRPC channel and stream, becomes primary
controller by arbitration, pushes the pipeline, writes table entries and multicast groups by
P4Info *names*, and reads counters. Every gRPC failure is raised as a P4RuntimeError whose
message is one line (rpc.describe_rpc_error).

    info = P4Info.from_file(prog.p4info_path)
    with SwitchConnection("127.0.0.1:50051", device_id=1, name="s1") as sw:
        sw.set_pipeline(info, prog.read_json())
        sw.insert_table_entry("ipv4_lpm", {"hdr.ipv4.dstAddr": "10.0.0.2/32"},
                              "forward", {"port": 2, "src_mac": "..", "dst_mac": ".."})
        sw.read_counter("port_tx", [1, 2])   # {1: CounterValue(packets, bytes), ...}
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from mn_harness.p4.errors import NotPrimaryError, P4RuntimeError

from .entities import (
    UPDATE_TYPES,
    as_entity,
    clone_session_entry,
    counter_entry,
    multicast_group_entry,
    table_entry,
)
from .p4info import P4Info
from .rpc import describe_rpc_error, status_name
from .wire import CounterReadPlan


@dataclass(frozen=True)
class CounterValue:
    packets: int
    bytes: int


class SwitchConnection:
    """A P4Runtime client for one device: its own channel, stream and arbitration."""

    def __init__(self, address: str, device_id: int = 0, *, name: str | None = None,
                 election_id: int = 1, timeout: float = 10.0, p4info: P4Info | None = None):
        self.address = address
        self.device_id = device_id
        self.name = name or address
        self.election_id = election_id
        self.timeout = timeout
        self.p4info = p4info
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._requests: queue.Queue = queue.Queue()
        self._arbitration: queue.Queue = queue.Queue()
        self.packet_ins: queue.Queue = queue.Queue(maxsize=10000)
        self._stream: Any = None            # the StreamChannel call (requests in, replies out)
        self._reader: threading.Thread | None = None
        self._stream_error: grpc.RpcError | None = None
        self._raw_read: Any = None          # Read with bytes in and out (read_raw)

    @property
    def target(self) -> str:
        return f"{self.name} (device {self.device_id} at {self.address})"

    # -- lifecycle ---------------------------------------------------------------------------
    def connect(self, timeout: float | None = None) -> SwitchConnection:
        timeout = self.timeout if timeout is None else timeout
        self._channel = grpc.insecure_channel(self.address, options=[
            ("grpc.max_receive_message_length", 64 << 20),
            ("grpc.max_send_message_length", 64 << 20)])
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            self.close()
            raise P4RuntimeError(f"P4Runtime connect on {self.target} failed: no gRPC server "
                                 f"answered within {timeout:.0f}s -- is simple_switch_grpc "
                                 "running and listening there?", code="UNAVAILABLE") from None
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        # Same RPC with bytes in and out, for CounterReadPlan (no protobuf on the hot path).
        self._raw_read = self._channel.unary_stream("/p4.v1.P4Runtime/Read")
        self._stream = self._stub.StreamChannel(self._request_iter())
        self._reader = threading.Thread(target=self._read_stream, daemon=True,
                                        name=f"p4rt-stream-{self.name}")
        self._reader.start()
        try:
            self._arbitrate(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> SwitchConnection:
        return self.connect() if self._channel is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._requests.put(None)
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None
        if self._reader is not None:
            self._reader.join(timeout=2)
            self._reader = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        self._stub = None
        self._raw_read = None

    def _request_iter(self):
        while True:
            item = self._requests.get()
            if item is None:
                return
            yield item

    def _read_stream(self) -> None:
        try:
            for msg in self._stream:
                kind = msg.WhichOneof("update")
                if kind == "arbitration":
                    self._arbitration.put(msg.arbitration)
                elif kind == "packet":
                    try:
                        self.packet_ins.put_nowait(msg.packet)
                    except queue.Full:
                        pass
                elif kind == "error":
                    self._arbitration.put(msg.error)
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.CANCELLED:
                self._stream_error = err
                self._arbitration.put(err)

    def _arbitrate(self, timeout: float) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = 0
        req.arbitration.election_id.low = self.election_id
        self._requests.put(req)
        try:
            reply = self._arbitration.get(timeout=timeout)
        except queue.Empty:
            raise P4RuntimeError(f"P4Runtime arbitration on {self.target} failed: no answer "
                                 f"within {timeout:.0f}s", code="DEADLINE_EXCEEDED") from None
        if isinstance(reply, grpc.RpcError):
            raise describe_rpc_error(reply, "arbitration", self.target)
        if isinstance(reply, p4runtime_pb2.StreamError):
            raise P4RuntimeError(f"P4Runtime arbitration on {self.target} failed: "
                                 f"{status_name(reply.canonical_code)}: {reply.message}",
                                 code=status_name(reply.canonical_code))
        if reply.status.code != 0:
            raise NotPrimaryError(
                f"P4Runtime arbitration on {self.target}: not primary "
                f"({status_name(reply.status.code)}: "
                f"{reply.status.message}); another controller holds election id "
                f"{reply.election_id.low}", code=status_name(reply.status.code))

    def _stub_or_fail(self) -> p4runtime_pb2_grpc.P4RuntimeStub:
        if self._stub is None:
            raise P4RuntimeError(f"P4Runtime on {self.target}: not connected")
        return self._stub

    def require_p4info(self) -> P4Info:
        """The P4Info of the pipeline set on this connection (writes and reads by name need it)."""
        if self.p4info is None:
            raise P4RuntimeError(f"P4Runtime on {self.target}: no P4Info (call set_pipeline "
                                 "or pass p4info=)")
        return self.p4info

    # -- pipeline ----------------------------------------------------------------------------
    def set_pipeline(self, p4info: P4Info, device_config: bytes, cookie: int = 0) -> None:
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.election_id.low = self.election_id
        req.config.p4info.CopyFrom(p4info.proto)
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = cookie
        try:
            self._stub_or_fail().SetForwardingPipelineConfig(req, timeout=60)
        except grpc.RpcError as err:
            raise describe_rpc_error(err, "SetForwardingPipelineConfig", self.target) from None
        self.p4info = p4info

    # -- writes ------------------------------------------------------------------------------
    def write(self, entities: Iterable[Any], op: str = "insert") -> None:
        """Write entities (TableEntry, PacketReplicationEngineEntry, ... or Entity) in one
        WriteRequest."""
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        req.election_id.low = self.election_id
        try:
            utype = UPDATE_TYPES[op]
        except KeyError:
            raise ValueError(f"op must be one of {sorted(UPDATE_TYPES)}") from None
        for ent in entities:
            req.updates.add(type=utype, entity=as_entity(ent))
        if not req.updates:
            return
        try:
            self._stub_or_fail().Write(req, timeout=self.timeout)
        except grpc.RpcError as err:
            raise describe_rpc_error(err, f"Write({op})", self.target) from None

    def insert_table_entry(self, table: str, match: Mapping[str, Any] | None, action: str,
                           params: Mapping[str, Any] | None = None,
                           priority: int | None = None) -> None:
        self.write([table_entry(self.require_p4info(), table, match, action, params, priority)])

    def modify_table_entry(self, table: str, match: Mapping[str, Any] | None, action: str,
                           params: Mapping[str, Any] | None = None,
                           priority: int | None = None) -> None:
        self.write([table_entry(self.require_p4info(), table, match, action, params, priority)], "modify")

    def delete_table_entry(self, table: str, match: Mapping[str, Any] | None,
                           priority: int | None = None) -> None:
        self.write([table_entry(self.require_p4info(), table, match, None, None, priority)], "delete")

    def set_default_action(self, table: str, action: str,
                           params: Mapping[str, Any] | None = None) -> None:
        self.write([table_entry(self.require_p4info(), table, None, action, params, default=True)],
                   "modify")

    def write_multicast_group(self, group_id: int, ports: Iterable[int | tuple[int, int]],
                              op: str = "insert") -> None:
        self.write([multicast_group_entry(group_id, ports)], op)

    def delete_multicast_group(self, group_id: int) -> None:
        entry = p4runtime_pb2.PacketReplicationEngineEntry()
        entry.multicast_group_entry.multicast_group_id = group_id
        self.write([entry], "delete")

    def write_clone_session(self, session_id: int, ports: Iterable[int],
                            packet_length_bytes: int = 0, op: str = "insert") -> None:
        self.write([clone_session_entry(session_id, ports, packet_length_bytes)], op)

    # -- reads -------------------------------------------------------------------------------
    def read(self, entities: Iterable[Any]) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        for ent in entities:
            req.entities.append(as_entity(ent))
        out: list[p4runtime_pb2.Entity] = []
        try:
            for resp in self._stub_or_fail().Read(req, timeout=self.timeout):
                out.extend(resp.entities)
        except grpc.RpcError as err:
            raise describe_rpc_error(err, "Read", self.target) from None
        return out

    def read_counter(self, name: str, indices: Iterable[int] | None = None
                     ) -> dict[int, CounterValue]:
        """Counter cells by index; all cells when `indices` is None."""
        info = self.require_p4info()
        if indices is None:
            entries = [counter_entry(info, name)]
        else:
            entries = [counter_entry(info, name, i) for i in indices]
        return {e.counter_entry.index.index: CounterValue(e.counter_entry.data.packet_count,
                                                          e.counter_entry.data.byte_count)
                for e in self.read(entries)}

    def read_counters(self, wanted: Mapping[str, Iterable[int] | None]
                      ) -> dict[str, dict[int, CounterValue]]:
        """Several counters in one Read RPC: {name: indices or None} -> {name: {index: value}}.
        The keys of the answer are the names as given."""
        info = self.require_p4info()
        by_id: dict[int, str] = {}
        entries = []
        for name, indices in wanted.items():
            by_id[info.counter_id(name)] = name
            if indices is None:
                entries.append(counter_entry(info, name))
            else:
                entries.extend(counter_entry(info, name, i) for i in indices)
        result: dict[str, dict[int, CounterValue]] = {name: {} for name in wanted}
        for e in self.read(entries):
            ce = e.counter_entry
            result[by_id[ce.counter_id]][ce.index.index] = CounterValue(ce.data.packet_count,
                                                                        ce.data.byte_count)
        return result

    def counter_read_plan(self, wanted: Mapping[str, Iterable[int] | None]) -> CounterReadPlan:
        return CounterReadPlan(self, wanted)

    def read_raw(self, request: bytes) -> list[bytes]:
        """Read with a serialized ReadRequest; the serialized ReadResponses."""
        if self._channel is None or self._raw_read is None:
            raise P4RuntimeError(f"P4Runtime on {self.target}: not connected")
        try:
            return list(self._raw_read(request, timeout=self.timeout))
        except grpc.RpcError as err:
            raise describe_rpc_error(err, "Read", self.target) from None

    def read_table(self, table: str) -> list[p4runtime_pb2.TableEntry]:
        entry = p4runtime_pb2.TableEntry(table_id=self.require_p4info().table_id(table))
        return [e.table_entry for e in self.read([entry])]



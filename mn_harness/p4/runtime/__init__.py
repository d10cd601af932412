"""The P4Runtime client: grpcio and the `p4runtime` protobuf bindings, nothing else.

    values.py      Python values <-> P4Runtime bytestrings (MACs, addresses, widths)
    p4info.py      P4Info: a compiled program's tables, actions, counters by name
    entities.py    table / counter / multicast / clone entities from names and values
    rpc.py         gRPC failures as one-line P4RuntimeErrors
    connection.py  SwitchConnection: one device's channel, arbitration, writes and reads
    wire.py        CounterReadPlan: repeated counter reads decoded without protobuf

`P4Info` and the entity builders need no switch and are unit-tested on their own.

    info = P4Info.from_file(prog.p4info_path)
    with SwitchConnection("127.0.0.1:50051", device_id=1, name="s1") as sw:
        sw.set_pipeline(info, prog.read_json())
        sw.read_counter("port_tx", [1, 2])
"""

from __future__ import annotations

import os

# The harness forks (subprocess) while the telemetry thread is inside gRPC; every child execs at
# once, so gRPC's fork handlers are not needed (and would log "skipping fork() handlers"). Set
# before any submodule imports grpc: the package is always initialised before its modules.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from .connection import CounterValue, SwitchConnection  # noqa: E402
from .entities import (  # noqa: E402
    action_message,
    as_entity,
    clone_session_entry,
    counter_entry,
    field_match,
    multicast_group_entry,
    table_entry,
)
from .p4info import P4Info  # noqa: E402
from .rpc import describe_rpc_error  # noqa: E402
from .values import decode_value, encode_value, format_mac, parse_value  # noqa: E402
from .wire import CounterReadPlan, decode_counter_read_response  # noqa: E402

__all__ = [
    "CounterReadPlan", "CounterValue", "P4Info", "SwitchConnection", "action_message",
    "as_entity", "clone_session_entry", "counter_entry", "decode_counter_read_response",
    "decode_value", "describe_rpc_error", "encode_value", "field_match", "format_mac",
    "multicast_group_entry", "parse_value", "table_entry",
]

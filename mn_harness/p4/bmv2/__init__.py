"""BMv2 `simple_switch_grpc` processes and their egress queues.

    switch.py  BMv2Switch: start (ready when gRPC accepts), stop (always), per-run paths
    queues.py  QueueConfig / pps_for_rate: queue depth and packets/s rate per priority queue
    cli.py     run_cli: simple_switch_CLI (Thrift), the only way to set the queues
    net.py     free ports, readiness probes, veth offloads

Programming a started switch (queues, P4Runtime pipeline, entries) is mn_harness.p4.bringup.
"""

from __future__ import annotations

from .cli import cli_has_thrift, run_cli
from .net import disable_offloads, netns_tcp_listening, pick_free_port, port_accepts, unix_socket_accepts
from .queues import QueueConfig, pps_for_rate
from .switch import BMv2Switch

__all__ = [
    "BMv2Switch", "QueueConfig", "cli_has_thrift", "disable_offloads", "netns_tcp_listening",
    "pick_free_port", "port_accepts", "pps_for_rate", "run_cli", "unix_socket_accepts",
]
